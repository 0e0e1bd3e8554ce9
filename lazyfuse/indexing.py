"""``Tensor.__getitem__``: ints, slices (steps included), None and ``...`` become views;
an integer tensor on one dim becomes a gather (``index_select``)."""
from __future__ import annotations

from .errors import IndexDTypeError, InvalidIndexError, ShapeError
from .ir.view import View


def _expand_key(t, key) -> list:
    from .tensor import Tensor
    if not isinstance(key, tuple):
        key = (key,)
    n_real = sum(1 for k in key if k is not None and k is not Ellipsis)
    if sum(1 for k in key if k is Ellipsis) > 1:
        raise ShapeError("an index can only have one ellipsis (...)")
    if n_real > t.ndim:
        raise InvalidIndexError(f"too many indices ({n_real}) for a tensor of {t.ndim} dims")
    out = []
    for k in key:
        if k is Ellipsis:
            out.extend([slice(None)] * (t.ndim - n_real))
        else:
            out.append(k)
    if not any(k is Ellipsis for k in key):
        out.extend([slice(None)] * (t.ndim - n_real))
    for k in out:
        if not (k is None or isinstance(k, (int, slice, Tensor)) or hasattr(k, "__index__")):
            raise IndexDTypeError(f"unsupported index {k!r}: use ints, slices, None, ... or an integer Tensor")
    return out


def getitem(t, key):
    from .tensor import Tensor
    if key.__class__ is int and t._view.shape and -t._view.shape[0] <= key < t._view.shape[0]:
        return t._with_view(t._view.select(0, key % t._view.shape[0]))   # t[i], the common case
    from .advanced_indexing import getitem as advanced_getitem, is_advanced
    if is_advanced(key):
        return advanced_getitem(t, key)
    parts = _expand_key(t, key)
    view: View = t._view
    dim = 0
    gathers = []
    for k in parts:
        if k is None:
            view = view.unsqueeze(dim)
            dim += 1
        elif isinstance(k, Tensor):
            gathers.append((dim, k))
            dim += 1
        elif isinstance(k, slice):
            size = view.shape[dim]
            start, stop, step = k.indices(size) if k.step is None or k.step > 0 else (0, 0, 0)
            if k.step is not None and k.step <= 0:
                raise ShapeError(f"slice step must be positive, got {k.step} (flip is not supported)")
            view = view.slice(dim, start, max(stop, start), step)
            dim += 1
        else:
            i = int(k)
            size = view.shape[dim]
            if not -size <= i < size:
                raise InvalidIndexError(f"index {i} is out of range for dim {dim} of size {size}")
            view = view.select(dim, i % size)
    out = t._with_view(view)
    if len(gathers) > 1:
        raise ShapeError("only one integer-tensor index is supported per indexing expression")
    if gathers:
        d, idx = gathers[0]
        out = index_select(out, d, idx)
    return out


def index_select(t, dim: int, index):
    """``t`` with dim ``dim`` indexed by the integer tensor ``index`` (any shape). The drain
    refuses an index out of [-size, size) (a negative one counts from the end)."""
    from . import ops
    from .ir.node import Node, Op
    from .tensor import result_tensor
    if index.dtype.is_float or index.dtype.is_bool:
        raise IndexDTypeError(f"tensor indices must be integers (or a bool mask), got {index.dtype.name}")
    ops.common_device((t, index))
    flat = index.reshape(-1)
    shape = t.shape[:dim] + (flat.shape[0],) + t.shape[dim + 1:]
    node = Node(Op.GATHER, (t._read(), flat._read()), t.dtype, shape, (dim, t.shape[dim]))
    out = result_tensor(t.device, node)
    if t._ag is not None:
        from .autograd import is_grad_enabled, rules
        if is_grad_enabled():
            rules.record_gather(t, dim, flat, out)
    return out.reshape(t.shape[:dim] + index.shape + t.shape[dim + 1:])
