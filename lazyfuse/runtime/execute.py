"""Running one drain's plan, phase by phase: allocate, launch metadata, compile (the build path
only), launch, and after a failed launch salvage what can still be computed; then realize.

All allocations of a drain happen before its first launch, so a failing allocation (say, a
``CaptureAllocationError``) leaves every live tensor as it was. A failed launch loses only what
needed it: the rest stays pending for the next drain.
"""
from __future__ import annotations

import operator
import struct
import weakref

from ..errors import DeviceError, LazyfuseError, torch_refusal
from ..ir.node import Node, Op
from .backend import StepKind
from .build import trace
from .collectives import Schedule, settle
from .pool import DATA, META, SCRATCH, size_class
from .stream import memory_of

# (hot-path aliases: an Enum member read costs ~150 ns on Python 3.11)
KERNEL = StepKind.KERNEL
BUFFER = Op.BUFFER
_block_of = operator.attrgetter("block")


def execute(engine, plan, roots, build) -> None:
    """Allocate, compile (``build``: the build path's (leaves, scalars)), bind and launch: on
    the device's asynchronous stream where it takes the plan (``runtime/stream.py``), after
    everything queued where not, and where the build path or tuning reads the bound buffers."""
    device = engine.device
    stream = device.stream
    kept = None
    if build is None and plan.memoized and plan.untuned is None and not device.capturing and (
            stream is None or stream.runs_inline(plan)) and device.backend.reuses_launches:
        kept = engine.pool.take_kept(plan.allocations)
        if launch_memo(engine, plan, roots, kept):
            return
    if stream is not None and (stream.busy() or stream.failures) and (
            build is not None or plan.untuned is not None or not stream.takes(plan)):
        stream.synchronize()
    tracking = device.capture_tracking
    cause = lambda: tracking.cause(plan, build is not None)  # noqa: E731 (only built on failure)
    root_bufs, temps = allocate(engine, plan, roots, cause, kept)
    metas = launch_metadata(engine, plan, build is not None, cause)
    tape = engine.tape
    bound = tape + root_bufs + temps if temps else tape + root_bufs
    if build is not None:
        if plan.origin == "planned":   # a rebound or loaded plan's steps came compiled
            compile_plan(engine, plan, roots, root_bufs, temps, build)
        engine.remember(plan)
    elif plan.untuned is not None and not engine.device.capturing:
        engine.device.backend.tune_plan(plan, engine.stats, bound, tape)   # off the build path (autotune.Deferred)
        engine.store(plan)
    if stream is not None and stream.takes(plan):
        enqueue(stream, engine, plan, roots, root_bufs, metas, bound)
    else:
        launch(engine, plan, roots, root_bufs, metas, bound)


def allocate(engine, plan, roots, cause, kept=None) -> tuple:
    """The buffers of the roots not yet realized and of the plan's temporaries, from the pool:
    those its kept blocks serve taken in one go (``MemoryPool.take_kept``; ``kept``: already
    taken), the rest one by one."""
    pool = engine.pool
    label = plan.label
    specs = plan.allocations
    if specs is None:   # (the same for every drain of the plan's key, which says which roots have buffers)
        specs = plan.allocations = [(dt, n, (DATA, size_class(max(n, 1) * dt.itemsize))) for dt, n in
                                    [(s.dtype, s.numel) for s in roots if s.buffer is None] + plan.temps]
    if kept is None:
        kept = pool.take_kept(specs)   # (a Buffer is true, a block not kept None)
    n = len(roots)
    if len(specs) - len(plan.temps) == n and None not in kept:   # the steady state: every root new, all kept
        return kept[:n], kept[n:]
    kept = iter(kept)
    root_bufs = []
    try:
        for s in roots:
            buf = s.buffer
            if buf is None:
                buf = next(kept) or pool.buffer(s.dtype, s.numel, DATA, f"the output of {label}", cause)
            root_bufs.append(buf)
        temps = [next(kept) or pool.buffer(dt, n, DATA, f"an intermediate of {label}", cause)
                 for dt, n in plan.temps] if plan.temps else []
    except DeviceError as e:
        # out of memory: the value that asked (every root, for an intermediate) can never be
        # computed, so it fails on its reads; the rest stays pending for the next drain
        for s in roots[len(root_bufs):len(root_bufs) + 1] if len(root_bufs) < len(roots) else roots:
            engine.poison(s, e)
        raise
    return root_bufs, temps


