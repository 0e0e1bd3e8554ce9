"""Op definitions: how each Tensor API call becomes IR nodes (promotion, broadcasting, casts).

Every function here only *records*: it builds nodes and returns new Tensors at once
(docs/semantics.md, Lazy recording). Elementwise sources are cast to the computation dtype and expanded to the
result shape with explicit nodes, so the planner and code generators never infer either.
"""
from __future__ import annotations

import functools
import math
import numbers
import threading

import numpy as np
import torch

from . import config
from .codegen.kernel import INTEGER_DIVISIONS
from .errors import DeviceError, DivisionByZeroError, DTypeError, InvalidIndexError, ShapeError
from .ir import dtypes as dt
from .ir.layout import (NUMBER, channels_last_layout, elementwise_layout, is_channels_last, preserved_layout,
                        suggests_channels_last)
from .ir.node import Kind, Node, Op
from .ir.shapes import broadcast_shapes, normalize_dim, normalize_dims, prod
from .ir.view import View, contiguous_view

# matmuls with at most this many multiply-adds become fused reductions (see _matmul_as_reduction)
INLINE_MATMUL = config.INLINE_MATMUL.get()
FLOAT_UNARY = {Op.EXP, Op.LOG, Op.SQRT, Op.RSQRT, Op.SIN, Op.COS, Op.TANH, Op.SIGMOID, Op.GELU, Op.SILU,
               Op.RECIPROCAL, Op.LOG2, Op.LOG10, Op.EXP2, Op.ERFC}
COMPARE = {Op.LT, Op.LE, Op.GT, Op.GE, Op.EQ, Op.NE}
LOGIC = {Op.AND, Op.OR, Op.XOR}
_I64 = 2 ** 63   # Python ints outside [-2^63, 2^63) do not fit a launch's 64-bit scalar word
BOOL_UNSUPPORTED = {Op.ABS, Op.RELU, Op.FLOORDIV, Op.MOD, Op.FMOD, Op.POW}  # torch has no bool kernel for these
FLOAT_ONLY = {Op.GELU, Op.GELU_GRAD, Op.SILU}   # torch has no integer or bool kernel (exp, tanh... promote to float32)


def is_scalar(x) -> bool:
    if type(x) in (float, int, bool):   # the common case, without the ABC check of numbers.Number
        return True
    return isinstance(x, (bool, numbers.Number, np.bool_)) and not isinstance(x, complex)


def scalar_value(value, dtype: dt.DType):
    """A Python value of the kind the launch metadata stores for ``dtype`` (one 64-bit word)."""
    if dtype.is_float:
        try:
            return float(value)
        except OverflowError:
            raise DTypeError(f"the scalar {value} is too large for {dtype.name}") from None
    if dtype.is_bool:
        return int(bool(value))
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        raise DTypeError(f"cannot convert {value} to {dtype.name}")
    value = int(value)
    if not -_I64 <= value < _I64:
        raise DTypeError(f"the scalar {value} does not fit in 64 bits (as in torch); use a float or a smaller int")
    return value


# torch's CPU add and sub of a float16/bfloat16 tensor and a Python number round the number to the
# tensor's dtype first (float16(0.001) - 0.001 is 0 there), where mul and div compute with the
# number as it is, in float32; lazyfuse's kernels compute half types in float32, so these ops' scalars
# are rounded at recording (tests/test_semantics.py).
SCALAR_ROUNDED_OPS = frozenset({Op.ADD, Op.SUB})
_HALF_TYPES = frozenset({dt.float16, dt.bfloat16})


@functools.lru_cache(maxsize=1024)
def _rounded(value: float, dtype: dt.DType) -> float:
    return torch.tensor(value, dtype=torch.float64).to(dtype.torch).item()


def rounded_scalar(value, dtype: dt.DType):
    """``value`` rounded to ``dtype`` as torch's cast rounds it (inf beyond its range)."""
    return _rounded(float(value), dtype) if not isinstance(value, bool) else value


def scalar_node(value, dtype: dt.DType) -> Node:
    return Node(Op.SCALAR, (), dtype, (), scalar_value(value, dtype))


def refuse_zero_divisor(op: Op, divisor, ct: dt.DType) -> None:
    """Raise ``DivisionByZeroError`` now for an integer ``//``, ``%`` or ``fmod`` (``op`` one of
    ``INTEGER_DIVISIONS``, as its callers test; compute dtype
    ``ct``) by a Python number that is 0 in ``ct``: 0, False, or a multiple of 2^bits (2**32 is 0
    in int32, as torch wraps the number). torch raises at the call, leaving an in-place operand
    as it was; a tensor divisor's zeros are only known to the kernel (its error flag, at the drain)."""
    if not ct.is_float and int(divisor) % (1 << 8 * ct.itemsize) == 0:
        raise DivisionByZeroError(f"ZeroDivisionError: integer {op.label} by the number {divisor!r}, which is 0 in "
                                  f"{ct.name} (torch raises RuntimeError: ZeroDivisionError too); divide by a "
                                  "non-zero number")


