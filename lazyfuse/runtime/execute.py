"""Running one drain's plan, phase by phase: allocate, launch metadata, compile (the build path
only), launch, and after a failed launch salvage what can still be computed; then realize.

All allocations of a drain happen before its first launch, so a failing allocation (say, a
``CaptureAllocationError``) leaves every live tensor as it was. A failed launch loses only what
needed it: the rest stays pending for the next drain.
"""
from __future__ import annotations

from ..errors import DeviceError
from ..ir.node import Node, Op
from .backend import StepKind
from .build import trace
from .collectives import Schedule, settle
from .pool import DATA, META, SCRATCH

KERNEL = StepKind.KERNEL   # (a hot-path alias: an Enum member read costs ~150 ns on Python 3.11)


def execute(engine, plan, roots, build) -> None:
    """Allocate, compile (``build``: the build path's (leaves, scalars)), bind and launch."""
    tracking = engine.device.capture_tracking
    cause = lambda: tracking.cause(plan, build is not None)  # noqa: E731 (only built on failure)
    root_bufs, temps = allocate(engine, plan, roots, cause)
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
    launch(engine, plan, roots, root_bufs, metas, bound)


def allocate(engine, plan, roots, cause) -> tuple:
    """The buffers of the roots not yet realized and of the plan's temporaries, from the pool."""
    pool = engine.pool
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
    waits = plan.waits
    if waits is True:
        waits = plan.waits = Schedule(plan.steps, [st.bind(bound) for st in plan.steps])
    calls = []
    try:
        with device.launching():
            for at, (step, meta) in enumerate(zip(plan.steps, metas)):
                if step.kind is KERNEL or step.scalars:
                    meta.write(step.header, step.bind_scalars(tape))
                calls.append(device.call(step, step.bind(bound), meta, waits and waits.wrapper(at, calls)))
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
        salvage(engine, plan, roots, root_bufs, failed, done, lost, e)
        raise
    finally:
        realize(engine.stats, plan, roots, root_bufs, done, lost)


def ran(step: int, done: int, lost) -> bool:
    """Whether plan step ``step`` ran: one of the first ``done``, and not a collective that failed."""
    return step < done and step not in lost


def salvage(engine, plan, roots, root_bufs, failed_steps, done: int, lost, error: BaseException) -> None:
    """After the steps ``failed_steps`` failed (``done`` steps ran, but for those of ``lost``),
    poison the roots that can no longer be computed; the others stay pending for the next drain.

    After a KeyboardInterrupt nothing failed: all of it stays pending. The failed node is found
    in this drain's trace (walked only here): a cached plan's own graph holds the nodes of the
    drain that built it (same positions, other objects).
    """
    nodes = trace(roots)[0] if failed_steps else None
    failed = {id(nodes[o]) for j in failed_steps for o in plan.steps[j].group.outputs} if nodes else None
    # roots whose in-place writes ran (their buffer existed before this drain)
    written = [k for k in range(len(roots)) if ran(plan.root_steps[k], done, lost) and roots[k].buffer is not None]
    written_nodes = {id(roots[k].current) for k in written}
    written_bufs = {id(root_bufs[k]) for k in written}
    for k, s in enumerate(roots):
        if ran(plan.root_steps[k], done, lost):
            continue
        if failed is not None and first_reached(s.current, lambda n: id(n) in failed) is not None:
            engine.poison(s, error)
        elif written and first_reached(s.current, lambda n: id(n) in written_nodes or (
                n.op is Op.BUFFER and id(n.arg) in written_bufs)) is not None:
            # run at the next drain, it would recompute that write from the buffer as it
            # is now (applying it twice) or read the buffer after it: refuse instead
            engine.poison(s, DeviceError(
                f"not computed: its drain on {engine.device.name} stopped ({error!r}) after in-place "
                "writes it reads had run, so it can no longer be computed as recorded; recompute it"))


def realize(stats, plan, roots, root_bufs, done: int, lost) -> None:
    """Count the ``done`` launches and turn each root whose kernel ran into a leaf on its buffer:
    even if a later launch failed (or was interrupted), since re-running an in-place write at
    the next drain would apply it twice (a collective that failed at its wait did not run)."""
    stats.kernels_launched += done
    if plan.n_extern:
        stats.extern_launches += plan.n_extern if done == len(plan.steps) else \
            sum(1 for st in plan.steps[:done] if st.kind is StepKind.EXTERN)
    for k, (s, buf) in enumerate(zip(roots, root_bufs)):
        if ran(plan.root_steps[k], done, lost):
            s.buffer = buf
            s.current = Node(Op.BUFFER, (), s.dtype, s.shape, buf)


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
