"""``lf.distributed``: torch.distributed collectives as lazy IR nodes, and data-parallel training.

The process group is torch's (``torch.distributed.init_process_group``; gloo on the CPU, NCCL on
GPUs; launched with ``torchrun``); every function takes ``group=`` like torch's (None: the
default group). Each collective returns a new tensor at once and records a collective node;
it runs at the next drain, through torch.distributed on the pool buffers it binds, and is
captured by ``lf.capture`` like a kernel. Collectives are never elided and run in program
order (see ``collective``): drop a result on one rank and that rank still takes part.

Functional forms: ``all_reduce``, ``all_gather``, ``reduce_scatter``, ``broadcast``,
``all_to_all`` (each with ``out=``); in-place forms: ``all_reduce_``, ``broadcast_``.
"""
from __future__ import annotations

from .collective import Collective, check_divisible, process_group, record, reduce_name
from .data_parallel import DataParallel, all_reduce_gradients  # noqa: F401
from . import frontend  # noqa: F401 (torch.distributed's own collectives on frontend tensors record lazily)
from ..errors import CollectiveError  # noqa: F401
from ..errors import ShapeError

__all__ = ["all_reduce", "all_reduce_", "all_gather", "reduce_scatter", "broadcast", "broadcast_", "all_to_all",
           "all_reduce_gradients", "DataParallel", "CollectiveError"]


def _finish(result, out):
    """``result``, or written into ``out`` (any Tensor of its shape and dtype) and ``out`` returned."""
    if out is None:
        return result
    return out.copy_(result)


def all_reduce(tensor, op="sum", *, group=None, out=None):
    """The elementwise reduction (``op``: "sum", "avg", "max", "min", or a torch ReduceOp) of
    ``tensor`` over every rank of ``group``: a new tensor of its shape (``tensor`` is unchanged)."""
    grp, rank, world = process_group(group, "all_reduce")
    spec = Collective("all_reduce", reduce_name(op, "all_reduce"), None, grp, world, rank)
    return _finish(record(tensor, spec, tensor.shape), out)


def all_reduce_(tensor, op="sum", *, group=None):
    """In place: ``tensor`` becomes the reduction over ``group`` (as ``torch.distributed.all_reduce``)."""
    return tensor.copy_(all_reduce(tensor, op, group=group))


def broadcast(tensor, src: int = 0, *, group=None, out=None):
    """Rank ``src``'s ``tensor`` (``src`` a global rank, as in torch), on every rank of ``group``."""
    import torch.distributed as dist
    grp, rank, world = process_group(group, "broadcast")
    members = dist.get_process_group_ranks(grp() if grp is not None else dist.group.WORLD)
    if not isinstance(src, int) or src not in members:
        raise CollectiveError(f"lf.distributed.broadcast: src={src!r} is not a (global) rank of the group "
                              f"(its ranks: {members})")
    return _finish(record(tensor, Collective("broadcast", None, src, grp, world, rank), tensor.shape), out)


def broadcast_(tensor, src: int = 0, *, group=None):
    """In place: ``tensor`` becomes rank ``src``'s (as ``torch.distributed.broadcast``)."""
    return tensor.copy_(broadcast(tensor, src, group=group))


def all_gather(tensor, dim: int = 0, *, group=None, out=None):
    """Every rank's ``tensor`` concatenated along ``dim`` in rank order (``world`` times as long
    there), as ``torch.distributed._functional_collectives.all_gather_tensor``."""
    grp, rank, world = process_group(group, "all_gather")
    spec = Collective("all_gather", None, None, grp, world, rank)
    return _finish(_along(tensor, dim, lambda x: record(x, spec, (x.shape[0] * world, *x.shape[1:])),
                          "all_gather"), out)


def reduce_scatter(tensor, op="sum", dim: int = 0, *, group=None, out=None):
    """The reduction of ``tensor`` over ``group``, split in ``world`` equal chunks along ``dim``:
    rank r gets chunk r (``tensor.shape[dim]`` must be a multiple of the world size)."""
    grp, rank, world = process_group(group, "reduce_scatter")
    spec = Collective("reduce_scatter", reduce_name(op, "reduce_scatter"), None, grp, world, rank)
    d = _dim(tensor, dim, "reduce_scatter")
    check_divisible(tensor, d, world, "reduce_scatter")
    return _finish(_along(tensor, d, lambda x: record(x, spec, (x.shape[0] // world, *x.shape[1:])),
                          "reduce_scatter"), out)


def all_to_all(tensor, *, group=None, out=None):
    """``tensor`` split in ``world`` equal chunks along dim 0; chunk j goes to rank j, and the
    result holds the chunks received, in rank order (``torch.distributed.all_to_all_single``
    with equal splits)."""
    grp, rank, world = process_group(group, "all_to_all")
    check_divisible(tensor, _dim(tensor, 0, "all_to_all"), world, "all_to_all")
    return _finish(record(tensor, Collective("all_to_all", None, None, grp, world, rank), tensor.shape), out)


def _dim(tensor, dim, what) -> int:
    from ..ir.shapes import normalize_dim
    if getattr(tensor, "ndim", 0) == 0:
        raise ShapeError(f"lf.distributed.{what}: tensor must have at least one dim (got a 0-d tensor)")
    return normalize_dim(dim, tensor.ndim)


def _along(tensor, dim, collective, what):
    """``collective`` (which works along dim 0) applied along ``dim``: a transpose (a view) on
    each side, so the collective's input is the moved tensor made contiguous."""
    d = _dim(tensor, dim, what)
    if d == 0:
        return collective(tensor)
    return collective(tensor.transpose(0, d)).transpose(0, d)
