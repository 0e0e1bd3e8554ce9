"""Autotuning with an on-disk cache (part of the build path: docs/semantics.md, The plan cache and its two paths).

A backend proposes candidate configs for a kernel; the tuner benchmarks each on scratch
buffers (never the live ones: in-place kernels would clobber their own inputs) and keeps the
fastest. The choice is stored under a key made of everything that changes the code or its
speed — the kernel's structural signature with shapes rounded to a size class, the device,
and the lazyfuse / Triton / compiler versions (a key that missed one would reuse a wrong
choice: tinygrad #11908). One small JSON file per key, written atomically: a corrupted or
truncated entry is ignored and rebuilt, and concurrent writers can only replace a whole file.

``LAZYFUSE_AUTOTUNE=0`` skips benchmarking and takes each backend's heuristic default.
``LAZYFUSE_AUTOTUNE_FORCE=N`` takes every kernel's N-th candidate (its last where it has fewer)
without benchmarking: the tests run each candidate this way, so no code path a tuner may pick
goes untested.

Crash safety: a candidate that kills the process (a segfault in generated code) must never be
tried again, or every later run dies the same way before it can save a result. So the entry
is written *before* each candidate runs, naming it as ``trying``; a process that finds a
``trying`` mark left by another knows that candidate never came back, records it under
``crashed``, warns once, and tunes again without it. The mark names its process (pid and
host): a mark whose process is still running is a concurrent tuner, not a crash (three
processes tuning the same kernel at once used to mark each other's candidates crashed until
none was left, and the last one raised "every candidate failed to run").
"""
from __future__ import annotations

import hashlib
import json
import os
import socket
import time
import warnings

from .. import config
from ..errors import CompileError
from .cache import atomic_write, cache_dir
from .index import DivMod
from .kernel import Apply, Kernel, Load, walk


MARGIN = 0.05   # a candidate must beat the default by 5% to replace it


def enabled() -> bool:
    return config.AUTOTUNE.get()


def forced() -> int | None:
    """``LAZYFUSE_AUTOTUNE_FORCE``: the candidate index every kernel takes, or None."""
    return config.AUTOTUNE_FORCE.get()


def explores() -> bool:
    """Whether backends list every candidate (tuning, or one forced), not only the default."""
    return enabled() or forced() is not None


def after() -> int:
    """``LAZYFUSE_AUTOTUNE_AFTER``: the run of a plan at which its untuned kernels are tuned."""
    return config.AUTOTUNE_AFTER.get()


def cached_choice(tuner: "Tuner", signature: str, labels: list) -> int | None:
    """The candidate a kernel takes at its first build without benchmarking anything: the forced
    one, the heuristic default (tuning off, or nothing to choose from), or the winner the cache
    holds; None when it is still to be tuned (then the default serves until ``Deferred`` is due).
    ``labels`` may list candidates twice (the backend deduplicates by source only for tuning):
    a stored winner is found among them as among the deduplicated list."""
    force = forced()
    if force is not None:
        return min(force, len(labels) - 1)
    if len(labels) == 1 or not enabled():
        return 0
    return tuner.lookup(tuner.key(signature), labels)


class Deferred:
    """The steps of a plan its first build left to tune (``cached_choice`` found no winner) when
    ``LAZYFUSE_AUTOTUNE_AFTER`` > 1 takes tuning off the build path, so a drain that runs once (a first optimizer step, a warmup,
    an evaluation) costs one compile of each kernel's default. ``due()`` is asked at each later
    run and answers True once, at the plan's ``after()``-th run."""

    def __init__(self, steps: list, runs: int = 1):
        self.steps = steps
        self.runs = runs   # the runs so far, the build's own included

    def due(self) -> bool:
        self.runs += 1
        return self.runs == max(after(), 2)


