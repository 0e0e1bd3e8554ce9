"""Torch's elementwise math that lazyfuse's primitives compose: the inverse trigonometric functions
(Cephes' ``atanf`` polynomial), the hyperbolic and inverse hyperbolic functions, ``tan expm1 log1p exp2 erfc sinc logit``, degrees and radians, and the
binary ``xlogy hypot logaddexp(2) fmax fmin heaviside float_power ldexp fmod copysign signbit
isclose``. Each is a short chain of native ops (``atan``, ``atan2``, ``copysign`` and ``fmod`` one op
each: a node costs microseconds to record), so it fuses with its neighbours and autograd
differentiates it through them.

Dtypes follow torch: an integer or bool input of a float function computes in float32;
float16/bfloat16 compute in float32 and round once (torch's opmath). The formulas are chosen
for float32 accuracy where the naive one loses it (``sinh``/``cosh`` shifted by ln 2 so they
overflow where torch's do, not half an octave earlier; ``asinh`` odd by construction;
``logaddexp`` exact at ``a == b``, infinities included).
"""
from __future__ import annotations

import functools
import math

from . import ops
from .autograd import no_grad, recording
from .autograd.graph import attach
from .errors import DTypeError, ShapeError
from .ir import dtypes as dt
from .ir.node import Op
from .tensor import Tensor   # (at the top: see torch_ops' import of it)

_LN2 = math.log(2.0)
# beyond it ``x^2 +- 1`` rounds to ``x^2`` in float32 and float64 alike, so ``asinh``/``acosh``
# are ``log(2x)``: the square itself overflows from 1.8e19 in float32 (it gave inf for 1e20)
_HUGE_ARG = 2.0 ** 28


def _float_unary(f):
    """``f`` on ``x`` computed in float32 (integer, bool, float16, bfloat16 input) and rounded
    to the result dtype torch gives: ``x``'s float dtype, else float32."""
    def method(x):
        out = x.dtype if x.dtype.is_float else dt.float32
        return f(x.to(dt.opmath(out))).to(out)
    method.__name__ = method.__qualname__ = f.__name__
    method.__doc__ = f.__doc__
    return method


def _float_result(*xs):
    """The result dtype of a float function of ``xs``: torch's promotion, then float32 for integers."""
    tensors = [x for x in xs if isinstance(x, Tensor)]
    if not tensors:
        import sys
        frame = sys._getframe(1)   # (the calling op, for the message: this path only; past helpers such as
        while frame.f_code.co_name.startswith("_") and frame.f_back is not None:   # _float_operands)
            frame = frame.f_back
        name = frame.f_code.co_name
        raise DTypeError(f"{name}: pass a Tensor (got only Python numbers: {xs}); wrap one with lf.tensor(v)")
    out = dt.result_type([t.dtype for t in tensors if t.ndim], [t.dtype for t in tensors if not t.ndim],
                         [dt.scalar_dtype(x) for x in xs if not isinstance(x, Tensor)])
    return out if out.is_float else dt.float32


def _float_operands(*xs):
    """(operands in the computing dtype, result dtype) of a float binary function: torch's
    promotion, then float32 for integers (and opmath for the half types)."""
    out = _float_result(*xs)
    wide = dt.opmath(out)
    return [x.to(wide) if isinstance(x, Tensor) else float(x) for x in xs], out


def _floating_only(name, *xs):
    """torch's kernels of ``name`` take floating operands only (``"hypot_cpu" not implemented for
    'Long'``): refuse integer and bool ones as torch does, rather than compute in float32."""
    if not any(isinstance(x, float) or isinstance(x, Tensor) and x.dtype.is_float for x in xs):
        raise DTypeError(f"{name}: not implemented for integer or bool tensors (as torch); call .float() first")


def _both_tensors(x, other, name):
    """torch's signature for ``name`` takes two tensors (no Python number): refuse one as torch does."""
    if not (isinstance(x, Tensor) and isinstance(other, Tensor)):
        raise DTypeError(f"{name}: both arguments must be Tensors, got {type(x).__name__} and "
                         f"{type(other).__name__}; wrap a number with lf.tensor(v)")