def common_device(args, default=None):
    Tensor = _t.Tensor
    dev = None
    for a in args:
        if isinstance(a, Tensor):
            if dev is None:
                dev = a.device
            elif a.device is not dev:
                raise DeviceError(f"Expected all tensors to be on the same device, but found at least two devices, "
                                  f"{dev.name} and {a.device.name}! tensors on {dev.name} and {a.device.name} are "
                                  "mixed in one op; move one with lf.tensor(t.numpy(), device=...)")
    return dev if dev is not None else default


# (hot-path aliases: ``Op.X`` costs ~150 ns a read on Python 3.11, whose Enum metaclass has a __getattr__)
_VIEW, _SUM, _MUL, _VIEW_KIND = Op.VIEW, Op.SUM, Op.MUL, Kind.VIEW
_NO_IDENTITY = frozenset({Op.MAX, Op.MIN, Op.ARGMAX, Op.ARGMIN})   # reductions an empty dim cannot take


def new_node(engine, op, srcs, dtype, shape, arg=None) -> Node:
    """An inner node of an API call (not a result): counted as a recorded op."""
    node = Node(op, srcs, dtype, shape, arg)
    if op.pending and op.kind is not _VIEW_KIND:
        engine.count_extra_ops(1)
    return node


@functools.lru_cache(maxsize=4096)
def _expand_view(src_shape: tuple, shape: tuple) -> View:
    return View.contiguous(src_shape).expand(shape)


def expand_node(node: Node, shape) -> Node:
    shape = tuple(shape)
    if node.shape == shape:
        return node
    return Node(_VIEW, (node,), node.dtype, shape, _expand_view(node.shape, shape))


def binary_method(op: Op, reflected: bool = False):
    """``Tensor.__<op>__`` (``reflected``: ``__r<op>__``) with a fast path for the common case.

    A tensor of the same dtype on the same device (broadcast if its shape differs), or a
    Python float/int the tensor's dtype takes as is (torch's promotion keeps the tensor's
    dtype), needs no promotion or validation: the node is recorded directly. Anything else goes
    through ``elementwise``, which applies torch's rules and raises the errors.
    """
    SCALAR = Op.SCALAR
    out_bool = op in COMPARE
    rounds = op in SCALAR_ROUNDED_OPS   # (a number meeting a half-type tensor: rounded_scalar)
    fast_dtypes = frozenset(d for d in dt.ALL if not (d.is_bool or (op is Op.DIV and not d.is_float)))
    divides = op in INTEGER_DIVISIONS and not reflected   # (a number divisor: refuse_zero_divisor)
    numbers_are_operands = op not in NUMBER_PARAMETER_OPS   # (to the layout rule: see there)

    def method(a, b):
        st = a._storage
        ct = st.dtype
        if ct in fast_dtypes:
            tb = type(b)
            shape = a._view.shape
            if tb is float and ct.is_float or tb is int and -_I64 <= b < _I64:   # else: refused below
                if divides:
                    refuse_zero_divisor(op, b, ct)
                value = (rounded_scalar(b, ct) if rounds and ct in _HALF_TYPES else float(b)) if ct.is_float else b
                other = Node(SCALAR, (), ct, (), value)   # broadcasts as is
            elif tb is _t.Tensor and b.device is a.device and b._storage.dtype is ct:
                other = b
                if b._view.shape != shape:   # broadcast (a mismatch raises ShapeError here)
                    shape = broadcast_shapes(shape, b._view.shape)
            else:
                return elementwise(op, b, a) if reflected else elementwise(op, a, b)
            dtype = dt.bool_ if out_bool else ct
            grad = (a._ag is not None or other is b and b._ag is not None) and autograd.is_grad_enabled()
            if (a._view is st.view or a._view.is_row_major()) and (other is not b or b._view.is_row_major()) \
                    and 0 not in shape:
                layout = None
            else:
                layout = layout_of(shape, (a._view, b._view) if other is b else
                                   (a._view, NUMBER) if numbers_are_operands else (a._view,))
                if layout is not None:   # (``laid_out``, reading each storage through one view)
                    if grad:   # (laid_out's Tensor views carry the gradients)
                        return elementwise(op, b, a) if reflected else elementwise(op, a, b)
                    x = a._read_as(layout.stored_view(a._view))
                    if other is b:
                        other = b._read_as(layout.stored_view(b._view))
                    return laid_out_result(a.device, Node(op, (other, x) if reflected else (x, other), dtype,
                                                          layout.stored_shape), layout)
            x = st.current if a._view is st.view else a._read()
            if other is b:
                bs = b._storage
                other = bs.current if b._view is bs.view else b._read()
                if shape is not a._view.shape or shape != b._view.shape:   # (broadcast)
                    x, other = expand_node(x, shape), expand_node(other, shape)
            out = _t.result_tensor(a.device, Node(op, (other, x) if reflected else (x, other), dtype, shape))
            if grad:
                autograd.rules.record_elementwise(op, (b, a) if reflected else (a, b), out)
            return out
        return elementwise(op, b, a) if reflected else elementwise(op, a, b)

    method.__name__ = f"__{'r' if reflected else ''}{op.label}__"
    method.__doc__ = (f"Elementwise {op.label} of {'(other, self)' if reflected else '(self, other)'}, ``other`` a "
                      "Tensor or Python number, with torch's promotion and broadcasting; recorded lazily.")
    return method


