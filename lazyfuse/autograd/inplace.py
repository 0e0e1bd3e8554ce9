"""Autograd through an in-place write (torch's ``CopySlices``): ``y[key] = v``, ``y.copy_(v)``,
``y.add_(v)``... where ``y`` is not a leaf that requires grad but ``y`` or ``v`` takes part in
autograd (``y = x.clone(); y[0] = v``, ``buf = lf.zeros(n); buf[i] = v``).

The write itself runs as without autograd; then ``y``'s gradient function is replaced by one
that sends the written elements' gradient to ``v`` and the others' to what ``y`` was before.
A leaf that requires grad is refused (torch's rule), and so is a write through a view of
another tensor (torch re-bases the base's graph; lazyfuse does not track a view's base
object): the error says to write into the base itself.
"""
from __future__ import annotations

from ..ir import dtypes as dt
from .graph import AutogradError, attach, needs_grad
from .mode import is_grad_enabled, no_grad


def records(target, value) -> bool:
    """Whether the write of ``value`` into ``target`` must be recorded for autograd."""
    return is_grad_enabled() and (needs_grad(target) or needs_grad(value))


def write(target, key, value, perform):
    """``perform(value)`` writes ``value`` into ``target[key]`` (``key`` None: the whole of it),
    recorded for autograd; returns ``target``."""
    ag = target._ag
    if ag is not None and ag.is_leaf and ag.requires_grad:
        raise AutogradError("a leaf Variable that requires grad is being used in an in-place operation; wrap "
                            "the write in `with lf.no_grad():` (optimizer updates) or use an out-of-place op")
    if target._view != target._storage.view:
        raise AutogradError("an in-place write through a view of a tensor, where the view or the written value "
                            "requires grad, is not differentiable in lazyfuse: write into the base tensor "
                            "itself (y[key] = v), or build the value out of place (lf.cat, lf.where)")
    old = target.detach()
    old._ag = ag   # what ``target`` was: its gradient goes on to the graph that computed it
    with no_grad():
        perform(value.detach() if needs_grad(value) else value)
        written = None if key is None else _written_mask(target, key)
    edges = []
    if needs_grad(old) and written is not None:
        from ..ops import where
        edges.append((old, lambda g: where(written, 0.0, g)))
    if needs_grad(value):
        shape, dtype = value.shape, value.dtype   # (not the tensor: a later write to it changes nothing here)
        edges.append((value, lambda g: _value_gradient(g if key is None else g[key], shape, dtype)))
    elif needs_grad(old) and written is None:   # wholly overwritten by a constant: still in the graph
        edges.append((old, lambda g: g * 0.0))
    target._ag = None
    return attach(target, "copy_slices", edges)


def snapshot(t):
    """A copy of ``t``'s value now that stands for ``t`` in the autograd graph (the same gradient
    node): an in-place op computes its result from it, so the result's gradient, which may read
    the old value (``y.mul_(z)``'s for ``z`` is ``g * y``), is not affected by the write."""
    with no_grad():
        copy = t.clone()
    copy._ag = t._ag
    return copy


def _written_mask(target, key):
    """A bool tensor of ``target``'s shape, True where ``target[key]`` lands."""
    from ..creation import zeros
    mask = zeros(target.shape, dtype=dt.bool_, device=target.device)
    mask[key] = True
    return mask


def _value_gradient(g, shape, dtype):
    """The gradient of the written elements, summed back to the value's ``shape`` (a written
    value broadcasts, and ``t[key] = v`` drops ``v``'s leading size-1 dims)."""
    from .rules import sum_to
    if len(shape) > g.ndim:
        g = g.reshape((1,) * (len(shape) - g.ndim) + tuple(g.shape))
    return sum_to(g, tuple(shape)).to(dtype)