def _isnan(x):
    return x.isnan() if isinstance(x, Tensor) else math.isnan(x)


# -- unary ------------------------------------------------------------------------------------------
@_float_unary
def tan(x):
    """Elementwise tangent, ``sin / cos``."""
    return x.sin() / x.cos()


def _atan(x):
    """atan of a float tensor: one node (``Op.ATAN``: cephes' ``atanf`` polynomial, within ~2 ulp, in
    the kernels; libm's in float64 C), computed in float32 for the half types and rounded once."""
    return ops.elementwise(Op.ATAN, x)


def atan(x):
    """Elementwise arctangent (integers give float32)."""
    return _atan(x if x.dtype.is_float else x.to(dt.float32))


def _derivative(d):
    """The function's gradient as torch's formula, ``g * d(x)``, instead of autograd's walk through
    the chain that computes it: the chain's ``where`` zeroes the gradient where torch's formula is
    finite (``acosh`` below -1) or makes it NaN (the untaken branch's inf times 0: ``asinh`` and
    ``sinc`` at 0), and its ``sqrt`` gives NaN at the domain's edge where torch says inf."""
    def wrap(f):
        @functools.wraps(f)
        def differentiated(x):
            with no_grad():
                out = f(x)
            if recording(x):
                attach(out, f.__name__, [(x, lambda g: g * d(x))])
            return out
        return differentiated
    return wrap


@_float_unary
@_derivative(lambda x: (1.0 - x * x).rsqrt())
def asin(x):
    """Elementwise arcsine, ``atan(x / sqrt(1 - x^2))`` (NaN outside [-1, 1], as torch)."""
    return ops.where(x.abs() > 1, math.nan, _atan(x / (1.0 - x * x).sqrt()))


@_float_unary
@_derivative(lambda x: -(1.0 - x * x).rsqrt())
def acos(x):
    """Elementwise arccosine, ``pi / 2 - asin(x)``."""
    return ops.where(x.abs() > 1, math.nan, math.pi / 2 - _atan(x / (1.0 - x * x).sqrt()))


def atan2(x, other):
    """The angle of the point (``other``, ``x``), signed zeros and infinities as C's ``atan2``: one
    node (``Op.ATAN2``), in the promoted float dtype (integers: float32)."""
    return ops.elementwise(Op.ATAN2, x, other, compute_dtype=_float_result(x, other))


@_float_unary
def sinh(x):
    """Elementwise hyperbolic sine, ``(e^(x - ln 2) - e^(-x - ln 2))``: finite up to torch's bound."""
    return (x - _LN2).exp() - (-x - _LN2).exp()


@_float_unary
def cosh(x):
    """Elementwise hyperbolic cosine, ``e^(x - ln 2) + e^(-x - ln 2)``."""
    return (x - _LN2).exp() + (-x - _LN2).exp()


@_float_unary
@_derivative(lambda x: (x * x + 1.0).rsqrt())
def asinh(x):
    """Elementwise inverse hyperbolic sine, ``sign(x) log(|x| + sqrt(x^2 + 1))`` (odd exactly)."""
    a = x.abs()
    return ops.where(x < 0, -1.0, 1.0) * ops.where(a > _HUGE_ARG, a.log() + _LN2, (a + (a * a + 1.0).sqrt()).log())


@_float_unary
@_derivative(lambda x: (x * x - 1.0).rsqrt())
def acosh(x):
    """Elementwise inverse hyperbolic cosine, ``log(x + sqrt(x^2 - 1))`` (NaN below 1, as torch)."""
    large = ops.where(x > _HUGE_ARG, x.log() + _LN2, (x + (x * x - 1.0).sqrt()).log())
    return ops.where(x < 1.0, math.nan, large)   # (below -1.8e19 the square's inf would hide the NaN)


@_float_unary
@_derivative(lambda x: 1.0 / (1.0 - x * x))
def atanh(x):
    """Elementwise inverse hyperbolic tangent, ``log((1 + x) / (1 - x)) / 2``."""
    return ((1.0 + x) / (1.0 - x)).log() * 0.5


