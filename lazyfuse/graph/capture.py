"""Graph capture: record a closure's steady-state launches once, replay them as one dispatch.

This follows Burn's ``capture`` (``burn_tensor/tensor/api/graph.rs`` in Burn's repository) step by step, and each
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
   fallback that re-runs the closure — and unlike Burn's, which discards these
   errors, ``Graph.fallback_reason`` says why, and a warning says it once.
"""
from __future__ import annotations

import time
import warnings
import weakref

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


def _write_into(old, new) -> None:
    """A fallback replay's result written into the first run's output tensors, so code written
    for a device with graphs (docs/semantics.md, Replay: the same output tensor, overwritten) reads fresh values
    on one without them too."""
    if isinstance(old, Tensor) and isinstance(new, Tensor):
        if new is not old:
            if new.shape != old.shape or new.dtype != old.dtype:
                raise CaptureError(f"the closure returned a {new.dtype.name}{list(new.shape)} tensor on replay where "
                                   f"it returned {old.dtype.name}{list(old.shape)} at capture: a graph's outputs "
                                   "keep their shapes")
            from ..autograd import no_grad
            with no_grad():
                old.copy_(new)
        return
    same = type(old) is type(new) and (
        old is None or (isinstance(old, (tuple, list)) and len(old) == len(new)) or
        (isinstance(old, dict) and old.keys() == new.keys()))
    if not same:
        raise CaptureError(f"the closure returned {type(new).__name__} on replay where it returned "
                           f"{type(old).__name__} at capture: a graph's outputs keep their structure")
    if isinstance(old, dict):
        for k in old:
            _write_into(old[k], new[k])
    elif old is not None:
        for o, n in zip(old, new):
            _write_into(o, n)


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

    ``check_overwrites=True`` (``lf.capture``): each replay returns fresh tensors aliasing the
    output buffers, and reading one that a later replay overwrote raises ``CaptureError``.
    ``reset()`` empties the graph; ``lf.capture(..., graph=g)`` captures into it again.
    ``debug_dump()`` lists what it launches and holds.
    """

    def __init__(self, device, output, closure, hardware=None, fallback_reason=None, rng_draw=0,
                 check_overwrites=False, shared=None):
        self.device = device
        self._output = output
        self._closure = closure
        self._hardware = hardware
        self.fallback_reason = fallback_reason
        self._rng_draw = rng_draw
        # one replay at a time: the token of a one-item list, whose pop and append are atomic
        # (under the GIL and in free-threaded builds alike) and ~0.13 us cheaper than a
        # threading.Lock's acquire and release, which weighs on a 2 us decode replay
        self._turn = [True]
        self._handed = [] if check_overwrites else None   # storages of the outputs handed out last
        self._shared = shared    # the SharedPool this graph's memory belongs to (pool=), or None
        self._is_reset = False
        self._settle()

    def _settle(self) -> None:
        """Whether replays take the short path: a hardware graph with no random draw, no shared
        pool and no overwrite check (decided whenever one of those changes, not per replay)."""
        self._plain = (self._hardware is not None and not self._rng_draw and self._shared is None
                       and self._handed is None)

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
        try:
            self._turn.pop()
        except IndexError:
            raise CaptureError("Graph.replay() is already running in another thread: a graph replays its "
                               "recorded buffers, so concurrent replays would race; serialise them") from None
        try:
            dev = self.device
            if self._plain and not dev.capturing:
                # the common case in few steps: a hidden-64 decode step's kernels take ~1.5 us,
                # so each Python step of the general path below weighs on it
                dev.replay_alone(self._hardware)   # pending x.copy_(new) lands first
                dev.stats.graph_replays += 1
                return self._output
            if self._is_reset:
                raise CaptureError("replay() of a Graph that was reset(): capture into it again first "
                                   "(lf.capture(device, closure, graph=g))")
            if self._hardware is None:   # a fallback: re-run the closure into the same output tensors
                out = self._closure()
                _check_output(out)
                _write_into(self._output, out)
                return self._outputs()
            dev.sync()   # pending x.copy_(new) must land before the launches
            if dev.capturing:   # replayed inside another capture: its launches join that graph
                if self._rng_draw:
                    raise CaptureError("a graph that draws random numbers (lf.rand/randn) cannot be replayed inside "
                                       "another capture: the outer graph could not give it fresh numbers per "
                                       "replay; call the closure itself inside the outer capture instead")
                dev.graph_replay_into_capture(self._hardware.host)
                dev.stats.graph_replays += 1
                return self._outputs()
            if self._shared is not None:
                self._shared.check_turn(self)
            if self._rng_draw:   # draw from the generator like an eager run (lf.manual_seed included)
                from ..creation import generator
                self._hardware.draw_rng(*generator.take(self._rng_draw))
            dev.graph_replay(self._hardware)
            dev.stats.graph_replays += 1
            return self._outputs()
        finally:
            self._turn.append(True)

    def _outputs(self):
        """The output, or (check mode) fresh aliases of it, the previous ones marked overwritten."""
        if self._handed is None:
            return self._output
        dev = self.device
        stale = [st for st in (ref() for ref in self._handed) if st is not None]
        if stale:
            err = CaptureError(f"this tensor is an output of an earlier replay of a graph on {self.device.name}, "
                               "and a later replay has overwritten its memory (graph outputs alias across "
                               "replays): .clone() the outputs you keep before replaying again")
            for st in stale:
                dev.poison(st, err)
        self._handed = []
        if self._hardware is None:
            dev.sync()   # the fallback's fresh result, realized so it can be aliased
        return _map_tensors(self._output, self._alias)

    def _alias(self, t: Tensor) -> Tensor:
        """A tensor on ``t``'s buffer with a storage of its own, so that storage alone can be
        marked overwritten (every read of it raises; ``t`` and other replays' outputs are untouched)."""
        held = t._storage
        st = self.device.alias_storage(held.root)
        if st is None:   # a value that failed to compute: it raises on reads anyway
            return t
        self._handed.append(weakref.ref(st))
        # (a view of another dtype: the same stand-in over the alias, so it is poisoned with it)
        return Tensor(st if held is held.root else held.over(st), t._view, t.device)

    def reset(self) -> None:
        """Drop the recorded launches, the buffers they bind and the output; capture into this
        Graph again with ``lf.capture(device, closure, graph=g)``. (Memory lent to graphs that
        share its pool stays theirs until they go too.)"""
        self._wait_turn()   # a replay running in another thread finishes first
        try:
            if self._shared is not None:
                self._shared.leave(self)
            self._output = self._closure = self._hardware = self._shared = None
            self.fallback_reason = None
            self._rng_draw = 0
            self._handed = None
            self._is_reset = True
            self._settle()
        finally:
            self._turn.append(True)

    def _wait_turn(self) -> None:
        while True:
            try:
                self._turn.pop()
                return
            except IndexError:
                time.sleep(1e-4)

    def _take(self, other: "Graph") -> None:
        """Become the freshly captured ``other`` (``lf.capture(..., graph=self)``)."""
        turn = self._turn
        vars(self).update(vars(other))
        self._turn = turn
        if self._shared is not None:
            self._shared.replace(other, self)

    def debug_dump(self) -> str:
        """What this graph launches and holds: each recorded kernel with the buffers it binds
        (dtype, elements, address, role), then the memory held, counted once per buffer."""
        if self._hardware is None:
            state = "reset" if self._is_reset else f"fallback ({self.fallback_reason}): replay re-runs the closure"
            return f"Graph on {self.device.name}: {state}; it holds no launches"
        outputs = {id(t._storage.buffer) for t in _tensors(self._output) if t._storage.buffer is not None}
        lines = [f"Graph on {self.device.name}: {self.num_launches} kernel launch(es)"
                 + (f", {self._rng_draw} random numbers per replay" if self._rng_draw else "")
                 + (f", pool shared with {len(self._shared.graphs) - 1} other graph(s)" if self._shared else "")]
        held = {}
        roles = {"temp": "intermediate", "leaf": "input", "root": "written"}   # written: in place, or not returned
        for k, (name, bufs, kinds, meta) in enumerate(_records(self._hardware.host)):
            parts = []
            for buf, kind in zip(bufs, kinds):
                role = "output" if id(buf) in outputs else roles[kind]
                held[id(buf)] = (buf, role)
                parts.append(f"{buf.dtype.name}[{buf.numel}] @ {buf.ptr:#x} ({role})")
            lines.append(f"  {k}: {name}({', '.join(parts)})")
        by_role = {}
        for buf, role in held.values():
            by_role[role] = by_role.get(role, 0) + _nbytes(buf)
        metas = sum(_nbytes(m.buffer) for m in self._hardware.host.metas)
        total = sum(by_role.values()) + metas
        lines.append(f"holds {len(held)} buffer(s), {total} bytes: " + ", ".join(
            f"{role} {n}" for role, n in sorted(by_role.items())) + f", launch metadata {metas}")
        return "\n".join(lines)

    def __repr__(self):
        if self._is_reset:
            return f"Graph({self.device.name}, reset)"
        kind = f"hardware, {self.num_launches} launches" if self.is_hardware else f"fallback: {self.fallback_reason}"
        return f"Graph({self.device.name}, {kind})"


def _records(host):
    """A host graph's launch records, nested graphs' included, in launch order."""
    for rec in host.records:
        if isinstance(rec, tuple):
            yield rec
        else:
            yield from _records(rec)


def _nbytes(buf) -> int:
    block = getattr(buf, "block", None)
    return block.nbytes if block is not None else buf.numel * buf.dtype.itemsize


def _tensors(out) -> list:
    found = []
    _map_tensors(out, lambda t: found.append(t) or t)
    return found


def _map_tensors(out, fn):
    if isinstance(out, Tensor):
        return fn(out)
    if isinstance(out, (tuple, list)):
        return type(out)(_map_tensors(o, fn) for o in out)
    if isinstance(out, dict):
        return {k: _map_tensors(v, fn) for k, v in out.items()}
    return out


class SharedPool:
    """Graphs sharing one memory pool (``lf.capture(..., pool=g)``): each capture may run on the
    memory earlier ones hold for their intermediates, so a replay overwrites what a later graph
    of the pool may have put there (its outputs included). Safe when they replay in capture
    order — the first again, or the one after the last to run — and refused otherwise. Holds
    its graphs weakly (each graph holds its pool: no reference cycle)."""

    def __init__(self, first: Graph):
        self.graphs = [weakref.ref(first)]
        self.last = 0     # the graph that ran last (the latest capture run, then each replay)

    def _live(self) -> list:
        return [j for j, ref in enumerate(self.graphs) if ref is not None and ref() is not None]

    def _position(self, graph: Graph) -> int:
        return next(j for j, ref in enumerate(self.graphs) if ref is not None and ref() is graph)

    def blocks(self) -> list:
        seen = {}
        for j in self._live():
            hw = self.graphs[j]()._hardware
            if hw is not None:
                for buf in hw.host.intermediates():
                    seen[id(buf.block)] = buf.block
        return list(seen.values())

    def join(self, graph: Graph) -> None:
        self.graphs.append(weakref.ref(graph))
        self.last = len(self.graphs) - 1

    def check_turn(self, graph: Graph) -> None:
        k = self._position(graph)
        live = self._live()
        following = next((j for j in live if j > self.last), None)
        if k not in (live[0], following):
            allowed = " or ".join(f"#{j + 1}" for j in dict.fromkeys((live[0], following)) if j is not None)
            raise CaptureError(f"graphs sharing a memory pool (pool=) replay in capture order: this is graph #{k + 1} "
                               f"of {len(self.graphs)}, the last to run was #{self.last + 1}, so the next may be "
                               f"{allowed}; out of order, a replay would overwrite memory another graph's result "
                               "still sits in. Capture with separate pools to replay in any order")
        self.last = k

    def leave(self, graph: Graph) -> None:
        self.graphs[self._position(graph)] = None

    def replace(self, old: Graph, new: Graph) -> None:
        self.graphs[self._position(old)] = weakref.ref(new)


def capture(device, closure, *, warmup_iters: int = 3, hold_outputs: bool = True, check_overwrites: bool = False,
            graph: Graph | None = None, pool: Graph | None = None) -> Graph:
    """Capture ``closure`` on ``device`` for repeated replay (docs/semantics.md, Capture; Replay).

    ``check_overwrites``: replays return fresh tensors aliasing the outputs and reading one a
    later replay overwrote raises (off: no cost). ``graph``: a ``reset()`` Graph to capture into
    again. ``pool``: another Graph on the device whose memory pool this one shares — its
    intermediates may serve this capture — replayed in capture order (see ``SharedPool``)."""
    dev = get_device(device)
    if not callable(closure):
        raise CaptureError(f"closure={closure!r} is not callable")
    if not isinstance(warmup_iters, int) or warmup_iters < 0:
        raise CaptureError(f"warmup_iters={warmup_iters!r} must be a non-negative int")
    for name, g in (("graph", graph), ("pool", pool)):
        if g is not None and (not isinstance(g, Graph) or g.device is not dev):
            raise CaptureError(f"{name}={g!r} must be a Graph captured on {dev.name}")
    if graph is not None and not graph._is_reset:
        raise CaptureError("graph=: this Graph still holds its capture; call graph.reset() before capturing into it")
    if pool is not None and pool._is_reset:
        raise CaptureError("pool=: that Graph was reset() and holds no memory to share")
    with dev.capture_under_way():   # refuses a nested capture before it touches anything
        result = _capture(dev, closure, warmup_iters, hold_outputs, check_overwrites, pool)
    if graph is None:
        return result
    graph._take(result)
    return graph


def _capture(dev, closure, warmup_iters: int, hold_outputs: bool, check: bool, pool) -> Graph:
    if not dev.supports_graphs:
        reason = f"device {dev.name} has no graph support"
        _warn_once(reason)
        out = closure()   # no pointless warmup: replay re-runs the closure anyway
        _check_output(out)
        return Graph(dev, out, closure, None, reason, check_overwrites=check)

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
    shared = None
    if pool is not None and pool._hardware is not None:
        shared = pool._shared or SharedPool(pool)
    try:
        dev.graph_start_capture()
    except Exception as e:  # noqa: BLE001 (any failure to open means: fall back)
        dev.graph_abort()
        reason = f"capture could not start on {dev.name}: {e}"
        _warn_once(reason)
        out = closure()
        _check_output(out)
        return Graph(dev, out, closure, None, reason, check_overwrites=check)

    if shared is not None:
        dev.pool.lend(shared.blocks())
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
        return Graph(dev, out, closure, None, reason, check_overwrites=check)
    if rng_draw:
        hardware.bind_rng(rng_before)
    if not len(hardware):
        warnings.warn(f"lazyfuse: the capture on {dev.name} recorded 0 kernel launches, so replay() will do "
                      "nothing. Likely cause: the closure's results were dropped before it returned (the lazy "
                      "engine elides them: return what you need), or it returns tensors computed before the "
                      "capture (only work recorded inside the closure is captured)", RuntimeWarning, stacklevel=3)
    graph = Graph(dev, out, closure, hardware, None, rng_draw, check_overwrites=check, shared=shared)
    if shared is not None:
        pool._shared = shared
        pool._settle()
        shared.join(graph)
    return graph
