"""Free functions of the public API: sync, stats, matmul, where, maximum, minimum, cat, stack."""
from __future__ import annotations

from . import autograd, ops
from .errors import DTypeError, ShapeError
from .ir.node import Op
from .ir.shapes import normalize_dim, prod
from .runtime.device import all_devices, device as get_device
from .tensor import Tensor


def sync(device=None) -> None:
    """Drain pending work: of ``device``, or of every device in use when None, and wait for the
    launches still queued on its stream (runtime/stream.py)."""
    for dev in (get_device(device),) if device is not None else all_devices():
        dev.engine.sync("lf.sync")
        dev.synchronize()


def stats(device=None):
    """A snapshot of the device's counters (see ``lazyfuse.runtime.stats.Stats``)."""
    return get_device(device).stats.snapshot()


def reset_stats(device=None) -> None:
    """Zero the device's counters (``lf.stats``)."""
    get_device(device).stats.reset()


def matmul(a, b, *, out=None):
    """Matrix product with torch's broadcasting rules (``a @ b``). ``out=`` takes the result, of its
    dtype only (torch's matmul does not cast into out)."""
    if out is not None:
        from .extern import write_out
        return write_out("matmul", ops.matmul(a, b), out, casts="exact")
    return ops.matmul(a, b)


def where(condition, input=None, other=None, *, out=None):  # noqa: A002 (torch's names)
    """``input`` where ``condition`` is true, else ``other`` (broadcast); ``where(condition)``
    alone is ``condition.nonzero(as_tuple=True)``, as torch (a drain: its size needs the data).
    ``out=`` takes the result, of its dtype only (torch's where does not cast into out)."""
    if input is None and other is None:
        return condition.nonzero(as_tuple=True)
    if input is None or other is None:
        raise DTypeError("where(condition, input, other) needs both input and other (or neither: the indices "
                         "where condition is true)")
    if out is not None:
        # torch's where with out= is its Tensor overload alone: its Python number forms have no out
        for position, name, value in ((2, "input", input), (3, "other", other)):
            if not isinstance(value, Tensor):
                raise DTypeError(f"where(): argument '{name}' (position {position}) must be Tensor, not "
                                 f"{type(value).__name__}: with out=, pass {name} as a tensor "
                                 f"(lf.tensor({value!r})) or drop out=")
        result = ops.where(condition, input, other)
        if isinstance(out, Tensor) and out.dtype is not result.dtype:
            raise DTypeError(f"Expected out type to be {result.dtype.torch_scalar_name} but got "
                             f"{out.dtype.torch_scalar_name}: where's out= must have the result's dtype "
                             f"{result.dtype} (torch's where does not cast into out)")
        return _elementwise_out("where", result, out, (condition, input, other), "exact")
    return ops.where(condition, input, other)


def maximum(a, b, *, out=None):
    """Elementwise maximum (NaN-propagating, as torch's); ``out=`` takes the result, cast as torch's
    elementwise ops cast (to a dtype the result can be cast to)."""
    if out is not None:
        return _elementwise_out("maximum", ops.elementwise(Op.MAXIMUM, a, b), out, (a, b), "can_cast")
    return ops.elementwise(Op.MAXIMUM, a, b)


def minimum(a, b, *, out=None):
    """Elementwise minimum (NaN-propagating, as torch's); ``out=`` as ``maximum``'s."""
    if out is not None:
        return _elementwise_out("minimum", ops.elementwise(Op.MINIMUM, a, b), out, (a, b), "can_cast")
    return ops.elementwise(Op.MINIMUM, a, b)


def _elementwise_out(name, result, out, inputs, casts):
    """``result`` written into ``out`` as torch's elementwise ``out=``: ``out`` may be an input itself
    (each element written where it was read), not a part of one (``refuse_overlap``)."""
    from .extern import refuse_overlap, write_out
    refuse_overlap(name, out, inputs, same_place_ok=True)
    return write_out(name, result, out, casts=casts)


# A CAT kernel computes every piece at every output element and selects one (the operands of a
# select are all computed), so it costs pieces x elements: it is the form of the small cats,
# where one launch instead of one per piece is the win (a stack of 28 scalars); a large cat is
# one in-place write per piece into a new storage, each a kernel that reads its piece once. That
# storage is uninitialised (``lf.empty``): the pieces cover it, so a fill first would write every
# element twice (at 2^20 elements that fill made the cat 0.77x torch's; without it, 1.2-1.35x).
CAT_SELECTS = 1 << 16


def _sequence_of_tensors(name, tensors) -> list:
    """``tensors`` as a list; one Tensor is refused, as torch's binding refuses it (iterated, its
    rows would be concatenated)."""
    if isinstance(tensors, Tensor):
        raise DTypeError(f"{name}(): argument 'tensors' must be a tuple or list of Tensors, not one Tensor "
                         f"(pass [t] or t.unbind(0))")
    return list(tensors)


