"""How many OpenMP threads the C kernels use: the cores other processes leave free.

An OpenMP region ends at a barrier that waits for every thread of its team. When another busy
process holds one of the cores, the team's thread scheduled there waits for a time slice —
milliseconds — and so does the whole region: with one competing process on a 2-core machine
the captured 32x64 MLP training step took 11-22 ms instead of 0.05. A region whose team fits
the free cores never waits like that.

So before C kernels run (a drain's launches, a graph's replay) the cpu device sets the thread
count their parallel regions ask for (``num_threads(lf_num_threads)``, ``codegen/c_compile.py``)
to the free cores: the CPUs this process may run on, less the time other processes kept them
busy over the last sampling window. That is read from ``/proc/stat`` (busy jiffies of the
allowed CPUs, steal time included) minus this process's own CPU time, at most once per
``SAMPLE_S`` — a check of the clock per drain otherwise. Where ``/proc/stat`` cannot be read
the count stays at every allowed CPU.

torch's CPU ops run on the same libgomp, so OpenMP's own count (``omp_set_num_threads``) is
torch's setting: lazyfuse never changes it as torch's callers see it, and reads it as a cap.
The rule: ``LAZYFUSE_THREADS`` if set to a count, that count; else (``auto``) the free cores,
at most ``torch.get_num_threads()`` — which is ``OMP_NUM_THREADS`` where set, and follows a
user's ``torch.set_num_threads`` within ``SAMPLE_S``. Both are read at the load's pace.

torch's own calls among a drain's or a replay's launches (BLAS matmuls, externs) would wait for
a busy core just the same, so while those launches run (``torch_calls``) the calling thread's
OpenMP count is lowered to the budget's where that is below torch's, and put back right after.
OpenMP's count is per thread, so no other thread ever sees the lowered one, and this thread
sees torch's own again as soon as lazyfuse's launches return.
"""
from __future__ import annotations

import contextlib
import os
import time

import torch

from .. import config

SAMPLE_S = 0.1     # the window over which other processes' load is measured
_HZ = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def allowed_cpus() -> list:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def _busy_jiffies(cpus: set) -> int | None:
    """Non-idle jiffies of ``cpus`` since boot, or None where /proc/stat is unreadable."""
    try:
        with open("/proc/stat") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    busy = 0
    for line in lines:
        if not line.startswith("cpu") or line.startswith("cpu "):
            continue
        name, *fields = line.split()
        if int(name[3:]) not in cpus:
            continue
        v = [int(x) for x in fields[:8]]
        busy += v[0] + v[1] + v[2] + v[5] + v[6] + v[7]   # user nice system irq softirq steal
    return busy


class _TorchCallsLowered:
    """The context of launches that include torch's calls, while the budget is below torch's
    count: this thread's OpenMP count is the budget's inside, torch's own again after."""

    __slots__ = ("set_omp", "peer_threads", "n", "saved")

    def __init__(self, set_omp, peer_threads, n):
        self.set_omp, self.peer_threads, self.n = set_omp, peer_threads, n

    def __enter__(self):
        self.saved = self.peer_threads()
        self.set_omp(self.n)

    def __exit__(self, *exc):
        self.set_omp(self.saved)


_UNCHANGED = contextlib.nullcontext()


class ThreadBudget:
    """The free-core count, sampled; ``apply`` hands it to the kernels' parallel regions,
    ``torch_calls`` to torch's calls among the launches."""

    def __init__(self, set_threads, peer_threads=torch.get_num_threads, set_omp=None):
        self._set_threads = set_threads          # writes the count the kernels' regions read
        self._peer_threads = peer_threads        # torch's thread setting: the cap of ``auto``
        self._set_omp = set_omp                  # this thread's OpenMP count (omp_set_num_threads)
        self.cpus = allowed_cpus()
        self.limit = self._limit()
        self.threads = self.limit
        self.fixed = False                       # whether ``threads`` is LAZYFUSE_THREADS's, not the load's
        self._mark = None                        # (wall, busy jiffies, own CPU seconds)
        self._checked = None                     # when the count was last decided
        self._set_threads(self.limit)            # (no kernel runs on a count nobody chose)
        self._applied = self.limit               # the count last handed to the kernels

    def _limit(self) -> int:
        return max(1, min(len(self.cpus), self._peer_threads()))

    def free_cores(self) -> int:
        """The current count, decided again when the last decision is at least SAMPLE_S old:
        ``LAZYFUSE_THREADS`` if set, else a new load sample. Within a window this is a clock
        read: it runs before every drain's launches and every replay."""
        now = time.monotonic()
        if self._checked is not None and now - self._checked < SAMPLE_S:
            return self.threads
        self._checked = now
        fixed = config.THREADS.get()
        self.fixed = fixed is not None
        if self.fixed:
            self.threads, self._mark = fixed, None
            return fixed
        self.limit = self._limit()
        busy, own = _busy_jiffies(set(self.cpus)), time.process_time()
        if busy is None:
            self.threads = self.limit
            return self.threads
        if self._mark is not None:
            wall = now - self._mark[0]
            others = max(0.0, (busy - self._mark[1]) / _HZ - (own - self._mark[2])) / wall
            self.threads = max(1, min(self.limit, round(len(self.cpus) - others)))
        else:   # no window yet: every core torch's setting allows
            self.threads = self.limit
        self._mark = (now, busy, own)
        return self.threads

    def measure(self) -> int:
        """The free cores, estimated afresh over one whole window (blocks for SAMPLE_S) and not
        capped by torch's count: for a benchmark that then gives torch this count
        (``torch.set_num_threads``), so both peers run on as many threads — uncapped, so an
        earlier, busier measurement's count does not stick."""
        peer, self._peer_threads = self._peer_threads, lambda: len(self.cpus)
        try:
            self._mark = self._checked = None
            self.free_cores()
            time.sleep(SAMPLE_S)
            return self.free_cores()
        finally:
            self._peer_threads = peer

    def apply(self) -> None:
        n = self.free_cores()
        if self._applied != n:
            self._set_threads(n)
            self._applied = n

    def launches(self):
        """``apply``, then ``torch_calls``: the context a drain's launches run in. It runs at
        every drain, so within the window of a count already applied it decides and applies
        nothing: a clock read."""
        checked = self._checked
        if checked is None or time.monotonic() - checked >= SAMPLE_S or self._applied != self.threads:
            self.apply()
        return self.torch_calls()

    def torch_calls(self):
        """The context to run launches in that may include torch's calls, after ``apply``: a
        no-op while torch's own count fits the free cores (a quiet machine) or the count is
        ``LAZYFUSE_THREADS``'s (a count for lazyfuse's kernels), else it lowers this thread's
        OpenMP count to the budget's for the launches' duration."""
        if self._set_omp is None or self.fixed or self.threads >= self.limit:
            return _UNCHANGED
        return _TorchCallsLowered(self._set_omp, self._peer_threads, self.threads)
