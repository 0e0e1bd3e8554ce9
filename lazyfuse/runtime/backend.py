"""The interface the engine and the devices ask of a backend, declared once.

A device owns one backend (``Device.backend``): ``CpuBackend`` (C/OpenMP, runtime/cpu.py) or
``TritonBackend`` (compiled Triton or its interpreter, runtime/triton_devices.py). The engine
calls ``new_meta``, ``compile_plan`` and ``tune_plan`` and reads ``matmul_template``; the device
calls ``thunk`` to launch, ``batch`` to make a recorded launch list cheaper to replay and
``uses_threads`` to know whether its replay needs the thread budget; ``lf.explain`` calls
``preview``.

``compile_plan`` and ``tune_plan`` are written once, here: a build binds each kernel's cached
or default config (``configs``, ``build``); at the plan's ``autotune.after()``-th run, what had
no tuned choice is built with every candidate (``tuned_candidates``), tuned on scratch copies of its
buffers (``scratch``, ``launcher``, ``autotune.choose``), falling back to the first candidate
that built, and the winner bound (``bind``). A backend supplies those parts; everything else on
it is its own business.
"""
from __future__ import annotations

import contextlib
import warnings
from enum import Enum
from typing import NamedTuple

from ..codegen import autotune
from ..errors import CompileError, LazyfuseError
from .pool import SCRATCH


class StepKind(str, Enum):
    """What one step of a compiled plan launches: a generated kernel or a library call (named
    by its op's label: a new library op adds its member here, and its call to the backends'
    ``thunk``). A ``str`` enum, so it prints as, and compares equal to, its name."""
    KERNEL = "kernel"
    MATMUL = "matmul"
    GATHER = "gather"
    INDEX_ADD = "index_add"
    COLLECTIVE = "collective"
    EXTERN = "extern"

    def __str__(self) -> str:
        return self.value

    __format__ = str.__format__


class LibraryCall(NamedTuple):
    """What a library step (matmul, gather) calls torch with: a view (or None: the whole buffer)
    of each operand, the output's shape, each operand's base shape, and the op's attribute."""
    views: tuple
    out_shape: tuple
    base_shapes: tuple
    arg: object