# Tensor.<op>() docstrings, set by ``unary_method`` (dtype notes: see FLOAT_UNARY, BOOL_UNSUPPORTED)
UNARY_DOCS = {
    Op.NEG: "Elementwise ``-x`` (bool tensors raise DTypeError, as in torch; use ``~``).",
    Op.ABS: "Elementwise ``|x|`` (bool tensors raise DTypeError, as in torch).",
    Op.EXP: "Elementwise ``e**x``; integer and bool tensors give float32, as in torch.",
    Op.LOG: "Elementwise natural logarithm; integer and bool tensors give float32, as in torch.",
    Op.SQRT: "Elementwise square root; integer and bool tensors give float32, as in torch.",
    Op.RSQRT: "Elementwise ``1 / sqrt(x)``; integer and bool tensors give float32, as in torch.",
    Op.SIN: "Elementwise sine; integer and bool tensors give float32, as in torch.",
    Op.COS: "Elementwise cosine; integer and bool tensors give float32, as in torch.",
    Op.TANH: "Elementwise hyperbolic tangent; integer and bool tensors give float32, as in torch.",
    Op.SIGMOID: "Elementwise ``1 / (1 + e**-x)``; integer and bool tensors give float32, as in torch.",
    Op.RELU: "Elementwise ``max(x, 0)``, keeping the dtype (bool tensors raise DTypeError, as in torch).",
    Op.GELU: "Elementwise exact (erf) GELU, ``x * Phi(x)``; integer and bool tensors raise DTypeError (as torch).",
    Op.SILU: "Elementwise ``x * sigmoid(x)`` (SiLU); integer and bool tensors raise DTypeError (as torch).",
    Op.RECIPROCAL: "Elementwise ``1 / x``; integer and bool tensors give float32, as in torch.",
    Op.NOT: "``~x``: logical not of a bool tensor, bitwise not of an integer one (floats raise DTypeError).",
}


def unary_method(op: Op):
    """``Tensor.<op>()`` with a fast path for dtypes the op keeps (a float tensor's exp, an
    int tensor's neg...): no promotion or validation needed; others go through ``elementwise``."""
    keeps = frozenset(d for d in dt.ALL if (d.is_float if op in FLOAT_UNARY else
                                            not d.is_float if op is Op.NOT else not d.is_bool))

    def method(a):
        st = a._storage
        if st.dtype in keeps:
            v = a._view
            grad = a._ag is not None and autograd.is_grad_enabled()
            layout = None if v is st.view or v.is_row_major() and 0 not in v.shape else layout_of(v.shape, (v,))
            if layout is None:
                x = st.current if v is st.view else a._read()
                out = _t.result_tensor(a.device, Node(op, (x,), st.dtype, v.shape))
                if grad:
                    autograd.rules.record_elementwise(op, (a,), out)
                return out
            if not grad:   # (``laid_out``, reading the storage through one view; else its Tensor views
                #             carry the gradients)
                x = a._read_as(layout.stored_view(v))
                return laid_out_result(a.device, Node(op, (x,), st.dtype, layout.stored_shape), layout)
        return elementwise(op, a)

    method.__name__ = op.label
    method.__doc__ = UNARY_DOCS[op] + " Recorded lazily, run at the next drain."
    return method


def cast_node(engine, node: Node, dtype: dt.DType) -> Node:
    if node.dtype is dtype:
        return node
    if node.op is Op.SCALAR:
        return scalar_node(node.arg, dtype)
    return new_node(engine, Op.CAST, (node,), dtype, node.shape)


def _unsupported_operand(a) -> DTypeError:
    return DTypeError(f"unsupported operand of type {type(a).__module__}.{type(a).__qualname__}: pass a Tensor, "
                      "a torch tensor or numpy array, or a Python number")


def operand_dtypes(args):
    Tensor = _t.Tensor
    dims, zeros, scalars = [], [], []
    for a in args:
        if isinstance(a, Tensor):
            (dims if a.ndim else zeros).append(a.dtype)
        elif is_scalar(a):
            scalars.append(dt.scalar_dtype(a))
        else:
            raise _unsupported_operand(a)
    return dims, zeros, scalars


def operand_node(engine, a, dtype, shape) -> Node:
    """A source of an elementwise op: cast, then expanded to ``shape`` (a scalar broadcasts as is)."""
    Tensor = _t.Tensor
    if isinstance(a, Tensor):
        return expand_node(cast_node(engine, a._read(), dtype), shape)
    return scalar_node(a, dtype)


_FLOAT_SCALAR = (dt.DEFAULT_FLOAT, None)


def elementwise(op: Op, *args, out_dtype=None, compute_dtype=None):
    """Record an elementwise op with torch's promotion and broadcasting (a torch tensor or numpy
    array operand is data: uploaded to the op's device, a tensor operand as torch reads it)."""
    for a in args:
        if isinstance(a, _HOST_ARRAYS):
            args = uploaded_operands(args)
            break
    dev = common_device(args)
    if dev is None:
        raise DTypeError(f"{op.label} needs at least one Tensor operand")
    engine = dev.engine
    ct, shape, odt = _elementwise_types(op, tuple([_operand_signature(a) for a in args]), out_dtype, compute_dtype)
    if op in SCALAR_ROUNDED_OPS and ct in _HALF_TYPES:
        args = tuple([rounded_scalar(a, ct) if is_scalar(a) else a for a in args])
    if op in INTEGER_DIVISIONS and is_scalar(args[1]):
        refuse_zero_divisor(op, args[1], ct)

    def record(args, shape):
        out = _t.result_tensor(dev, Node(op, tuple([operand_node(engine, a, ct, shape) for a in args]), odt, shape))
        if autograd.recording(*args):
            autograd.rules.record_elementwise(op, args, out)
        return out
    return in_result_layout(record, args, shape, numbers_are_operands=op not in NUMBER_PARAMETER_OPS)


