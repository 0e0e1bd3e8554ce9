"""The C kernels' thread count follows the cores other processes leave free (runtime/threads.py)."""
from __future__ import annotations

import json
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
    """A budget over four CPUs, torch's own count 4; ``calls`` are the counts it hands the kernels
    (the first at its creation)."""
    monkeypatch.delenv("LAZYFUSE_THREADS", raising=False)
    monkeypatch.setattr(threads, "allowed_cpus", lambda: [0, 1, 2, 3])
    calls = []
    b = threads.ThreadBudget(calls.append, peer_threads=lambda: 4)
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


def test_torch_thread_count_caps_the_count(monkeypatch):
    clock = FakeClock(monkeypatch)
    monkeypatch.delenv("LAZYFUSE_THREADS", raising=False)
    monkeypatch.setattr(threads, "allowed_cpus", lambda: [0, 1, 2, 3])
    torch_count, calls = [4], []
    b = threads.ThreadBudget(calls.append, peer_threads=lambda: torch_count[0])
    b.apply()
    torch_count[0] = 2                         # torch.set_num_threads(2): seen at the next window
    clock.advance(2 * threads.SAMPLE_S, others_cores=0.0)
    b.apply()
    assert calls == [4, 2]
    clock.advance(2 * threads.SAMPLE_S, others_cores=3.0)   # load lowers it further, never below 1
    b.apply()
    assert calls == [4, 2, 1]


def test_torch_calls_run_on_the_budget_while_it_is_below_torch_count(monkeypatch):
    """Among a drain's launches torch's own calls (BLAS, externs) get this thread's OpenMP count
    lowered to the budget's, and torch's count back after; on a quiet machine nothing is set."""
    clock = FakeClock(monkeypatch)
    monkeypatch.delenv("LAZYFUSE_THREADS", raising=False)
    monkeypatch.setattr(threads, "allowed_cpus", lambda: [0, 1, 2, 3])
    omp = [4]
    b = threads.ThreadBudget(lambda n: None, peer_threads=lambda: omp[0], set_omp=lambda n: omp.__setitem__(0, n))
    b.apply()
    with b.torch_calls():
        assert omp == [4]                      # quiet: torch's own count, untouched
    clock.advance(0.5, others_cores=2.0)       # two cores busy: a budget of 2
    b.apply()
    with b.torch_calls():
        assert omp == [2]
    assert omp == [4]
    monkeypatch.setenv("LAZYFUSE_THREADS", "1")   # a fixed count is the kernels' only
    clock.advance(2 * threads.SAMPLE_S, others_cores=0.0)
    b.apply()
    with b.torch_calls():
        assert omp == [4]


def test_a_benchmarks_measurement_is_not_capped_by_torch_count(monkeypatch):
    """``measure`` (a benchmark then gives torch the count) reads the free cores alone, so a count
    torch got from a busier measurement does not cap the next one."""
    monkeypatch.setattr(threads, "allowed_cpus", lambda: [0, 1, 2, 3])
    monkeypatch.setattr(threads, "SAMPLE_S", 0.0)
    monkeypatch.setattr(threads, "_busy_jiffies", lambda cpus: 0)   # every core free
    monkeypatch.delenv("LAZYFUSE_THREADS", raising=False)
    b = threads.ThreadBudget(lambda n: None, peer_threads=lambda: 1)
    assert b.measure() == 4
    assert b.free_cores() == 1                 # the kernels' count stays capped by torch's


def test_a_fixed_count(budget, monkeypatch):
    b, calls = budget
    clock = FakeClock(monkeypatch)
    monkeypatch.setenv("LAZYFUSE_THREADS", "2")
    b.apply()
    assert calls == [4, 2]
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


# -- torch's thread setting is torch's: lazyfuse and torch share one libgomp ----------------------------
_TORCH_COUNT_PROGRAM = """
import json, sys, numpy as np, torch, lazyfuse as lf
if sys.argv[1] != "-":
    torch.set_num_threads(int(sys.argv[1]))
before = torch.get_num_threads()
dev = lf.device("cpu")
x = np.linspace(-3, 3, 1 << 17, dtype=np.float32).reshape(256, 512)
t = lf.tensor(x)
got = ((t * 2 + 1).tanh() * t.exp()).sum(-1).numpy()          # parallel regions (LAZYFUSE_PARALLEL_THRESHOLD=0)
g = lf.capture(dev, lambda: (t * 3 - 1).exp().sum(-1))
g.replay().numpy()
ref = (np.tanh(x.astype(np.float64) * 2 + 1) * np.exp(x)).sum(-1)
print(json.dumps({"before": before, "after": torch.get_num_threads(), "lazyfuse": dev.threads.threads,
                  "ok": bool(np.allclose(got, ref, rtol=1e-4)), "cpus": len(dev.threads.cpus)}))
"""