def expm1(x):
    """Elementwise ``e^x - 1``, one op (``Op.EXPM1``): exact near 0, where ``exp(x) - 1`` cancels
    (``expm1(1e-10)`` is 1e-10, not 0); integers give float32, the half types compute in float32
    and round once."""
    return ops.elementwise(Op.EXPM1, x if x.dtype.is_float else x.to(dt.float32))


def log1p(x):
    """Elementwise ``log(1 + x)``, one op (``Op.LOG1P``): exact near 0, where ``log(1 + x)`` loses
    ``x``'s digits to the rounding of ``1 + x``."""
    return ops.elementwise(Op.LOG1P, x if x.dtype.is_float else x.to(dt.float32))


def exp2(x):
    """Elementwise ``2^x`` (integers give float32): one node (``Op.EXP2``)."""
    return ops.elementwise(Op.EXP2, x)


def erfc(x):
    """Elementwise complementary error function, ``1 - erf(x)`` (integers give float32), as one node
    (``Op.ERFC``): computed as such, not as 1 - erf, whose positive tail cancels to 0 (erfc(4) is
    1.5e-8)."""
    return ops.elementwise(Op.ERFC, x)


@_float_unary
@_derivative(lambda x: ops.where(x == 0, 0.0, ((x * math.pi) * (x * math.pi).cos() - (x * math.pi).sin()) /
                                  (x * x * math.pi)))
def sinc(x):
    """Elementwise normalized sinc, ``sin(pi x) / (pi x)``, 1 at 0."""
    px = x * math.pi
    return ops.where(x == 0, 1.0, px.sin() / px)


@_float_unary
def deg2rad(x):
    """Degrees to radians."""
    return x * (math.pi / 180.0)


@_float_unary
def angle(x):
    """The argument of a real number: pi where ``x < 0``, else 0 (-0 included), NaN where NaN."""
    return ops.where(x.isnan(), x, (x < 0) * math.pi)


@_float_unary
def rad2deg(x):
    """Radians to degrees."""
    return x * (180.0 / math.pi)


def logit(x, eps=None):
    """Elementwise ``log(x / (1 - x))``, ``x`` clamped to ``[eps, 1 - eps]`` first when ``eps`` is given.
    As torch's kernel: in the result's dtype, each step rounded to it (in float16 the quotient too),
    both bounds held in it (in float16 ``1 - 1e-6`` is 1, so ``logit(1.0, 1e-6)`` is inf)."""
    out = x.dtype if x.dtype.is_float else dt.float32
    if eps is None:
        return _logit(x.to(out), None, None)
    lo = _rounded(float(eps), out)
    return _logit(x.to(out), lo, _rounded(1.0 - lo, out))


def _rounded(value: float, dtype) -> float:
    """``value`` rounded to ``dtype`` (a float dtype)."""
    import torch
    return torch.tensor(value, dtype=dtype.torch).item()


def _logit(x, lo, hi):
    """``logit`` in ``x``'s (float) dtype, ``x`` clamped to [lo, hi] unless they are None, its
    gradient torch's formula ``1 / (x (1 - x))`` of the unclamped ``x``: NaN outside [0, 1]
    without bounds, 0 outside them with them. The chain's gradient was finite outside [0, 1],
    and NaN, not inf, at 0 and 1 (``eps=0``)."""
    with no_grad():
        c = x if lo is None else x.clamp(lo, hi)
        out = (c / (1.0 - c)).log()
    if recording(x):
        lo, hi, outside = (0.0, 1.0, math.nan) if lo is None else (lo, hi, 0.0)
        attach(out, "logit", [(x, lambda g: g * ops.where((x < lo) | (x > hi), outside, 1.0 / (x * (1.0 - x))))])
    return out


def signbit(x):
    """True where the sign bit of ``x`` is set (-0.0 included: ``1 / -0.0`` is -inf)."""
    if x.dtype.is_bool:
        return x != x
    if not x.dtype.is_float:
        return x < 0
    return (x < 0) | ((x == 0) & ((1.0 / x) < 0))


