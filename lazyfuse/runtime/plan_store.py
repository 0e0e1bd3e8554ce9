"""Compiled plans on disk: a second process starts where the first one stopped.

The on-disk caches of compiled libraries and tuning choices spare a new process the compiler
and the benchmarks, but not the rest of the build path: planning, lowering, and printing
every autotune candidate of every kernel to find its library — hundreds of milliseconds for
a transformer block, seconds for a GPT training step. So each plan a process builds is also
written down (``plans/<digest>.pkl`` under the cache folder): the planner's groups and, per
step, what the backend needs to take its compiled code back (the C library's key, the kernel's
function name and config) and, for a kernel, the lowered step. A process that misses its
in-memory plan cache looks there before it plans: it takes the stored kernel steps (their
codegen kernels left pickled until something reads them: ``StoredKernelStep``), makes the
library steps from the drain's nodes and loads the libraries, with no planner, no lowering, no
printing and no compiler run (``lf.stats().plans_loaded``). A plan is written once compiled and
tuned: at its build, or at the later run that tunes it (``LAZYFUSE_AUTOTUNE_AFTER``).

A record is found by a digest of the plan key (ops, dtypes, shapes, strides, attributes, live
roots) with everything else the generated code depends on: lazyfuse's own source files, the
backend's toolchain identity, torch's version and every ``LAZYFUSE_*`` knob that can change a
kernel. A key holding something with no stable text across processes (a lambda passed to
``lf.extern``, an opaque constant) is never stored. A missing, unreadable or stale record
(its library gone) only means planning as before. On by default; ``LAZYFUSE_PLAN_STORE=0``
turns it off.
"""
from __future__ import annotations

import enum
import functools
import hashlib
import os
import pickle
from pathlib import Path

import torch

from .. import config
from ..codegen.cache import atomic_write, cache_dir
from ..ir.dtypes import DType
from ..ir.view import View
from .backend import StepKind
from .build import Step, lower_steps

# knobs that never change a plan's code or choices (where, whether to print, which device)
IGNORED_KNOBS = {"LAZYFUSE_CACHE_DIR", "LAZYFUSE_DEBUG", "LAZYFUSE_DEVICE", "LAZYFUSE_TEST_DEVICE",
                 "LAZYFUSE_THREADS", "LAZYFUSE_PLAN_STORE"}


class Unstable(Exception):
    """A plan key part with no text that is the same in every process."""


def enabled() -> bool:
    return config.PLAN_STORE.get()


def digest(parts: tuple, backend) -> str | None:
    """The record name of a plan key (None: the key cannot be named across processes)."""
    try:
        text = _key_text(*parts)
    except Unstable:
        return None
    knobs = sorted((k.name, repr(k.get())) for k in config.KNOBS.values() if k.name not in IGNORED_KNOBS)
    h = hashlib.sha256()
    for part in (_package_hash(), backend.store_identity(), torch.__version__, repr(knobs), text):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:40]


def load(name: str, backend, nodes) -> tuple | None:
    """``(plan, steps)`` of the stored plan ``name``, each step given its compiled code back: the
    library calls made from ``nodes``, the kernels as stored. None where none is stored or it no
    longer loads."""
    try:
        record = pickle.loads((_folder() / f"{name}.pkl").read_bytes())
        planned, stored = record["plan"], record["steps"]
        kernel_steps = {j: StoredKernelStep(*fields) for j, (_, fields) in enumerate(stored) if fields is not None}
        steps = lower_steps(nodes, planned, kernel_steps)
    except Exception:  # noqa: BLE001 (missing, truncated, from another version: plan instead)
        return None
    if len(steps) != len(stored) or not all(backend.restore_step(st, rec) for st, (rec, _) in zip(steps, stored)):
        return None
    return planned, steps