def launch_metadata(engine, plan, build: bool, cause) -> list:
    """One metadata block per step: throw-away scratch on the build path; on the steady-state
    path the plan's own, allocated on its first steady-state launch and reused after."""
    backend, pool = engine.device.backend, engine.pool
    if build:
        return [backend.new_meta(pool, st.meta_words, SCRATCH, f"build-path metadata of {st.name}", cause)
                for st in plan.steps]
    if plan.metas is None:
        plan.metas = [backend.new_meta(pool, st.meta_words, META,
                                       f"launch metadata of {st.name} (first steady-state launch)", cause)
                      for st in plan.steps]
    return plan.metas


def compile_plan(engine, plan, roots, root_bufs, temps, build) -> None:
    """Compile and tune the plan's steps on this drain's buffers; a failure poisons every root."""
    leaves, scalars = build
    try:
        engine.device.backend.compile_plan(plan, engine.stats, leaves, root_bufs, temps, scalars)
    except Exception as e:
        for s in roots:
            engine.poison(s, e)
        raise


def launch(engine, plan, roots, root_bufs, metas, bound) -> None:
    """Write each step's metadata and make its call, then run the calls in order. In a plan with
    collectives, a call waits for those in flight whose buffers it touches (``Schedule``: the
    first drain of a plan makes it, on that drain's buffers)."""
    device = engine.device
    tape = engine.tape
    done = at = 0   # steps run; the step being prepared or run
    lost = frozenset()   # steps before ``done`` that failed after all: collectives whose wait raised
    kept = frozenset()   # roots of a failed step computed right all the same (``salvage``)
    waits = plan.waits
    if waits is True:
        waits = plan.waits = Schedule(plan.steps, [st.bind(bound) for st in plan.steps])
    memo, blocks = LaunchMemo.find(device, plan, root_bufs, metas, bound)
    calls = [] if memo is None else memo.calls
    try:
        with device.launching():
            if memo is None:
                plan.written = None   # (until all are written)
                for at, (step, meta) in enumerate(zip(plan.steps, metas)):
                    if step.kind is KERNEL or step.scalars:
                        meta.write(step.header, step.bind_scalars(tape))
                    calls.append(device.call(step, step.bind(bound), meta, waits and waits.wrapper(at, calls)))
                if metas is plan.metas:
                    plan.written = scalar_words(plan, tape)
                if blocks is not None:
                    LaunchMemo.keep(plan, root_bufs, metas, blocks, calls)
            else:
                memo.write_scalars(plan, metas, tape)
            for at, call in enumerate(calls):
                call()
                done += 1
    except BaseException as e:
        # a collective fails at a later launch's wait for it: it is the failed step (not the one
        # that waited), and any other still in flight is waited out first (lost too if it fails)
        collective = getattr(e, "step_index", None)
        if waits:
            done += getattr(e, "step_ran", False)   # a wait after the last step's own launch raised
            lost = settle(calls) | ({collective} if collective is not None else set())
        failed = lost | {at} if isinstance(e, Exception) and collective is None else lost
        kept = salvage(engine, plan, roots, root_bufs, failed, done, lost, e)
        if collective is None:
            refuse_extern(plan, at, e)
        raise
    finally:
        realize(engine.stats, plan, roots, root_bufs, done, lost, kept)


