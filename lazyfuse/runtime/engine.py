"""The engine: the per-device pending queue, the drain, elision and the plan cache.

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
   live subgraph; a program that drops other results gets a plan of its own;
3. on a plan-cache miss takes the **build path**: trace the live DAG (``trace``), plan
   (ir.planner), lower (codegen.lower), compile and autotune, launching with throw-away
   scratch metadata; the plan also records where each of its leaves and scalars sits on the
   tape (a function of the key, so it holds for every drain with the same key);
   on a hit takes the **steady-state path**: the cached kernels, with per-kernel launch
   metadata allocated from the pool on the first steady-state launch and reused after
   (docs/semantics.md, The plan cache and its two paths: they allocate different buffers, on
   purpose);
4. binds buffers (tape leaves, fresh outputs and temporaries from the pool) and scalars by
   prebuilt gathers, launches, and turns every realized storage's value into a leaf.

All allocations of a drain happen before its first launch, so a failing allocation (say, a
``CaptureAllocationError``) leaves every live tensor as it was.
"""
from __future__ import annotations

import dataclasses
import operator
import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from .. import config
from ..errors import CaptureError, DeviceError
from ..ir.node import Kind, Node, Op, post_order, sources
from ..ir.planner import DrainGraph, plan as make_plan
from ..ir.shapes import prod
from ..ir.view import contiguous_view
from .backend import LibraryCall, StepKind
from .collectives import Schedule, settle
from .pool import DATA, META, SCRATCH
from .recompile import MissLog

MAX_PENDING = config.MAX_PENDING.get()
PLAN_CACHE_SIZE = config.PLAN_CACHE.get()
SCALAR = Op.SCALAR
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

    __slots__ = ("engine", "dtype", "shape", "view", "current", "buffer", "version", "__weakref__")

    def __init__(self, engine, node: Node):
        self.engine = engine
        self.dtype = node.dtype
        self.shape = node.shape
        self.view = contiguous_view(node.shape)   # how a tensor reads the whole storage
        self.current = node
        self.buffer = None
        self.version = 0   # in-place writes so far: autograd checks the values it saved are unchanged
        if node.op.pending:
            engine.record(self)

    @property
    def numel(self) -> int:
        return self.view.numel

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


@dataclass
class Step:
    """One launch of a compiled plan: a kernel or a library call, and what it binds."""
    name: str
    kind: StepKind
    slots: list               # buffer slot of each argument
    scalars: list             # position of each runtime scalar in the trace's scalar list
    header: list              # metadata words before the scalars (loop extents)
    kernel: object = None     # codegen Kernel (kernels) or LibraryCall (library)
    compiled: object = None   # backend object
    group: object = None      # the planner's Group, for explain
    bind: object = None       # bound -> its buffers, ``bound`` being the tape, then root buffers, then temps
    bind_scalars: object = None  # tape -> its runtime scalar values
    rng_words: tuple = ()     # (seed word, offset word) of each random stream (set from the generator on replay)
    source: str = ""
    config: object = None

    @property
    def meta_words(self) -> int:
        return len(self.header) + len(self.scalars)


