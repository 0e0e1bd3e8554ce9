"""The interface the engine and the devices ask of a backend, declared once.

A device owns one backend (``Device.backend``): ``CpuBackend`` (C/OpenMP, runtime/cpu.py) or
``TritonBackend`` (compiled Triton or its interpreter, runtime/triton_devices.py). The engine
calls ``new_meta`` and ``compile_plan`` and reads ``matmul_template``; the device calls ``thunk``
to launch and ``batch`` to make a recorded launch list cheaper to replay; ``lf.explain`` calls
``preview``.

``compile_plan`` is written once, here: print and build every candidate config of every kernel
(``candidates``, ``build``), tune each kernel on scratch copies of its buffers (``scratch``,
``launcher``, ``autotune.choose``), fall back to the first candidate that built, and bind the
winner (``bind``). A backend supplies those parts; everything else on it is its own business.
"""
from __future__ import annotations

import contextlib
from enum import Enum
from typing import NamedTuple

from ..codegen import autotune
from ..errors import CompileError
from .pool import SCRATCH


class StepKind(str, Enum):
    """What one step of a compiled plan launches: a generated kernel or a library call (named
    by its op's label: a new library op adds its member here, and its call to the backends'
    ``thunk``). A ``str`` enum, so it prints as, and compares equal to, its name."""
    KERNEL = "kernel"
    MATMUL = "matmul"
    GATHER = "gather"
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

    def new_meta(self, pool, words: int, usage, requester: str, cause):
        """A launch-metadata block of ``words`` int64 words from ``pool`` (``usage``: the pool's
        DATA/META/SCRATCH), named by ``requester`` and ``cause`` if the pool must refuse it."""
        raise NotImplementedError

    # -- the compile-and-tune loop -------------------------------------------------------------
    def compile_plan(self, plan, stats, leaves, root_bufs, temps, scalars) -> None:
        """Build every step of a new plan: library steps choose their library, kernel steps are
        built with every candidate config, tuned on scratch copies of the buffers
        ``bound_buffers`` finds, and the winner kept in ``step.compiled``. Candidates that fail
        to build or to run are skipped; a kernel none of whose candidates builds (or runs) is a
        ``CompileError``."""
        for st in plan.steps:
            if st.kind is not StepKind.KERNEL:
                self.choose_library(st, bound_buffers(st, leaves, root_bufs, temps), stats)
        steps = [st for st in plan.steps if st.kind is StepKind.KERNEL]
        if not steps:
            return
        cands = {st.name: self.candidates(st.kernel) for st in steps}
        built = self.build(plan, steps, cands, stats)
        for st in steps:
            results = built[st.name]
            found = [None if isinstance(r, CompileError) else r for r in results]
            if not any(found):
                first = next((r for r in results if isinstance(r, CompileError)), None)
                raise CompileError(f"kernel {st.name} of plan {plan.label}: every candidate failed to compile; "
                                   f"the first error:\n{first}") from first
            best = 0
            if len(found) > 1:
                best = self.tune(st, cands[st.name], found, bound_buffers(st, leaves, root_bufs, temps), scalars,
                                 stats)
                if best < 0:
                    raise CompileError(f"kernel {st.name} of plan {plan.label}: every candidate failed to run")
            if found[best] is None:
                best = next(j for j, f in enumerate(found) if f is not None)
            compiled, st.source = found[best]
            st.config = cands[st.name][best]
            st.compiled = self.bind(st, st.config, compiled)

    def tune(self, step, cands, found, bufs, scalars, stats) -> int:
        """The index of the fastest candidate of kernel ``step`` (``found``: each one's
        ``(compiled, source)``, None where it did not build), timed on scratch copies; -1 if
        none ran."""
        labels = [c.label() for c in cands]
        with self.scratch(bufs, step, scalars) as args:
            runners = [None if f is None else self.launcher(step, cfg, f[0], args) for cfg, f in zip(cands, found)]
            return autotune.choose(self.tuner_for(bufs), autotune.signature(step.kernel), labels, runners, stats)

    @contextlib.contextmanager
    def scratch(self, bufs, step, scalars):
        """Copies of a kernel's bound buffers and metadata, as ``launcher`` takes them: tuning
        never touches live data (an in-place kernel run N times would apply its update N times)."""
        pool = self.scratch_pool(bufs)
        copies = pool.scratch_copies(bufs, f"autotune scratch for {step.name}")
        meta = self.new_meta(pool, step.meta_words, SCRATCH, f"autotune metadata of {step.name}", None)
        meta.write(step.header, [scalars[i] for i in step.scalars])
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

    def build(self, plan, steps, candidates: dict, stats) -> dict:
        """Every candidate of every kernel step, printed and built: ``{step name: [(compiled,
        source), or the ``CompileError`` it failed with, per candidate]}``."""
        raise NotImplementedError

    def bind(self, step, cfg, compiled):
        """What ``step.compiled`` holds for the winning candidate (``compiled``: what ``build``
        made of it); by default that object itself."""
        return compiled

    def choose_library(self, step, bufs, stats) -> None:
        """The choice a library step makes at build time (say, which matmul library); by
        default none."""

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

    def preview(self, kernel) -> str:
        """The source of ``kernel`` with the heuristic config, without compiling it."""
        raise NotImplementedError


def bound_buffers(step, leaves, root_bufs, temps) -> list:
    """The buffers a build-path step binds, by slot: ``("leaf", i)`` the trace's leaf ``i``,
    ``("root", i)`` the drain's root ``i``, ``("temp", i)`` temporary ``i``."""
    out = []
    for kind, i in step.slots:
        out.append(leaves[i] if kind == "leaf" else root_bufs[i] if kind == "root" else temps[i])
    return out