class Backend:
    name: str = ""                          # shown by the demo and lf.explain ("c", "triton", ...)
    # the matmul operand dtypes this backend computes in a template kernel with the fused
    # epilogue inside (the planner's capability flag; empty: matmul is a library call)
    matmul_template: frozenset = frozenset()
    # whether a drain may launch the calls an earlier drain of its plan made on the same pool
    # blocks and metadata (runtime/execute.py, LaunchMemo): only where making a call binds
    # nothing but those (host memory; a GPU's launch may take its stream when made)
    reuses_launches: bool = False

    def new_meta(self, pool, words: int, usage, requester: str, cause):
        """A launch-metadata block of ``words`` int64 words from ``pool`` (``usage``: the pool's
        DATA/META/SCRATCH), named by ``requester`` and ``cause`` if the pool must refuse it."""
        raise NotImplementedError

    # -- the compile-and-tune loop -------------------------------------------------------------
    def compile_plan(self, plan, stats, leaves, root_bufs, temps, scalars) -> None:
        """Build every step of a new plan, without benchmarking: each kernel in one config (the
        forced candidate, the tuned winner the cache holds, or the heuristic default), each
        library step with its cached or default library. What has no tuned choice yet is left in
        ``plan.untuned``, tuned at the plan's ``autotune.after()``-th run (``tune_plan``), or now,
        every candidate built in the same go, where this build is that run (a capture's rebuild of
        a plan counts the runs before it). A kernel none of whose candidates builds (or runs) is a
        ``CompileError``."""
        bufs_of = lambda st: bound_buffers(st, leaves, root_bufs, temps)  # noqa: E731
        values_of = lambda st: [scalars[i] for i in st.scalars]  # noqa: E731
        runs = plan.untuned.runs + 1 if plan.untuned is not None else 1
        tune_now = runs >= autotune.after()
        untuned, cands = [], {}
        for st in plan.steps:
            if st.kind is not StepKind.KERNEL:
                if self.cached_library(st, bufs_of(st)):
                    continue
                if tune_now:
                    self.choose_library(st, bufs_of(st), stats)
                else:
                    untuned.append(st)
                continue
            # forced: the deduplicated list, as tuning numbers it; else the configs unprinted
            configs = self.candidates(st.kernel) if autotune.forced() is not None else self.configs(st.kernel)
            pick = autotune.cached_choice(self.tuner_for(bufs_of(st)), autotune.signature(st.kernel),
                                          [c.label() for c in configs])
            if pick is None and tune_now:
                cands[st.name] = self.tuned_candidates(st.kernel)
                continue
            cands[st.name] = [configs[pick or 0]]
            if pick is None:
                untuned.append(st)
        self.build_and_bind(plan, [st for st in plan.steps if st.name in cands], cands, stats, bufs_of, values_of)
        plan.untuned = autotune.Deferred(untuned, runs) if untuned else None

    def tune_plan(self, plan, stats, bound, tape) -> None:
        """At a steady-state run of ``plan`` (``bound``: the buffers ``step.bind`` reads, ``tape``:
        what ``step.bind_scalars`` reads): tune what its build left in ``plan.untuned`` once this
        is its ``autotune.after()``-th run. Tuning that fails keeps the code the plan runs."""
        if not plan.untuned.due():
            return
        steps, plan.untuned = plan.untuned.steps, None
        bufs_of = lambda st: st.bind(bound)  # noqa: E731
        try:
            for st in steps:
                if st.kind is not StepKind.KERNEL:
                    self.choose_library(st, bufs_of(st), stats)
            kernels = [st for st in steps if st.kind is StepKind.KERNEL]
            self.build_and_bind(plan, kernels, {st.name: self.tuned_candidates(st.kernel) for st in kernels}, stats,
                                bufs_of, lambda st: st.bind_scalars(tape))
        except LazyfuseError as e:   # e.g. no memory for the scratch copies
            warnings.warn(f"autotuning of plan {plan.label} skipped: {e}", RuntimeWarning, stacklevel=2)

    def build_and_bind(self, plan, steps, cands: dict, stats, bufs_of, values_of) -> None:
        """Build every candidate in ``cands`` (step name -> configs) of ``steps`` and bind each
        step to its best: the one candidate, or the winner of tuning them (``bufs_of(step)``,
        ``values_of(step)``: the buffers and scalar values it is tuned on). Candidates that fail
        to build or to run are skipped; a step that has code already (being tuned) keeps it if
        none of them does."""
        if not steps:
            return
        built = self.build(plan, steps, cands, stats)
        for st in steps:
            results = built[st.name]
            found = [None if isinstance(r, CompileError) else r for r in results]
            if not any(found):
                if st.compiled is not None:
                    continue
                first = next((r for r in results if isinstance(r, CompileError)), None)
                raise CompileError(f"kernel {st.name} of plan {plan.label}: every candidate failed to compile; "
                                   f"the first error:\n{first}") from first
            best = 0
            if len(found) > 1:
                bufs = bufs_of(st)
                # a kernel of the same signature tuned since this plan was built (this plan's
                # own, or another's): its winner, without the scratch copies
                best = autotune.cached_choice(self.tuner_for(bufs), autotune.signature(st.kernel),
                                              [c.label() for c in cands[st.name]])
                if best is None or found[best] is None:
                    best = self.tune(st, cands[st.name], found, bufs, values_of(st), stats)
                if best < 0:
                    if st.compiled is not None:
                        continue
                    raise CompileError(f"kernel {st.name} of plan {plan.label}: every candidate failed to run")
            if found[best] is None:
                best = next(j for j, f in enumerate(found) if f is not None)
            compiled, st.source = found[best]
            st.config = cands[st.name][best]
            st.compiled = self.bind(st, st.config, compiled)

    def tune(self, step, cands, found, bufs, values, stats) -> int:
        """The index of the fastest candidate of kernel ``step`` (``found``: each one's
        ``(compiled, source)``, None where it did not build), timed on scratch copies of ``bufs``
        with scalar ``values``; -1 if none ran."""
        labels = [c.label() for c in cands]
        with self.scratch(bufs, step, values) as args:
            runners = [None if f is None else self.launcher(step, cfg, f[0], args) for cfg, f in zip(cands, found)]
            return autotune.choose(self.tuner_for(bufs), autotune.signature(step.kernel), labels, runners, stats)

    @contextlib.contextmanager
    def scratch(self, bufs, step, values):
        """Copies of the buffers a kernel writes and of its metadata, with the buffers it only
        reads, as ``launcher`` takes them: tuning never writes live data (an in-place kernel run
        N times would apply its update N times)."""
        pool = self.scratch_pool(bufs)
        copies = pool.scratch_copies(bufs, f"autotune scratch for {step.name}", [a.written for a in step.kernel.args])
        meta = self.new_meta(pool, step.meta_words, SCRATCH, f"autotune metadata of {step.name}", None)
        meta.write(step.header, values)
        try:
            yield self.scratch_args(copies, meta)
        finally:
            self.scratch_done(bufs)
            del copies, meta

    # -- what a backend supplies to the loop -----------------------------------------------------
    def candidates(self, kernel) -> list:
        """The configs to build ``kernel`` with: the heuristic default first, then (autotuning
        on) what else to try."""
        raise NotImplementedError

    def tuned_candidates(self, kernel) -> list:
        """What tuning builds and times: ``candidates`` less those that cannot run differently
        from another at ``kernel``'s size class (its tuning key); by default all of them.
        ``LAZYFUSE_AUTOTUNE_FORCE`` numbers ``candidates``, so each one stays reachable."""
        return self.candidates(kernel)

    def configs(self, kernel) -> list:
        """``candidates``, or a cheaper list of the same configs in the same order where some may
        repeat (one not yet deduplicated by source): what a build looks a tuned winner up in."""
        return self.candidates(kernel)

    def build(self, plan, steps, candidates: dict, stats) -> dict:
        """Every candidate of every kernel step, printed and built: ``{step name: [(compiled,
        source), or the ``CompileError`` it failed with, per candidate]}``."""
        raise NotImplementedError

    def bind(self, step, cfg, compiled):
        """What ``step.compiled`` holds for the winning candidate (``compiled``: what ``build``
        made of it); by default that object itself."""
        return compiled

    def cached_library(self, step, bufs) -> bool:
        """Set the library a library step takes at its build (a cached winner, or the default)
        without timing anything; False when there is a choice still to tune (``choose_library``).
        By default there is none."""
        return True

    def choose_library(self, step, bufs, stats) -> None:
        """The choice a library step makes by timing (say, which matmul library); by default
        none."""

    def tuner_for(self, bufs) -> autotune.Tuner:
        """The tuning cache kernels bound to ``bufs`` are tuned in (one per machine or device model)."""
        raise NotImplementedError

    def launcher(self, step, cfg, compiled, args):
        """A no-argument callable running candidate ``compiled`` (config ``cfg``) of ``step`` on
        ``scratch_args``' ``args``, for timing."""
        raise NotImplementedError

    def scratch_pool(self, bufs):
        """The pool the scratch copies of ``bufs`` come from."""
        return bufs[0].pool

    def scratch_args(self, copies, meta):
        """The scratch copies and metadata as the backend's launchers take them."""
        raise NotImplementedError

    def scratch_done(self, bufs) -> None:
        """Called before the scratch copies are freed (a GPU: wait until nothing uses them)."""

    def thunk(self, step, bufs, meta):
        """A no-argument callable that launches compiled ``step`` on ``bufs`` with ``meta``."""
        raise NotImplementedError

    def batch(self, thunks) -> list:
        """A captured launch list as the callables a replay runs (by default, unchanged)."""
        return thunks

    def uses_threads(self, thunks) -> bool:
        """Whether replaying ``thunks`` needs the device's thread budget applied first."""
        return False

    def preview(self, kernel) -> str:
        """The source of ``kernel`` with the heuristic config, without compiling it."""
        raise NotImplementedError

    # -- plans reused at other sizes and across processes ------------------------------------------
    def rebind(self, old, new) -> bool:
        """Whether compiled step ``old`` serves ``new``, the same step of its structure lowered
        at other sizes (runtime.structure): the same code and, where tuning explores, the same
        tuning class. If so, ``new`` takes ``old``'s compiled code, source and config."""
        return False

    def store_identity(self) -> str:
        """What, besides lazyfuse's code, the compiled code of a stored plan depends on (the
        toolchain and target): part of the plan store's record names (runtime.plan_store)."""
        return self.name

    def stored_step(self, step):
        """What brings compiled ``step``'s code back in another process (picklable), or None
        where it cannot be stored (then its plan is not)."""
        return None

    def restore_step(self, step, record) -> bool:
        """Give ``step`` (lowered from a stored plan) its compiled code back from ``record``;
        False where that code is gone."""
        return False


def bound_buffers(step, leaves, root_bufs, temps) -> list:
    """The buffers a build-path step binds, by slot: ``("leaf", i)`` the trace's leaf ``i``,
    ``("root", i)`` the drain's root ``i``, ``("temp", i)`` temporary ``i``."""
    out = []
    for kind, i in step.slots:
        out.append(leaves[i] if kind == "leaf" else root_bufs[i] if kind == "root" else temps[i])
    return out
