"""The launch of a collective step: torch.distributed on torch views of the bound pool buffers.

The engine binds a collective like its other library calls (matmul, gather): the input buffer
(through its view), the previous collective's buffer when the node carries an ordering token
(unused here: its only job was to order the plan), and the output buffer. The views are
zero-copy torch tensors over pool memory, so NCCL or gloo read and write the buffers lazyfuse
fuses into. On the ``cpu`` device the host graph replays this call.

Overlap: on the host a collective is started asynchronously (``async_op=True``; gloo runs it on
its own threads) and the plan's next steps run meanwhile; the engine wraps the first later step
that reads or writes its buffers in a wait for it, and the plan's last step in a wait for all
still in flight (``Schedule``), so a drain or a replay never returns with one running. The
planner starts a collective as soon as its inputs are ready, so a gradient bucket's all-reduce
overlaps the rest of backward. Launch order is plan order on every rank, which is what gloo
matches collectives by. A failed collective raises at its wait: its outputs are poisoned (not
those of the launch that waited), and every other collective still in flight is waited out
first (``settle``).

On a GPU every collective of a device is issued on one stream of its own, forked from and
joined back to the current stream with events. NCCL inside a CUDA graph needs an eager warmup
on the stream it is captured on (vllm #29207, openxla/xla #33073): ``lf.capture``'s eager
warmup iterations run on the device's stream and its capture on a side stream, but the NCCL
calls of both run on this collective stream, so the warmup (which also creates the NCCL
communicator, which cannot happen inside a capture) is on the capture's stream. The fork and
join are events, which a capture records as graph edges; the join is made where the Schedule
waits, so the kernels in between overlap the NCCL call, and the plan's last step joins every
stream back before a capture ends. (Untested here: this machine has no GPU; the cpu path is
tested, and ``bench/gpu_check.py`` checks NCCL in a CUDA graph on one GPU.)
"""
from __future__ import annotations

import threading

from ..errors import CollectiveError

_streams: dict = {}   # torch cuda device index -> the stream its collectives run on
_streams_lock = threading.Lock()


def collective_thunk(step, views):
    """The launch of collective ``step`` on ``views`` (torch tensors: input, [token], output)."""
    return CollectiveLaunch(step.kernel.arg, views[0], views[-1])


class CollectiveLaunch:
    """A collective step's launch: started asynchronously (``async_op=True``: gloo runs it on its
    own threads while the kernels after it run), its torch.distributed Work kept until
    ``wait()``. A launch waits for it before the first later step that touches its buffers,
    and the plan's last launch waits for whatever is still in flight (``Schedule``). On a GPU
    the launch is enqueued on the collective stream and ``wait()`` makes the current stream wait
    for it (an event: no host sync)."""
    __slots__ = ("spec", "src", "out", "work", "step_index")

    def __init__(self, spec, src, out):
        self.spec, self.src, self.out = spec, src, out
        self.work = None
        self.step_index = None   # which step of its plan this is (set by the Schedule that waits for it)

    def __call__(self) -> None:
        try:
            self.work = launch(self.spec, self.src, self.out)
        except Exception as e:  # noqa: BLE001 (torch raises RuntimeError subclasses, gloo/NCCL-specific)
            raise failure(self, e) from e

    def wait(self) -> None:
        work, self.work = self.work, None
        if work is not None:
            try:
                work.wait()
            except Exception as e:  # noqa: BLE001 (gloo/NCCL raise their own RuntimeError subclasses)
                raise failure(self, e) from e


class AfterCollectives:
    """A step's launch that first waits for the collectives in flight whose buffers it touches
    (``before``), and after it, for ``after`` (on the plan's last launch: every collective
    still in flight, so none is when a drain or a replay returns)."""
    __slots__ = ("call", "before", "after")

    def __init__(self, call, before, after):
        self.call, self.before, self.after = call, before, after

    def __call__(self) -> None:
        for c in self.before:
            c.wait()
        self.call()
        try:
            for c in self.after:
                c.wait()
        except CollectiveError as e:
            e.step_ran = True   # this launch itself ran: the engine counts it done
            raise


class Schedule:
    """Where a plan with collectives waits for them: ``before[j]`` the collective steps to wait
    for before step ``j`` (the first step after a collective that reads or writes its input or
    output buffer; its ordering token is not a read), ``after`` the ones still in flight after
    the last step. Buffers, not slots: an in-place root shares its leaf's buffer. A plan's key
    fixes which of its slots share a buffer, so the schedule of its first drain holds for all."""
    __slots__ = ("before", "after")

    def __init__(self, steps, step_buffers):
        from .backend import StepKind
        in_flight = {}   # collective step -> ids of its input and output buffers
        self.before = []
        for j, (step, bufs) in enumerate(zip(steps, step_buffers)):
            collective = step.kind is StepKind.COLLECTIVE
            touched = {id(bufs[0]), id(bufs[-1])} if collective else {id(b) for b in bufs}
            waits = [c for c, ids in in_flight.items() if not ids.isdisjoint(touched)]
            for c in waits:
                del in_flight[c]
            self.before.append(tuple(waits))
            if collective:
                in_flight[j] = touched
        self.after = tuple(in_flight)

    def wrapper(self, j: int, calls: list):
        """What the engine's call of step ``j`` wraps its launch in (``calls``: the launches of
        the steps before it), or None when the step waits for nothing."""
        last = j == len(self.before) - 1
        if not self.before[j] and not (last and self.after):
            return None
        before = tuple(self._launch(calls, c) for c in self.before[j])
        after = tuple(self._launch(calls, c) if c < j else None for c in self.after) if last else ()

        def wrap(call):
            own = call   # the last step, a collective itself: it is in flight after its own launch
            if isinstance(own, CollectiveLaunch):
                own.step_index = j
            return AfterCollectives(call, before, tuple(own if a is None else a for a in after))
        return wrap

    @staticmethod
    def _launch(calls, c: int):
        launch_ = launch_of(calls[c])
        launch_.step_index = c
        return launch_