# torch's kernels for these take a Python number as a parameter of a unary op (``pow(Tensor,
# Scalar)``, ``clamp(Tensor, Scalar, Scalar)``; a number reaches MAXIMUM/MINIMUM only from clamp's
# one bound): to the layout rule it is no operand
NUMBER_PARAMETER_OPS = frozenset({Op.POW, Op.CLAMP, Op.MAXIMUM, Op.MINIMUM})


def in_result_layout(record, args, shape, numbers_are_operands=True):
    """``record(args, shape)`` (an elementwise op's recording over its operands ``args``, tensors
    and numbers, broadcast to ``shape``) with the result laid out as torch lays it out
    (``ir/layout.py``): when that is not row-major, the op is recorded over the operands
    broadcast and permuted into the result's memory order, so that the kernel reads and writes
    in that order (``x.t() + 1`` streams as ``x + 1`` does), and its result is viewed back with
    torch's strides. Row-major operands (the common case) are recorded as they are.
    ``numbers_are_operands``: False where torch's kernel takes a number as a parameter rather
    than as a 0-d operand (``NUMBER_PARAMETER_OPS``: then a unary op's fast setup applies)."""
    layout = result_layout(args, shape, numbers_are_operands)
    return record(args, shape) if layout is None else laid_out(layout, record, args, shape)


def result_layout(args, shape, numbers_are_operands=True):
    """The layout (``ir/layout.elementwise_layout``) of an elementwise result of ``shape`` over
    ``args``, or None for row-major: always so when every operand is row-major (and the result
    not empty), and inside a ``row_major`` composite."""
    for a in args:
        if isinstance(a, _t.Tensor) and not a._view.is_row_major():
            break
    else:
        if 0 not in shape:   # (an empty result of row-major operands may not be: torch breaks a
            return None      # size-1/size-0 stride tie by size, and its strides after a 0 are 0)
    Tensor = _t.Tensor
    return layout_of(shape, tuple([a._view if isinstance(a, Tensor) else NUMBER for a in args
                                   if numbers_are_operands or isinstance(a, Tensor)]))


def layout_of(shape, views):
    """``ir/layout.elementwise_layout`` of a result of ``shape`` over operands of ``views``, or
    None (row-major) inside a ``row_major`` composite: ``result_layout`` without its row-major
    shortcut, for the fast paths, which tested it already."""
    return None if _composite.depth else elementwise_layout(shape, views)


CHANNELS_LAST_RANKS = {torch.channels_last: 4, torch.channels_last_3d: 5}


def copy_layout(view: View, memory_format):
    """The layout of a new copy of ``view`` (``clone``, ``.to``, ``*_like``) in torch's
    ``memory_format``, or None for row-major: ``torch.preserve_format`` (their default, also
    ``None``) keeps a dense view's strides or a strided one's order of dims
    (``ir/layout.preserved_layout``; row-major inside a ``row_major`` composite);
    ``torch.contiguous_format`` is row-major; ``torch.channels_last`` (4-d) and
    ``channels_last_3d`` (5-d) put the channels innermost, refused at another rank as torch
    refuses them."""
    if memory_format is None or memory_format is torch.preserve_format:
        return None if view.is_row_major() or _composite.depth else preserved_layout(view)
    if memory_format is torch.contiguous_format:
        return None
    rank = CHANNELS_LAST_RANKS.get(memory_format)
    if rank is None:
        raise DTypeError(f"memory_format={memory_format!r} is not one of torch.preserve_format, "
                         "torch.contiguous_format, torch.channels_last, torch.channels_last_3d")
    if len(view.shape) != rank:
        raise ShapeError(f"required rank {rank} tensor to use {str(memory_format).removeprefix('torch.')} format "
                         f"(this one has {len(view.shape)} dims)")
    return channels_last_layout(view.shape)


def in_memory_format(view: View, memory_format) -> bool:
    """torch's ``is_contiguous(memory_format=...)``: ``view`` is dense in that format's order
    (``torch.contiguous_format``: row-major, size-1 dims' strides not counting)."""
    if memory_format is torch.contiguous_format:
        return view.is_contiguous()
    rank = CHANNELS_LAST_RANKS.get(memory_format)
    if rank is None:
        raise DTypeError(f"memory_format={memory_format!r} is not one of torch.contiguous_format, "
                         "torch.channels_last, torch.channels_last_3d")
    return is_channels_last(view.shape, view.strides, rank)


def suggested_memory_format(view: View):
    """torch's ``suggest_memory_format()`` of a tensor of ``view``: the channels-last format of its
    rank where its strides are channels-last-like, else ``torch.contiguous_format``; ``.to``
    copies only into another format than this one (torch's ``to_will_alias``)."""
    if suggests_channels_last(view.shape, view.strides):
        return torch.channels_last if len(view.shape) == 4 else torch.channels_last_3d
    return torch.contiguous_format


