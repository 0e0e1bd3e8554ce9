"""What tuning on the build path costs (issue 15), and that it stays honest: timing stops early only
for a candidate clearly slower than the best, tiles that cannot differ at a size class are built
and timed once, each candidate stays reachable by ``LAZYFUSE_AUTOTUNE_FORCE``, only the buffers a
kernel writes are copied for tuning, a small reduction builds no loop variants, and a drain's new
kernels compile in parts of equal size."""
from __future__ import annotations

import time

import numpy as np
import pytest

import lazyfuse as lf
import lazyfuse.runtime.cpu as cpu_module
from lazyfuse.codegen import autotune, c_compile

CPU = lf.device("cpu")


@pytest.fixture
def tuning(monkeypatch, tmp_path):
    """Autotuning on the build path, in an empty cache, from empty plan caches."""
    monkeypatch.setenv("LAZYFUSE_AUTOTUNE", "1")
    monkeypatch.setenv("LAZYFUSE_AUTOTUNE_AFTER", "1")
    monkeypatch.delenv("LAZYFUSE_AUTOTUNE_FORCE", raising=False)
    monkeypatch.setenv("LAZYFUSE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(CPU.backend, "tuner", None)
    CPU.engine.plans.clear()
    yield monkeypatch
    CPU.engine.plans.clear()


def _last_kernel_step():
    plan = CPU.engine.plans[next(reversed(CPU.engine.plans))]
    return next(st for st in plan.steps if st.kind == "kernel")


def _counting(seconds):
    calls = []

    def run():
        calls.append(1)
        time.sleep(seconds)
    return run, calls


def test_timing_stops_once_a_candidate_is_clearly_slower_than_the_best():
    slow, calls = _counting(0.002)
    best = autotune.benchmark(slow, beat=1e-5)              # 200x slower than the best so far
    assert len(calls) == 2 and best >= 0.002                # the warm-up and one timed run
    slow, calls = _counting(0.002)
    autotune.benchmark(slow, beat=0.0006)                   # ~3x slower: two timed runs tell
    assert len(calls) == 3
    fast, calls = _counting(0)
    autotune.benchmark(fast, beat=1.0)                      # faster than the best: every repeat
    assert len(calls) == 21
    fast, calls = _counting(0)
    autotune.benchmark(fast)                                # the first candidate: nothing to beat
    assert len(calls) == 21


def test_the_winner_is_still_the_fastest_candidate_measured(tuning, tmp_path):
    runners = [_counting(s)[0] for s in (0.003, 0.0002, 0.003, 0.001)]
    tuner = autotune.Tuner("test-backend")
    stats = lf.stats(CPU)
    best = autotune.choose(tuner, "sig", ["a", "b", "c", "d"], runners, stats)
    assert best == 1
    entry = tuner.entry(tuner.key("sig"))
    assert entry["config"] == "b" and sorted(entry["timings_us"]) == ["a", "b", "c", "d"]
    assert min(entry["timings_us"], key=entry["timings_us"].get) == "b"


def _column_sum():
    """A column sum of 300 rows: 100 outputs (size class 128), a strided reduced dim: tiled."""
    a = np.random.default_rng(0).standard_normal((300, 100)).astype(np.float32)
    return lf.tensor(a), a.astype(np.float64).sum(0)


def test_a_small_reduction_is_tuned_over_its_thread_counts_only(tuning):
    """A reduction of less work than ``VARIANT_WORK_FACTOR`` parallel thresholds builds and times
    no loop variant: the default and its serial launch (one compiled function), nothing else."""
    x, want = _column_sum()
    built = []
    real = c_compile.build_functions
    tuning.setattr(c_compile, "build_functions", lambda sources, *a, **k: built.append(len(sources)) or
                   real(sources, *a, **k))
    printed = []
    real_print = cpu_module.print_c
    tuning.setattr(cpu_module, "print_c", lambda kernel, cfg: printed.append(cfg) or real_print(kernel, cfg))
    # (~60k units: a parallel region at this threshold, less than the variants ask for)
    tuning.setenv("LAZYFUSE_PARALLEL_THRESHOLD", "20000")
    np.testing.assert_allclose(x.sum(0).numpy(), want, rtol=1e-5, atol=1e-5)
    kernel = _last_kernel_step().kernel
    tuned = [c.label() for c in CPU.backend.tuned_candidates(kernel)]
    assert tuned == ["threads=all,strategy=auto,tile=16,unroll=8,lanes=1024",
                     "threads=1,strategy=auto,tile=16,unroll=8,lanes=1024"]
    assert built == [1] and printed == [cpu_module.CConfig()]   # the variants are not even printed
    assert len(CPU.backend.candidates(kernel)) > len(tuned)
    # with the bar at 0 the same kernel is tuned over its variants too
    tuning.setattr(cpu_module, "VARIANT_WORK_FACTOR", 0)
    assert len(CPU.backend.tuned_candidates(kernel)) > len(tuned)


def test_tiles_that_cannot_differ_at_the_size_class_are_tuned_once(tuning):
    tuning.setattr(cpu_module, "VARIANT_WORK_FACTOR", 0)   # (a small kernel: tuned over every variant)
    x, want = _column_sum()
    timed = []
    real = autotune.benchmark

    def spy(run, *args, **kwargs):
        timed.append(run)
        return real(run, *args, **kwargs)
    tuning.setattr(autotune, "benchmark", spy)
    np.testing.assert_allclose(x.sum(0).numpy(), want, rtol=1e-5, atol=1e-5)
    kernel = _last_kernel_step().kernel
    every = [c.label() for c in CPU.backend.candidates(kernel)]
    tuned = [c.label() for c in CPU.backend.tuned_candidates(kernel)]
    # the default is a tile of 1024 here: the tiles of 128 and 512 run the same single block
    one_block = [lab for lab in every if "strategy=tile" in lab and lab.split("lanes=")[1] in ("128", "512")]
    assert len(one_block) == 2 and tuned == [lab for lab in every if lab not in one_block]
    assert "threads=all,strategy=tile,tile=16,unroll=8,lanes=16" in tuned   # 16 lanes: 7 blocks, a real choice
    assert len(timed) == len(tuned)


def test_every_candidate_stays_reachable_by_force(tuning):
    x, want = _column_sum()
    x.sum(0).numpy()
    every = [c.label() for c in CPU.backend.candidates(_last_kernel_step().kernel)]
    pruned = [k for k, lab in enumerate(every) if lab not in
              [c.label() for c in CPU.backend.tuned_candidates(_last_kernel_step().kernel)]]
    for k in pruned:
        tuning.setenv("LAZYFUSE_AUTOTUNE_FORCE", str(k))
        CPU.engine.plans.clear()
        np.testing.assert_allclose(x.sum(0).numpy(), want, rtol=1e-5, atol=1e-5)
        assert _last_kernel_step().config.label() == every[k]


def test_tuning_copies_only_the_buffers_a_kernel_writes(tuning):
    """An in-place update tuned at its build: the live buffer it reads and writes is never the
    one timed (its update applies once), the one it only reads is bound as it is."""
    a = np.arange(300 * 257, dtype=np.float32).reshape(300, 257) / 1000
    x, y = lf.tensor(a), lf.tensor(a[::-1].copy())
    seen = []
    real = CPU.pool.scratch_copies

    def spy(bufs, requester, written=None):
        copies = real(bufs, requester, written)
        seen.append([c is b for c, b in zip(copies, bufs)])
        return copies
    tuning.setattr(CPU.pool, "scratch_copies", spy)
    x.add_(y.tanh() * 2)
    np.testing.assert_allclose(x.numpy(), a + np.tanh(a[::-1]) * 2, rtol=1e-6)
    assert lf.stats(CPU).autotune_runs and seen
    kernel = _last_kernel_step().kernel
    assert seen[-1] == [not arg.written for arg in kernel.args] and any(seen[-1]) and not all(seen[-1])


def test_a_tuned_build_prints_each_candidate_once(tuning):
    tuning.setattr(cpu_module, "VARIANT_WORK_FACTOR", 0)   # (a small kernel: tuned over every variant)
    x, want = _column_sum()
    printed = []
    real = cpu_module.print_c

    def spy(kernel, cfg):
        printed.append(cfg)
        return real(kernel, cfg)
    tuning.setattr(cpu_module, "print_c", spy)
    np.testing.assert_allclose(x.sum(0).numpy(), want, rtol=1e-5, atol=1e-5)
    assert len(printed) == len(set(printed)) == len(CPU.backend.configs(_last_kernel_step().kernel))


def test_compile_parts_have_about_equal_source_sizes():
    sizes = {f"s{k}": size for k, size in enumerate([9000, 300, 2500, 2400, 700, 5000, 100, 4100, 800])}
    parts = c_compile.balanced_parts(list(sizes), 2, sizes.get)
    assert sorted(s for part in parts for s in part) == sorted(sizes)
    totals = [sum(sizes[s] for s in part) for part in parts]
    assert abs(totals[0] - totals[1]) <= max(sizes.values()) // 4, totals
    assert c_compile.balanced_parts(list(reversed(list(sizes))), 2, sizes.get) == parts   # the order does not matter
