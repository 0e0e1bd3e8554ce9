"""Torch Tensor methods and functions lazyfuse lowers natively, as compositions of its primitive
ops (so they fuse, and autograd differentiates them through those primitives).

``TENSOR_METHODS`` are installed on ``lf.Tensor`` and ``FUNCTIONS`` exported as ``lf.<name>``
(``lazyfuse/__init__.py``); everything else torch offers reaches an extern through
``lazyfuse.surface``. Each function follows torch's signature, dtype rules and edge cases
(``masked_fill`` keeps the tensor's dtype, ``tril`` keeps bool, ``any`` of NaN is True...).
"""
from __future__ import annotations

import builtins
import functools
import math

from . import autograd, ops
from .autograd import no_grad, recording
from .autograd.graph import attach
from .autograd.rules import sum_to
from .creation import arange
from .errors import DTypeError, InvalidIndexError, ShapeError
from .ir import dtypes as dt
from .ir.node import Op
from .ir.shapes import normalize_dim, normalize_dims, prod
# (these at the top, not in the functions that use them: lf.exp(x) and lf.add(x, y) test for Tensor
# on every call, and a relative import in a function runs the import machinery each time, ~10 us
# of a drain's fixed cost once the caches are cold, as they are after a large kernel: bench/drain_cold.py)
from .tensor import Tensor
from .torch_index import reindexed


def _zero(x):
    """A Python zero of ``x``'s kind: ``where(m, x, _zero(x))`` keeps ``x``'s dtype."""
    return False if x.dtype.is_bool else 0.0 if x.dtype.is_float else 0


def _scalar_as(value, dtype):
    """A Python scalar converted as torch converts a fill value to ``dtype``."""
    if dtype.is_bool:
        return bool(value)
    if dtype.is_float:
        return float(value)
    return int(value)


def _dims_kw(dim, axis):
    return axis if dim is None and axis is not None else dim


# -- masking and triangles ---------------------------------------------------------------------
def masked_fill(x, mask, value):
    """``value`` where the bool ``mask`` holds, else ``x``, in their broadcast shape (as torch's
    out-of-place form; the in-place one needs a mask that broadcasts to ``x``); keeps ``x``'s dtype."""
    if not isinstance(mask, Tensor) or not mask.dtype.is_bool:
        raise DTypeError("masked_fill: mask must be a bool Tensor (as in torch); compare it (m != 0) first")
    if isinstance(value, Tensor):
        if value.ndim:
            raise ShapeError(f"masked_fill: value must be a 0-d tensor or a number, got shape {value.shape}")
        value = value.to(x.dtype)
    elif ops.is_scalar(value):
        value = _scalar_as(value, x.dtype)
    else:
        raise DTypeError(f"masked_fill: value must be a number or a 0-d Tensor, got {type(value).__name__}")
    return ops.where(mask, value, x).to(x.dtype)


def masked_fill_(x, mask, value):
    """In-place ``masked_fill``."""
    out = masked_fill(x, mask, value)
    if out.shape != x.shape:
        raise ShapeError(f"output with shape {list(x.shape)} doesn't match the broadcast shape {list(out.shape)}: "
                         f"masked_fill_: a mask of shape {mask.shape} does not broadcast to {x.shape}; use the "
                         "out-of-place masked_fill")
    return x.copy_(out)


def _triangle(x, diagonal, lower: bool, name: str):
    if x.ndim < 2:
        raise ShapeError(f"{name}: input must have at least 2 dims, got shape {x.shape}")
    rows, cols = x.shape[-2], x.shape[-1]
    i = arange(rows, device=x.device).reshape(rows, 1)
    j = arange(cols, device=x.device).reshape(1, cols)
    keep = (j - i <= diagonal) if lower else (j - i >= diagonal)
    return ops.where(keep, x, _zero(x))


def tril(x, diagonal=0):
    """The lower triangle of the last two dims (``j - i <= diagonal``), zero elsewhere: index arithmetic."""
    return _triangle(x, int(diagonal), True, "tril")


def triu(x, diagonal=0):
    """The upper triangle of the last two dims (``j - i >= diagonal``), zero elsewhere: index arithmetic."""
    return _triangle(x, int(diagonal), False, "triu")


# -- reductions --------------------------------------------------------------------------------
def any(x, dim=None, keepdim=False, *, axis=None):  # noqa: A001 (torch's name)
    """True where any element along ``dim`` is nonzero (NaN counts), as a bool tensor (uint8
    for a uint8 input: torch's legacy rule)."""
    return _as_uint8_if(x, (x != 0).sum(_any_all_dims(x, dim, axis), keepdim) > 0)


def all(x, dim=None, keepdim=False, *, axis=None):  # noqa: A001 (torch's name)
    """True where every element along ``dim`` is nonzero (NaN counts), as a bool tensor (uint8
    for a uint8 input: torch's legacy rule)."""
    return _as_uint8_if(x, (x == 0).sum(_any_all_dims(x, dim, axis), keepdim) == 0)


def _as_uint8_if(x, truth):
    return truth.to(dt.uint8) if x.dtype is dt.uint8 else truth


def _any_all_dims(x, dim, axis):
    """any's/all's dims: torch's any and all refuse a tensor of more than 64 dims even with no dim
    (their kernel reduces a dim list, where sum() has a kernel of its own), so for one they name
    every dim and ``ops.reduce`` refuses it as torch."""
    dims = _dims_kw(dim, axis)
    return tuple(range(x.ndim)) if dims is None and x.ndim > 64 else dims


@ops.row_major   # (a reduction: its result has no layout to follow, and its shift fuses so)
def logsumexp(x, dim, keepdim=False):
    """``log(sum(exp(x)))`` along ``dim``, max-shifted (float16/bfloat16 in float32, rounded once)."""
    out_dtype = x.dtype if x.dtype.is_float else dt.float32
    x = x.to(dt.opmath(out_dtype))
    dims = normalize_dims(dim, x.ndim) if x.ndim else ()
    if 0 not in [x.shape[d] for d in dims]:   # (``all`` here is torch's, this module's)
        m = x.detach().amax(dims, keepdim=True)
        m = ops.where(m.abs() == math.inf, 0.0, m)   # all -inf (or an inf) rows: no shift, as torch
    else:
        m = 0   # (an empty dim has no max, where amax refuses: its sum is 0, the log -inf, as torch's)
    out = (x - m).exp().sum(dims, keepdim=True).log() + m
    if not keepdim:
        out = out.reshape(tuple(s for d, s in enumerate(x.shape) if d not in dims))
    return out.to(out_dtype)


