"""VJPs of the primitive ops, written with lazyfuse Tensor ops (they run under ``no_grad``).

Every public op reaches one of the recorders here: elementwise (with torch's broadcasting,
so a gradient is summed back to its input's shape), where, reductions, views, casts, matmul,
gather (integer indexing, embedding) and cat. Composite functions (softmax, layer_norm,
rms_norm, sdpa, ...) are differentiated through the primitives they record, so their
backward fuses like their forward; var and std have a rule of their own (``record_var``: torch's
values where too few elements make the composition's another).
"""
from __future__ import annotations

import math

from ..ir import dtypes as dt
from ..ir.node import Op
from .graph import attach
from .mode import no_grad


def sum_to(g, shape: tuple):
    """Sum ``g`` over the dims that broadcasting added or grew, giving ``shape``."""
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    dims = tuple(range(lead)) + tuple(lead + d for d, s in enumerate(shape) if s == 1 and g.shape[lead + d] != 1)
    out = g.sum(dims, keepdim=True) if dims else g
    return out.reshape(shape)


def _to_input(x, grad):
    return sum_to(grad, x.shape).to(x.dtype)


def _sign(x):
    return (x > 0).to(x.dtype) - (x < 0).to(x.dtype)


def _gelu_grad(x):
    """d/dx x*Phi(x) = Phi(x) + x*phi(x), one op (``Op.GELU_GRAD``: the C kernel shares gelu's erfc
    and exp(-x^2/2) between the terms)."""
    from ..ops import elementwise
    return elementwise(Op.GELU_GRAD, x)


def _unary(op, x, out):
    """The local derivative of a unary op times g."""
    return {
        Op.NEG: lambda g: -g,
        Op.ABS: lambda g: g * _sign(x),
        Op.EXP: lambda g: g * out,
        Op.LOG: lambda g: g / x,
        Op.SQRT: lambda g: g / (out * 2.0),
        Op.RSQRT: lambda g: g * out * out * out * -0.5,
        Op.SIN: lambda g: g * x.cos(),
        Op.COS: lambda g: -(g * x.sin()),
        Op.TANH: lambda g: g * (1.0 - out * out),
        Op.SIGMOID: lambda g: g * out * (1.0 - out),
        Op.RELU: lambda g: g * (out > 0).to(out.dtype),
        Op.GELU: lambda g: g * _gelu_grad(x),
        Op.GELU_GRAD: lambda g: g * (x * x * -0.5).exp() * (2.0 - x * x) * (1.0 / math.sqrt(2.0 * math.pi)),
        Op.SILU: lambda g: g * _silu_grad(x),
        Op.RECIPROCAL: lambda g: -(g * out * out),
        Op.ATAN: lambda g: g / (x * x + 1.0),
        Op.EXPM1: lambda g: g * (out + 1.0),
        Op.LOG1P: lambda g: g / (x + 1.0),
        # piecewise constant: a zero gradient (torch's SignBackward, FloorBackward...: zeros)
        Op.SIGN: lambda g: g * 0.0,
        Op.FLOOR: lambda g: g * 0.0,
        Op.CEIL: lambda g: g * 0.0,
        Op.TRUNC: lambda g: g * 0.0,
        Op.ROUND: lambda g: g * 0.0,
        Op.FRAC: lambda g: g,
        # (torch's boundaries: hardsigmoid's slope is 0 at +-3, hardswish's is 0 at -3 and 1 at 3)
        Op.HARDSIGMOID: lambda g: _where((x > -3.0) & (x < 3.0), g / 6.0, 0.0),
        Op.LOGSIGMOID: lambda g: g * (-x).sigmoid(),
        Op.LOG2: lambda g: g / (x * math.log(2.0)),   # (torch's order: grad / (self * ln 2))
        Op.LOG10: lambda g: g / (x * math.log(10.0)),
        Op.EXP2: lambda g: g * out * math.log(2.0),
        Op.ERFC: lambda g: g * (x * x * -1.0).exp() * (-2.0 / math.sqrt(math.pi)),
        Op.MISH: lambda g: g * _mish_grad(x),
        Op.HARDSWISH: lambda g: _where(x <= -3.0, 0.0, _where(x < 3.0, g * (x / 3.0 + 0.5), g)),
        Op.CAST: lambda g: g,
    }.get(op)


