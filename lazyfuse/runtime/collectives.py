"""The launch of a collective step: torch.distributed on torch views of the bound pool buffers.

The engine binds a collective like its other library calls (matmul, gather): the input buffer
(through its view), the previous collective's buffer when the node carries an ordering token
(unused here: its only job was to order the plan), and the output buffer. The views are
zero-copy torch tensors over pool memory, so NCCL or gloo read and write the buffers lazyfuse
fuses into. On the ``cpu`` device the host graph replays this call.

On a GPU every collective of a device is issued on one stream of its own, forked from and
joined back to the current stream with events. NCCL inside a CUDA graph needs an eager warmup
on the stream it is captured on (vllm #29207, openxla/xla #33073): ``lf.capture``'s eager
warmup iterations run on the device's stream and its capture on a side stream, but the NCCL
calls of both run on this collective stream, so the warmup (which also creates the NCCL
communicator, which cannot happen inside a capture) is on the capture's stream. The fork and
join are events, which a capture records as graph edges. (Untested here: this machine has no
GPU; the cpu path is tested.)
"""
from __future__ import annotations

import functools
import threading

from ..errors import CollectiveError

_streams: dict = {}   # torch cuda device index -> the stream its collectives run on
_streams_lock = threading.Lock()


def collective_thunk(step, views):
    """The call that runs collective ``step`` on ``views`` (torch tensors: input, [token], output)."""
    spec = step.kernel.arg
    return functools.partial(run, spec, views[0], views[-1])


def run(spec, src, out) -> None:
    import torch.distributed as dist
    try:
        if out.is_cuda:
            _on_collective_stream(out.device, lambda: _LAUNCH[spec.kind](dist, spec, src, out))
        else:
            _LAUNCH[spec.kind](dist, spec, src, out)
    except Exception as e:  # noqa: BLE001 (torch raises RuntimeError subclasses, gloo/NCCL-specific)
        raise CollectiveError(
            f"collective {spec} failed: {type(e).__name__}: {e}. Another rank may have failed, or not reached "
            "this collective within the process group's timeout (init_process_group(timeout=...)): every rank "
            "must record the same collectives in the same order and drain them (lf.sync or a host read). "
            "The process group may be unusable now: destroy it (torch.distributed.destroy_process_group()) "
            "and start again") from e


def _on_collective_stream(device, call) -> None:
    """``call()`` on ``device``'s collective stream, after the work queued on the current stream
    and before anything queued on it later (fork and join by events)."""
    import torch
    with _streams_lock:
        stream = _streams.get(device.index)
        if stream is None:
            stream = _streams[device.index] = torch.cuda.Stream(device)
    current = torch.cuda.current_stream(device)
    stream.wait_stream(current)
    with torch.cuda.stream(stream):
        call()
    current.wait_stream(stream)


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


# torch 2.13 renamed all_gather_into_tensor and reduce_scatter_tensor (the old names warn)
def _all_gather(dist, spec, src, out):
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    gather(out, src, group=spec.process_group())


def _reduce_scatter(dist, spec, src, out):
    scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    scatter(out, src, _reduce_op(dist, spec.reduce), group=spec.process_group())


def _all_to_all(dist, spec, src, out):
    dist.all_to_all_single(out, src, group=spec.process_group())


_LAUNCH = {"all_reduce": _all_reduce, "broadcast": _broadcast, "all_gather": _all_gather,
           "reduce_scatter": _reduce_scatter, "all_to_all": _all_to_all}