# -- binary -----------------------------------------------------------------------------------------
def xlogy(x, y):
    """``x * log(y)``, 0 where ``x`` is 0 (unless ``y`` is NaN: NaN), as torch's: one node
    (``Op.XLOGY``; 6 before)."""
    return ops.elementwise(Op.XLOGY, x, y, compute_dtype=_float_result(x, y))


def hypot(x, other):
    """``sqrt(x^2 + other^2)`` without overflow (the squares themselves overflow from 1.8e19 in
    float32): one node (``Op.HYPOT``; 17 before). As C's ``hypot``, an infinite operand gives inf
    even beside a NaN."""
    _floating_only("hypot", x, other)
    return ops.elementwise(Op.HYPOT, x, other, compute_dtype=_float_result(x, other))


def logaddexp(x, other):
    """``log(e^x + e^other)``: the larger plus ``log1p(e^-|x - other|)``; exact where they are equal:
    one node (``Op.LOGADDEXP``; 12 before)."""
    _floating_only("logaddexp", x, other)
    return ops.elementwise(Op.LOGADDEXP, x, other, compute_dtype=_float_result(x, other))


def logaddexp2(x, other):
    """``log2(2^x + 2^other)``: the larger plus ``log1p(2^-|x - other|) / ln 2``; exact (``x + 1``)
    where they are equal: one node (``Op.LOGADDEXP2``; 14 before)."""
    _floating_only("logaddexp2", x, other)
    return ops.elementwise(Op.LOGADDEXP2, x, other, compute_dtype=_float_result(x, other))


def _nan_ignoring(name):
    def method(x, other):
        from . import functions
        pick = getattr(functions, name)
        _both_tensors(x, other, method.__name__)
        if not x.dtype.is_float and not other.dtype.is_float:
            return pick(x, other)
        return ops.where(_isnan(x), other, ops.where(_isnan(other), x, pick(x, other)))
    return method


fmax = _nan_ignoring("maximum")
fmax.__name__ = fmax.__qualname__ = "fmax"
fmax.__doc__ = "Elementwise maximum that ignores a NaN (the other value wins; NaN only where both are)."
fmin = _nan_ignoring("minimum")
fmin.__name__ = fmin.__qualname__ = "fmin"
fmin.__doc__ = "Elementwise minimum that ignores a NaN (the other value wins; NaN only where both are)."


def heaviside(x, values):
    """``values`` where ``x == 0``, else 1 where ``x > 0`` and 0 elsewhere (NaN included), as torch."""
    _both_tensors(x, values, "heaviside")
    out = dt.promote_types(x.dtype, values.dtype)
    return ops.where(x == 0, values.to(out), (x > 0).to(out))


def float_power(x, exponent):
    """``x ** exponent`` in float64 (torch's double-precision power)."""
    base = x.to(dt.float64) if isinstance(x, Tensor) else float(x)
    return base ** (exponent.to(dt.float64) if isinstance(exponent, Tensor) else float(exponent))


def ldexp(x, other):
    """``x * 2^other``."""
    (a, b), out = _float_operands(x, other)
    return (a * (b * _LN2).exp() if isinstance(b, Tensor) else a * 2.0 ** b).to(out)


def fmod(x, other):
    """C's remainder: the sign of the dividend (``remainder`` takes the divisor's). One op of its
    own, not ``x % other`` moved back by ``other``: that sum rounds (fmod(-1e-8, 1) gave 0)."""
    return ops.elementwise(Op.FMOD, x, other)


def copysign(x, other):
    """``|x|`` with the sign bit of ``other`` (-0.0 and a negative NaN count as negative, as C's and
    torch's): one node (``Op.COPYSIGN``), in the promoted float dtype (integers: float32)."""
    return ops.elementwise(Op.COPYSIGN, x, other, compute_dtype=_float_result(x, other))