def launch_memo(engine, plan, roots, kept) -> bool:
    """The steady state's drain in one pass: where the buffers the pool's kept blocks gave
    (``kept``: every root's, then the temporaries') bind the blocks of a LaunchMemo of the plan,
    its calls run as they are — ``launch``'s memo branch without the general work around it
    (``allocate``'s fallbacks, making calls, collectives, the stream: ``execute`` takes this path
    only for a plan whose every root is new, with nothing queued on the stream or tuning left).
    False, with nothing run, where no memo applies: the general path then binds ``kept``."""
    if None in kept:
        return False
    memo = kept[0].block.views.get(id(plan))
    metas = plan.metas
    if memo is None or memo.plan is not plan or memo.metas is not metas:
        return False
    tape = engine.tape
    try:
        if memo.blocks != tuple(map(_block_of, plan.bind_all(tape + kept))):
            return False
    except AttributeError:   # an imported input (ExternalBuffer: no block) where the memo's drain had a pooled one
        return False
    if plan.n_scalars:
        memo.write_scalars(plan, metas, tape)
    done = 0   # (realize and salvage read the roots' buffers from ``kept``'s first entries)
    right = frozenset()
    try:
        with engine.device.launching():
            for call in memo.calls:
                call()
                done += 1
    except BaseException as e:
        right = salvage(engine, plan, roots, kept, {done} if isinstance(e, Exception) else frozenset(), done,
                        frozenset(), e)
        refuse_extern(plan, done, e)
        raise
    finally:
        realize(engine.stats, plan, roots, kept, done, frozenset(), right)
    return True


def refuse_extern(plan, at: int, error: BaseException) -> None:
    """torch's refusal inside extern step ``at`` raised as a LazyfuseError naming the op."""
    if at < len(plan.steps) and plan.steps[at].kind is StepKind.EXTERN and isinstance(error, Exception) \
            and not isinstance(error, LazyfuseError):
        raise torch_refusal(plan.steps[at].name, error) from error


def enqueue(stream, engine, plan, roots, root_bufs, metas, bound) -> None:
    """``launch`` on the asynchronous stream: the calls made (or the memo's taken) and their
    metadata written here, after the queued launches that read that metadata; the roots
    realized at once (their buffers are written in stream order); the calls run by the
    stream's worker. A failure there is the stream's to report (``LaunchStream.deliver``)."""
    device = engine.device
    tape = engine.tape
    memo, blocks = LaunchMemo.find(device, plan, root_bufs, metas, bound)
    if memo is None:
        stream.wait_metas(metas)
        calls = []
        plan.written = None
        for step, meta in zip(plan.steps, metas):
            if step.kind is KERNEL or step.scalars:
                meta.write(step.header, step.bind_scalars(tape))
            calls.append(device.call(step, step.bind(bound), meta))
        if metas is plan.metas:
            plan.written = scalar_words(plan, tape)
        if blocks is not None:
            LaunchMemo.keep(plan, root_bufs, metas, blocks, calls)
        else:
            blocks = tuple([memory_of(b) for b in plan.bind_all(bound)])
    else:
        calls = memo.calls
        words = scalar_words(plan, tape)
        if words is None or words != plan.written:
            stream.wait_metas(metas)
            memo.write_scalars(plan, metas, tape)
    root_steps = plan.root_steps
    ready = {}
    for k, buf in enumerate(root_bufs):
        mem = memory_of(buf)
        ready[mem] = max(ready.get(mem, -1), root_steps[k])
    realize(engine.stats, plan, roots, root_bufs, len(calls), frozenset())
    stream.submit(calls, blocks, ready, metas,
                  [(root_steps[k], memory_of(buf), weakref.ref(roots[k].current)) for k, buf in enumerate(root_bufs)])