def product(x, dim=None, keepdim=False, *, dtype=None, axis=None):   # torch's prod (shapes.prod is another)
    """The product along ``dim`` (of every element for None), in ``dtype``; integers and bool
    multiply in int64, as torch. One reduction kernel, with its prologue fused."""
    out = dt.as_dtype(dtype) if dtype is not None else x.dtype if x.dtype.is_float else dt.int64
    return ops.reduce(Op.PROD, x.to(out), _dims_kw(dim, axis), keepdim)


def count_nonzero(x, dim=None):
    """The int64 number of nonzero elements along ``dim``."""
    return (x != 0).sum(dim)


def nansum(x, dim=None, keepdim=False, *, dtype=None):
    """``sum`` with NaN counted as zero."""
    if x.dtype.is_float:
        x = ops.where(x.isnan(), 0.0, x)
    return x.sum(dim, keepdim, dtype=dtype)


def nanmean(x, dim=None, keepdim=False, *, dtype=None):
    """The mean of the non-NaN elements along ``dim`` (NaN where there are none)."""
    if dtype is not None:
        x = x.to(dtype)
    if not x.dtype.is_float:
        raise DTypeError(f"nanmean() needs a floating tensor, got {x.dtype.name} (as in torch)")
    wide = x.to(dt.opmath(x.dtype))
    keep = ~wide.isnan()
    total = ops.where(keep, wide, 0.0).sum(dim, keepdim)
    return (total / keep.sum(dim, keepdim).to(wide.dtype)).to(x.dtype)


def aminmax(x, *, dim=None, keepdim=False, out=None):
    """(min, max) along ``dim`` (all of ``x`` for None); ``out=(min, max)`` of ``x``'s dtype, as torch's."""
    import torch
    mins, maxs = x.amin(dim, keepdim), x.amax(dim, keepdim)
    if out is not None:
        from .extern import write_out
        mins, maxs = write_out("aminmax", (mins, maxs), out, casts="exact")
    return torch.return_types.aminmax([mins, maxs])


def _unbiased_first(dim, unbiased):
    """torch's ``var_mean(x, unbiased)`` overload: a bool where ``dim`` goes is ``unbiased``."""
    return (None, dim) if isinstance(dim, bool) else (dim, unbiased)