def _torch_count_run(torch_threads="-", **env):
    import json
    import os
    full = {**os.environ, "LAZYFUSE_PARALLEL_THRESHOLD": "0", **env}
    for name in ("LAZYFUSE_THREADS", "OMP_NUM_THREADS"):
        if name not in env:
            full.pop(name, None)
    out = subprocess.run([sys.executable, "-c", _TORCH_COUNT_PROGRAM, torch_threads], env=full,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(lf.device("cpu").threads is None, reason="no C compiler: the interpreter runs the cpu device")
def test_kernels_under_a_one_thread_budget_leave_torch_count_alone():
    r = _torch_count_run(LAZYFUSE_THREADS="1")
    assert r["ok"] and r["lazyfuse"] == 1
    assert r["after"] == r["before"] == min(r["cpus"], r["before"])   # torch's own default, untouched


@pytest.mark.skipif(lf.device("cpu").threads is None, reason="no C compiler: the interpreter runs the cpu device")
@pytest.mark.parametrize("how", ["torch.set_num_threads", "OMP_NUM_THREADS"])
def test_a_users_torch_thread_count_caps_lazyfuse(how):
    r = _torch_count_run("1") if how == "torch.set_num_threads" else _torch_count_run(OMP_NUM_THREADS="1")
    assert r["ok"] and r["before"] == r["after"] == 1 and r["lazyfuse"] == 1


@pytest.mark.skipif(lf.device("cpu").threads is None or len(lf.device("cpu").threads.cpus) < 2,
                    reason="needs the C kernels and two CPUs")
def test_torch_calls_in_a_drain_see_the_budget_and_torch_its_own_count_after(monkeypatch):
    import torch
    dev = lf.device("cpu")
    budget = dev.threads
    monkeypatch.delenv("LAZYFUSE_THREADS", raising=False)
    monkeypatch.setattr(threads, "SAMPLE_S", 1e9)   # the budget decided below stays for the test
    before = torch.get_num_threads()
    monkeypatch.setattr(budget, "limit", 2)
    monkeypatch.setattr(budget, "threads", 1)      # as if another process held a core
    monkeypatch.setattr(budget, "fixed", False)
    monkeypatch.setattr(budget, "_checked", time.monotonic())
    seen = []

    def probe(x):
        seen.append(torch.get_num_threads())
        return x * 2
    x = np.arange(6, dtype=np.float32)
    got = lf.extern(probe, lf.tensor(x) + 1).numpy()
    assert seen[-1] == 1 and torch.get_num_threads() == before   # (the earlier calls: its shape, on torch's meta device)
    np.testing.assert_array_equal(got, (x + 1) * 2)


# -- a launch's own thread count: the serial candidate is the default's function ------------------
PROBE = """
void lf_kernel(char **args, const int64_t *meta) {
    int32_t *out = (int32_t *)args[0];
    #pragma omp parallel num_threads(lf_threads())
    { if (omp_get_thread_num() == 0) out[0] = omp_get_num_threads(); }
}
"""


@pytest.fixture
def probe_launch():
    """``launch(cfg, batched)``: the team size a parallel region of a kernel bound with config
    ``cfg`` opens, launched as a drain does (``CpuBackend.thunk``) or, ``batched``, as a replay's
    launch list does (``CpuBackend.batch``), with the budget's count set to 3."""
    from types import SimpleNamespace

    from lazyfuse.codegen import c_compile
    from lazyfuse.codegen.c_printer import PRELUDE
    from lazyfuse.runtime.backend import StepKind
    dev = lf.device("cpu")
    if dev.threads is None:
        pytest.skip("no C compiler: the interpreter runs the cpu device")
    symbol, source = c_compile.named(PROBE, PRELUDE)
    fn = c_compile.build_functions({symbol: source}, PRELUDE, {symbol: "probe"})[symbol]
    count = c_compile.thread_count()
    saved, count.value = count.value, 3

    def launch(cfg, batched=False):
        outs = [np.zeros(1, np.int32) for _ in range(2)]
        step = SimpleNamespace(kind=StepKind.KERNEL, compiled=dev.backend.bind(None, cfg, fn), source=source,
                               error_flag=None)   # (a kernel that cannot fail: no error flag word)
        calls = [dev.backend.thunk(step, [SimpleNamespace(ptr=o.ctypes.data)], SimpleNamespace(launches={}, ptr=0))
                 for o in outs]
        for call in dev.backend.batch(calls) if batched else calls:
            call()
        assert outs[0][0] == outs[1][0]
        return int(outs[0][0])
    yield launch
    count.value = saved


@pytest.mark.parametrize("batched", [False, True])
def test_a_launch_runs_on_its_configs_thread_count_and_then_the_budgets(probe_launch, batched):
    from lazyfuse.codegen.c_printer import SERIAL, CConfig
    assert probe_launch(CConfig(), batched) == 3
    assert probe_launch(CConfig(**SERIAL), batched) == 1
    assert probe_launch(CConfig(threads=2), batched) == 2
    assert probe_launch(CConfig(), batched) == 3   # the launch's own count ended with it


def test_the_serial_candidate_is_the_defaults_function_compiled_once(monkeypatch, fresh_cache):
    """Tuning a parallel pointwise kernel times the default and the serial launch of one compiled
    function: one source reaches the compiler for the two, and both are timed."""
    from lazyfuse.codegen import c_compile
    monkeypatch.setenv("LAZYFUSE_AUTOTUNE", "1")
    built = []
    real = c_compile.build_functions
    monkeypatch.setattr(c_compile, "build_functions", lambda sources, *a, **k: built.append(len(sources)) or
                        real(sources, *a, **k))
    x = np.linspace(-2, 2, 1 << 18, dtype=np.float32)
    got = (lf.tensor(x) * 3 + 1).tanh().numpy()
    np.testing.assert_allclose(got, np.tanh(x.astype(np.float64) * 3 + 1), rtol=1e-6, atol=1e-6)
    assert built == [1]
    (entry,) = [json.loads(p.read_text()) for p in (fresh_cache / "autotune").glob("*.json")]
    assert sorted(entry["timings_us"]) == sorted(["threads=all,strategy=auto,tile=16,unroll=8,lanes=1024",
                                                  "threads=1,strategy=auto,tile=16,unroll=8,lanes=1024"])


def test_a_drains_launch_context_decides_nothing_within_a_window(monkeypatch):
    """``launches`` (every drain's): in the window of a count already applied it decides and
    applies nothing; a new window decides and applies again; while the budget is below torch's
    count every drain's context lowers torch's count."""
    clock = FakeClock(monkeypatch)
    monkeypatch.delenv("LAZYFUSE_THREADS", raising=False)
    monkeypatch.setattr(threads, "allowed_cpus", lambda: [0, 1, 2, 3])
    omp, counts = [4], []
    b = threads.ThreadBudget(counts.append, peer_threads=lambda: 4, set_omp=lambda n: omp.__setitem__(0, n))
    applied = []
    real_apply = b.apply
    monkeypatch.setattr(b, "apply", lambda: applied.append(1) or real_apply())
    assert b.launches() is threads._UNCHANGED and len(applied) == 1
    clock.advance(threads.SAMPLE_S / 10, others_cores=0.0)
    for _ in range(3):
        assert b.launches() is threads._UNCHANGED
    assert len(applied) == 1                     # the same window: a clock read
    clock.advance(0.5, others_cores=2.0)          # a new window, two cores busy: a budget of 2
    for _ in range(2):
        with b.launches():
            assert omp == [2]                     # torch's calls among the launches: the budget's count
        assert omp == [4]
    assert len(applied) == 2 and counts == [4, 2]
    clock.advance(0.5, others_cores=0.0)          # quiet again: applied once, then a clock read
    assert b.launches() is threads._UNCHANGED and b.launches() is threads._UNCHANGED
    assert len(applied) == 3 and counts == [4, 2, 4]