def cat(tensors, dim=0, *, out=None, axis=None):
    """Concatenate along ``dim``. A small cat (``CAT_SELECTS``) is one ``CAT`` node, index
    arithmetic that fuses with the pieces' producers and the result's readers: one kernel for
    all the pending pieces. A large one writes each piece into a slice of one new, uninitialised storage.
    ``out=`` takes the result (``lazyfuse.extern.write_out``); as torch, not an ``out`` whose memory
    overlaps a piece's. ``axis`` is ``dim`` (torch's alias)."""
    dim = dim if axis is None else axis
    if out is not None:
        from .extern import refuse_overlap, write_out
        tensors = _sequence_of_tensors("cat", tensors)
        result = cat(tensors, dim)
        refuse_overlap("cat", out, tensors, same_place_ok=False)
        return write_out("cat", result, out)
    tensors = _sequence_of_tensors("cat", tensors)
    if not tensors:
        raise ShapeError("cat needs a non-empty sequence of Tensors, got an empty one")
    if not all(isinstance(t, Tensor) for t in tensors):
        raise DTypeError("cat needs a non-empty sequence of Tensors")
    kept = [t for t in tensors if t.shape != (0,)]
    if kept and len(kept) < len(tensors) and any(t.ndim != 1 for t in kept):
        # torch's legacy rule: a 1-d empty tensor is left out of a cat of other ranks (``cat([[],
        # x], 1)`` is x), though its dtype still takes part in the promotion
        from .ir.dtypes import result_type
        dtype = result_type([t.dtype for t in tensors], [], [])
        return cat([t.to(dtype) for t in kept], dim)
    if autograd.recording(*tensors):
        return autograd.rules.record_cat(tensors, normalize_dim(dim, tensors[0].ndim), cat)
    dev = ops.common_device(tensors)
    ref = tensors[0]
    if any(t.ndim == 0 for t in tensors):
        raise ShapeError("cat: zero-dimensional tensors cannot be concatenated; use lf.stack (or unsqueeze them)")
    if any(t.ndim != ref.ndim for t in tensors):
        raise ShapeError(f"cat: tensors have different numbers of dims: {[t.shape for t in tensors]}")
    d = normalize_dim(dim, ref.ndim)
    for n, t in enumerate(tensors):
        if t.shape[:d] != ref.shape[:d] or t.shape[d + 1:] != ref.shape[d + 1:]:
            k = next(k for k in range(ref.ndim) if k != d and t.shape[k] != ref.shape[k])
            raise ShapeError(f"Sizes of tensors must match except in dimension {d}. Expected size {ref.shape[k]} "
                             f"but got size {t.shape[k]} for tensor number {n} in the list: cat: shapes "
                             f"{[t.shape for t in tensors]} differ outside dim {d}")
    dims, zeros, scalars = ops.operand_dtypes(tensors)
    from .ir.dtypes import result_type
    from .ir.node import Node
    from .tensor import result_tensor
    dtype = result_type(dims + zeros, [], [])
    shape = ref.shape[:d] + (sum(t.shape[d] for t in tensors),) + ref.shape[d + 1:]
    pieces = [t for t in tensors if t.shape[d]]   # (empty pieces hold no element)
    if 0 < len(pieces) * prod(shape) <= CAT_SELECTS:
        srcs = tuple([ops.operand_node(dev.engine, t, dtype, t.shape) for t in pieces])
        return result_tensor(dev, Node(Op.CAT, srcs, dtype, shape, d))
    from .creation import empty
    out = empty(shape, dtype=dtype, device=dev)
    start = 0
    for t in pieces:
        n = t.shape[d]
        out._with_view(out._view.slice(d, start, start + n, 1)).copy_(t)
        start += n
    return out


def stack(tensors, dim=0, *, out=None, axis=None):
    """Join same-shaped tensors along a new dim ``dim`` (``axis`` is the same); ``out=`` as ``cat``'s."""
    dim = dim if axis is None else axis
    tensors = _sequence_of_tensors("stack", tensors)
    if not tensors:
        raise ShapeError("stack needs a non-empty sequence of Tensors, got an empty one")
    odd = next((n for n, t in enumerate(tensors) if t.shape != tensors[0].shape), None)
    if odd is not None:
        raise ShapeError(f"stack expects each tensor to be equal size, but got {list(tensors[0].shape)} at entry 0 "
                         f"and {list(tensors[odd].shape)} at entry {odd}: stack: all tensors must have the same "
                         f"shape, got {[t.shape for t in tensors]}")
    d = normalize_dim(dim, tensors[0].ndim + 1)
    return cat([t.unsqueeze(d) for t in tensors], d, out=out)


__all__ = ["sync", "stats", "reset_stats", "matmul", "where", "maximum", "minimum", "cat", "stack"]