def var_mean(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """(var, mean) with torch's arguments."""
    dim, unbiased = _unbiased_first(dim, unbiased)
    return x.var(dim, unbiased, keepdim, correction=correction), x.mean(dim, keepdim)


def std_mean(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """(std, mean) with torch's arguments."""
    dim, unbiased = _unbiased_first(dim, unbiased)
    return x.std(dim, unbiased, keepdim, correction=correction), x.mean(dim, keepdim)


# -- elementwise math ----------------------------------------------------------------------------
def _float_of(x):
    return x if x.dtype.is_float else x.to(dt.float32)


def square(x):
    """``x * x`` (bool squares to int64, as torch)."""
    return (x.long() if x.dtype.is_bool else x) * (x.long() if x.dtype.is_bool else x)


def clamp_min(x, min):  # noqa: A002 (torch's name)
    """``maximum(x, min)`` (NaN propagates)."""
    _tensor_input(x, "clamp_min")
    return x.clamp(min=min)


def clamp_max(x, max):  # noqa: A002 (torch's name)
    """``minimum(x, max)`` (NaN propagates)."""
    _tensor_input(x, "clamp_max")
    return x.clamp(max=max)


def _tensor_input(x, name):
    if not isinstance(x, Tensor):
        raise DTypeError(f"{name}: input must be a Tensor, got {type(x).__name__}; wrap a number with lf.tensor(v)")


def _wide(*xs):
    """(operands widened to float32 where they are float16/bfloat16, the dtype to round back to):
    torch's fused pointwise kernels compute there and round once."""
    tensors = [x for x in xs if isinstance(x, Tensor)]
    out = dt.result_type([t.dtype for t in tensors if t.ndim], [t.dtype for t in tensors if not t.ndim],
                         [dt.scalar_dtype(x) for x in xs if not isinstance(x, Tensor)])
    wide = dt.opmath(out) if out.is_float else out
    return [x.to(wide) if isinstance(x, Tensor) else x for x in xs], out


def addcmul(x, tensor1, tensor2, *, value=1):
    """``x + value * tensor1 * tensor2`` as torch's kernel computes it: ``value * tensor1`` rounded,
    its product with ``tensor2`` fused into the addition (``Op.FMA``; float16/bfloat16 in float32,
    rounded once)."""
    (x, a, b), out = _wide(x, tensor1, tensor2)
    return ops.elementwise(Op.FMA, a * value if value != 1 else a, b, x).to(out)


def addcdiv(x, tensor1, tensor2, *, value=1):
    """``x + value * tensor1 / tensor2``, in torch's order: ``(value * tensor1) / tensor2``, then the
    sum (float16/bfloat16 in float32, rounded once)."""
    (x, a, b), out = _wide(x, tensor1, tensor2)
    return (x + (a * value if value != 1 else a) / b).to(out)


def lerp(x, end, weight):
    """``x + weight * (end - x)`` where ``|weight| < 0.5``, else ``end - (end - x) * (1 - weight)``,
    as torch computes it (float16/bfloat16 in float32, rounded once): one node (``Op.LERP``; 6
    before), ``weight`` a runtime scalar or a tensor. As torch, ``end`` (and a weight with dims)
    must have ``x``'s float dtype."""
    _tensor_input(x, "lerp")
    _tensor_input(end, "lerp")
    if not x.dtype.is_float:
        raise DTypeError(f"lerp: not implemented for {x.dtype} tensors (as torch); call .float() first")
    for name, t in (("end", end), ("weight", weight)):
        if isinstance(t, Tensor) and t.dtype is not x.dtype and (name == "end" or t.ndim):
            raise DTypeError(f"lerp: expected dtype {x.dtype} for `{name}` but got dtype {t.dtype} (as torch); "
                             f"cast it with .to({x.dtype})")
    return ops.elementwise(Op.LERP, x, end, weight if isinstance(weight, Tensor) else float(weight),
                           compute_dtype=x.dtype)


def _zero_gradient(out, *inputs, name=None):
    """``out`` is piecewise constant in ``inputs``: it still requires grad where one does (torch's
    ``FloorBackward``...), and its gradient is zero, so a loss through it back-propagates."""
    if not recording(*inputs):
        return out
    return attach(out, name or "piecewise_constant",
                  [(x, lambda g, shape=x.shape: sum_to(g * 0.0, shape)) for x in inputs if isinstance(x, Tensor)])


def sign(x):
    """-1, 0 or 1 by the sign of ``x``: ``(x > 0) - (x < 0)``, as torch computes it, so NaN gives 0
    (bool stays bool). One node (``Op.SIGN``); its gradient is zero."""
    if x.dtype.is_bool:
        return x
    return ops.elementwise(Op.SIGN, x)


def _rounding(op):
    def method(x, decimals=0):
        if decimals:
            import torch
            from .extern import extern
            return extern(torch.round, x, decimals=decimals)
        if not x.dtype.is_float:
            return x.clone()   # integers are already whole (torch returns a copy)
        return ops.elementwise(op, x)   # (its zero gradient: autograd.rules)
    method.__name__ = method.__qualname__ = op.label
    method.__doc__ = (f"Elementwise {op.label} (float tensors; integers are returned as a copy)"
                      + (", half to even, as torch; ``decimals`` other than 0 runs as an extern." if op is Op.ROUND
                         else "."))
    return method


floor, ceil, trunc, round = (_rounding(op) for op in (Op.FLOOR, Op.CEIL, Op.TRUNC, Op.ROUND))  # noqa: A001


def frac(x):
    """``x - trunc(x)`` (float tensors): one node (``Op.FRAC``)."""
    if not x.dtype.is_float:
        raise DTypeError(f"frac is not implemented for {x.dtype.name} tensors (as in torch)")
    return ops.elementwise(Op.FRAC, x)


def erf(x):
    """Elementwise error function (integers give float32); its gradient is ``2/sqrt(pi) exp(-x^2)``."""
    x = _float_of(x)
    with no_grad():
        out = ops.elementwise(Op.ERF, x)
    if recording(x):
        attach(out, "erf", [(x, lambda g: g * (x * x * -1.0).exp() * (2.0 / math.sqrt(math.pi)))])
    return out


def log2(x):
    """Elementwise base-2 logarithm (integers give float32): one node (``Op.LOG2``)."""
    return ops.elementwise(Op.LOG2, x)


def log10(x):
    """Elementwise base-10 logarithm (integers give float32): one node (``Op.LOG10``)."""
    return ops.elementwise(Op.LOG10, x)


def isinf(x):
    """True where ``x`` is +-inf (never for integers)."""
    return x.abs() == math.inf if x.dtype.is_float else x != x


def isposinf(x):
    """True where ``x`` is +inf."""
    return x == math.inf if x.dtype.is_float else x != x


def isneginf(x):
    """True where ``x`` is -inf."""
    return x == -math.inf if x.dtype.is_float else x != x


def isfinite(x):
    """True where ``x`` is neither NaN nor +-inf (always for integers)."""
    return x.abs() < math.inf if x.dtype.is_float else x == x   # (NaN compares false)


def nan_to_num(x, nan=0.0, posinf=None, neginf=None):
    """NaN -> ``nan``, +inf -> ``posinf`` (default: the dtype's max), -inf -> ``neginf`` (its lowest)."""
    if not x.dtype.is_float:
        return x.clone()
    hi = _finite_range(x.dtype)[1] if posinf is None else posinf
    lo = _finite_range(x.dtype)[0] if neginf is None else neginf
    # one node (Op.NAN_TO_NUM), the three values runtime scalars, computed in x's dtype (torch
    # casts them to it: a posinf beyond float16's range is inf there too)
    return ops.elementwise(Op.NAN_TO_NUM, x, float(nan), float(hi), float(lo), compute_dtype=x.dtype)


@functools.lru_cache(maxsize=None)
def _finite_range(dtype) -> tuple:
    """(lowest, largest) finite value of a float dtype (torch.finfo's min and max)."""
    import torch
    info = torch.finfo(dtype.torch)
    return info.min, info.max


def logical_and(x, other):
    """Elementwise logical and (nonzero is True)."""
    return (x != 0) & (other != 0)


def logical_or(x, other):
    """Elementwise logical or (nonzero is True)."""
    return (x != 0) | (other != 0)


def logical_xor(x, other):
    """Elementwise logical xor (nonzero is True)."""
    return (x != 0) ^ (other != 0)


def remainder(x, other):
    """Python's ``%``: the sign of the divisor (as torch.remainder)."""
    return x % other


def _number_as_tensor(x, other):
    """``x`` as a 0-d tensor where both operands are Python numbers: torch's ``add(2.5, 1)`` is a
    tensor (of the number's default dtype), where the operator alone would give a number."""
    if isinstance(x, Tensor) or isinstance(other, Tensor):
        return x
    from .creation import tensor
    return tensor(x)


def add(x, other, *, alpha=1):
    """``x + alpha * other``."""
    return _number_as_tensor(x, other) + (other * alpha if alpha != 1 else other)


def sub(x, other, *, alpha=1):
    """``x - alpha * other``."""
    return _number_as_tensor(x, other) - (other * alpha if alpha != 1 else other)


def mul(x, other):
    """``x * other``."""
    return _number_as_tensor(x, other) * other


def div(x, other, *, rounding_mode=None):
    """``x / other``; ``rounding_mode="floor"`` is ``//``, ``"trunc"`` rounds toward zero (floats:
    ``trunc(x / other)``; integers: the floor quotient, one up where it rounded a negative
    quotient down)."""
    x = _number_as_tensor(x, other)
    if rounding_mode is None:
        return x / other
    if rounding_mode == "floor":
        return x // other
    if rounding_mode != "trunc":
        raise DTypeError(f"div: rounding_mode must be None, 'floor' or 'trunc', got {rounding_mode!r}")
    q = x // other
    if q.dtype.is_float:   # one op to autograd, as torch's: a zero gradient (not 0 sent through x / 0)
        grad = autograd.recording(x, other)
        with autograd.no_grad():
            q = trunc(x / other)
        return _zero_gradient(q, x, other, name="div") if grad else q
    # The floor quotient is one below the truncated one where the floor remainder is not 0 and its
    # sign differs from x's. The remainder is computed in the result dtype, where the divisor is as
    # the kernel sees it: a Python -1 meeting a uint8 tensor is 255 there (7 // 255 is 0, truncated
    # too), so ``other < 0`` on the number itself would be wrong. INT_MIN / -1 wraps to INT_MIN, as
    # its floor quotient does (torch's own CPU kernel traps on it with SIGFPE for int32/int64).
    r = x - q * other
    return ops.where((r != 0) & ((r < 0) != (x < 0)), q + 1, q)


def rsub(x, other, *, alpha=1):
    """``other - alpha * x``."""
    return other - (x * alpha if alpha != 1 else x)


# -- views and index arithmetic --------------------------------------------------------------------
def t(x):
    """The transpose of a matrix (0-d and 1-d tensors come back as they are), as torch's ``t()``."""
    if x.ndim > 2:
        raise ShapeError(f"t() expects a tensor with <= 2 dims, got shape {x.shape}; use transpose or mT")
    return x.transpose(0, 1) if x.ndim == 2 else x


def narrow(x, dim, start, length):
    """The ``length`` elements of ``dim`` from ``start``: a view."""
    if x.ndim == 0:
        raise ShapeError("narrow() cannot be applied to a 0-dim tensor; unsqueeze it first")
    d = normalize_dim(dim, x.ndim)
    if isinstance(start, bool) or getattr(getattr(start, "dtype", None), "is_bool", False):
        raise DTypeError(f"narrow: start={start!r} must be an integer (or a 0-dim integer tensor), not a bool")
    start, length, n = int(start), int(length), x.shape[d]
    if not -n <= start <= n:   # (torch's bounds: the end itself is a valid start)
        raise InvalidIndexError(f"narrow: start {start} is out of range for dim {d} of size {n} "
                                f"(expected a start in [{-n}, {n}])")
    if length < 0:
        raise ShapeError(f"narrow: length={length} must be non-negative")
    if start < 0:
        start += n
    if start + length > n:
        raise ShapeError(f"start ({start}) + length ({length}) exceeds dimension size ({n}): narrow along dim {d}")
    return x[(slice(None),) * d + (slice(start, start + length),)]


def split(x, split_size_or_sections, dim=0):
    """Pieces of ``x`` along ``dim``: of ``split_size`` each (the last smaller), or of the listed sizes. Views."""
    d = normalize_dim(dim, x.ndim)
    n = x.shape[d]
    if isinstance(split_size_or_sections, int):
        size = split_size_or_sections
        if size <= 0 and n:
            raise ShapeError(f"split: split_size must be positive, got {size}")
        sizes = [min(size, n - s) for s in range(0, n, size)] if n else [0]
    else:
        sizes = [int(s) for s in split_size_or_sections]
        if sum(sizes) != n:
            raise ShapeError(f"split: sections {sizes} do not add up to dim {d} of size {n}")
    out, start = [], 0
    for s in sizes:
        out.append(narrow(x, d, start, s))
        start += s
    return tuple(out)


def chunk(x, chunks, dim=0):
    """``chunks`` pieces along ``dim`` (of ceil(n / chunks) each, as torch): views."""
    d = normalize_dim(dim, x.ndim)
    if chunks <= 0:
        raise ShapeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    n = x.shape[d]
    size = max(1, -(-n // chunks))
    return split(x, size, d) if n else tuple(narrow(x, d, 0, 0) for _ in range(chunks))


def tensor_split(x, indices_or_sections, dim=0):
    """Pieces along ``dim``: ``n`` near-equal ones, or cut at the given indices. Views."""
    d = normalize_dim(dim, x.ndim)
    n = x.shape[d]
    if getattr(indices_or_sections, "ndim", None) == 0:   # a 0-d tensor is a count, as in torch
        indices_or_sections = int(indices_or_sections.item())
    if isinstance(indices_or_sections, int):
        k = indices_or_sections
        base, extra = divmod(n, k)
        sizes = [base + 1] * extra + [base] * (k - extra)
    else:
        cuts = [min(max(int(i) if i >= 0 else int(i) + n, 0), n) for i in indices_or_sections]
        bounds = [0] + cuts + [n]
        sizes = [max(0, b - a) for a, b in zip(bounds, bounds[1:])]
        starts = bounds[:-1]
        return tuple(narrow(x, d, min(s, n), z) for s, z in zip(starts, sizes))
    return split(x, sizes, d)


def unbind(x, dim=0):
    """The slices of ``x`` along ``dim`` (each without that dim): views."""
    if x.ndim == 0:
        raise InvalidIndexError("unbind: dim specified as 0 but the tensor has no dimensions")
    d = normalize_dim(dim, x.ndim)
    return tuple(x[(slice(None),) * d + (i,)] for i in range(x.shape[d]))


def movedim(x, source, destination):
    """``x`` with the dims ``source`` moved to ``destination`` (the others keep their order): a view."""
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    if len(src) != len(dst):
        raise ShapeError(f"movedim: source {src} and destination {dst} must have the same length")
    src = [normalize_dim(s, x.ndim, "source") for s in src]
    dst = [normalize_dim(s, x.ndim, "destination") for s in dst]
    for name, dims in (("source", src), ("destination", dst)):
        if len(set(dims)) != len(dims):
            raise ShapeError(f"movedim: repeated dim in {name} {dims}; each dim may move once")
    order = [None] * x.ndim
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(d for d in range(x.ndim) if d not in src)
    order = [next(rest) if o is None else o for o in order]
    return x.permute(order)


def unflatten(x, dim, sizes):
    """Dim ``dim`` split into ``sizes`` (one may be -1): a view."""
    d = normalize_dim(dim, x.ndim)
    sizes = tuple(sizes)
    if -1 in sizes:
        known = 1
        for s in sizes:
            known *= s if s != -1 else 1
        sizes = tuple(x.shape[d] // known if s == -1 else s for s in sizes)
    return x.reshape(x.shape[:d] + sizes + x.shape[d + 1:])


def swapaxes(x, axis0, axis1):
    """``transpose(axis0, axis1)``."""
    return x.transpose(axis0, axis1)


def select(x, dim, index):
    """``x`` indexed by the int ``index`` along ``dim`` (that dim removed): a view."""
    d = normalize_dim(dim, x.ndim)
    return x[(slice(None),) * d + (int(index),)]


def repeat(x, *sizes):
    """``x`` tiled ``sizes`` times along each dim (leading new dims allowed), as torch's ``repeat``."""
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    if len(sizes) < x.ndim:
        raise ShapeError(f"repeat: {len(sizes)} repeat counts for a tensor of {x.ndim} dims")
    shape = (1,) * (len(sizes) - x.ndim) + x.shape
    x = x.reshape(shape)
    # each dim d as (sizes[d], shape[d]): expand a new axis in front of it, then merge them
    grown = x.reshape(tuple(v for s in shape for v in (1, s)))
    expanded = grown.expand(tuple(v for r, s in zip(sizes, shape) for v in (r, s)))
    return expanded.reshape(tuple(r * s for r, s in zip(sizes, shape)))


def tile(x, *dims):
    """``repeat`` with the counts left-padded with ones, as torch's ``tile``."""
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = tuple(dims[0])
    dims = (1,) * (x.ndim - len(dims)) + tuple(dims)
    return repeat(x, *dims)


def roll(x, shifts, dims=None):
    """``x`` rotated by ``shifts`` along ``dims`` (flattened when None): a copy, one ``ROLL``
    node that reads the source at (i - shift) mod n along each dim (index arithmetic, fused with
    its neighbours). The shifts are part of the kernel (a new shift compiles anew: programs
    rarely change theirs); the sizes are runtime values."""
    if dims is None:
        return roll(x.reshape(-1), shifts, 0).reshape(x.shape)
    shifts = list(shifts) if isinstance(shifts, (tuple, list)) else [shifts]
    dims = [dims] if isinstance(dims, int) else list(dims)
    if len(shifts) != len(dims):
        raise ShapeError(f"roll: shifts {shifts} and dims {dims} must have the same length")
    if x.ndim == 0:
        raise InvalidIndexError(f"roll: dims={dims} specified, but the tensor has no dimensions")
    if not builtins.all(isinstance(s, int) and not isinstance(s, bool) for s in shifts):
        raise InvalidIndexError(f"roll: shifts {shifts} must be ints (a shift is a count of positions)")
    total = {}   # dim -> its shift in (0, n): a dim named twice rolls by the sum (torch's)
    for s, d in zip(shifts, dims):
        d = normalize_dim(d, x.ndim)
        n = x.shape[d]
        total[d] = (total.get(d, 0) + s) % n if n else 0
    rolled = tuple(sorted((d, s) for d, s in total.items() if s))
    if not rolled:
        return x.clone()
    return reindexed(x, Op.ROLL, rolled, lambda g: roll(g, [-s for _, s in rolled], [d for d, _ in rolled]))


def diagonal(x, offset=0, dim1=0, dim2=1):
    """The diagonal of dims ``dim1``/``dim2`` (shifted by ``offset``) as the last dim."""
    d1, d2 = normalize_dim(dim1, x.ndim), normalize_dim(dim2, x.ndim)
    if d1 == d2:
        raise ShapeError(f"diagonal: dim1 and dim2 must differ, both are {d1}")
    moved = movedim(x, (d1, d2), (-2, -1))
    rows, cols = moved.shape[-2], moved.shape[-1]
    if offset >= 0:
        n = max(0, min(rows, cols - offset))
        start = offset
    else:
        n = max(0, min(rows + offset, cols))
        start = -offset * cols
    flat = moved.reshape(moved.shape[:-2] + (rows * cols,))
    if n == 0:
        return flat[..., :0]
    return flat[..., start:start + (n - 1) * (cols + 1) + 1:cols + 1]


def one_hot(input, num_classes=-1):  # noqa: A002 (torch's name)
    """int64 one-hot vectors of the class indices ``input`` (a new last dim); ``num_classes=-1``
    reads the largest index (a drain)."""
    if input.dtype is not dt.int64:
        raise DTypeError(f"one_hot: needs an int64 index tensor, got {input.dtype.name} (torch: one_hot is only "
                         "applicable to index tensor of type LongTensor); call .long() first")
    if num_classes < 0:
        num_classes = int(input.amax().item()) + 1 if input.numel() else 0
    from .torch_index import checked_positions
    input = checked_positions(input, 0, num_classes, False, "one_hot")   # (a class out of range: refused, as torch)
    return (input.unsqueeze(-1) == arange(num_classes, device=input.device)).long()


# -- einsum: permutes, reshapes and batched matmuls ----------------------------------------------------
def einsum(equation, *operands):
    """torch's ``einsum`` as views, sums and batched matmuls (so it fuses and takes the matmul
    path); an ellipsis, or a letter repeated within one operand (a diagonal), runs as an extern."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    eq = equation.replace(" ", "")
    lhs, rhs = eq.split("->") if "->" in eq else (eq, None)
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise ShapeError(f"einsum: {len(terms)} operand subscripts for {len(operands)} operands")
    if rhs is None:   # implicit output: the letters that appear once, sorted
        letters = "".join(terms)
        rhs = "".join(sorted(c for c in set(letters) if letters.count(c) == 1 and c.isalpha()))
    if "." in eq or builtins.any(len(set(t)) != len(t) for t in terms):
        import torch
        from .extern import extern
        return extern(torch.einsum, equation, *operands)
    for t, x in zip(terms, operands):
        if len(t) != x.ndim:
            raise ShapeError(f"einsum: subscripts {t!r} for an operand of {x.ndim} dims")
    operands = _einsum_broadcast(terms, operands)
    acc, acc_term = operands[0], terms[0]
    for k in range(1, len(operands)):
        later = set("".join(terms[k + 1:])) | set(rhs)
        acc, acc_term = _einsum_pair(acc, acc_term, operands[k], terms[k], later)
    # letters left that the output does not keep are summed; then the output's order
    drop = tuple(i for i, c in enumerate(acc_term) if c not in rhs)
    if drop:
        acc = acc.sum(drop)
        acc_term = "".join(c for c in acc_term if c in rhs)
    return acc.permute([acc_term.index(c) for c in rhs]) if acc_term != rhs else acc


def _einsum_broadcast(terms, operands):
    """A letter of size 1 in one operand broadcasts against its size in another (as torch's
    einsum): such dims are expanded (views); two different sizes above 1 are an error."""
    sizes = {}
    for t, x in zip(terms, operands):
        for c, n in zip(t, x.shape):
            if n != 1 and sizes.get(c, 1) not in (1, n):
                raise ShapeError(f"einsum: subscript {c!r} has sizes {sizes[c]} and {n}, which do not broadcast")
            sizes[c] = n if n != 1 else sizes.get(c, 1)
    return tuple(x.expand(tuple(sizes[c] for c in t)) if x.shape != tuple(sizes[c] for c in t) else x
                 for t, x in zip(terms, operands))


def _einsum_pair(a, ta, b, tb, keep):
    """``a`` (subscripts ``ta``) times ``b`` (``tb``), contracted over the letters they share that
    ``keep`` (the later operands and the output) does not need: one batched matmul."""
    a, ta = _sum_lone(a, ta, tb, keep)
    b, tb = _sum_lone(b, tb, ta, keep)
    sizes = {c: n for t, x in ((ta, a), (tb, b)) for c, n in zip(t, x.shape)}
    batch = [c for c in ta if c in tb and c in keep]
    contract = [c for c in ta if c in tb and c not in keep]
    left = [c for c in ta if c not in tb]
    right = [c for c in tb if c not in ta]
    n = lambda cs: prod(sizes[c] for c in cs)  # noqa: E731
    a3 = a.permute([ta.index(c) for c in batch + left + contract]).reshape(n(batch), n(left), n(contract))
    b3 = b.permute([tb.index(c) for c in batch + contract + right]).reshape(n(batch), n(contract), n(right))
    out = (a3 @ b3).reshape(tuple(sizes[c] for c in batch + left + right))
    return out, "".join(batch + left + right)


def _sum_lone(x, t, other, keep):
    """``x`` summed over its letters that neither the other operand nor anything later reads."""
    lone = tuple(i for i, c in enumerate(t) if c not in other and c not in keep)
    if not lone:
        return x, t
    return x.sum(lone), "".join(c for i, c in enumerate(t) if i not in lone)


def pad(input, pad, mode="constant", value=None):  # noqa: A002 (torch's name)
    """torch's ``F.pad``: ``pad`` is (left, right) pairs from the last dim backwards; negative
    amounts crop. ``constant`` is native: a small pad is filled pieces concatenated (one ``CAT``
    node, which fuses), a large one ``_pad_by_writes``; the other modes (reflect, replicate,
    circular) run as externs."""
    if len(pad) % 2 or len(pad) // 2 > input.ndim:
        raise ShapeError(f"pad: {len(pad)} amounts for a tensor of {input.ndim} dims (pairs, at most 2 per dim)")
    if mode != "constant":
        import torch.nn.functional as TF
        from .extern import extern
        return extern(TF.pad, input, tuple(pad), mode=mode, value=value)
    from .creation import full
    from .functions import CAT_SELECTS, cat
    fill = _scalar_as(0 if value is None else value, input.dtype)
    grown = []   # (dim, lo, hi) with lo, hi >= 0: the crops are done first (a crop and a pad of
    for k in range(len(pad) // 2):   # other dims commute)
        d = input.ndim - 1 - k
        lo, hi = int(pad[2 * k]), int(pad[2 * k + 1])
        if lo < 0 or hi < 0:
            n = input.shape[d]
            start, stop = max(0, -lo), n - max(0, -hi)
            if stop < start:
                raise ShapeError(f"pad: cropping {-lo} and {-hi} from dim {d} of size {n}")
            input = narrow(input, d, start, stop - start)
            lo, hi = max(0, lo), max(0, hi)
        if lo or hi:
            grown.append((d, lo, hi))
    shape = list(input.shape)
    for d, lo, hi in grown:
        shape[d] += lo + hi
    # as large as a cat of three pieces that cat writes piece by piece (functions.CAT_SELECTS)
    if grown and 3 * prod(shape) > CAT_SELECTS and not recording(input):
        return _pad_by_writes(input, grown, fill, tuple(shape))
    for d, lo, hi in grown:
        pieces = [full(input.shape[:d] + (amount,) + input.shape[d + 1:], fill, dtype=input.dtype, device=input.device)
                  if amount else None for amount in (lo, hi)]
        input = cat([p for p in (pieces[0], input, pieces[1]) if p is not None], d)
    return input


def _pad_by_writes(x, grown, fill, shape):
    """``x`` padded by ``grown`` ((dim, lo, hi) each) with ``fill`` into a new storage of ``shape``
    that each element is written to once: ``x`` into the interior, and ``fill`` into each border
    slab (a dim's lo and hi rows, within the interior of the dims before it). torch's constant pad
    fills the whole output and then copies ``x`` over it: every interior element twice. Outer dims
    go first, so their slabs are whole contiguous rows."""
    from .creation import empty
    out = empty(shape, dtype=x.dtype, device=x.device)
    inner = out._view
    for d, lo, hi in sorted(grown):
        n = shape[d]
        for start, stop in ((0, lo), (n - hi, n)):
            if stop > start:
                out._with_view(inner.slice(d, start, stop, 1)).fill_(fill)
        inner = inner.slice(d, lo, n - hi, 1)
    out._with_view(inner).copy_(x)
    return out


# -- construction from a tensor ---------------------------------------------------------------------
def _like_kwargs(x, dtype, device):
    return {"dtype": dtype if dtype is not None else x.dtype, "device": device if device is not None else x.device}


def new_zeros(x, *size, dtype=None, device=None, requires_grad=False, **_):
    """Zeros of ``size`` with ``x``'s dtype and device (unless given)."""
    from .creation import zeros
    return zeros(*size, requires_grad=requires_grad, **_like_kwargs(x, dtype, device))


def new_ones(x, *size, dtype=None, device=None, requires_grad=False, **_):
    """Ones of ``size`` with ``x``'s dtype and device (unless given)."""
    from .creation import ones
    return ones(*size, requires_grad=requires_grad, **_like_kwargs(x, dtype, device))


def new_full(x, size, fill_value, *, dtype=None, device=None, requires_grad=False, **_):
    """``fill_value`` in ``size`` with ``x``'s dtype and device (unless given)."""
    from .creation import full
    return full(tuple(size), fill_value, requires_grad=requires_grad, **_like_kwargs(x, dtype, device))


def new_empty(x, *size, dtype=None, device=None, requires_grad=False, **_):
    """Uninitialised memory of ``size`` with ``x``'s dtype and device (unless given)."""
    from .creation import empty
    return empty(*size, requires_grad=requires_grad, **_like_kwargs(x, dtype, device))


def new_tensor(x, data, *, dtype=None, device=None, requires_grad=False):
    """``data`` as a tensor with ``x``'s dtype and device (unless given)."""
    from .creation import tensor
    return tensor(data, requires_grad=requires_grad, **_like_kwargs(x, dtype, device))


def type_as(x, other):
    """``x`` cast to ``other``'s dtype."""
    return x.to(other.dtype)


def view_as(x, other):
    """``x.view(other.shape)``."""
    return x.view(other.shape)


def reshape_as(x, other):
    """``x.reshape(other.shape)``."""
    return x.reshape(other.shape)


def _documented(name, fn, doc):
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


TENSOR_METHODS = {
    "masked_fill": masked_fill, "masked_fill_": masked_fill_, "tril": tril, "triu": triu,
    "any": any, "all": all, "prod": product, "logsumexp": logsumexp, "count_nonzero": count_nonzero, "nansum": nansum,
    "nanmean": nanmean, "aminmax": aminmax, "square": square, "clamp_min": clamp_min, "clamp_max": clamp_max,
    "addcmul": addcmul, "addcdiv": addcdiv, "lerp": lerp, "sign": sign, "sgn": sign, "log2": log2,
    "log10": log10, "isinf": isinf, "isposinf": isposinf, "isneginf": isneginf, "isfinite": isfinite,
    "nan_to_num": nan_to_num, "floor": floor, "ceil": ceil, "trunc": trunc, "fix": trunc, "round": round,
    "frac": frac, "erf": erf, "logical_and": logical_and, "logical_or": logical_or,
    "logical_xor": logical_xor, "remainder": remainder, "add": add, "sub": sub, "subtract": sub, "mul": mul,
    "multiply": mul, "div": div, "divide": div, "true_divide": div, "t": t, "narrow": narrow,
    "split": split, "chunk": chunk, "tensor_split": tensor_split, "unbind": unbind, "movedim": movedim,
    "moveaxis": movedim, "unflatten": unflatten, "swapaxes": swapaxes, "swapdims": swapaxes,
    "select": select, "repeat": repeat, "tile": tile, "roll": roll, "diagonal": diagonal,
    "new_zeros": new_zeros, "new_ones": new_ones, "new_full": new_full, "new_empty": new_empty,
    "new_tensor": new_tensor, "type_as": type_as, "view_as": view_as, "reshape_as": reshape_as,
    **{name: _documented(name, fn, doc) for name, fn, doc in (
        ("eq", lambda x, o: x == o, "``x == other``."), ("ne", lambda x, o: x != o, "``x != other``."),
        ("lt", lambda x, o: x < o, "``x < other``."), ("le", lambda x, o: x <= o, "``x <= other``."),
        ("gt", lambda x, o: x > o, "``x > other``."), ("ge", lambda x, o: x >= o, "``x >= other``."),
        ("greater", lambda x, o: x > o, "``x > other``."), ("less", lambda x, o: x < o, "``x < other``."),
        ("greater_equal", lambda x, o: x >= o, "``x >= other``."), ("less_equal", lambda x, o: x <= o, "``x <= other``."),
        ("not_equal", lambda x, o: x != o, "``x != other``."), ("negative", lambda x: -x, "``-x``."),
        ("absolute", lambda x: x.abs(), "``abs(x)``."), ("__rdiv__", lambda x, o: o / x, "``other / x``."), ("positive", lambda x: x, "``x`` itself (``+x``)."))},
}

def _more_methods() -> dict:
    """The compositions kept in modules of their own (elementwise math; gathers, scans, matmul aliases)."""
    from . import torch_index, torch_math
    return {**torch_math.METHODS, **torch_index.METHODS, **_in_place_draws(), "rsub": rsub,
            "floor_divide": floor_divide, "ravel": ravel}


def _in_place_draws() -> dict:
    """``x.uniform_()``, ``normal_``...: methods only (torch has no ``torch.uniform_``)."""
    from . import random_draws
    return random_draws.METHODS


def _stacking_functions() -> dict:
    """``lf.hstack``, ``vstack``, ``dstack``, ``column_stack`` (functions of a list: no method form)."""
    from .torch_index import FUNCTIONS as stacking
    return stacking


def _native_norm_forms() -> dict:
    """torch's ``native_*_norm`` functions (lf.native_layer_norm...): the norms with their statistics."""
    from .nn.norms import NATIVE_FORMS
    return NATIVE_FORMS


def floor_divide(x, other):
    """``x // other`` (floor rounding, as torch)."""
    return _number_as_tensor(x, other) // other


def ravel(x):
    """``x`` flattened to 1-d: a view where the strides allow, else a copy (as torch)."""
    return x.reshape(-1)


def sum_to_size(x, *size):
    """``x`` summed down to ``size``, which must expand to ``x``'s shape (torch's
    ``Tensor.sum_to_size``: the leading dims and each dim ``size`` has as 1 are summed); ``x``
    itself where ``size`` is its shape."""
    size = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else size   # (torch.Size is a tuple)
    lead = x.ndim - len(size)
    if lead < 0 or builtins.any(s not in (1, n) for s, n in zip(size, x.shape[lead:])):
        raise ShapeError(f"sum_to_size: size {list(size)} is not expandable to size {list(x.shape)}: pass a "
                         "size whose dims are 1 or x's, aligned at the right")
    return sum_to(x, tuple(size))


def narrow_copy(x, dim, start, length):
    """A copy of ``x.narrow(dim, start, length)``."""
    return x.narrow(dim, start, length).clone()


def constant_pad_nd(x, pad, value=0):
    """torch's ``constant_pad_nd``: ``F.pad(x, pad, value=value)`` (a negative pad crops)."""
    from .nn import functional as F
    return F.pad(x, pad, value=value)


def dist(x, other, p=2):
    """The ``p``-norm of ``x - other`` (broadcast), 0-d."""
    from .linalg import vector_norm
    return vector_norm(x - other, p)


TENSOR_METHODS.update({k: v for k, v in _more_methods().items() if k not in TENSOR_METHODS})
TENSOR_METHODS.update({"sum_to_size": sum_to_size, "narrow_copy": narrow_copy, "dist": dist, **{
    name: _documented(name, fn, doc) for name, fn, doc in (
        ("bitwise_and", lambda x, o: x & o, "``x & other``."), ("bitwise_or", lambda x, o: x | o, "``x | other``."),
        ("bitwise_xor", lambda x, o: x ^ o, "``x ^ other``."), ("bitwise_not", lambda x: ~x, "``~x``."),
        ("unsafe_chunk", lambda x, chunks, dim=0: x.chunk(chunks, dim), "``x.chunk(chunks, dim)``."),
        ("unsafe_split", lambda x, split_size, dim=0: x.split(split_size, dim), "``x.split(split_size, dim)``."))}})

# lf.<name>: the same functions (the tensor first) but the method-only ones, plus the function-only ones
_METHOD_ONLY = {"sum_to_size", "new_zeros", "new_ones", "new_full", "new_empty", "new_tensor", "type_as", "view_as", "reshape_as",
                "masked_fill_", *_in_place_draws()}
FUNCTIONS = {k: v for k, v in TENSOR_METHODS.items() if k not in _METHOD_ONLY}
FUNCTIONS["einsum"] = einsum
FUNCTIONS["constant_pad_nd"] = constant_pad_nd
FUNCTIONS.update(_native_norm_forms())
FUNCTIONS.update({"var_mean": var_mean, "std_mean": std_mean})
FUNCTIONS.update(_stacking_functions())

# Tensor methods of lazyfuse's own (tensor.py) that torch also offers as ``torch.<name>(input, ...)``
# with the method's arguments: ``lf.exp(x)`` is ``x.exp()``, native and fused, where it used to
# reach torch's function as an extern (one library call per op, a fusion boundary)
_NATIVE_METHOD_FUNCTIONS = ("abs", "neg", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "relu",
                            "reciprocal", "isnan", "logical_not", "pow", "clamp", "clip", "sum", "mean", "amax",
                            "amin", "max", "min", "argmax", "argmin", "var", "std", "softmax", "log_softmax",
                            # views (as externs they were torch calls recording aliased results, and
                            # detach's was a copy) and the rest of tensor.py's methods torch also has
                            "reshape", "permute", "transpose", "squeeze", "unsqueeze", "flatten", "detach",
                            "clone", "numel")


def _method_as_function(name: str):
    """``lf.<name>(input, ...)``: the Tensor method on a lazyfuse ``input``; anything else (a
    number first, as in ``torch.pow(2, x)``, or an ``out=`` tensor) is torch's function, an extern."""
    def function(input, *args, **kwargs):
        method = Tensor.__dict__[name]
        if isinstance(input, Tensor) and "out" not in kwargs:
            return method(input, *args, **kwargs)
        import torch
        from .surface import namespace_function
        return namespace_function(torch, "lf.", name)(input, *args, **kwargs)
    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"``input.{name}(...)`` (see ``Tensor.{name}``)."
    return function


FUNCTIONS.update({name: _method_as_function(name) for name in _NATIVE_METHOD_FUNCTIONS})


def _taking_out(name: str, fn):
    """``lf.<name>(..., out=t)`` for a native function that has no ``out`` of its own (torch's
    ``torch.add(a, b, out=c)``): the result recorded natively and written into ``t``
    (``extern.write_out``: resized as torch's) where it has ``t``'s dtype; where it has not, torch's
    function as an extern, which applies that op's own rule (an elementwise op casts, ``cumsum``
    computes in ``out``'s dtype, ``mm`` refuses) and leaves the native result unread (elided)."""
    @functools.wraps(fn)
    def function(*args, out=None, **kwargs):
        if out is None:
            return fn(*args, **kwargs)
        from .extern import flatten, pointwise, refuse_overlap, write_out
        if pointwise(name):
            refuse_overlap(name, out, flatten(args, kwargs)[1], same_place_ok=True)
        result = fn(*args, **kwargs)
        if isinstance(out, Tensor) and isinstance(result, Tensor) and result.dtype == out.dtype:
            return write_out(name, result, out, casts="exact")
        import torch
        from .surface import namespace_function
        return namespace_function(torch, "lf.", name)(*args, out=out, **kwargs)
    return function


def _has_out(fn) -> bool:
    import inspect
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return True   # (no signature to read: left as it is)
    return builtins.any(p.name == "out" or p.kind is p.VAR_KEYWORD for p in params)


FUNCTIONS.update({name: _taking_out(name, fn) for name, fn in FUNCTIONS.items() if not _has_out(fn)})


def _taking_axis(fn):
    """``fn`` that also takes ``axis=`` for ``dim=`` (torch's argument parser takes numpy's name
    for ``dim`` on every op it binds: ``x.max(axis=1)``, ``torch.std_mean(x, axis=0)``)."""
    @functools.wraps(fn)
    def function(*args, **kwargs):
        if "axis" in kwargs:
            if "dim" in kwargs:
                raise TypeError(f"{fn.__name__}() got both 'dim' and its alias 'axis': pass one")
            kwargs["dim"] = kwargs.pop("axis")
        return fn(*args, **kwargs)
    return function


def _lacks_axis(fn, torch_fn) -> bool:
    """Whether ``fn`` has a ``dim`` but no ``axis`` (nor ``**kwargs`` that pass it on) while torch's
    op of that name is a bound one (a C builtin: a Python-defined torch function, as
    ``Tensor.split``, takes no ``axis``)."""
    import inspect
    if torch_fn is None or inspect.isfunction(torch_fn) or not inspect.isfunction(fn):
        return False
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return "dim" in params and "axis" not in params and \
        not builtins.any(p.kind is p.VAR_KEYWORD for p in params.values())


def _axis_aliases(namespace: dict, torch_namespace) -> dict:
    """The entries of ``namespace`` that need ``axis``, so wrapped."""
    return {name: _taking_axis(fn) for name, fn in namespace.items()
            if _lacks_axis(fn, getattr(torch_namespace, name, None))}


def install() -> None:
    """Put ``TENSOR_METHODS`` on ``lf.Tensor`` (each keeps its name and docstring), and ``axis=``
    on every method with a ``dim`` (tensor.py's own too) where torch's takes it."""
    import torch
    for name, fn in TENSOR_METHODS.items():
        if name not in Tensor.__dict__:
            setattr(Tensor, name, fn)
    for name, fn in _axis_aliases(dict(vars(Tensor)), torch.Tensor).items():
        setattr(Tensor, name, fn)
    FUNCTIONS.update(_axis_aliases(FUNCTIONS, torch))


__all__ = ["TENSOR_METHODS", "FUNCTIONS", "install"]