def save(name: str, backend, plan) -> None:
    """Write ``plan`` (compiled) down as record ``name``, where every step can be: per step,
    what the backend needs to take its code back and, for a kernel, the lowered step's fields
    (lowering a GPT step's 150 kernels again would cost more than all the rest), its codegen
    ``Kernel`` pickled apart (``StoredKernelStep``)."""
    stored = []
    try:
        for st in plan.steps:
            rec = backend.stored_step(st)
            if rec is None:
                return
            fields = None
            if st.kind is StepKind.KERNEL:
                fields = (st.name, st.slots, st.scalars, st.header, pickle.dumps(st.kernel), st.rng_words,
                          st.source, st.config, st.error_flag, st.index_checks)
            stored.append((rec, fields))
        atomic_write(_folder() / f"{name}.pkl", pickle.dumps({"plan": plan.planned, "steps": stored}))
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        pass   # a read-only cache, or a plan that does not pickle: the next process plans it


class StoredKernelStep(Step):
    """A kernel step of a stored plan, its codegen ``Kernel`` left pickled until something reads
    it (``lf.explain``, tuning, a rebind at other sizes while tuning explores). A launch needs
    only the compiled function, the slots and the metadata layout; unpickling a GPT step's ~200
    kernels makes ~15,000 objects, which cost more than the rest of the load — and, counted by
    the garbage collector, often bring on a full collection over torch's ~190,000 objects."""

    def __init__(self, name, slots, scalars, header, kernel: bytes, rng_words, source, config, error_flag,
                 index_checks):
        super().__init__(name, StepKind.KERNEL, slots, scalars, header, kernel, rng_words=rng_words,
                         source=source, config=config, error_flag=error_flag, index_checks=index_checks)

    @property
    def kernel(self):
        kernel = self.__dict__["_kernel"]
        if type(kernel) is bytes:
            kernel = self.__dict__["_kernel"] = pickle.loads(kernel)
        return kernel

    @kernel.setter
    def kernel(self, value) -> None:
        self.__dict__["_kernel"] = value


def _folder() -> Path:
    return cache_dir("plans")


@functools.lru_cache(maxsize=1)
def _package_hash() -> str:
    """A hash of lazyfuse's own source files, by path, size and modification time (the rule
    Python's bytecode cache trusts; reading and hashing the ~850 kB of source instead cost 4 ms
    of a second process's start): a record made by other code is never read."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(d for d in subfolders if d != "__pycache__")   # walked in this order
        for name in sorted(files):
            if name.endswith((".py", ".h")):
                st = os.stat(os.path.join(folder, name))
                h.update(f"{os.path.relpath(folder, root)}/{name} {st.st_size} {st.st_mtime_ns}\0".encode())
    return h.hexdigest()


def _key_text(descs: tuple, live: tuple) -> str:
    """A plan key as text (runtime.engine's descriptors: op, dtype, then a shape, attribute and
    source positions, or a buffer's first position), one line per node. (``_name_``: an enum's
    ``name`` is a Python-level property, looked up 4,000 times for a GPT step's key.)"""
    lines = []
    for d in descs:
        if len(d) == 5:
            arg = d[3]
            lines.append(f"{d[0]._name_} {d[1].name} {d[2]} {'-' if arg is None else _text(arg)} {d[4]}")
        else:
            lines.append(f"{d[0]._name_} {d[1].name} {d[2:]}")
    lines.append(repr(live))
    return "\n".join(lines)


def _text(x) -> str:
    """Text of a plan key part that is the same in every process (``Unstable`` if none)."""
    if type(x) is View:   # the most common attribute by far (a view op's)
        return f"V{x.shape}{x.strides}{x.offset}"
    if x is None or isinstance(x, (bool, int, float, str)):
        return repr(x)
    if isinstance(x, tuple):
        if all(type(v) is int for v in x):   # a shape, source positions, reduced axes: most of a key
            return repr(x)
        return "(" + ",".join([_text(v) for v in x]) + ")"
    if isinstance(x, enum.Enum):
        return f"{type(x).__name__}.{x.name}"
    if isinstance(x, DType):
        return x.name
    if isinstance(x, (torch.dtype, torch.device, torch.memory_format, torch.layout)):
        return str(x)
    if x is Ellipsis:
        return "..."
    named = getattr(x, "stable_text", None)   # an extern call, an argument slot
    text = None if named is None else named(_text)
    if text is None:
        raise Unstable(type(x).__name__)
    return text