def _where(cond, a, b):
    from ..ops import where
    return where(cond, a, b)


def _silu_grad(x):
    s = x.sigmoid()
    return s * (1.0 + x * (1.0 - s))


def _is_tensor(x):
    return hasattr(x, "_ag")


def _pow_grads(a, b, out):
    from ..ops import where
    if _is_tensor(b):
        ga = lambda g: where(b == 0, 0.0, g * b * a ** (b - 1.0))  # noqa: E731
    else:
        ga = (lambda g: g * 0.0) if b == 0 else (lambda g: g * (b * a ** (b - 1.0)))
    if _is_tensor(a):
        gb = lambda g: g * where((a == 0) & (b >= 0), 0.0, out * a.log())  # noqa: E731
    else:
        log_a = math.log(a) if a > 0 else (float("-inf") if a == 0 else float("nan"))
        gb = (lambda g: g * where(b >= 0, 0.0, out * log_a)) if a == 0 else (lambda g: g * out * log_a)
    return ga, gb


def _extreme_grads(op, a, b):
    """maximum/minimum: with a scalar it is clamp (gradient where x >= min, as torch's clamp);
    between tensors a tie splits the gradient in halves, and an input gets it wherever it does
    not lose, so both get it where a NaN is compared (as torch's maximum)."""
    from ..ops import where
    loses = (lambda x, y: x < y) if op is Op.MAXIMUM else (lambda x, y: x > y)
    if not _is_tensor(b):
        keep = (a >= b) if op is Op.MAXIMUM else (a <= b)
        return (lambda g: where(keep, g, 0.0)), None
    if not _is_tensor(a):
        keep = (b >= a) if op is Op.MAXIMUM else (b <= a)
        return None, (lambda g: where(keep, g, 0.0))
    return (lambda g: where(a == b, g * 0.5, where(loses(a, b), 0.0, g)),
            lambda g: where(a == b, g * 0.5, where(loses(b, a), 0.0, g)))


