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
from .pool import DATA, META, SCRATCH


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
    """Write each step's metadata and make its call, then run the calls in order."""
    device = engine.device
    tape = engine.tape
    done = at = 0   # steps run; the step being prepared or run
    try:
        with device.launching():
            calls = []
            for at, (step, meta) in enumerate(zip(plan.steps, metas)):
                if step.kind is StepKind.KERNEL or step.scalars:
                    meta.write(step.header, step.bind_scalars(tape))
                calls.append(device.call(step, step.bind(bound), meta))
            for at, call in enumerate(calls):
                call()
                done += 1
    except BaseException as e:
        salvage(engine, plan, roots, root_bufs, at, done, e)
        raise
    finally:
        realize(engine.stats, plan, roots, root_bufs, done)


def salvage(engine, plan, roots, root_bufs, at: int, done: int, error: BaseException) -> None:
    """After step ``at`` failed (``done`` steps ran), poison the roots that can no longer be
    computed; the others stay pending for the next drain.

    After a KeyboardInterrupt nothing failed: all of it stays pending. The failed node is found
    in this drain's trace (walked only here): a cached plan's own graph holds the nodes of the
    drain that built it (same positions, other objects).
    """
    failed = {id(trace(roots)[0][o]) for o in plan.steps[at].group.outputs} if isinstance(error, Exception) \
        else None
    # roots whose in-place writes ran (their buffer existed before this drain)
    written = [k for k in range(len(roots)) if plan.root_steps[k] < done and roots[k].buffer is not None]
    written_nodes = {id(roots[k].current) for k in written}
    written_bufs = {id(root_bufs[k]) for k in written}
    for k, s in enumerate(roots):
        if plan.root_steps[k] < done:
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


def realize(stats, plan, roots, root_bufs, done: int) -> None:
    """Count the ``done`` launches and turn each root whose kernel ran into a leaf on its buffer:
    even if a later launch failed (or was interrupted), since re-running an in-place write at
    the next drain would apply it twice."""
    stats.kernels_launched += done
    if plan.n_extern:
        stats.extern_launches += sum(1 for st in plan.steps[:done] if st.kind is StepKind.EXTERN)
    for k, (s, buf) in enumerate(zip(roots, root_bufs)):
        if done >= len(plan.steps) or plan.root_steps[k] < done:
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
