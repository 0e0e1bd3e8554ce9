"""The C kernels' thread count follows the cores other processes leave free (runtime/threads.py)."""
from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import pytest

import lazyfuse as lf
from lazyfuse.runtime import threads


class FakeClock:
    """/proc/stat, the wall clock and this process's CPU time, advanced by hand."""

    def __init__(self, monkeypatch):
        self.wall, self.busy, self.own = 100.0, 0, 0.0
        monkeypatch.setattr(threads.time, "monotonic", lambda: self.wall)
        monkeypatch.setattr(threads.time, "process_time", lambda: self.own)
        monkeypatch.setattr(threads, "_busy_jiffies", lambda cpus: self.busy)

    def advance(self, seconds, others_cores, own_cores=0.0):
        self.wall += seconds
        self.own += own_cores * seconds
        self.busy += round((others_cores + own_cores) * seconds * threads._HZ)


@pytest.fixture
def budget(monkeypatch):
    monkeypatch.delenv("LAZYFUSE_THREADS", raising=False)
    calls = []
    b = threads.ThreadBudget(calls.append)
    b.cpus = [0, 1, 2, 3]
    b.threads = b.limit = 4
    return b, calls


def test_a_busy_core_of_another_process_is_left_to_it(budget, monkeypatch):
    b, calls = budget
    clock = FakeClock(monkeypatch)
    b.apply()                                  # first sample: no window yet, every core
    clock.advance(0.5, others_cores=1.0, own_cores=2.0)
    b.apply()
    assert calls == [4, 3]
    clock.advance(0.5, others_cores=3.0)       # three busy: one thread, never zero
    b.apply()
    clock.advance(0.5, others_cores=5.0)
    b.apply()
    assert calls == [4, 3, 1]


def test_our_own_threads_do_not_count_as_load(budget, monkeypatch):
    b, calls = budget
    clock = FakeClock(monkeypatch)
    b.apply()
    clock.advance(0.5, others_cores=0.0, own_cores=4.0)
    b.apply()
    assert calls == [4]                        # unchanged: not set again


def test_the_count_is_sampled_at_most_once_per_window(budget, monkeypatch):
    b, calls = budget
    clock = FakeClock(monkeypatch)
    b.apply()
    clock.advance(threads.SAMPLE_S / 10, others_cores=4.0)
    b.apply()
    assert calls == [4]


def test_omp_num_threads_caps_the_count(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert threads.ThreadBudget(lambda n: None).threads == 1


def test_a_fixed_count(budget, monkeypatch):
    b, calls = budget
    clock = FakeClock(monkeypatch)
    monkeypatch.setenv("LAZYFUSE_THREADS", "2")
    b.apply()
    assert calls == [2]
    monkeypatch.setenv("LAZYFUSE_THREADS", "many")
    clock.advance(2 * threads.SAMPLE_S, others_cores=0.0)   # the knob is read once per window
    with pytest.raises(lf.DeviceError, match="LAZYFUSE_THREADS='many'"):
        b.apply()


def test_kernels_are_right_and_leave_a_core_to_a_competing_process():
    dev = lf.device("cpu")
    if dev.threads is None:
        pytest.skip("no C compiler: the interpreter runs the cpu device")
    x = np.linspace(-3, 3, 1 << 18, dtype=np.float32)
    t = lf.tensor(x)
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        deadline = time.monotonic() + 3 * threads.SAMPLE_S + 1
        while time.monotonic() < deadline:
            got = ((t * 2 + 1).tanh() * t.exp()).sum().item()
        assert dev.threads.threads <= max(1, len(dev.threads.cpus) - 1)
    finally:
        busy.kill()
        busy.wait()
    np.testing.assert_allclose(got, float((np.tanh(x.astype(np.float64) * 2 + 1) * np.exp(x)).sum()), rtol=1e-4)


@pytest.mark.parametrize("reduce", ["sum", "mean", "amax", "argmax", "var"])
def test_a_reduction_does_not_depend_on_the_thread_count(monkeypatch, reduce):
    """The thread count follows other processes' load, so a result must not depend on it: a
    reduction split across threads cuts its extent into chunks that do not depend on the count."""
    monkeypatch.setattr(threads, "SAMPLE_S", 0.0)   # each drain reads the knob again
    x = np.random.default_rng(7).standard_normal((3, 100_003)).astype(np.float32)
    t = lf.tensor(x)
    got = {}
    for n in ("1", "2", "3"):
        monkeypatch.setenv("LAZYFUSE_THREADS", n)
        got[n] = getattr(t * 1.5, reduce)(-1).numpy()
    assert np.array_equal(got["1"], got["2"]) and np.array_equal(got["1"], got["3"])
    ref = x.astype(np.float64) * 1.5
    want = np.var(ref, axis=-1, ddof=1) if reduce == "var" else getattr(np, {"amax": "max"}.get(reduce, reduce))(ref, axis=-1)
    np.testing.assert_allclose(got["1"], want, rtol=1e-5, atol=1e-5)
