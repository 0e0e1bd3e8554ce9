"""Graph capture: record a closure's steady-state launches once, replay them as one dispatch.

This follows Burn's ``capture`` (shared/reference/burn-graph.rs.txt) step by step, and each
step is there because of the failure it prevents:

1. ``graph_prepare``: the pool keeps every block freed from now on in a private segment, so
   the capture run can be served entirely from what the warmup allocated — a fresh
   allocation mid-capture is illegal (it would not be part of the graph).
2. Warmup, ``warmup_iters`` times (default 3), **holding the output across a drain**: a lazy
   engine elides a result dropped before it drains, so a dropped warmup output would build
   nothing and allocate nothing, and the capture run would be the first to allocate
   (``hold_outputs=False`` reproduces exactly that). More than one iteration, because the
   first drain of a new plan takes the *build path* (plan, compile, autotune on scratch
   buffers); only the second takes the steady-state path, whose launch metadata the capture
   must find already allocated (``warmup_iters=1`` reproduces that).
3. Open the capture; run the closure once more and drain under capture, recording every
   launch with the buffers it binds.
4. Close. A close that fails still leaves the device out of capture mode; the graph is then a
   fallback that re-runs the closure — and unlike the Rust original, which discards these
   errors, ``Graph.fallback_reason`` says why, and a warning says it once.
"""
from __future__ import annotations

import threading
import warnings

from ..errors import CaptureError
from ..runtime.device import device as get_device
from ..tensor import Tensor

_warned: set = set()


def _check_output(out):
    """A closure returns a Tensor, None, or a tuple/list/dict of them (torch frontend tensors too)."""
    if out is None or isinstance(out, Tensor) or getattr(out, "_lazyfuse_frontend", False):
        return
    if isinstance(out, (tuple, list)):
        for o in out:
            _check_output(o)
        return
    if isinstance(out, dict):
        for o in out.values():
            _check_output(o)
        return
    raise CaptureError(f"the captured closure returned a {type(out).__name__}: it must return a Tensor, None, "
                       "or a tuple/list/dict of Tensors (a Python value would be baked into the graph)")


def _warn_once(reason: str) -> None:
    if reason not in _warned:
        _warned.add(reason)
        warnings.warn(f"lazyfuse: graph replay falls back to re-running the closure: {reason}", RuntimeWarning,
                      stacklevel=3)


class Graph:
    """A captured closure. ``replay()`` re-launches the recorded kernels against the buffers
    used during capture and returns the same output each time (its buffers overwritten:
    outputs alias across replays, clone what you keep). Refresh inputs in place with
    ``x.copy_(new)`` before a replay; pending writes to them are drained first.

    The Graph keeps every buffer it touched alive, so dropping an input tensor cannot make a
    replay read freed memory, and no later allocation can be handed its intermediates.
    """

    def __init__(self, device, output, closure, hardware=None, fallback_reason=None, rng_draw=0):
        self.device = device
        self._output = output
        self._closure = closure
        self._hardware = hardware
        self.fallback_reason = fallback_reason
        self._rng_draw = rng_draw
        self._replay_lock = threading.Lock()

    @property
    def output(self):
        return self._output

    @property
    def is_hardware(self) -> bool:
        return self._hardware is not None

    @property
    def num_launches(self) -> int:
        return len(self._hardware) if self._hardware is not None else 0

    def replay(self):
        if not self._replay_lock.acquire(blocking=False):
            raise CaptureError("Graph.replay() is already running in another thread: a graph replays its "
                               "recorded buffers, so concurrent replays would race; serialise them")
        try:
            if self._hardware is None:
                out = self._closure()
                _check_output(out)
                self._output = out
                return out
            dev = self.device
            dev.engine.drain_for_capture()   # pending x.copy_(new) must land before the launches
            if self._rng_draw:
                from ..creation import generator
                generator.take(self._rng_draw)
                self._hardware.advance_rng(self._rng_draw)
            dev.graph_replay(self._hardware)
            dev.stats.graph_replays += 1
            return self._output
        finally:
            self._replay_lock.release()

    def __repr__(self):
        kind = f"hardware, {self.num_launches} launches" if self.is_hardware else f"fallback: {self.fallback_reason}"
        return f"Graph({self.device.name}, {kind})"


def capture(device, closure, *, warmup_iters: int = 3, hold_outputs: bool = True) -> Graph:
    """Capture ``closure`` on ``device`` for repeated replay (SPEC semantics 6-8)."""
    dev = get_device(device)
    if not callable(closure):
        raise CaptureError(f"closure={closure!r} is not callable")
    if not isinstance(warmup_iters, int) or warmup_iters < 0:
        raise CaptureError(f"warmup_iters={warmup_iters!r} must be a non-negative int")
    if dev.capturing:
        raise CaptureError(f"a capture is already open on {dev.name}: captures cannot nest")
    if not dev.supports_graphs:
        reason = f"device {dev.name} has no graph support"
        _warn_once(reason)
        out = closure()   # no pointless warmup: replay re-runs the closure anyway
        _check_output(out)
        return Graph(dev, out, closure, None, reason)

    dev.sync()          # work recorded before the capture is not part of it: drain it now
    dev.graph_prepare()
    try:
        for _ in range(warmup_iters):
            out = closure()
            _check_output(out)
            if hold_outputs:
                dev.sync()      # the output is alive: its kernels run and its buffers are pooled
                del out
            else:
                del out         # dropped before the drain: elided, nothing built or allocated
                dev.sync()
    except BaseException:
        dev.graph_abort()
        raise

    from ..creation import generator
    try:
        dev.graph_start_capture()
    except Exception as e:  # noqa: BLE001 (any failure to open means: fall back)
        dev.graph_abort()
        reason = f"capture could not start on {dev.name}: {e}"
        _warn_once(reason)
        out = closure()
        _check_output(out)
        return Graph(dev, out, closure, None, reason)

    rng_before = generator.offset
    try:
        out = closure()
        _check_output(out)
        dev.sync()
    except BaseException:
        out = None
        dev.graph_abort()
        raise
    rng_draw = generator.offset - rng_before
    try:
        hardware = dev.graph_stop_capture()
    except Exception as e:  # noqa: BLE001 (the device is already out of capture mode)
        dev.graph_abort()
        reason = f"capture failed to close on {dev.name}: {e}"
        _warn_once(reason)
        return Graph(dev, out, closure, None, reason)
    return Graph(dev, out, closure, hardware, None, rng_draw)
