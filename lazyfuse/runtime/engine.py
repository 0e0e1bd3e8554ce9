"""The engine: the per-device pending queue (recording, the tape), the drain, elision and the
plan cache. The build path it takes on a miss is runtime/build.py, the execution of a plan
runtime/execute.py, and what a capture under way has run runtime/capture_tracking.py.

Recording (``record``) appends a storage to the pending queue and enters its node — with any
source not yet there — on the *tape*: one entry per node the pending work reads or computes,
sources first, holding what a launch binds from it (a leaf's buffer, a scalar's value, else
None). Entering a node makes its compact structural descriptor (op, dtype, shape, attribute
and its sources as tape positions; for a buffer leaf, the first tape position of a leaf on
the same buffer; for a scalar, only its dtype — its value is bound at launch). Positions tell
a shared node from two equal ones, views carry their strides. The tape does not keep nodes
alive: a dropped result's nodes die at once, as they would without it.

A drain:

1. keeps the pending storages that are still alive (docs/semantics.md, Elision: a result
   dropped before the drain is never computed, nor anything only it needed);
2. forms the structural key from the already-made descriptors plus the live roots (their
   tape positions and which buffers they overwrite): no walk of the graph. The descriptors
   cover every node recorded since the last drain, dropped ones too, so the key fixes the
   live subgraph; a program that drops other results gets a plan of its own (rebound from
   the plan of the program recorded alone, where one is cached: the structure below leaves
   the nodes no live root reads out, runtime.structure.live_parts);
3. on a plan-cache miss takes the **build path** (runtime/build.py): trace the live DAG, plan
   (ir.planner), lower (codegen.lower), compile and autotune, launching with throw-away
   scratch metadata — or, without planning or compiling, take a cached plan of the same
   size-free structure lowered at the new sizes (runtime.structure), or a plan an earlier
   process stored (runtime.plan_store); the plan also records where each of its leaves and
   scalars sits on the tape (a function of the key, so it holds for every drain with the
   same key);
   on a hit takes the **steady-state path**: the cached kernels, with per-kernel launch
   metadata allocated from the pool on the first steady-state launch and reused after
   (docs/semantics.md, The plan cache and its two paths: they allocate different buffers, on
   purpose);
4. executes the plan (runtime/execute.py): binds buffers (tape leaves, fresh outputs and
   temporaries from the pool) and scalars by prebuilt gathers, launches, and turns every
   realized storage's value into a leaf.
"""
from __future__ import annotations

import threading
import weakref
from collections import OrderedDict

import numpy as np

from .. import config
from ..errors import CaptureError, DeviceError
from ..ir.node import Node, Op, post_order
from ..ir.view import contiguous_view
from . import plan_store
from .build import assemble, matmul_template, new_plan, rebind_steps, trace
from .execute import execute, first_reached
from .recompile import MissLog
from .structure import live_parts, structure_key

MAX_PENDING = config.MAX_PENDING.get()
PLAN_CACHE_SIZE = config.PLAN_CACHE.get()
TEMPLATES = 4   # cached plans of one structure a new size tries (runtime.structure)
ORIGIN_COUNTERS = {"planned": "plans_built", "rebound": "plans_rebound", "loaded": "plans_loaded"}
# (hot-path aliases: ``Op.X`` costs ~150 ns a read on Python 3.11, whose Enum metaclass has a __getattr__)
SCALAR = Op.SCALAR
BUFFER = Op.BUFFER
_weakref = weakref.ref

# the drain observer, called as drain_hook(device, plan, build) after every drain. The runtime
# imports nothing above it: explain.py installs its printer here (``LAZYFUSE_DEBUG=1``), and
# ``python -m lazyfuse explain`` its reporter
drain_hook = None