def launch_of(call):
    """The launch inside ``call`` (a step's call, perhaps wrapped in AfterCollectives)."""
    return call.call if isinstance(call, AfterCollectives) else call


def settle(calls) -> set:
    """After a failed launch: wait for every collective of ``calls`` still in flight (so none
    writes into a buffer after the drain or replay gave up); the plan steps of those that
    failed. A peer that never comes makes this wait the process group's timeout."""
    failed = set()
    for call in calls:
        c = launch_of(call)
        if isinstance(c, CollectiveLaunch) and c.work is not None:
            try:
                c.wait()
            except CollectiveError:
                failed.add(c.step_index)
    return failed


def failure(launch_, error: BaseException) -> CollectiveError:
    """The error of a failed collective, naming it and what to do; ``.step_index`` says which
    step of its plan it was (its outputs are lost, not the launch that waited for it)."""
    e = CollectiveError(
        f"collective {launch_.spec} failed: {type(error).__name__}: {error}. Another rank may have failed, or not "
        "reached this collective within the process group's timeout (init_process_group(timeout=...)): every "
        "rank must record the same collectives in the same order and drain them (lf.sync or a host read). "
        "The process group may be unusable now: destroy it (torch.distributed.destroy_process_group()) "
        "and start again")
    e.step_index = launch_.step_index
    return e


def launch(spec, src, out):
    """Start collective ``spec`` from ``src`` into ``out``: what to ``wait()`` for (a gloo Work; on
    a GPU, the join of the collective stream)."""
    import torch.distributed as dist
    if out.is_cuda:
        return _on_collective_stream(out.device, lambda: _LAUNCH[spec.kind](dist, spec, src, out, False))
    return _LAUNCH[spec.kind](dist, spec, src, out, True)


def _on_collective_stream(device, call) -> "_Join":
    """``call()`` on ``device``'s collective stream, after the work queued on the current stream
    (fork by an event); the join is left to the returned ``_Join``'s ``wait()``, which the
    Schedule calls where the result is read, so the kernels queued in between overlap it."""
    import torch
    with _streams_lock:
        stream = _streams.get(device.index)
        if stream is None:
            stream = _streams[device.index] = torch.cuda.Stream(device)
    current = torch.cuda.current_stream(device)
    stream.wait_stream(current)
    with torch.cuda.stream(stream):
        call()
    done = torch.cuda.Event()
    done.record(stream)
    return _Join(current, done)


class _Join:
    """The current stream waiting for a collective's event (a graph edge inside a CUDA capture)."""
    __slots__ = ("current", "done")

    def __init__(self, current, done):
        self.current, self.done = current, done

    def wait(self) -> None:
        self.current.wait_event(self.done)


def _reduce_op(dist, name):
    return {"sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.AVG, "max": dist.ReduceOp.MAX,
            "min": dist.ReduceOp.MIN}[name]


# each returns the Work of the collective it started (async_op=True) or None (async_op=False)
def _all_reduce(dist, spec, src, out, async_op):
    out.copy_(src)   # functional: the input buffer (perhaps a user's live tensor) keeps its value
    return dist.all_reduce(out, _reduce_op(dist, spec.reduce), group=spec.process_group(), async_op=async_op)


def _broadcast(dist, spec, src, out, async_op):
    if dist.get_rank() == spec.root:
        out.copy_(src)   # the other ranks' outputs are overwritten whole: no copy there
    return dist.broadcast(out, spec.root, group=spec.process_group(), async_op=async_op)


# torch 2.13 renamed all_gather_into_tensor and reduce_scatter_tensor (the old names warn)
def _all_gather(dist, spec, src, out, async_op):
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    return gather(out, src, group=spec.process_group(), async_op=async_op)


def _reduce_scatter(dist, spec, src, out, async_op):
    scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    return scatter(out, src, _reduce_op(dist, spec.reduce), group=spec.process_group(), async_op=async_op)


def _all_to_all(dist, spec, src, out, async_op):
    return dist.all_to_all_single(out, src, group=spec.process_group(), async_op=async_op)


_LAUNCH = {"all_reduce": _all_reduce, "broadcast": _broadcast, "all_gather": _all_gather,
           "reduce_scatter": _reduce_scatter, "all_to_all": _all_to_all}