class LaunchMemo:
    """The calls a steady-state drain of a plan made, kept for the next drain that binds the same
    pool blocks with the same launch metadata: making them again (each step's buffers gathered,
    its call looked up) costs more than some of the launches. Kept on the block of the plan's
    first root, so it lives no longer than that block (a root alternates between two blocks
    while the caller holds the previous result: each keeps its own memo).

    Only where the backend says a call binds nothing but blocks and metadata
    (``Backend.reuses_launches``), for plans without random streams or collectives
    (``CompiledPlan.reusable``), on the steady-state path (its metadata the plan's), tuned (its
    kernels final), outside a capture (whose run records every call it makes), and on pool
    blocks only: imported memory is never memoized
    (the memo would keep it alive). The runtime scalars are written again only when they changed.
    """

    __slots__ = ("plan", "metas", "blocks", "calls")

    def __init__(self, plan, metas, blocks, calls):
        self.plan, self.metas, self.blocks, self.calls = plan, metas, blocks, calls

    @staticmethod
    def find(device, plan, root_bufs, metas, bound) -> tuple:
        """``(memo, blocks)``: the memo that applies to this drain, else None and the blocks the
        drain binds (None where no memo may be kept)."""
        if (not plan.reusable or metas is not plan.metas or device.capturing or plan.untuned is not None
                or not device.backend.reuses_launches):   # (the build path's metadata is scratch: never reused)
            return None, None
        try:
            blocks = tuple(map(_block_of, plan.bind_all(bound)))   # (no listcomp frame)
            # (an int key, as the library calls' memos on blocks (runtime/cpu.memo_on_blocks): typed
            # views have (dtype, View) keys, and each entry holds its owner, so two ids never meet)
            memo = root_bufs[0].block.views.get(id(plan))
        except AttributeError:   # an imported buffer (ExternalBuffer) has no block
            return None, None
        # (blocks compare by identity; the memo holds the plan, so its id is not reused meanwhile)
        if memo is not None and memo.plan is plan and memo.metas is metas and memo.blocks == blocks:
            return memo, blocks
        return None, blocks

    @staticmethod
    def keep(plan, root_bufs, metas, blocks, calls) -> None:
        # every root new (the key says so for every drain of the plan): ``launch_memo`` may serve it
        plan.memoized = len(plan.allocations) == len(root_bufs) + len(plan.temps)
        views = root_bufs[0].block.views
        if len(views) >= 16:   # (as the block's other memos: a block many plans use stays small)
            views.clear()
        views[id(plan)] = LaunchMemo(plan, metas, blocks, calls)

    @staticmethod
    def write_scalars(plan, metas, tape) -> None:
        """Write the runtime scalars where one differs from those last written to the plan's
        metadata (``plan.written``: whichever memo's drain, or the calls' maker, wrote them),
        compared as the words they are written as (0.0 and -0.0 compare equal as floats)."""
        words = scalar_words(plan, tape)
        if words is None or words != plan.written:
            plan.written = None
            for step, meta in zip(plan.steps, metas):
                if step.scalars:
                    meta.write(step.header, step.bind_scalars(tape))
            plan.written = words


def scalar_words(plan, tape):
    """The metadata words of the plan's runtime scalars on this tape, or None where a value is
    not of its scalar's kind (then they are written, never compared)."""
    try:
        return plan.scalar_words(*plan.scalars_all(tape))
    except struct.error:
        return None


def ran(step: int, done: int, lost) -> bool:
    """Whether plan step ``step`` ran: one of the first ``done``, and not a collective that failed."""
    return step < done and step not in lost