@dataclass
class CompiledPlan:
    key: tuple
    steps: list
    temps: list               # (dtype, numel) per temporary slot
    graph: DrainGraph
    metas: list | None = None  # steady-state launch metadata, one per step, made on first use
    label: str = ""
    n_ops: int = 0            # recorded ops this plan executes (for ops_elided)
    root_steps: tuple = ()    # for each live root, the step that writes its final value
    n_extern: int = 0         # extern steps (torch calls with no native lowering)
    waits: object = None      # where the launches wait for the plan's collectives (None: it has none)


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
        # planned and compiled plans whose path state a capture reset (see start_tracking): the
        # next drain of their key takes the build path again, without planning or lowering
        self.planned: OrderedDict = OrderedDict()
        self.lock = threading.RLock()
        self._draining = False
        self.executed_keys: set | None = None  # plan keys run since graph_prepare (for error messages)
        self.captured_plans: list = []
        # the ERROR leaves of values that failed to compute (their readers fail too), held weakly:
        # once none is left, no pending op can read one and drains stop looking for them
        self.poisoned = weakref.WeakSet()
        # storages the next drain computes even when their tensors are dropped: collectives, which
        # every rank must run (lazyfuse.distributed); held until a drain consumes the queue
        self.pinned: list = []
        self.misses = MissLog()  # the last plan-cache misses, explained on demand (lf.explain, LAZYFUSE_DEBUG)

    # -- recording -----------------------------------------------------------------------------
    def record(self, storage: Storage) -> None:
        """Queue a storage whose value is a new pending node; enter the node on the tape.

        The hot path of every op: a pending node always has sources, which are usually on
        the tape already or fresh scalars, so both are entered inline here. (The lock is taken
        by explicit calls: a ``with`` block costs twice as much, and this runs once per op.)
        """
        node = storage.current
        lock = self.lock
        lock.acquire()
        try:
            tape = self.tape
            if node.tape is not tape:
                srcs = node.srcs
                for src in srcs:
                    if src.tape is not tape:
                        if src.op is SCALAR:
                            src.tape = tape
                            src.tpos = len(tape)
                            tape.append(src.arg)
                            self.descs.append((SCALAR, src.dtype))
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
                self.descs.append((node.op, node.dtype, node.shape, node.arg, at))
            pending = self.pending
            pending.append(_weakref(storage))
            self.pending_ops += 1
            self.stats.ops_recorded += 1
            full = len(pending) >= MAX_PENDING
        finally:
            lock.release()
        if full:
            self._drain()

    def _enter(self, root: Node) -> None:
        """Put ``root`` and every source of it not yet on the tape there, sources first."""
        tape = self.tape
        for node in post_order((root,), lambda n: [s for s in n.srcs if s.tape is not tape]):
            self._append(node)

    def _append(self, node: Node) -> None:
        """Enter one node whose sources are on the tape, with its structural descriptor."""
        tape = self.tape
        pos = len(tape)
        op = node.op
        value = None
        if op is Op.BUFFER:
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
        if node.op is not Op.BUFFER or node.arg is not buf or self.executed_keys is not None:
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
        roots = []
        for ref in self.pending:
            s = ref()
            if s is not None and s.current.op.pending:
                roots.append(s)
        if len(roots) > 1:
            roots = list(dict.fromkeys(roots))   # a storage written in place is queued once per write
        if self.poisoned and roots:
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
        self.poisoned.add(storage.current)

    def _drain_locked(self) -> None:
        roots = self._live_roots()
        recorded = self.pending_ops
        if not roots:
            self._consume()
            self.stats.ops_elided += recorded
            return
        leaf_first = self.leaf_first
        live = tuple([(s.current.tpos, None if s.buffer is None else leaf_first.get(id(s.buffer), -1))
                      for s in roots])
        key = PlanKey((tuple(self.descs), live))
        plan = self.plans.get(key)
        if plan is None:
            if self.device.capturing:
                # the build path compiles, autotunes and allocates scratch buffers: never inside a capture
                from ..errors import CaptureAllocationError
                need = [(s.numel * s.dtype.itemsize, s.dtype.name) for s in roots if s.buffer is None]
                size = f"{need[0][0]} bytes ({need[0][1]}) for its first output" if need else "scratch buffers"
                raise CaptureAllocationError(
                    f"capture needed a fresh allocation of {size}: the capture run met a new fused plan "
                    f"({len(trace(roots)[0])} nodes) on {self.device.name}, and building it would compile, "
                    "autotune and allocate mid-capture. " + self._capture_cause(None, True))
            self.misses.add(self.device.name, key, self.plans)
            plan, build = self._build(key, roots)
        else:
            build = None
            self.plans.move_to_end(key)
        self._execute(plan, roots, build)
        # success: the queue is consumed (on failure it stays, so nothing live is lost)
        self._consume()
        self.stats.ops_elided += max(0, recorded - plan.n_ops)
        if build is not None:
            self.stats.fusion_cache_misses += 1
        else:
            self.stats.fusion_cache_hits += 1
        if self.executed_keys is not None:
            self.executed_keys.add(key)
        if self.device.capturing:
            self.captured_plans.append(plan)

    # -- build path ------------------------------------------------------------------------------
    def _build(self, key, roots) -> tuple:
        """A new plan for ``key``, and the (leaves, scalars) its compilation binds this once."""
        nodes, leaves, scalars, targets = trace(roots)
        reused = self.planned.pop(key, None)
        if reused is not None:
            return reused, (leaves, scalars)
        graph = DrainGraph(nodes, [r for r, _ in targets], [t for _, t in targets])
        planned, steps = plan_and_lower(graph, matmul_template(self.device), lambda p: self._lower(nodes, p))
        temps = [None] * planned.n_temps
        for i, slot in planned.slots.items():
            if slot[0] == "temp":
                temps[slot[1]] = (nodes[i].dtype, prod(nodes[i].shape))
        n_ops = sum(1 for n in nodes if n.is_pending and n.kind is not Kind.VIEW)
        step_of = {o: j for j, st in enumerate(steps) for o in st.group.outputs}
        # where the steady state finds what this drain binds: every node of the trace is on the
        # tape, whose length, like each node's position, is the same for every drain of this key
        n_tape = len(self.tape)
        base = {"root": n_tape, "temp": n_tape + len(targets)}
        scalar_tape = [n.tpos for n in nodes if n.op is Op.SCALAR]   # trace's scalar order
        for st in steps:
            st.bind = gather([nodes[i].tpos if kind == "leaf" else base[kind] + i for kind, i in st.slots])
            st.bind_scalars = gather([scalar_tape[i] for i in st.scalars])
        plan = CompiledPlan(key, steps, temps, structure_of(graph), n_ops=n_ops,
                            root_steps=tuple(step_of[r] for r in graph.roots))
        plan.label = " + ".join(s.name for s in steps)
        plan.n_extern = sum(1 for s in steps if s.kind is StepKind.EXTERN)
        plan.waits = any(s.kind is StepKind.COLLECTIVE for s in steps) or None   # a Schedule at its first launch
        return plan, (leaves, scalars)

    def _lower(self, nodes, planned) -> list:
        from ..codegen.lower import lower_group
        pos = {id(n): i for i, n in enumerate(nodes)}
        scalar_pos = {}
        for i, n in enumerate(nodes):
            if n.op is Op.SCALAR:
                scalar_pos[i] = len(scalar_pos)
        producers = planned.producers()
        rng_streams = [(pos[id(n.srcs[0])], pos[id(n.srcs[1])]) for n in nodes if n.op in (Op.RAND, Op.RANDN)]
        steps = []
        for grp in planned.groups:
            out = nodes[grp.output]
            if out.kind is Kind.EXTERN and grp.matmul is None:
                steps.append(self._extern_step(nodes, pos, grp, planned.slots, scalar_pos))
                continue
            kernel, low = lower_group(nodes, pos, grp, planned.slots, producers, f"k{len(steps)}")
            header = _header(kernel)
            word = {i: len(header) + k for k, i in enumerate(low.scalar_nodes)}
            rng = tuple((word[sd], word[off]) for sd, off in rng_streams if off in word)
            steps.append(Step(kernel.name, StepKind.KERNEL, low.arg_slots, [scalar_pos[i] for i in low.scalar_nodes],
                              header, kernel, group=grp, rng_words=rng))
        return steps

    def _extern_step(self, nodes, pos, grp, slots, scalar_pos) -> Step:
        out = nodes[grp.output]
        views = []
        arg_slots = []
        scalars = [scalar_pos[pos[id(s)]] for s in out.srcs if s.op is Op.SCALAR]   # a random extern's seed, offset
        for s in out.srcs:
            if s.op is Op.SCALAR:
                continue
            if s.kind is Kind.VIEW:
                base = s.srcs[0]
                views.append(s.arg)
            else:
                base = s
                views.append(None)
            arg_slots.append(slots[pos[id(base)]])
        arg_slots.append(slots[grp.output])
        base_shapes = tuple((s.srcs[0] if s.kind is Kind.VIEW else s).shape for s in out.srcs if s.op is not Op.SCALAR)
        name = f"extern {out.arg.name}" if out.op is Op.EXTERN else out.op.label
        return Step(name, StepKind(out.op.label), arg_slots, scalars, [],
                    LibraryCall(tuple(views), out.shape, base_shapes, out.arg), group=grp,
                    rng_words=((0, 1),) if scalars else ())   # a random extern: (seed, offset) in words 0, 1

    # -- execution ---------------------------------------------------------------------------------
    def _execute(self, plan: CompiledPlan, roots, build) -> None:
        """Allocate, compile (``build``: the build path's (leaves, scalars)), bind and launch."""
        device = self.device
        pool = self.pool
        cause = lambda: self._capture_cause(plan, build is not None)  # noqa: E731 (only built on failure)
        label = plan.label
        root_bufs = []
        try:
            for s in roots:
                buf = s.buffer
                if buf is None:
                    buf = pool.buffer(s.dtype, s.numel, DATA, f"the output of {label}", cause)
                root_bufs.append(buf)
            temps = [pool.buffer(dt, n, DATA, f"an intermediate of {label}", cause) for dt, n in plan.temps]
        except DeviceError as e:
            # out of memory: the value that asked (every root, for an intermediate) can never be
            # computed, so it fails on its reads; the rest stays pending for the next drain
            for s in roots[len(root_bufs):len(root_bufs) + 1] if len(root_bufs) < len(roots) else roots:
                self.poison(s, e)
            raise
        if build is not None:
            metas = [device.backend.new_meta(pool, st.meta_words, SCRATCH, f"build-path metadata of {st.name}", cause)
                     for st in plan.steps]
        else:
            if plan.metas is None:
                plan.metas = [device.backend.new_meta(pool, st.meta_words, META,
                                                      f"launch metadata of {st.name} (first steady-state launch)",
                                                      cause) for st in plan.steps]
            metas = plan.metas
        tape = self.tape
        bound = tape + root_bufs + temps if temps else tape + root_bufs
        if build is not None:
            try:
                device.backend.compile_plan(plan, self.stats, build[0], root_bufs, temps, build[1])
            except Exception as e:
                for s in roots:
                    self.poison(s, e)
                raise
            self.plans[plan.key] = plan
            while len(self.plans) > PLAN_CACHE_SIZE:
                self.plans.popitem(last=False)
                self.stats.plan_cache_evictions += 1
        done = at = 0   # steps run; the step being prepared or run
        lost = frozenset()   # steps before ``done`` that failed after all: collectives whose wait raised
        waits = plan.waits
        if waits is True:
            waits = plan.waits = Schedule(plan.steps, [st.bind(bound) for st in plan.steps])
        calls = []
        try:
            with device.launching():
                for at, (step, meta) in enumerate(zip(plan.steps, metas)):
                    if step.kind is StepKind.KERNEL or step.scalars:
                        meta.write(step.header, step.bind_scalars(tape))
                    calls.append(device.call(step, step.bind(bound), meta, waits and waits.wrapper(at, calls)))
                for at, call in enumerate(calls):
                    call()
                    done += 1
        except BaseException as e:
            # only what needed the failed launch is lost; the rest stays pending for the next drain
            # (after a KeyboardInterrupt nothing failed: all of it stays pending). The failed node
            # is found in this drain's trace (walked only here): a cached plan's own graph holds
            # the nodes of the drain that built it (same positions, other objects). A collective
            # fails at a later launch's wait for it: it is the failed step, and any other still
            # in flight is waited out first (and lost too if it fails)
            collective = getattr(e, "step_index", None)   # set on a collective's failure
            if waits:
                done += getattr(e, "step_ran", False)   # a wait after the last step's own launch raised
                lost = settle(calls) | ({collective} if collective is not None else set())
            failed_steps = lost | {at} if isinstance(e, Exception) and collective is None else lost
            nodes = trace(roots)[0] if failed_steps else None
            failed = {id(nodes[o]) for j in failed_steps for o in plan.steps[j].group.outputs} if nodes else None
            # roots whose in-place writes ran (their buffer existed before this drain)
            written = [k for k in range(len(roots)) if ran(plan.root_steps[k], done, lost) and roots[k].buffer is not None]
            written_nodes = {id(roots[k].current) for k in written}
            written_bufs = {id(root_bufs[k]) for k in written}
            for k, s in enumerate(roots):
                if ran(plan.root_steps[k], done, lost):
                    continue
                if failed is not None and _first_reached(s.current, lambda n: id(n) in failed) is not None:
                    self.poison(s, e)
                elif written and _first_reached(s.current, lambda n: id(n) in written_nodes or (
                        n.op is Op.BUFFER and id(n.arg) in written_bufs)) is not None:
                    # run at the next drain, it would recompute that write from the buffer as it
                    # is now (applying it twice) or read the buffer after it: refuse instead
                    self.poison(s, DeviceError(
                        f"not computed: its drain on {self.device.name} stopped ({e!r}) after in-place "
                        "writes it reads had run, so it can no longer be computed as recorded; recompute it"))
            raise
        finally:
            self.stats.kernels_launched += done
            if plan.n_extern:
                self.stats.extern_launches += sum(1 for st in plan.steps[:done] if st.kind is StepKind.EXTERN)
            # roots whose kernel ran are realized even if a later launch failed (or was
            # interrupted): re-running an in-place write at the next drain would apply it twice
            for k, (s, buf) in enumerate(zip(roots, root_bufs)):
                if ran(plan.root_steps[k], done, lost):
                    s.buffer = buf
                    s.current = Node(Op.BUFFER, (), s.dtype, s.shape, buf)
        if drain_hook is not None:
            drain_hook(self.device, plan, build is not None)

    def _capture_cause(self, plan: CompiledPlan, build: bool) -> str:
        if self.executed_keys is None:
            return ""
        if plan is None or plan.key not in self.executed_keys:
            return ("Likely cause: the warmup never executed this plan — its outputs were dropped before they "
                    "were synced, so the lazy engine elided them and allocated nothing (hold_outputs=False?). "
                    "Hold each warmup output across lf.sync(). (Or the closure records a different program "
                    "after its first run — state created lazily, like optimizer moments: warm up at least "
                    "twice.)")
        if not build and plan.metas is None:
            return ("Likely cause: warmup too short — the warmup only took the build path for this plan, so the "
                    "capture run is its first steady-state run and allocates launch metadata "
                    "(warmup_iters=1?). Warm up at least twice (the default is 3).")
        return ("Likely cause: the capture run allocated more than the warmup did (a different shape or dtype, or "
                "an output of the warmup kept alive past its iteration).")

    # -- capture hooks --------------------------------------------------------------------------------
    def start_tracking(self) -> None:
        """Called by ``graph_prepare``, before the pool turns persistent.

        A capture starts with every plan's *path state* reset, so its warmup always takes the
        build path first and the steady-state path after — the same sequence whatever ran
        before, which is what makes the two reproduced bugs deterministic (docs/semantics.md, The two reproduced bugs). What is
        reset is which plans have run which path in this capture's pool (their launch
        metadata), not the planning: the plans move to ``planned``, planned, lowered and
        compiled, and a warmup's build path takes them from there (compiled code and tuning are
        cached too). The plans' metadata returns to the shared cache now, not to the
        capture's private segment.
        """
        with self.lock:
            for plan in self.plans.values():
                plan.metas = None
            self.planned.update(self.plans)
            while len(self.planned) > PLAN_CACHE_SIZE:
                self.planned.popitem(last=False)
            self.plans.clear()
            self.executed_keys = set()
            self.captured_plans = []

    def take_captured_metadata(self) -> list:
        """Hand the launch metadata of the plans a capture ran to the graph that recorded them.

        The graph's launches read those buffers at every replay, so they must never again be
        rewritten by an eager run of the same plan: the plan allocates new metadata on its
        next steady-state launch (outside the capture, where allocating is legal).
        """
        with self.lock:
            metas = []
            for plan in self.captured_plans:
                if plan.metas is not None:
                    metas.extend(plan.metas)
                    plan.metas = None
            self.captured_plans = []
            return metas

    def stop_tracking(self) -> None:
        self.executed_keys = None