class _CompositeDepth(threading.local):
    depth = 0   # how many ``row_major`` composites this thread is inside (a class default: reading
    #             a thread-local's missing attribute with getattr's default raises inside, ~300 ns)


_composite = _CompositeDepth()


def row_major(composite):
    """``composite`` records its elementwise results row-major, whatever its inputs' layout. For
    the composites whose fused kernels read their intermediates in row-major order (a row-wise
    softmax or layer_norm: one kernel, its reductions taking their elementwise prologue and
    epilogue; an intermediate laid out as a transposed input would split it into four) and
    whose torch kernel makes a contiguous result anyway."""
    @functools.wraps(composite)
    def recorded_row_major(*args, **kwargs):
        depth = _composite.depth
        _composite.depth = depth + 1
        try:
            return composite(*args, **kwargs)
        finally:
            _composite.depth = depth
    return recorded_row_major


def laid_out(layout, record, args, shape):
    """``record`` over ``args`` in ``layout``'s memory order (see ``in_result_layout``), its
    result viewed back as ``shape`` with the layout's strides. The operands are reordered
    with Tensor views, so autograd carries the gradients back through them."""
    Tensor = _t.Tensor
    if layout.order == tuple(range(len(shape))):   # (torch's strides differ from row-major's in size-1 dims only)
        return record(args, shape)._with_view(layout.view)
    permuted = []
    for a in args:
        if isinstance(a, Tensor):   # (two views: autograd's view rule takes a broadcast or a permutation, not both)
            if a._view.shape != shape:
                a = a._with_view(a._view.expand(shape))
            a = a._with_view(a._view.permute(layout.order))
        permuted.append(a)
    return record(tuple(permuted), layout.stored_shape)._with_view(layout.view)


def laid_out_result(device, node: Node, layout):
    """The result of ``node``, recorded over operands read in ``layout``'s memory order, viewed
    back with torch's strides (``laid_out``'s last step)."""
    return _t.Tensor(_t.result_tensor(device, node)._storage, layout.view, device)


_HOST_ARRAYS = (torch.Tensor, np.ndarray)


def uploaded_operands(args) -> tuple:
    """``args`` with each torch tensor and numpy array made a lazyfuse Tensor on the device of the
    lazyfuse operands (torch's promotion then reads it as the tensor it is: a dim or 0-d tensor,
    float64 for a float64 array)."""
    from .creation import tensor
    dev = common_device(args)
    if dev is None:
        raise DTypeError("an elementwise op needs at least one lazyfuse Tensor operand (got only torch "
                         "tensors, numpy arrays or numbers); make one with lf.tensor(...)")
    return tuple([tensor(a, device=dev) if isinstance(a, _HOST_ARRAYS) else a for a in args])


def uploading(fn):
    """``fn`` with its torch tensor and numpy array arguments (an index made with ``torch.tensor``)
    made lazyfuse Tensors as ``uploaded_operands`` makes them: for the compositions that read their
    tensor arguments' lazyfuse internals (``x.gather(0, torch_index)`` was an AttributeError)."""
    def call(*args, **kwargs):
        values = (*args, *kwargs.values())
        if not any(isinstance(a, _HOST_ARRAYS) for a in values):
            return fn(*args, **kwargs)
        values = uploaded_operands(values)
        return fn(*values[:len(args)], **dict(zip(kwargs, values[len(args):])))
    call.__name__, call.__qualname__, call.__doc__ = fn.__name__, fn.__qualname__, fn.__doc__
    call.__wrapped__ = fn
    return call


def _operand_signature(a) -> tuple:
    """What promotion and broadcasting read of an operand: (dtype, shape), shape None for a scalar."""
    if isinstance(a, _t.Tensor):
        return a._storage.dtype, a._view.shape   # (the attributes: a property read costs ~100 ns)
    if type(a) is float:   # (a runtime-scalar parameter, the common case: no ABC checks)
        return _FLOAT_SCALAR
    if is_scalar(a):
        return dt.scalar_dtype(a), None
    raise _unsupported_operand(a)


@functools.lru_cache(maxsize=4096)
def _elementwise_types(op: Op, signature: tuple, out_dtype, compute_dtype) -> tuple:
    """(computation dtype, result shape, result dtype) of ``op`` over operands of ``signature``,
    validated. Cached: a program records the same few signatures over and over (errors are
    raised, never cached)."""
    dims = [d for d, shape in signature if shape]
    zeros = [d for d, shape in signature if shape == ()]
    scalars = [d for d, shape in signature if shape is None]
    ct = compute_dtype or dt.result_type(dims, zeros, scalars)
    shape = broadcast_shapes(*(shape for _, shape in signature if shape is not None))
    if op in FLOAT_ONLY and not ct.is_float:
        raise DTypeError(f"{op.label} is not implemented for {ct.name} tensors (as in torch); call .float() first")
    if op in FLOAT_UNARY or op is Op.DIV:
        if not ct.is_float:
            ct = dt.DEFAULT_FLOAT
    if op in (Op.SUB, Op.NEG) and (ct.is_bool or dt.bool_ in dims + zeros + scalars):
        # torch refuses a bool operand of ``-`` even when the result would be an integer
        raise DTypeError(f"{op.label} of bool tensors is not supported; use ~ or ^ (logical ops) instead")
    if op in BOOL_UNSUPPORTED and ct.is_bool and not (op is Op.POW and signature[1][1] is None):
        # (torch does take ``bool_tensor ** True``: a scalar exponent has its own kernel)
        raise DTypeError(f"{op.label} is not implemented for bool tensors (as in torch); cast with .int() first")
    if op in LOGIC and ct.is_float:
        raise DTypeError(f"{op.label} needs bool or integer tensors, not {ct.name}")
    if op is Op.NOT and ct.is_float:
        raise DTypeError("~ needs a bool or integer tensor")
    return ct, shape, out_dtype or (dt.bool_ if op in COMPARE or op is Op.ISNAN else ct)