def _binary(op, a, b, out):
    if op is Op.ADD:
        return (lambda g: g), (lambda g: g)
    if op is Op.SUB:
        return (lambda g: g), (lambda g: -g)
    if op is Op.MUL:
        return (lambda g: g * b), (lambda g: g * a)
    if op is Op.DIV:
        return (lambda g: g / b), (lambda g: -(g * out / b))
    if op is Op.POW:
        return _pow_grads(a, b, out)
    if op in (Op.MAXIMUM, Op.MINIMUM):
        return _extreme_grads(op, a, b)
    if op is Op.MOD:
        return (lambda g: g), (lambda g: -(g * (a // b)))
    if op is Op.FMOD:
        return (lambda g: g), (lambda g: -(g * (a / b).trunc()))
    if op is Op.ATAN2:   # atan2(a, b): d/da = b / (a^2 + b^2), d/db = -a / (a^2 + b^2)
        return (lambda g: g * b / (a * a + b * b)), (lambda g: -(g * a) / (a * a + b * b))
    if op is Op.LEAKY_RELU:   # (the slope is a number)
        return (lambda g: _where(a > 0, g, g * b)), None
    if op is Op.LOGADDEXP:   # torch's: g / (1 + e^(b - a)), g / (1 + e^(a - b))
        return (lambda g: g / ((b - a).exp() + 1.0)), (lambda g: g / ((a - b).exp() + 1.0))
    if op is Op.LOGADDEXP2:   # torch's: g / (1 + 2^(b - a)), g / (1 + 2^(a - b))
        return (lambda g: g / ((b - a).exp2() + 1.0)), (lambda g: g / ((a - b).exp2() + 1.0))
    if op is Op.XLOGY:   # torch's: xlogy(g, b), but 0 where a is 0 and b <= 0; g a / b
        from ..torch_math import xlogy
        return (lambda g: _where((a == 0) & (b <= 0), 0.0, xlogy(g, b))), (lambda g: g * a / b)
    if op is Op.HYPOT:   # torch's: g * a / out, g * b / out (NaN at (0, 0), as torch's)
        return (lambda g: g * a / out), (lambda g: g * b / out)
    if op is Op.COPYSIGN:   # torch's rule: out / a (0 where a is 0) for a; zeros for the sign's source
        return (lambda g: _where(a == 0, 0.0, g * (out / a))), (lambda g: g * 0.0)
    return None


def _mish_grad(x):
    """d/dx x tanh(sp(x)) = tanh(sp) + x sigmoid(x) (1 - tanh(sp)^2), sp = log1p(e^x) (torch's)."""
    from ..nn.activations import softplus
    t = softplus(x, 1.0, math.inf).tanh()
    return t + x * x.sigmoid() * (1.0 - t * t)


def _softplus_grad(x, beta, threshold):
    """torch's softplus_backward: g where x * beta > threshold, else g * sigmoid(x * beta)."""
    return lambda g: _where(x * beta > threshold, g, g * (x * beta).sigmoid())


def _elu_grad(x, negcoef, poscoef, input_scale):
    """torch's elu_backward: ``poscoef`` where x > 0 (and where x is NaN), else the exponential's slope."""
    return lambda g: _where(x <= 0, g * (x.clamp(max=0.0) * input_scale).exp() * (input_scale * negcoef),
                            g * poscoef)


def _clamp_grads(x, lo, hi):
    """torch's clamp_backward (x's gradient where lo <= x <= hi) and clamp_backward_min_max for
    tensor bounds: lo's where x < lo < hi, hi's where x > hi or hi < lo (hi wins a crossed clamp)."""
    gx = lambda g: _where((x >= lo) & (x <= hi), g, 0.0)  # noqa: E731
    glo = (lambda g: _where((x < lo) & (lo < hi), g, 0.0)) if _is_tensor(lo) else None
    ghi = (lambda g: _where((x > hi) | (hi < lo), g, 0.0)) if _is_tensor(hi) else None
    return gx, glo, ghi


def _lerp_grads(x, end, weight):
    """torch's lerp backward: g (1 - w) for x, g w for end, g (end - x) for a tensor weight."""
    return (lambda g: g * (1.0 - weight)), (lambda g: g * weight), \
        (lambda g: g * (end - x)) if _is_tensor(weight) else None


def _fma_grads(a, b, c):
    """a * b + c's: g b for a, g a for b, g for c."""
    return (lambda g: g * b), (lambda g: g * a), (lambda g: g)


def _nan_to_num_grad(x):
    """nan_to_num's gradient: ``g`` where ``x`` is finite, 0 where it was replaced (torch's)."""
    return lambda g: _where(x.abs() < math.inf, g, 0.0)


def _locals(op, args, out):
    """The local derivative of each operand (None: not differentiable in it), times g."""
    if len(args) == 1:
        return (_unary(op, args[0], out),)
    if op in (Op.HARDSIGMOID, Op.HARDSWISH):   # (x, and the clamp's bounds: numbers)
        return (_unary(op, args[0], out), None, None)
    if op is Op.NAN_TO_NUM:
        return (_nan_to_num_grad(args[0]), None, None, None)
    if op is Op.ELU:
        return (_elu_grad(*args), None, None, None)
    if op is Op.SOFTPLUS:
        return (_softplus_grad(*args), None, None)
    if op is Op.CLAMP:
        return _clamp_grads(*args)
    if op is Op.LERP:
        return _lerp_grads(*args)
    if op is Op.FMA:
        return _fma_grads(*args)
    return _binary(op, args[0], args[1], out)


def _saved_output(out):
    """The output a gradient rule reads (``g * out``), saved as torch saves it: the same storage
    and view without the gradient node, so ``out -> its GradFn -> the vjp -> out`` is no
    reference cycle (a cycle would keep the result alive until Python's cyclic collector runs,
    and a capture's dropped warmup outputs with it). Version counting still sees its storage."""
    return out.detach()


def record_elementwise(op, args, out):
    """``out = op(*args)`` (args: tensors and Python scalars, broadcast to ``out``)."""
    locals_ = _locals(op, args, _saved_output(out))
    if locals_ is None or all(f is None for f in locals_):
        return out   # comparisons, logic, floor division: not differentiable
    edges = [(x, _through(x, f)) for x, f in zip(args, locals_) if f is not None and _is_tensor(x)]
    return attach(out, op.label, edges)


def _through(x, local):
    return lambda g: _to_input(x, local(g))


def record_where(cond, a, b, out):
    from ..ops import where
    edges = []
    if _is_tensor(a):
        edges.append((a, lambda g: _to_input(a, where(cond, g, 0.0))))
    if _is_tensor(b):
        edges.append((b, lambda g: _to_input(b, where(cond, 0.0, g))))
    return attach(out, "where", edges)


def record_reduce(op, x, axes, out_keep):
    """``out_keep`` keeps the reduced axes (size 1); amax/amin/max/min share the gradient evenly
    between tied extremes (torch's amax rule)."""
    if op is Op.SUM:
        return attach(out_keep, "sum", [(x, lambda g: g.expand(x.shape).to(x.dtype))])
    if op is Op.PROD:
        return attach(out_keep, "prod", [(x, lambda g: _prod_grad(x.detach(), g, axes))])
    if op in (Op.MAX, Op.MIN):
        extreme = _saved_output(out_keep)

        def vjp(g):
            from ..ops import where
            if not axes:
                return g.to(x.dtype)
            hit = x == extreme
            return where(hit, g / hit.sum(axes, keepdim=True), 0.0).to(x.dtype)
        return attach(out_keep, op.label, [(x, vjp)])
    return out_keep


def record_var(x, dims: tuple, full: bool, correction, out_keep, std: bool):
    """``var`` (``std``: its square root) of ``x`` over ``dims`` (``full``: over every dim, torch's
    ``dim=None``), ``out_keep`` keeping them, its gradient torch's (``var_backward``,
    ``std_backward``) where the composition's is another: over every dim with no more elements
    than ``correction``, inf (NaN where ``x`` is its mean); over given dims ``2 / (n - correction)``
    times the deviation even where that is negative or infinite; a zero ``std`` passes 0 on, not NaN."""
    from ..ops import reduced_count, where
    value, out = x.detach(), _saved_output(out_keep)
    dof = reduced_count(x, dims) - correction

    def vjp(g):
        if std:
            g = where(out == 0, 0.0, g / (out * 2))
        mean = value.mean(dims, keepdim=True)
        if full and dof <= 0:
            return (g * where(value == mean, math.nan, math.inf)).to(x.dtype)
        return ((2.0 / dof if dof else math.inf) * g * (value - mean)).to(x.dtype)
    return attach(out_keep, "std" if std else "var", [(x, vjp)])


def _reversed_scan(op, t, dim: int):
    """The scan of ``t`` from the end of ``dim`` back (a scan of the flipped tensor, flipped)."""
    from ..ops import scan
    from ..torch_index import flip
    return flip(scan(op, flip(t, dim), dim, t.dtype), dim)


def _prod_grad(x, g, axes):
    """``g`` times the product of the other elements along ``axes``, zeros included: with no zero
    ``prod / x``; with one, that element gets the product of the rest, the others 0; with two
    or more, 0 everywhere (torch's rule, without dividing by a zero)."""
    from ..ops import reduce, where
    zero = x == 0
    zeros = zero.sum(axes, keepdim=True)
    rest = reduce(Op.PROD, where(zero, 1.0, x), axes, keepdim=True)   # the product without the zeros
    only = where(zeros == 0, rest / where(zero, 1.0, x), where((zeros == 1) & zero, rest, 0.0))
    return (g.expand(x.shape) * only).to(x.dtype)


def _cumprod_grad(x, out, g, dim: int):
    """The VJP of ``cumprod`` along ``dim``, zeros included. Before a row's first zero ``z``,
    element i gets ``sum_{j>=i} g_j out_j / x_i`` (later products are 0); ``z`` itself gets
    ``sum_{j>=z} g_j * prod_{k<=j, k!=z} x_k`` (the cumprod with ``x_z`` taken as 1); every
    element after ``z`` gets 0 (each product it is in holds ``x_z``)."""
    from ..ops import scan, where
    zero = x == 0
    zeros_so_far = scan(Op.CUMSUM, zero.to(dt.int64), dim, dt.int64)
    before, first = zeros_so_far == 0, zero & (zeros_so_far == 1)
    grad = where(before, _reversed_scan(Op.CUMSUM, g * out, dim) / where(before, x, 1.0), 0.0)
    without_first = scan(Op.CUMPROD, where(first, 1.0, x), dim, x.dtype)
    at_first = _reversed_scan(Op.CUMSUM, where(zeros_so_far >= 1, g * without_first, 0.0), dim)
    return where(first, at_first, grad)


def _logcumsumexp_grad(x, out, g, dim: int):
    """``grad_i = sum_{j>=i} g_j exp(x_i - out_j)``, as log-sum-exps of the positive and the
    negative parts of ``g`` (torch's form: nothing overflows)."""
    from ..ops import where
    pos = _reversed_scan(Op.LOGCUMSUMEXP, where(g > 0, g, 0.0).log() - out, dim)
    neg = _reversed_scan(Op.LOGCUMSUMEXP, where(g < 0, -g, 0.0).log() - out, dim)
    return (x + pos).exp() - (x + neg).exp()


def record_scan(op, x, dim: int, out):
    """cumsum: the reversed cumsum of ``g``; cumprod and logcumsumexp: see their VJPs."""
    if op is Op.CUMSUM:
        return attach(out, "cumsum", [(x, lambda g: _reversed_scan(Op.CUMSUM, g, dim).to(x.dtype))])
    saved = _saved_output(out)
    if op is Op.CUMPROD:
        return attach(out, "cumprod", [(x, lambda g: _cumprod_grad(x.detach(), saved, g, dim).to(x.dtype))])
    return attach(out, "logcumsumexp", [(x, lambda g: _logcumsumexp_grad(x.detach(), saved, g, dim).to(x.dtype))])


def record_max_along(x, dim: int, keepdim: bool, values, indices):
    """``max(dim)``/``min(dim)``: the gradient goes to the returned index alone, as torch's (the
    full reductions, amax and amin split it between ties instead: ``record_reduce``)."""
    def vjp(g):
        from ..creation import arange
        from ..ops import where
        shape = [1] * x.ndim
        shape[dim] = x.shape[dim]
        position = arange(x.shape[dim], device=x.device).reshape(tuple(shape))
        gk, ik = (g, indices) if keepdim else (g.unsqueeze(dim), indices.unsqueeze(dim))
        return where(position == ik, gk, 0.0).to(x.dtype)
    return attach(values, "max_along", [(x, vjp)])


def record_cast(x, out):
    dtype = x.dtype   # not x itself: a cast's gradient needs no saved value (so x may be written later)
    return attach(out, "cast", [(x, lambda g: g.to(dtype))])


def _same_order(vx, vy) -> bool:
    """True when ``vy`` reads the very elements of ``vx`` in the same row-major order."""
    if vx.numel != vy.numel:
        return False
    r = vx.reshape(vy.shape)
    return r is not None and r.offset == vy.offset and all(
        a == b for a, b, s in zip(r.strides, vy.strides, vy.shape) if s != 1)


def _permutation(vx, vy):
    """The dims order with ``vy == vx.permute(order)``, or None."""
    if len(vx.shape) != len(vy.shape) or vx.offset != vy.offset:
        return None
    free = list(range(len(vx.shape)))
    order = []
    for s, st in zip(vy.shape, vy.strides):
        match = next((d for d in free if vx.shape[d] == s and (s == 1 or vx.strides[d] == st)), None)
        if match is None:
            return None
        free.remove(match)
        order.append(match)
    return order


def record_view(x, y):
    """``y`` is a view of ``x``'s storage. Expand sums back; reshape and permute move ``g`` back;
    any other view (slices, selects) scatters ``g`` into zeros of the storage and reads x's part."""
    vx, vy = x._view, y._view
    if vy.has_overlap() and not vx.has_overlap():
        return attach(y, "expand", [(x, lambda g: sum_to(g, x.shape))])
    if _same_order(vx, vy):
        return attach(y, "view", [(x, lambda g: g.reshape(x.shape))])
    order = _permutation(vx, vy)
    if order is not None:
        inverse = tuple(sorted(range(len(order)), key=order.__getitem__))
        return attach(y, "permute", [(x, lambda g: g.permute(inverse))])

    def scatter(g):
        from ..creation import zeros
        whole = zeros(x._storage.shape, dtype=g.dtype, device=g.device)
        whole._with_view(vy).copy_(g)
        return whole._with_view(vx)
    return attach(y, "slice", [(x, scatter)])


def record_matmul(a, b, compute):
    with no_grad():
        out = compute(a, b)

    def promoted(g):
        if b.ndim == 1:
            g = g.unsqueeze(-1)
        if a.ndim == 1:
            g = g.unsqueeze(-2)
        return g

    a2 = lambda: a.unsqueeze(0) if a.ndim == 1 else a  # noqa: E731
    b2 = lambda: b.unsqueeze(-1) if b.ndim == 1 else b  # noqa: E731
    return attach(out, "matmul", [
        (a, lambda g: sum_to(_product(promoted(g), b2().mT, a), a2().shape).reshape(a.shape).to(a.dtype)),
        (b, lambda g: sum_to(_product(a2().mT, promoted(g), b), b2().shape).reshape(b.shape).to(b.dtype)),
    ])


def _product(x, y, like):
    """x @ y, computed as (y.mT @ x.mT).mT when ``like`` is a transposed view (``linear``'s
    ``weight.T``): the gradient then comes out in the layout of the weight's own storage,
    so it is the weight's .grad as is, not a reduction read through a transpose and copied."""
    if like.ndim >= 2 and not like.is_contiguous() and like.mT.is_contiguous():
        return (y.mT @ x.mT).mT
    return x @ y


def index_add(shape, dim: int, index, g):
    """zeros(shape) with ``g``'s slices added at ``index`` along ``dim`` (repeated indices
    accumulate): one native scatter-add (``Op.INDEX_ADD``, a library step like the gather, not
    an extern). It costs the size of ``g``, where a one-hot matmul costs that times
    ``shape[dim]`` (an embedding's vocabulary)."""
    from ..ir.node import Node, Op
    from ..ops import where
    from ..tensor import result_tensor
    n = shape[dim]
    idx = index.reshape(-1)
    idx = where(idx < 0, idx + n, idx)
    out_shape = g.shape[:dim] + (n,) + g.shape[dim + 1:]
    return result_tensor(g.device, Node(Op.INDEX_ADD, (g._read(), idx._read()), g.dtype, out_shape, (dim, n)))


def record_gather(x, dim: int, index, out):
    return attach(out, "gather", [(x, lambda g: index_add(x.shape, dim, index, g).to(x.dtype))])


def record_cat(tensors, dim: int, compute):
    with no_grad():
        out = compute(tensors, dim)
    edges, start = [], 0
    for t in tensors:
        n = t.shape[dim]
        edges.append((t, _slice_of(dim, start, n, t)))
        start += n
    return attach(out, "cat", edges)


def _slice_of(dim, start, n, t):
    key = (slice(None),) * dim + (slice(start, start + n),)
    return lambda g: g[key].to(t.dtype)
