"""How many OpenMP threads the C kernels use: the cores other processes leave free.

An OpenMP region ends at a barrier that waits for every thread of its team. When another busy
process holds one of the cores, the team's thread scheduled there waits for a time slice —
milliseconds — and so does the whole region: with one competing process on a 2-core machine
the captured 32x64 MLP training step took 11-22 ms instead of 0.05. A region whose team fits
the free cores never waits like that.

So before C kernels run (a drain's launches, a graph's replay) the cpu device sets the calling
thread's OpenMP thread count to the free cores: the CPUs this process may run on, less the
time other processes kept them busy over the last sampling window. That is read from
``/proc/stat`` (busy jiffies of the allowed CPUs, steal time included) minus this process's
own CPU time, at most once per ``SAMPLE_S`` — a check of the clock per drain otherwise.
Where ``/proc/stat`` cannot be read the count stays at every allowed CPU.

``LAZYFUSE_THREADS``: ``auto`` (the default, as above) or a fixed count. ``OMP_NUM_THREADS``,
where set, caps ``auto``.
"""
from __future__ import annotations

import os
import threading
import time

from ..errors import DeviceError

SAMPLE_S = 0.1     # the window over which other processes' load is measured
_HZ = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def allowed_cpus() -> list:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def fixed_threads() -> int | None:
    """``LAZYFUSE_THREADS`` as a count, or None for ``auto``."""
    raw = os.environ.get("LAZYFUSE_THREADS", "").strip().lower()
    if raw in ("", "auto"):
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise DeviceError(f"LAZYFUSE_THREADS={raw!r} is neither 'auto' nor a thread count: set it to auto "
                          "(the cores other processes leave free) or to a whole number >= 1")
    return int(raw)


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


class ThreadBudget:
    """The free-core count, sampled; ``apply`` hands it to OpenMP on the calling thread."""

    def __init__(self, set_threads):
        self._set_threads = set_threads          # omp_set_num_threads of the kernels' runtime
        self.cpus = allowed_cpus()
        omp = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
        self.limit = min(len(self.cpus), int(omp)) if omp.isdigit() and int(omp) > 0 else len(self.cpus)
        self.threads = self.limit
        self._mark = None                        # (wall, busy jiffies, own CPU seconds)
        self._applied = threading.local()

    def free_cores(self) -> int:
        """The current estimate, re-sampled when the last window is at least SAMPLE_S old."""
        fixed = fixed_threads()
        if fixed is not None:
            return fixed
        now = time.monotonic()
        if self._mark is not None and now - self._mark[0] < SAMPLE_S:
            return self.threads
        busy, own = _busy_jiffies(set(self.cpus)), time.process_time()
        if busy is None:
            return self.threads
        if self._mark is not None:
            wall = now - self._mark[0]
            others = max(0.0, (busy - self._mark[1]) / _HZ - (own - self._mark[2])) / wall
            self.threads = max(1, min(self.limit, round(len(self.cpus) - others)))
        self._mark = (now, busy, own)
        return self.threads

    def measure(self) -> int:
        """A fresh estimate over one whole window (blocks for SAMPLE_S): for a benchmark that
        sets its peers' thread count to lazyfuse's before it starts timing."""
        self._mark = None
        self.free_cores()
        time.sleep(SAMPLE_S)
        return self.free_cores()

    def apply(self) -> None:
        n = self.free_cores()
        if getattr(self._applied, "n", None) != n:
            self._set_threads(n)
            self._applied.n = n