def check_integer_exponent(base, exponent) -> None:
    """Refuse what torch refuses at the call for an integer or bool tensor ``base`` to a Python
    int ``exponent`` (DTypeError): a negative one, and one beyond the result dtype's range (torch
    converts the exponent to it, checked: int8 ** 128 is refused, uint8 ** 255 taken). A tensor
    exponent follows torch's rule for one (1 -> 1, -1 -> +-1, else 0)."""
    if isinstance(base, _t.Tensor) and not base.dtype.is_float and isinstance(exponent, numbers.Integral):
        if exponent < 0:
            raise DTypeError(f"{base.dtype.name} tensor ** {exponent}: integers to negative integer powers are not "
                             "allowed (as in torch); use a float exponent or .float() first")
        ct = dt.result_type(*operand_dtypes((base, exponent)))
        if not ct.is_bool:   # (bool ** True stays bool: nothing to overflow)
            dt.check_fits(int(exponent), int(exponent), ct, f"{base.dtype.name} tensor ** {exponent}")


def power(base, exponent):
    """``base ** exponent`` with torch's promotion (``check_integer_exponent`` says what is refused)."""
    check_integer_exponent(base, exponent)
    return elementwise(Op.POW, base, exponent)


def where(cond, a, b):
    Tensor, result_tensor = _t.Tensor, _t.result_tensor
    if isinstance(cond, _HOST_ARRAYS) or isinstance(a, _HOST_ARRAYS) or isinstance(b, _HOST_ARRAYS):
        cond, a, b = uploaded_operands((cond, a, b))
    dev = common_device((cond, a, b))
    if dev is None:
        raise DTypeError("where needs at least one Tensor")
    if not isinstance(cond, Tensor):
        got = ", ".join("Tensor" if isinstance(v, Tensor) else type(v).__name__ for v in (cond, a, b))
        raise DTypeError(f"where() received an invalid combination of arguments - got ({got}), but expected one "
                         f"of: a bool Tensor condition (then tensors or numbers); pass one (lf.tensor({cond!r}))")
    if not cond.dtype.is_bool:
        raise DTypeError(f"where expected condition to be a boolean tensor, but got a tensor with dtype "
                         f"{cond.dtype.torch_scalar_name}: condition is {cond.dtype.name}; compare it (t != 0) or "
                         "call .bool() first")
    engine = dev.engine
    dims, zeros, scalars = operand_dtypes((a, b))
    ct = dt.result_type(dims, zeros, scalars)
    shape = broadcast_shapes(*(x.shape for x in (cond, a, b) if isinstance(x, Tensor)))

    def record(args, shape):
        cond, a, b = args
        c = operand_node(engine, cond, dt.bool_, shape)
        out = result_tensor(dev, Node(Op.WHERE, (c, operand_node(engine, a, ct, shape),
                                                 operand_node(engine, b, ct, shape)), ct, shape))
        return autograd.rules.record_where(cond, a, b, out) if autograd.recording(a, b) else out
    return in_result_layout(record, (cond, a, b), shape)


# torch's reductions over given dims keep the dims in a 64-bit mask: over a tensor of more than 64
# dims they refuse (a RuntimeError with this text); a reduction of every dim (no dim) runs
_MAX_REDUCE_DIMS = 64
_TOO_MANY_DIMS = ("{name} over dim {dim}: only tensors with up to 64 dims are supported (as torch's reductions "
                  "over a dim); this one has {ndim}: reshape it to fewer dims first")


def reduce(op: Op, x, dim=None, keepdim=False, out_dtype=None):
    """Record a reduction; the stored result keeps the reduced dims (size 1), the returned view squeezes."""
    result_tensor = _t.result_tensor
    shape = x._view.shape
    if isinstance(dim, (tuple, list)) and not dim:
        dim = None   # torch: an empty dim list reduces every dim (``x.sum(dim=())`` is a scalar)
    if dim is not None and len(shape) > _MAX_REDUCE_DIMS:
        raise ShapeError(_TOO_MANY_DIMS.format(name=op.label, dim=dim, ndim=len(shape)))
    axes = normalize_dims(dim, len(shape))
    if not shape:
        axes = ()
    if op in _NO_IDENTITY and any(shape[a] == 0 for a in axes):
        raise InvalidIndexError(f"{op.label}() of an empty dim: there is no identity; reduce a non-empty dim")
    engine = x.device.engine
    src = x._read()
    x_dtype = x._storage.dtype
    in_dtype = out_dtype if out_dtype is not None and op is _SUM else x_dtype
    src = cast_node(engine, src, in_dtype)
    keep, squeezed = _reduced_shape(shape, axes)
    odt = out_dtype or x_dtype
    out = result_tensor(x.device, Node(op, (src,), odt, keep, axes))
    if x._ag is not None and autograd.is_grad_enabled():
        autograd.rules.record_reduce(op, x, axes, out)
    if keepdim:
        return out
    return out._with_view(squeezed)