class Storage:
    """The memory behind one or more tensors (a base and its views) and its current value.

    ``current`` is a Node: a BUFFER leaf once realized, else the pending op (or in-place
    write) that will produce it. Every version of a storage lives in the same buffer, so a
    captured graph and every view see in-place writes.
    """

    __slots__ = ("engine", "dtype", "shape", "view", "current", "buffer", "version", "before", "__weakref__")

    def __init__(self, engine, node: Node):
        self.engine = engine
        self.dtype = node.dtype
        self.shape = node.shape
        self.view = contiguous_view(node.shape)   # how a tensor reads the whole storage
        self.current = node
        self.buffer = None
        self.version = 0   # in-place writes so far: autograd checks the values it saved are unchanged
        # the version before the last in-place write, until a drain computes it: a write that
        # fails at the drain (a bad index torch would refuse at the call) is undone to it
        # (``execute.salvage``), as torch's failed call leaves the tensor as it was
        self.before = None
        if node.op.pending:
            engine.record(self)

    @property
    def numel(self) -> int:
        return self.view.numel

    @property
    def root(self) -> "Storage":
        """The storage holding this one's memory: itself (a view of another dtype's is its base's)."""
        return self

    def update(self, node: Node) -> None:
        """A new version (an in-place write): recorded like any op. A recording refused before
        the node was entered (another thread's, during a capture) leaves the old version: the
        write never happened, for reads and for the ops that read this storage alike."""
        old, self.current = self.current, node
        try:
            self.engine.record(self)
        except BaseException:
            if node.tape is None:
                self.current = old
            raise
        finally:
            if self.current is node:
                self.version += 1
                self.before = old


class BitcastStorage:
    """A storage's memory read as another dtype of the same itemsize (``x.view(torch.int32)`` of
    a float32 tensor). It holds no value of its own, so the two can never disagree: a read is
    the base's current value bitcast (a BITCAST node), and an in-place write is recorded on the
    base as the written value bitcast back to the base's dtype. Writes through either dtype show
    in the other, in program order; the engine and its buffers only ever see the base (storages
    hold one dtype). ``lazyfuse.bitcast`` makes them, and its ResizedStorage (another itemsize)
    is one with its own shape, reads and writes."""

    __slots__ = ("base", "dtype", "__weakref__")

    def __init__(self, base: Storage, dtype):
        self.base = base
        self.dtype = dtype

    engine = property(lambda self: self.base.engine)
    root = property(lambda self: self.base)
    shape = property(lambda self: self.base.shape)
    view = property(lambda self: self.base.view)
    numel = property(lambda self: self.base.numel)
    buffer = property(lambda self: self.base.buffer)
    before = property(lambda self: self.base.before)

    @property
    def version(self) -> int:
        return self.base.version

    @version.setter
    def version(self, value: int) -> None:
        self.base.version = value

    @property
    def current(self) -> Node:
        # a new node per read: one kept would outlive the drain that computed its source (its
        # tape gone), and a BITCAST costs nothing where a kernel reads it
        src = self.base.current
        return Node(Op.BITCAST, (src,), self.dtype, src.shape)

    def update(self, node: Node) -> None:
        self.base.update(Node(Op.BITCAST, (node,), self.base.dtype, node.shape))

    def over(self, base: Storage) -> "BitcastStorage":
        """The same reading of another storage of the base's dtype and shape."""
        return BitcastStorage(base, self.dtype)