def size_class(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def signature(kernel: Kernel) -> str:
    """The kernel's structure with extents rounded to powers of two."""
    if kernel.segments:
        return "foreach[" + ";".join(signature(seg) for seg in kernel.segments) + "]"
    values = [s.value for s in kernel.stores] + [s.value for s in kernel.stages]
    parts = [kernel.kind,
             ",".join(str(size_class(v.extent)) for v in kernel.outer),
             ",".join(str(size_class(v.extent)) for v in kernel.inner),
             ",".join(f"{s.op.label}:{s.value.dtype.name}" for s in kernel.stages),
             ",".join(a.dtype.name + ("w" if a.written else "") for a in kernel.args)]
    mm = kernel.matmul
    if mm is not None:
        # the operands' layouts (transposed or not) and dtype change the best tile
        parts.append(f"mm{size_class(mm.k.extent)}:{mm.dtype.name}:" + ",".join(
            str(min(abs(a.coeff(v)), 2)) for a in (mm.a_index, mm.b_index) for v in (mm.m, mm.n, mm.k)))
    last = [v for v in (kernel.outer[-1:] + kernel.inner[-1:])]
    for e in walk(values):
        if isinstance(e, Load):
            pattern = tuple(min(abs(e.index.coeff(v)), 2) for v in last)
            divmod_ = any(isinstance(t, DivMod) for t, _ in e.index.terms)
            parts.append(f"L{e.dtype.name}{pattern}{'d' if divmod_ else ''}")
        elif isinstance(e, Apply):
            parts.append(e.op.label)
    return "|".join(parts)


class Tuner:
    def __init__(self, backend_id: str):
        self.backend_id = backend_id   # device name + toolchain versions
        self.folders = {}   # LAZYFUSE_CACHE_DIR -> its autotune folder (made once; the knob is read each time)

    def key(self, signature: str) -> str:
        from ..version import __version__
        raw = f"{__version__}|{self.backend_id}|{signature}"
        return hashlib.sha256(raw.encode()).hexdigest()[:32]

    def _path(self, key: str):
        root = config.CACHE_DIR.get()
        folder = self.folders.get(root)
        if folder is None:
            folder = self.folders[root] = cache_dir("autotune")
        return folder / f"{key}.json"

    def entry(self, key: str) -> dict:
        """The stored entry of ``key`` ({} where missing or corrupted)."""
        try:
            entry = json.loads(self._path(key).read_text())
        except (OSError, ValueError):
            return {}
        return entry if isinstance(entry, dict) else {}

    def lookup(self, key: str, labels: list) -> int | None:
        """The cached winner's index among ``labels``, or None (missing, corrupted, stale, or
        left mid-tuning by a process that died)."""
        return winner(self.entry(key), labels)

    def store(self, key: str, entry: dict) -> None:
        try:
            atomic_write(self._path(key), json.dumps({**entry, "backend": self.backend_id}).encode())
        except OSError:
            pass  # a read-only cache only costs a re-tune next time (and loses the crash marks)


def winner(entry: dict, labels: list) -> int | None:
    """The index among ``labels`` of the choice ``entry`` records, or None (none, stale, or an
    entry left mid-tuning)."""
    if "trying" in entry:
        return None
    try:
        return labels.index(entry["config"])
    except (ValueError, KeyError, TypeError):
        return None


# A candidate whose best time is this many times the best candidate's so far is clearly slower:
# it could only still win by a run that much faster than every run it made, so its timing
# stops (``benchmark``'s ``beat``). With one timed run it takes a wider margin (one run may
# have been preempted), with two the plain one.
CLEARLY_SLOWER = 2.0
CLEARLY_SLOWER_ONE_RUN = 8.0


def benchmark(run, budget_s: float = 0.02, max_reps: int = 20, beat: float = float("inf")) -> float:
    """The best time of ``run()`` (seconds): one warm-up call, then repeats within a budget,
    stopped early once the best is clearly slower than ``beat`` (the best time of the candidates
    timed before it). A run of microseconds takes all ``max_reps`` repeats in well under the
    budget; the budget and the early stop bound the slow ones."""
    run()
    best = float("inf")
    start = time.perf_counter()
    for reps in range(1, max_reps + 1):
        t0 = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - t0)
        if best > beat * (CLEARLY_SLOWER if reps >= 2 else CLEARLY_SLOWER_ONE_RUN):
            break
        if time.perf_counter() - start > budget_s:
            break
    return best


def choose(tuner: Tuner, signature: str, labels: list, runners: list, stats) -> int:
    """Index of the best candidate for the work ``signature`` describes (a kernel's
    ``signature``, or a library call's): forced, from the cache, or by benchmarking
    ``runners`` (None = failed to build), never one that crashed an earlier process."""
    force = forced()
    if force is not None:
        best = min(force, len(labels) - 1)
        if runners[best] is None:
            raise CompileError(f"forced autotune candidate {labels[best]} (LAZYFUSE_AUTOTUNE_FORCE={force}) "
                               f"failed to build for {signature}")
        return best
    if len(labels) == 1 or not enabled():
        return 0
    key = tuner.key(signature)
    entry = tuner.entry(key)
    hit = winner(entry, labels)
    if hit is not None and runners[hit] is not None:
        return hit
    crashed = _crashed_candidates(tuner, key, entry, signature)
    record = {"crashed": sorted(crashed), "signature": signature}
    stats.autotune_runs += 1
    timings = {}
    for label, run in zip(labels, runners):
        if run is None or label in crashed:
            continue
        tuner.store(key, {**record, "trying": label, "trying_pid": os.getpid(), "trying_host": socket.gethostname()})
        try:
            timings[label] = benchmark(run, beat=min(timings.values(), default=float("inf")) / 1e6) * 1e6
        except Exception:  # noqa: BLE001 (a candidate that fails to run is skipped)
            continue
    if not timings:
        tuner.store(key, record)
        return -1
    best = min(timings, key=timings.get)
    # the heuristic default (listed first) keeps its place unless beaten clearly: a choice
    # made on noise would make tuned code slower than untuned
    default = labels[0]
    if default in timings and timings[best] > timings[default] * (1 - MARGIN):
        best = default
    tuner.store(key, {**record, "config": best, "timings_us": {k: round(v, 2) for k, v in timings.items()}})
    return labels.index(best)


def _still_running(mark: dict) -> bool:
    """Whether the process that left a ``trying`` mark is still alive on this host (another
    process tuning the same kernel now). An older mark without a pid, one from another host (a
    shared cache folder) or one naming this very process (a tuning interrupted here) counts as
    dead."""
    pid = mark.get("trying_pid")
    if not isinstance(pid, int) or pid <= 0 or pid == os.getpid() or mark.get("trying_host") != socket.gethostname():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:   # EPERM: alive, another user's
        return True
    return True


def _crashed_candidates(tuner: Tuner, key: str, entry: dict, signature: str) -> set:
    """The candidates of ``key`` that killed a process while being benchmarked: those ``entry``
    records, and the one it still names as ``trying`` (its process never came back)."""
    crashed = {c for c in entry.get("crashed", ()) if isinstance(c, str)}
    dead = entry.get("trying")
    if isinstance(dead, str) and dead not in crashed and not _still_running(entry):
        crashed.add(dead)
        warnings.warn(f"autotuning: candidate {dead} never came back when an earlier process benchmarked it "
                      f"(the process died, e.g. a crash in generated code); it is skipped from now on. "
                      f"Kernel: {signature[:200]}; entry: {tuner._path(key)}", RuntimeWarning, stacklevel=3)
    return crashed