def isclose(x, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """``|x - other| <= atol + rtol |other|`` where both are finite, equality elsewhere (NaNs equal
    when ``equal_nan``), as torch."""
    for name, tol in (("rtol", rtol), ("atol", atol)):
        if not tol >= 0:
            raise ShapeError(f"isclose: {name}={tol} must be greater than or equal to zero")
    _both_tensors(x, other, "isclose")
    if x.dtype.is_bool and other.dtype.is_bool:
        return x == other
    wide = dt.promote_types(x.dtype, other.dtype)
    wide = dt.opmath(wide) if wide.is_float else dt.float64
    a, b = x.to(wide), other.to(wide)
    close = (a == b) | ((a - b).abs() <= atol + rtol * b.abs())
    if wide.is_float:
        finite = (a.abs() != math.inf) & (b.abs() != math.inf)
        close = (a == b) | (finite & close)
        if equal_nan:
            close = close | (a.isnan() & b.isnan())
    return close


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """True where an element of ``elements`` equals one of ``test_elements``: a comparison
    broadcast over the test values, reduced with ``any``."""
    if not isinstance(elements, Tensor):
        from .creation import full
        elements = full((), elements, device=test_elements.device)
    if not isinstance(test_elements, Tensor):
        hit = elements == test_elements
    else:
        flat = test_elements.reshape(-1)
        hit = (elements.unsqueeze(-1) == flat).any(-1) if flat.shape[0] else elements != elements
    return ~hit if invert else hit


def isreal(x):
    """True everywhere (lazyfuse's dtypes are real)."""
    return x == x if not x.dtype.is_float else (x == x) | (x != x)


def equal(x, other):
    """Whether ``x`` and ``other`` have one shape and equal values (a Python bool: it reads the data)."""
    if tuple(x.shape) != tuple(other.shape):
        return False
    return bool((x == other).all().item()) if x.numel() else True


def allclose(x, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether ``isclose`` holds everywhere (a Python bool: it reads the data)."""
    return bool(isclose(x, other, rtol, atol, equal_nan).all().item())


def bucketize(x, boundaries, *, out_int32=False, right=False):
    """The index of each value's bucket among the sorted 1-d ``boundaries``: how many boundaries
    lie below it (``right``: at or below), a comparison summed over them."""
    if boundaries.ndim != 1:
        raise ShapeError(f"bucketize: boundaries must be 1-d, got shape {boundaries.shape} (searchsorted takes "
                         "one sorted sequence per row)")
    if not isinstance(x, Tensor):
        from .creation import full
        x = full((), x, device=boundaries.device)
    below = (boundaries <= x.unsqueeze(-1)) if right else (boundaries < x.unsqueeze(-1))
    return below.sum(-1).to(dt.int32 if out_int32 else dt.int64)


def searchsorted(sorted_sequence, values, *, out_int32=False, right=False, side=None, sorter=None):
    """For each of ``values``, where it would be inserted into the last dim of ``sorted_sequence``
    (``right`` / ``side='right'``: after equal values): the count of entries below it."""
    if sorter is not None:
        from .torch_index import take_along_dim
        sorted_sequence = take_along_dim(sorted_sequence, sorter, -1)
    right = right or side == "right"
    if not isinstance(values, Tensor):
        from .creation import full
        values = full((), values, dtype=sorted_sequence.dtype, device=sorted_sequence.device)
    if sorted_sequence.ndim == 1:
        return bucketize(values, sorted_sequence, out_int32=out_int32, right=right)
    seq = sorted_sequence.unsqueeze(-2)                 # (..., 1, n)
    v = values.unsqueeze(-1)                            # (..., m, 1)
    below = (seq <= v) if right else (seq < v)
    return below.sum(-1).to(dt.int32 if out_int32 else dt.int64)


METHODS = {f.__name__: f for f in (
    atan, asin, acos, atan2, tan, sinh, cosh, asinh, acosh, atanh, expm1, log1p, exp2, erfc, sinc, deg2rad, rad2deg, angle, logit, signbit,
    xlogy, hypot, logaddexp, logaddexp2, fmax, fmin, heaviside, float_power, ldexp, fmod, copysign, isclose,
    isin, isreal, equal, allclose, bucketize, searchsorted)}
METHODS.update({"arcsinh": asinh, "arccosh": acosh, "arctanh": atanh, "arctan": atan, "arcsin": asin,
                "arccos": acos, "arctan2": atan2})

__all__ = ["METHODS"]