def gather(positions: list):
    """A callable taking a sequence to the tuple of its items at ``positions`` (one C call for 2+)."""
    if len(positions) > 1:
        return operator.itemgetter(*positions)
    if positions:
        p = positions[0]
        return lambda seq: (seq[p],)
    return lambda seq: ()


def structure_of(graph: DrainGraph) -> DrainGraph:
    """A copy of a drain's graph without its buffers, for the cached plan (``lf.explain`` reads
    it): holding the build drain's own nodes would keep every buffer they read alive until the
    plan is evicted — a dropped input, say — though no later drain binds them."""
    copies = {}
    for n in graph.nodes:
        copies[id(n)] = Node(n.op, tuple([copies[id(s)] for s in n.srcs]), n.dtype, n.shape,
                             None if n.op is Op.BUFFER else n.arg)
    return dataclasses.replace(graph, nodes=list(copies.values()))


def plan_and_lower(graph: DrainGraph, template: frozenset, lower):
    """``(plan, lower(plan))``, re-planned with a node materialized each time the lowering
    finds one it cannot inline (``Unfusable``)."""
    from ..codegen.lower import Unfusable
    forced = {}
    while True:
        planned = make_plan(graph, forced, template)
        try:
            return planned, lower(planned)
        except Unfusable as u:
            if u.node in forced:
                raise
            forced[u.node] = u.reason


