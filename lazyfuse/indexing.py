"""``Tensor.__getitem__``: ints, slices (steps included), None and ``...`` become views;
an integer tensor on one dim becomes a gather (``index_select``)."""
from __future__ import annotations

from . import ops
from .advanced_indexing import byte_masks_as_bool, getitem as advanced_getitem, is_advanced, lazy_key
from .autograd import is_grad_enabled, rules
from .errors import IndexDTypeError, InvalidIndexError, ShapeError
from .ir import dtypes as dt
from .ir.node import Node, Op
from .ir.view import View
from .tensor import Tensor, result_tensor   # (tensor.py imports this module at its bottom)


def _expand_key(t, key) -> list:
    """``key`` as (index, position) pairs, one per dim of ``t`` (plus one per None): ``...`` and
    the dims after the last index become full slices; position is the index's place in the key
    as written, ``...`` counting as one (torch's errors number an index so). Several ellipses are
    torch's rule, not numpy's refusal: each stands for all the dims no index names, so the full
    slices of the later ones may run past the last dim (``getitem`` skips those)."""
    if not isinstance(key, tuple):
        key = (key,)
    n_real = sum(1 for k in key if k is not None and k is not Ellipsis)
    if n_real > t.ndim:
        raise InvalidIndexError(f"too many indices ({n_real}) for a tensor of {t.ndim} dims")
    out = []
    for pos, k in enumerate(key):
        if k is Ellipsis:
            out.extend([(slice(None), pos)] * (t.ndim - n_real))
        else:
            out.append((k, pos))
    if not any(k is Ellipsis for k in key):
        out.extend([(slice(None), len(key))] * (t.ndim - n_real))
    for k, _ in out:
        if not (k is None or isinstance(k, (int, slice, Tensor)) or hasattr(k, "__index__")):
            raise IndexDTypeError(f"unsupported index {k!r}: use ints, slices, None, ... or an integer Tensor")
    return out


def getitem(t, key):
    if key.__class__ is int and t._view.shape and -t._view.shape[0] <= key < t._view.shape[0]:
        return t._with_view(t._view.select(0, key % t._view.shape[0]))   # t[i], the common case
    key = byte_masks_as_bool(lazy_key(t, key))
    if is_advanced(key):
        return advanced_getitem(t, key)
    parts = _expand_key(t, key)
    view: View = t._view
    dim = 0
    gathers = []
    for k, pos in parts:
        if dim >= len(view.shape) and isinstance(k, slice) and k == slice(None):
            dim += 1   # a later ellipsis's dim past the last (_expand_key): torch's index moves on
        elif dim > len(view.shape) or dim == len(view.shape) and k is not None:
            raise InvalidIndexError(f"index {k!r} (at position {pos}) falls past the last of the {t.ndim} dims: "
                                    "as torch, each ellipsis (...) stands for every dim the key leaves unindexed; "
                                    "write one ellipsis")
        elif k is None:
            view = view.unsqueeze(dim)
            dim += 1
        elif isinstance(k, Tensor):
            gathers.append((dim, k))
            dim += 1
        elif isinstance(k, slice):
            size = view.shape[dim]
            start, stop, step = k.indices(size) if k.step is None or k.step > 0 else (0, 0, 0)
            if k.step is not None and k.step <= 0:
                raise ShapeError(f"step must be greater than zero: slice step {k.step} (for a reversed order, "
                                 "x.flip(dim))")
            view = view.slice(dim, start, max(stop, start), step)
            dim += 1
        else:
            i = int(k)
            size = view.shape[dim]
            if not -size <= i < size:
                raise InvalidIndexError(f"index {i} is out of bounds for dimension {pos} with size {size}")
            view = view.select(dim, i % size)
    out = t._with_view(view)
    if len(gathers) > 1:
        raise ShapeError("only one integer-tensor index is supported per indexing expression")
    if gathers:
        d, idx = gathers[0]
        out = index_select(out, d, idx)
    return out


def index_select(t, dim: int, index, wrap: bool = True, name=None):
    """``t`` with dim ``dim`` indexed by the integer tensor ``index`` (any shape). The drain
    refuses an index out of [-size, size) (a negative one counts from the end), or without
    ``wrap`` out of [0, size) (torch's ``index_select`` and ``embedding``), in torch's words for
    op ``name`` (runtime.cpu ``TORCH_INDEX_SENTENCES``; None: ``x[index]``'s)."""
    if index.dtype not in (dt.int32, dt.int64):   # (a uint8 index is a mask: advanced_indexing.lazy_key)
        raise IndexDTypeError(f"tensors used as indices must be long, int, byte or bool tensors: tensor indices must "
                              f"be integers (or a bool mask), got {index.dtype.name}; call .long() first")
    ops.common_device((t, index))
    flat = index.reshape(-1)
    shape = t.shape[:dim] + (flat.shape[0],) + t.shape[dim + 1:]
    node = Node(Op.GATHER, (t._read(), flat._read()), t.dtype, shape, (dim, t.shape[dim], wrap, name))
    out = result_tensor(t.device, node)
    if t._ag is not None:
        if is_grad_enabled():
            rules.record_gather(t, dim, flat, out)
    return out.reshape(t.shape[:dim] + index.shape + t.shape[dim + 1:])