class Engine:
    def __init__(self, device):
        self.device = device
        self.stats = device.stats
        self.pool = device.pool
        self.pending: list = []    # weak references to the storages recorded since the last drain
        self.pending_ops = 0
        self.tape: list = []       # per node entered (sources first), the buffer or scalar it binds, or None
        self.descs: list = []      # the structural descriptor of each node entered
        self.leaf_first: dict = {}  # id(buffer) -> tape position of the first leaf on it
        self.plans: OrderedDict = OrderedDict()
        # size-free structure key -> the keys of the last plans the planner built for it
        # (runtime.structure), used while such a plan is cached: dropping a plan drops its template
        self.structures: OrderedDict = OrderedDict()
        # planned and compiled plans whose path state a capture reset (see reset_path_state): the
        # next drain of their key takes the build path again, without planning or lowering
        self.planned: OrderedDict = OrderedDict()
        self.lock = threading.RLock()
        self._draining = False
        # the ERROR leaves of values that failed to compute (their readers fail too), held weakly:
        # once none is left, no pending op can read one and drains stop looking for them
        self.poisoned = weakref.WeakSet()
        # storages the next drain computes even when their tensors are dropped: collectives, which
        # every rank must run (lazyfuse.distributed); held until a drain consumes the queue
        self.pinned: list = []
        self.misses = MissLog()  # the last plan-cache misses, explained on demand (lf.explain, LAZYFUSE_DEBUG)
        self.last_plan = None    # the plan the last drain ran (``_predicted``)
        self.newest = None       # the key last put at the end of ``plans`` (a drain that ran it again moves nothing)

    # -- recording -----------------------------------------------------------------------------
    def record(self, storage: Storage) -> None:
        """Queue a storage whose value is a new pending node; enter the node on the tape.

        The hot path of every op: a pending node always has sources, which are usually on
        the tape already, fresh scalars or realized inputs, so those are entered inline here.
        (The lock is taken by explicit calls: a ``with`` block costs twice as much, and this
        runs once per op.)
        """
        node = storage.current
        lock = self.lock
        lock.acquire()
        try:
            tape = self.tape
            if node.tape is not tape:
                srcs = node.srcs
                descs = self.descs
                for src in srcs:
                    if src.tape is not tape:
                        op = src.op
                        if op is SCALAR:
                            src.tape = tape
                            src.tpos = len(tape)
                            tape.append(src.arg)
                            descs.append((SCALAR, src.dtype))
                        elif op is BUFFER:   # a realized input, entered again at every drain (as _append does)
                            value = src.arg
                            pos = src.tpos = len(tape)
                            src.tape = tape
                            tape.append(value)
                            descs.append((BUFFER, src.dtype, src.shape, self.leaf_first.setdefault(id(value), pos)))
                        else:
                            self._enter(src)
                if len(srcs) == 2:
                    at = (srcs[0].tpos, srcs[1].tpos)
                elif len(srcs) == 1:
                    at = (srcs[0].tpos,)
                else:
                    at = tuple([s.tpos for s in srcs])
                node.tape = tape
                node.tpos = len(tape)
                tape.append(None)
                descs.append((node.op, node.dtype, node.shape, node.arg, at))
            pending = self.pending
            pending.append(_weakref(storage))
            self.pending_ops += 1
            self.stats.ops_recorded += 1
            full = len(pending) >= MAX_PENDING
        finally:
            lock.release()
        if full:
            self._drain()

    def _enter(self, root: Node, depth: int = 0) -> None:
        """Put ``root`` and every source of it not yet on the tape there, sources first, in
        ``post_order``'s order (the last source's first), which the plan keys' positions follow.
        What is off the tape is an op's inner nodes (views, casts, a small matmul's product),
        a few levels deep: walked by recursion, cheaper than ``post_order``'s stack and set,
        and by ``post_order`` past a depth recursion should not reach."""
        tape = self.tape
        if depth > 16:
            for node in post_order((root,), lambda n: [s for s in n.srcs if s.tape is not tape]):
                self._append(node)
            return
        for s in reversed(root.srcs):
            if s.tape is not tape:   # (a source met twice is on the tape the second time)
                if s.srcs:
                    self._enter(s, depth + 1)
                else:
                    self._append(s)
        self._append(root)

    def _append(self, node: Node) -> None:
        """Enter one node whose sources are on the tape, with its structural descriptor."""
        tape = self.tape
        pos = len(tape)
        op = node.op
        value = None
        if op is BUFFER:
            value = node.arg   # held by the tape: a buffer's id names it in the descriptors
            desc = (op, node.dtype, node.shape, self.leaf_first.setdefault(id(value), pos))
        elif op is SCALAR:
            value = node.arg
            desc = (op, node.dtype)
        elif not node.srcs:   # an ERROR leaf: nothing live reads it (see _live_roots)
            desc = (op, node.dtype, node.shape)
        else:
            if node.tape is not None:
                raise self._stale_read()
            desc = (op, node.dtype, node.shape, node.arg, tuple([s.tpos for s in node.srcs]))
        node.tape = tape
        node.tpos = pos
        tape.append(value)
        self.descs.append(desc)

    def _stale_read(self) -> DeviceError:
        """The error for a pending node entered on an earlier drain's tape.

        A storage's pending value is always on the current tape (a drain that fails keeps its
        tape; one that succeeds realizes or poisons every live pending value), and an op reads
        its sources and records in one call. So a pending source from an earlier tape was read
        before a drain that realized it and recorded after: another thread drained in between.
        Entering it again would re-run it on buffers written since — a silently wrong value.
        """
        return DeviceError(
            f"another thread drained {self.device.name} while this op read one of its pending tensors, "
            "so the value it read is gone; threads sharing a device must serialise recording and draining "
            "under one lock (README, Reliability: Threads)")

    def _consume(self) -> None:
        """Start a new, empty pending queue and tape (after a drain that ran what was live)."""
        self.pending.clear()
        if self.pinned:
            self.pinned.clear()
        self.pending_ops = 0
        old, self.tape = self.tape, []
        old.clear()   # nodes still point at it (so it is never reused): emptied, it holds no buffer
        self.descs = []
        self.leaf_first = {}

    def reserve_for_capture(self) -> None:
        """While a capture is open, only the capturing thread may record on this device: the
        capture drains the whole pending queue, so another thread's work would be baked into
        the graph. Installed per instance, so recording outside a capture pays nothing."""
        owner = threading.get_ident()
        record = Engine.record

        def record_in_capture(storage):
            if threading.get_ident() != owner:
                raise CaptureError(f"a capture is open on {self.device.name} in another thread: recording here "
                                   "would put this work into its graph; wait for lf.capture to return")
            record(self, storage)
        self.record = record_in_capture

    def release_from_capture(self) -> None:
        self.__dict__.pop("record", None)

    def write_host_data(self, storage: Storage, data) -> bool:
        """Copy host data (a numpy array or CPU torch tensor of the storage's own shape and
        dtype) straight into its buffer, when that is exactly what a recorded ``copy_`` would do
        at the next drain: the buffer lives in host memory, the storage is realized, no pending
        op reads the buffer (it must see the old value: docs/semantics.md, Views and in-place
        writes), and no capture is under way —
        inside one the copy is recorded as a launch, so every replay repeats it, and so it is in
        the capture's warmup, which must run the very plans the capture run records (from
        ``graph_prepare`` to the end of ``lf.capture``). Returns False where the copy must be
        recorded. The input refresh of a replayed step (docs/semantics.md, Replay) then costs one
        memcpy instead of an upload and a one-kernel drain.
        """
        buf = storage.buffer
        node = storage.current
        if node.op is not Op.BUFFER or node.arg is not buf or self.device.capture_tracking.active:
            return False
        if isinstance(data, np.ndarray):
            if data.dtype != storage.dtype.numpy or data.shape != storage.shape:
                return False
        elif data.dtype != storage.dtype.torch or tuple(data.shape) != storage.shape or data.device.type != "cpu":
            return False
        flat = buf.tensor
        if flat.device.type != "cpu":
            return False
        with self.lock:
            if id(buf) in self.leaf_first:   # pending work reads this buffer: record the copy after it
                return False
            self.device.host_write(buf)   # queued launches may still read it (runtime/stream.py)
            if isinstance(data, np.ndarray):
                np.copyto(flat.numpy().reshape(data.shape), data, casting="no")
            else:
                flat.copy_(data.detach().reshape(-1))
            storage.version += 1   # an in-place write like a recorded copy_: autograd's saved values see it
        return True

    def count_extra_ops(self, n: int) -> None:
        """Ops recorded as inner nodes of one API call (var, softmax...) also count."""
        with self.lock:
            self.pending_ops += n
            self.stats.ops_recorded += n

    # -- draining ------------------------------------------------------------------------------
    def sync(self, reason: str = "lf.sync") -> None:
        """A user-visible drain: refused while a capture is open."""
        if self.device.capturing:
            raise CaptureError(f"cannot read device data during capture ({reason}): the value would be "
                               "baked in; read it after the capture, or from Graph.output after replay()")
        self._drain()
        self.device.raise_deferred_errors()

    def drain_for_capture(self) -> None:
        """Land pending work (a replay's ``x.copy_(new)``) before a capture or replay."""
        self._drain()

    def _drain(self) -> None:
        if not self.pending and not self.pending_ops:
            return   # nothing recorded: no queue to reset (~1.4 us saved per replay or idle sync)
        with self.lock:
            if self._draining:
                return
            self._draining = True
            try:
                self._drain_locked()
            finally:
                self._draining = False

    def _live_roots(self) -> list:
        pending = self.pending
        if len(pending) == 1:   # (the steady state of a single op's drain: no loop, no dedup)
            s = pending[0]()
            roots = [s] if s is not None and s.current.op.pending else []
        else:
            roots = []
            for ref in pending:
                s = ref()
                if s is not None and s.current.op.pending:
                    roots.append(s)
            if len(roots) > 1:
                roots = list(dict.fromkeys(roots))   # a storage written in place is queued once per write
        # (the WeakSet's own set: ``len(WeakSet)`` is Python code; a dead entry it still holds only
        # makes the check below run for nothing)
        if roots and self.poisoned.data:
            healthy = []
            for s in roots:
                err = _failed_input(s.current)
                if err is None:
                    healthy.append(s)
                else:
                    self.poison(s, err.arg)
            roots = healthy
        return roots

    def poison(self, storage: Storage, error: BaseException) -> None:
        """Mark a value whose computation failed: reading it raises, other work goes on."""
        storage.current = Node(Op.ERROR, (), storage.dtype, storage.shape, error)
        storage.before = None
        self.poisoned.add(storage.current)

    def _drain_locked(self) -> None:
        roots = self._live_roots()
        recorded = self.pending_ops
        if not roots:
            self._consume()
            self.stats.ops_elided += recorded
            return
        leaf_first = self.leaf_first
        if len(roots) == 1:
            s = roots[0]
            live = ((s.current.tpos, None if s.buffer is None else leaf_first.get(id(s.buffer), -1)),)
        else:
            live = tuple([(s.current.tpos, None if s.buffer is None else leaf_first.get(id(s.buffer), -1))
                          for s in roots])
        descs = tuple(self.descs)
        plan = self._predicted(descs, live)
        if plan is not None:
            key = plan.key
        else:
            key = PlanKey((descs, live))
            plan = self.plans.get(key)
        device = self.device
        if plan is None:
            if device.capturing:
                # the build path compiles, autotunes and allocates scratch buffers: never inside a capture
                from ..errors import CaptureAllocationError
                need = [(s.numel * s.dtype.itemsize, s.dtype.name) for s in roots if s.buffer is None]
                size = f"{need[0][0]} bytes ({need[0][1]}) for its first output" if need else "scratch buffers"
                raise CaptureAllocationError(
                    f"capture needed a fresh allocation of {size}: the capture run met a new fused plan "
                    f"({len(trace(roots)[0])} nodes) on {device.name}, and building it would compile, "
                    "autotune and allocate mid-capture. " + device.capture_tracking.cause(None, True))
            self.misses.add(device.name, key, self.plans)
            plan, build = self._build(key, roots)
        else:
            build = None
            if plan.key is not self.newest:   # (the cached key itself: found by identity, not compared again)
                self.plans.move_to_end(plan.key)
                self.newest = plan.key
        execute(self, plan, roots, build)
        if drain_hook is not None:
            drain_hook(device, plan, build is not None)
        # success: the queue is consumed (on failure it stays, so nothing live is lost)
        self._consume()
        stats = self.stats
        elided = recorded - plan.n_ops
        if elided > 0:
            stats.ops_elided += elided
        if build is not None:
            stats.fusion_cache_misses += 1
        else:
            stats.fusion_cache_hits += 1
        tracking = device.capture_tracking
        if tracking.executed_keys is not None or device.capturing:   # (a capture under way: CaptureTracking.ran)
            tracking.ran(key, plan, device.capturing)
        last = self.last_plan
        if last is not None and last.follower is not plan.key:
            last.follower = plan.key
        self.last_plan = plan

    def _predicted(self, descs: tuple, live: tuple):
        """The cached plan whose key is ``(descs, live)`` when it is the plan that followed the
        last drain's plan the last time that one ran, else None: a steady state repeats its
        drains in order (a training step's forward, backward, optimizer), so its plan is found
        by one comparison, without hashing the key (~100 ns a node). Evicted, or reset by a
        capture (``reset_path_state``), the plan is not in the cache: not predicted."""
        last = self.last_plan
        key = None if last is None else last.follower
        if key is None:
            return None
        parts = key.parts
        if parts[1] != live or parts[0] != descs:   # (tuples of other lengths differ at once)
            return None
        return self.plans.get(key)   # (the key itself: found by identity)

    def _build(self, key, roots) -> tuple:
        """The plan for ``key`` (a capture's reset one, else a new one: runtime/build.py), and the
        (leaves, scalars) its compilation binds this once."""
        nodes, leaves, scalars, targets = trace(roots)
        plan = self.planned.pop(key, None)
        if plan is None:
            plan = self._new_plan(key, nodes, targets)
        return plan, (leaves, scalars)

    def _new_plan(self, key, nodes, targets):
        """A plan for a key met for the first time: from a cached plan of its structure at other
        sizes (runtime.structure), else from the plan store (runtime.plan_store), else planned."""
        structure = PlanKey(structure_key(live_parts(key.parts, nodes)))
        backend = self.device.backend
        found, origin, stored = self._from_structure(structure, nodes), "rebound", None
        if found is None and plan_store.enabled():
            stored = plan_store.digest(key.parts, backend)
            if stored is not None:
                found, origin = plan_store.load(stored, backend, nodes), "loaded"
        if found is not None:
            plan = assemble(key, nodes, targets, len(self.tape), *found, origin=origin)
        else:
            plan = new_plan(key, nodes, targets, len(self.tape), matmul_template(self.device))
        plan.structure, plan.stored = structure, stored
        counter = ORIGIN_COUNTERS[plan.origin]
        setattr(self.stats, counter, getattr(self.stats, counter) + 1)
        return plan

    def _from_structure(self, structure, nodes) -> tuple | None:
        """``(plan, steps)`` of a cached plan of ``structure`` whose code serves this drain's
        sizes (the most recently used first), or None."""
        keys = self.structures.get(structure)
        for k in keys or ():
            template = self.plans.get(k) or self.planned.get(k)
            found = None if template is None else rebind_steps(template, nodes, self.device.backend)
            if found is not None:
                keys.remove(k)
                keys.insert(0, k)
                self.structures.move_to_end(structure)
                return found
        return None

    def remember(self, plan) -> None:
        """Put a plan that compiled in the plan cache (least recently used out first); one the
        planner or the plan store gave also becomes a template of its structure, and one the
        planner built is written to the plan store (``store``)."""
        self.plans[plan.key] = plan
        self.newest = plan.key
        while len(self.plans) > PLAN_CACHE_SIZE:
            self.plans.popitem(last=False)
            self.stats.plan_cache_evictions += 1
        if plan.origin != "rebound" and plan.structure is not None:
            # the few latest per structure: code that differs by size (serial and parallel, two
            # tuning classes) alternates in a sweep over sizes
            keys = self.structures.pop(plan.structure, [])
            self.structures[plan.structure] = [plan.key] + [k for k in keys if k != plan.key][:TEMPLATES - 1]
            while len(self.structures) > PLAN_CACHE_SIZE:
                self.structures.popitem(last=False)
        self.store(plan)

    def store(self, plan) -> None:
        """Write a plan the planner built to the plan store, once: at its build, or where its
        tuning waits for a later run (``LAZYFUSE_AUTOTUNE_AFTER``), once tuned — a loaded plan
        never tunes, so a record of the build's heuristic defaults would keep them for good."""
        if plan.origin == "planned" and plan.stored is not None and plan.untuned is None:
            plan_store.save(plan.stored, self.device.backend, plan)
            plan.stored = None   # written once (a capture's warmup builds it again)

    def reset_path_state(self) -> None:
        """At the start of a capture (``CaptureTracking.start``, under the lock), before the pool
        turns persistent.

        A capture starts with every plan's *path state* reset, so its warmup always takes the
        build path first and the steady-state path after — the same sequence whatever ran
        before, which is what makes the two reproduced bugs deterministic (docs/semantics.md, The two reproduced bugs). What is
        reset is which plans have run which path in this capture's pool (their launch
        metadata), not the planning: the plans move to ``planned``, planned, lowered and
        compiled, and a warmup's build path takes them from there (compiled code and tuning are
        cached too). The plans' metadata returns to the shared cache now, not to the
        capture's private segment.
        """
        for plan in self.plans.values():
            plan.metas = None
        self.planned.update(self.plans)
        while len(self.planned) > PLAN_CACHE_SIZE:
            self.planned.popitem(last=False)
        self.plans.clear()


def _failed_input(node: Node):
    """The ERROR leaf ``node`` depends on, if any."""
    return first_reached(node, lambda n: n.op is Op.ERROR)


class PlanKey:
    """A structural key with its hash computed once (dict lookups would rehash a tuple each time)."""

    __slots__ = ("parts", "_hash")

    def __init__(self, parts: tuple):
        self.parts = parts
        self._hash = hash(parts)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other) -> bool:
        return self is other or (self._hash == other._hash and self.parts == other.parts)
