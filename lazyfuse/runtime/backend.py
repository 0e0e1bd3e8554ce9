"""The interface the engine and the devices ask of a backend, declared once.

A device owns one backend (``Device.backend``): ``CpuBackend`` (C/OpenMP, runtime/cpu.py) or
``TritonBackend`` (compiled Triton or its interpreter, runtime/triton_devices.py). The engine
calls ``new_meta`` and ``compile_plan`` and reads ``matmul_template``; the device calls ``thunk``
to launch and ``batch`` to make a recorded launch list cheaper to replay; ``lf.explain`` calls
``preview``. Everything else on a backend is its own business.
"""
from __future__ import annotations

from enum import Enum
from typing import NamedTuple


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

    def compile_plan(self, plan, stats, leaves, root_bufs, temps, scalars) -> None:
        """Build every step of a new plan (print candidates, compile, tune on scratch copies of
        the buffers ``bound_buffers`` finds, keep the winner in ``step.compiled``)."""
        raise NotImplementedError

    def rebind(self, old, new) -> bool:
        """Whether compiled step ``old`` serves ``new``, the same step of its structure lowered
        at other sizes (runtime.structure): the same code and, where tuning explores, the same
        tuning class. If so, ``new`` takes ``old``'s compiled code, source and config."""
        raise NotImplementedError

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