@functools.lru_cache(maxsize=4096)
def _reduced_shape(shape: tuple, axes: tuple) -> tuple:
    """A reduction of ``shape`` over ``axes``: the stored result's shape (reduced dims kept, size 1)
    and the view of it that drops them (its storage is contiguous, so that is always a view).
    Memoized: a program reduces the same few shapes over and over."""
    keep = tuple([1 if d in axes else s for d, s in enumerate(shape)])
    return keep, contiguous_view(keep).reshape(tuple([s for d, s in enumerate(shape) if d not in axes]))


def scan(op: Op, x, dim: int, out_dtype):
    """Record a scan (``Op.CUMSUM``/``CUMPROD``/``LOGCUMSUMEXP``) of ``x`` along ``dim`` in
    ``out_dtype`` (``x`` is cast to it first, as torch's ``cumsum(dtype=)``); a 0-d ``x`` is a
    scan of one element."""
    if x.ndim == 0:
        normalize_dim(dim, 0)   # a 0-d tensor still has dims -1 and 0 only, as torch's
        return scan(op, x.reshape(1), 0, out_dtype).reshape(())
    axis = (normalize_dim(dim, x.ndim),)
    src = cast_node(x.device.engine, x._read(), out_dtype)
    out = _t.result_tensor(x.device, Node(op, (src,), out_dtype, x.shape, axis))
    if x._ag is not None and autograd.is_grad_enabled():
        autograd.rules.record_scan(op, x, axis[0], out)
    return out


def reduced_count(x, dim) -> int:
    axes = normalize_dims(dim, x.ndim) if x.ndim else ()
    return prod(x.shape[a] for a in axes)


def matmul(a, b):
    Tensor, result_tensor = _t.Tensor, _t.result_tensor
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise DTypeError("matmul needs two Tensors")
    # (shapes and dtypes read once: this runs for every linear layer, and each property read costs)
    ash, bsh, ct = a._view.shape, b._view.shape, a._storage.dtype
    if len(ash) > 2 and len(bsh) == 2 and ash[-1] == bsh[0] and \
            ct.name not in getattr(a.device.backend, "matmul_template", frozenset()):
        # one matrix on the right: the rows of ``a`` times it is one 2-D matmul (one GEMM), and so
        # is its weight gradient, where a batched matmul would need a batched GEMM and a sum. Not
        # on a backend with a matmul template: its epilogue (bias, residual) would then read the
        # product through a reshape, and the template takes an epilogue only at its own index
        lead = ash[:-1]
        return matmul(a.reshape(prod(lead), ash[-1]), b).reshape(*lead, bsh[-1])
    if (a._ag is not None or b._ag is not None) and autograd.is_grad_enabled():
        return autograd.rules.record_matmul(a, b, matmul)
    dev = common_device((a, b))
    if not ash or not bsh:
        raise ShapeError("matmul of a 0-d tensor: use * for scalar products")
    if ct is not b._storage.dtype:
        raise DTypeError(f"matmul needs operands of one dtype, got {ct.name} @ {b.dtype.name} (torch refuses "
                         "mixed ones too); cast one with .to(...)")
    if ct.is_bool:
        raise DTypeError("matmul of bool tensors is not supported; cast to int or float first")
    a2 = a.unsqueeze(0) if len(ash) == 1 else a
    b2 = b.unsqueeze(-1) if len(bsh) == 1 else b
    a2sh, b2sh = a2._view.shape, b2._view.shape
    if a2sh[-1] != b2sh[-2]:
        raise ShapeError(f"mat1 and mat2 shapes cannot be multiplied ({'x'.join(map(str, a2sh))} and "
                         f"{'x'.join(map(str, b2sh))}): matmul: inner dims differ: {ash} @ {bsh} "
                         f"({a2sh[-1]} != {b2sh[-2]}); transpose or reshape an operand")
    batch = broadcast_shapes(a2sh[:-2], b2sh[:-2])
    engine = dev.engine
    shape = batch + (a2sh[-2], b2sh[-1])
    if prod(shape) * a2sh[-1] <= INLINE_MATMUL:
        out = _matmul_as_reduction(dev, a2, b2, batch)
    else:
        na = _matmul_operand(engine, a2, ct, batch + a2sh[-2:])
        nb = _matmul_operand(engine, b2, ct, batch + b2sh[-2:])
        out = result_tensor(dev, Node(Op.MATMUL, (na, nb), ct, shape))
    if len(ash) == 1:
        out = out.squeeze(-2)
    if len(bsh) == 1:
        out = out.squeeze(-1)
    return out