def matmul_template(device) -> frozenset:
    """The matmul dtypes ``device``'s backend computes in a template kernel with the fused
    epilogue inside (the planner's capability flag; empty: matmul is a library call)."""
    return device.backend.matmul_template


def ran(step: int, done: int, lost) -> bool:
    """Whether plan step ``step`` ran: one of the first ``done``, and not a collective that failed."""
    return step < done and step not in lost


def _first_reached(node: Node, hit):
    """The first node ``hit`` accepts among ``node`` and everything it reads (None if none): the
    failure paths' one graph walk (which input failed, what reads a failed or overwritten value)."""
    stack, seen = [node], set()
    while stack:
        n = stack.pop()
        if hit(n):
            return n
        if id(n) not in seen:
            seen.add(id(n))
            stack.extend(n.srcs)
    return None


def _failed_input(node: Node):
    """The ERROR leaf ``node`` depends on, if any."""
    return _first_reached(node, lambda n: n.op is Op.ERROR)


def _header(kernel) -> list:
    return [len(kernel.outer), *(v.extent for v in kernel.outer), len(kernel.inner),
            *(v.extent for v in kernel.inner)]


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


def trace(roots):
    """Topological order, bound leaves and scalars, and root targets of a drain's live DAG.

    The build path's (and ``lf.explain``'s) view of the work: one iterative post-order walk
    from the live roots. ``leaves`` maps a BUFFER node's index to its buffer; ``targets`` gives
    each root's node index and the index of the leaf whose buffer it overwrites (-1: a buffer
    the DAG does not read; None: a new buffer).
    """
    nodes = post_order([s.current for s in roots], sources)
    pos = {}
    leaves, leaf_by_buffer, scalars = {}, {}, []
    for i, node in enumerate(nodes):
        pos[id(node)] = i
        op = node.op
        if op is Op.BUFFER:
            leaf_by_buffer.setdefault(id(node.arg), i)
            leaves[i] = node.arg
        elif op is Op.SCALAR:
            scalars.append(node.arg)
    targets = []
    for s in roots:
        t = None if s.buffer is None else leaf_by_buffer.get(id(s.buffer), -1)
        targets.append((pos[id(s.current)], t))
    return nodes, leaves, scalars, targets