def salvage(engine, plan, roots, root_bufs, failed_steps, done: int, lost, error: BaseException) -> frozenset:
    """After the steps ``failed_steps`` failed (``done`` steps ran, but for those of ``lost``),
    poison the roots that can no longer be computed; the others stay pending for the next drain,
    but for those the failed kernels computed right all the same, returned (positions in
    ``roots``: ``flag_failures``), which ``realize`` keeps as it keeps the roots of steps that ran.

    After a KeyboardInterrupt nothing failed: all of it stays pending. The failed node is found
    in this drain's trace (walked only here): a cached plan's own graph holds the nodes of the
    drain that built it (same positions, other objects).
    """
    nodes = trace(roots)[0] if failed_steps else None
    failed, right = set(), frozenset()
    for j in failed_steps if nodes else ():
        culprits, computed = flag_failures(nodes, plan, j, roots, error)
        failed |= culprits
        right |= computed
    # roots whose in-place writes ran (their buffer existed before this drain)
    written = [k for k in range(len(roots)) if (ran(plan.root_steps[k], done, lost) or k in right)
               and roots[k].buffer is not None]
    written_nodes = {id(roots[k].current) for k in written}
    written_bufs = {id(root_bufs[k]) for k in written}
    # the buffers a failed step may have written part of: its roots' (an in-place root's is the
    # storage's own buffer), and those of the in-place writes that ran
    clobbered = written_bufs | {id(root_bufs[k]) for k in range(len(roots)) if plan.root_steps[k] in failed_steps}
    for k, s in enumerate(roots):
        if ran(plan.root_steps[k], done, lost) or k in right:
            continue
        if nodes and first_reached(s.current, lambda n: id(n) in failed) is not None:
            if not undo_last_write(s, failed, written_nodes, clobbered):
                engine.poison(s, error)
        elif written and first_reached(s.current, lambda n: id(n) in written_nodes or (
                n.op is Op.BUFFER and id(n.arg) in written_bufs)) is not None:
            # run at the next drain, it would recompute that write from the buffer as it
            # is now (applying it twice) or read the buffer after it: refuse instead
            engine.poison(s, DeviceError(
                f"not computed: its drain on {engine.device.name} stopped ({error!r}) after in-place "
                "writes it reads had run, so it can no longer be computed as recorded; recompute it"))
    return right


def undo_last_write(s, failed, written_nodes, clobbered) -> bool:
    """Give storage ``s`` back its version before its last in-place write, which failed
    (``x.add_(1); x.index_add_(0, bad, v)`` leaves ``x0 + 1``, as torch's refused call does),
    where that version can still be computed as recorded: it reads no failed node, no in-place
    write that ran, and no buffer the failed step may have written part of. False: it cannot."""
    before = s.before
    if before is None or first_reached(before, lambda n: id(n) in failed or id(n) in written_nodes or (
            n.op is Op.BUFFER and id(n.arg) in clobbered)) is not None:
        return False
    s.current, s.before = before, None
    s.version -= 1   # (torch counts a write once it has run)
    return True


def flag_failures(nodes, plan, j, roots, error) -> tuple:
    """``(ids of the nodes whose values are lost, positions of roots computed right)`` for failed
    step ``j``. Where its kernel's flag raised the error, which names the ops that can fail
    (``error.flag_ops``: an index check, an integer division), those ops are the lost nodes, and
    the kernel ran to its end: the roots it writes that read none of them hold their values (in
    place too). Otherwise the step's outputs are lost, and none of its roots is right."""
    group = plan.steps[j].group
    flag_ops = getattr(error, "flag_ops", None)
    if flag_ops is None:
        return {id(nodes[o]) for o in group.outputs}, frozenset()
    culprits = {id(nodes[m]) for m in group.members if nodes[m].op in flag_ops}
    return culprits, frozenset(k for k, step in enumerate(plan.root_steps)
                               if step == j and first_reached(roots[k].current, lambda n: id(n) in culprits) is None)


def realize(stats, plan, roots, root_bufs, done: int, lost, right=frozenset()) -> None:
    """Count the ``done`` launches and turn each root whose kernel ran (or that a failed kernel
    computed ``right``: ``salvage``) into a leaf on its buffer: even if a later launch failed
    (or was interrupted), since re-running an in-place write at the next drain would apply it
    twice (a collective that failed at its wait did not run)."""
    stats.kernels_launched += done
    every = done == len(plan.steps) and not lost   # (the common case: no test per root)
    if plan.n_extern:
        stats.extern_launches += plan.n_extern if done == len(plan.steps) else \
            sum(1 for st in plan.steps[:done] if st.kind is StepKind.EXTERN)
    for k, (s, buf, step) in enumerate(zip(roots, root_bufs, plan.root_steps)):
        if every or ran(step, done, lost) or k in right:
            s.buffer = buf
            s.current = Node(BUFFER, (), s.dtype, s.shape, buf)
            s.before = None


def first_reached(node: Node, hit):
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
