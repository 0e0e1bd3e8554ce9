"""The launch of a collective step: torch.distributed on torch views of the bound pool buffers.

The engine binds a collective like its other library calls (matmul, gather): the input buffer
(through its view), the previous collective's buffer when the node carries an ordering token
(unused here: its only job was to order the plan), and the output buffer. The views are
zero-copy torch tensors over pool memory, so NCCL or gloo read and write the buffers lazyfuse
fuses into. The call runs on the current stream: during a CUDA capture that is the capture
stream, so NCCL's kernels are recorded into the CUDA graph like any other launch (the eager
warmup iterations of ``lf.capture`` have created the NCCL communicator by then — creating one
inside a capture is what fails). On the ``cpu`` device the host graph replays this call.
"""
from __future__ import annotations

import functools

from .errors import CollectiveError


def collective_thunk(step, views):
    """The call that runs collective ``step`` on ``views`` (torch tensors: input, [token], output)."""
    spec = step.kernel[3]
    return functools.partial(run, spec, views[0], views[-1])


def run(spec, src, out) -> None:
    import torch.distributed as dist
    try:
        _LAUNCH[spec.kind](dist, spec, src, out)
    except Exception as e:  # noqa: BLE001 (torch raises RuntimeError subclasses, gloo/NCCL-specific)
        raise CollectiveError(
            f"collective {spec} failed: {type(e).__name__}: {e}. Another rank may have failed, or not reached "
            "this collective within the process group's timeout (init_process_group(timeout=...)): every rank "
            "must record the same collectives in the same order and drain them (lf.sync or a host read). "
            "The process group may be unusable now: destroy it (torch.distributed.destroy_process_group()) "
            "and start again") from e


def _reduce_op(dist, name):
    return {"sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.AVG, "max": dist.ReduceOp.MAX,
            "min": dist.ReduceOp.MIN}[name]


def _all_reduce(dist, spec, src, out):
    out.copy_(src)   # functional: the input buffer (perhaps a user's live tensor) keeps its value
    dist.all_reduce(out, _reduce_op(dist, spec.reduce), group=spec.process_group())


def _broadcast(dist, spec, src, out):
    if dist.get_rank() == spec.root:
        out.copy_(src)   # the other ranks' outputs are overwritten whole: no copy there
    dist.broadcast(out, spec.root, group=spec.process_group())


def _all_gather(dist, spec, src, out):
    dist.all_gather_into_tensor(out, src, group=spec.process_group())


def _reduce_scatter(dist, spec, src, out):
    dist.reduce_scatter_tensor(out, src, _reduce_op(dist, spec.reduce), group=spec.process_group())


def _all_to_all(dist, spec, src, out):
    dist.all_to_all_single(out, src, group=spec.process_group())


_LAUNCH = {"all_reduce": _all_reduce, "broadcast": _broadcast, "all_gather": _all_gather,
           "reduce_scatter": _reduce_scatter, "all_to_all": _all_to_all}