def _matmul_as_reduction(dev, a, b, batch):
    """A small matmul as sum(a[..., m, None, :] * b[..., None, :, :].mT, -1): a reduction like any
    other, so its prologue and epilogue (bias, activation, residual) fuse into one kernel, and a
    launch costs a C call instead of a library dispatch. Large ones go to BLAS. float16/bfloat16
    operands multiply and sum in float32, the result rounded once, as torch's matmul does.

    The broadcast operands and their product are built as nodes directly (one recorded result,
    the sum): through the Tensor API, with its checks per view and op, a decode step's small
    matmuls took two thirds of its recording time."""
    engine = dev.engine
    wide = dt.opmath(a.dtype)
    lhs, rhs = _reduction_views(a._view, b._view, batch)
    full, at = lhs.shape, len(batch)
    # widened after the broadcast: a cast before it would pull an operand's producer (a
    # softmax's division) into this kernel as a prologue rather than read its result
    lhs = cast_node(engine, Node(_VIEW, (a._storage.current,), a.dtype, full, lhs), wide)
    rhs = cast_node(engine, Node(_VIEW, (b._storage.current,), b.dtype, full, rhs), wide)
    total = _t.result_tensor(dev, Node(_SUM, (new_node(engine, _MUL, (lhs, rhs), wide, full),), wide,
                                       full[:-1] + (1,), (at + 2,)))
    return total._with_view(total._view.reshape(full[:-1])).to(a.dtype)


@functools.lru_cache(maxsize=4096)
def _reduction_views(a: View, b: View, batch: tuple) -> tuple:
    """The views of a (..., m, k) and b (..., k, n) that ``_matmul_as_reduction`` multiplies, both
    broadcast to batch + (m, n, k)."""
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    at = len(batch)
    full = batch + (m, n, k)
    lhs = a.expand(batch + (m, k)).unsqueeze(at + 1).expand(full)
    rhs = b.expand(batch + (k, n)).permute(tuple(range(at)) + (at + 1, at)).unsqueeze(at).expand(full)
    return lhs, rhs


def _matmul_operand(engine, t, dtype, shape) -> Node:
    """A matmul input: a strided view of a buffer when possible (no copy), else a value node."""
    if t.dtype is dtype:
        view = t._view.expand(shape)
        return Node(_VIEW, (t._storage.current,), dtype, shape, view)
    return expand_node(cast_node(engine, t._read(), dtype), shape)


def as_torch_data(data, dtype=None):
    """Host data (lists, scalars, numpy, torch) as a CPU torch tensor with torch's inference."""
    if isinstance(data, np.generic):
        data = np.asarray(data)   # a numpy scalar keeps its dtype (np.int32(3) is int32, as in torch)
    if isinstance(data, torch.Tensor):
        t = data.detach()
        dt.from_torch(t.dtype)
    elif isinstance(data, np.ndarray):
        dt.from_numpy(data.dtype)
        # a C-ordered copy: np.ascontiguousarray would turn a 0-d array into shape (1,), and a
        # copy also takes read-only and negatively strided arrays, which torch.from_numpy refuses
        t = torch.from_numpy(np.array(data, order="C", copy=True))
    else:
        if isinstance(data, (str, bytes)) or data is None:
            raise DTypeError(f"data={data!r} is not numeric: pass numbers, nested lists of numbers, "
                             "a numpy array or a torch tensor")
        try:
            t = torch.tensor(data)
        except (ValueError, TypeError, RuntimeError) as e:
            if _holds_lazy_tensors(data):   # [lf.tensor(1.), lf.tensor(2.)]: their values, as torch reads its own
                return as_torch_data(_with_torch_values(data), dtype)
            if isinstance(e, ValueError) and "sequence" in str(e):
                raise ShapeError(f"data is ragged: {e}; every row must have the same length") from None
            raise DTypeError(f"data of type {type(data).__name__} cannot become a tensor: {e}") from None
        if t.is_complex():
            raise DTypeError("complex data is not supported")
        if t.dtype not in (torch.bool, torch.int64, torch.float32, torch.float64):
            t = t.to(torch.float32 if t.is_floating_point() else torch.int64)
        if dtype is not None and dt.as_dtype(dtype).is_int and t.numel() and t.dtype != torch.bool:
            # torch checks each Python number by its own type (an int wraps into an unsigned dtype,
            # a float does not: [-1, 2.0] is uint8 [255, 2]), which the inferred float tensor no
            # longer tells: torch converts the data itself, and a refusal is reported with the range
            try:
                t = torch.tensor(data, dtype=dt.as_dtype(dtype).torch)
            except RuntimeError as e:
                dt.check_fits(t.min().item(), t.max().item(), dt.as_dtype(dtype), "data")   # names the range
                raise DTypeError(f"data: {e}") from None   # a refusal check_fits does not know
    if dtype is not None:
        t = t.to(dt.as_dtype(dtype).torch)
    dt.from_torch(t.dtype)
    return t


def _holds_lazy_tensors(data) -> bool:
    if isinstance(data, _t.Tensor):
        return True
    return isinstance(data, (list, tuple)) and any(_holds_lazy_tensors(d) for d in data)


def _with_torch_values(data):
    """Nested lists with each lazyfuse Tensor replaced by its value as a torch tensor (drains)."""
    if isinstance(data, _t.Tensor):
        return data.torch()
    if isinstance(data, (list, tuple)):
        return [_with_torch_values(d) for d in data]
    return data


from . import autograd  # noqa: E402
from . import tensor as _t  # noqa: E402 (tensor.py imports this module: resolve at call time)
