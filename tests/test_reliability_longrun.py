"""Issue 7, items 5 and 6: long runs stay flat, the bounds hold, and the stress script runs.

* 100,000 ops recorded and drained in a loop: Python's allocated blocks, the pool's bytes and
  the number of live Tensors stay flat after warm-up.
* The pending queue never grows past ``LAZYFUSE_MAX_PENDING`` (a drain starts at the bound).
* The plan cache keeps at most ``LAZYFUSE_PLAN_CACHE`` plans, dropping the least recently used;
  ``lf.stats().plan_cache_evictions`` counts the drops.
* 10,000 replays allocate nothing, in the pool or in Python.
* ``lf.testing.pool_info`` reports the pool's live, cached and peak bytes and its modes.
* ``bench/stress.py`` runs a few seconds of random programs on both devices with 0 mismatches.
"""
from __future__ import annotations

import gc
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

import lazyfuse as lf
from lazyfuse.runtime import engine as engine_module
from lazyfuse.testing import no_fresh_allocations, pool_info

ROOT = Path(__file__).resolve().parent.parent
CPU = lf.device("cpu")


def live_tensors() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is lf.Tensor)


def flat_footprint(step, n: int, warmup: int):
    """Run ``step(i)`` ``warmup`` times, then ``n`` times; return the growth of Python's allocated
    memory blocks (``sys.getallocatedblocks``: free to read, unlike tracemalloc), pool bytes and
    live Tensors over the second part."""
    for i in range(warmup):
        step(i)
    gc.collect()
    before = (sys.getallocatedblocks(), pool_info(CPU), live_tensors())
    for i in range(n):
        step(i)
    gc.collect()
    after = (sys.getallocatedblocks(), pool_info(CPU), live_tensors())
    return (after[0] - before[0], after[1]["live_bytes"] - before[1]["live_bytes"],
            after[1]["cached_bytes"] - before[1]["cached_bytes"], after[2] - before[2])


def test_100k_ops_recorded_and_drained_without_memory_growth():
    rng = np.random.default_rng(0)
    xs = [lf.tensor(rng.standard_normal((16, 32)).astype(np.float32)) for _ in range(4)]
    acc = lf.zeros(32)
    ops = {"n": 0}

    def step(i):
        before = CPU.stats.ops_recorded
        for k, x in enumerate(xs):
            y = x
            for _ in range(4):
                y = ((y * (i % 7)).tanh() + 1).exp() - x      # 5 elementwise ops, fused
            acc.add_(y.sum(0) / 16.0)                         # a reduction and an in-place write
        acc.mul_(0.5)
        if i % 10 == 0:
            acc.numpy()                                       # a host read
        else:
            lf.sync()
        ops["n"] += CPU.stats.ops_recorded - before
    blocks, live, cached, tensors = flat_footprint(step, 1_200, 50)
    assert ops["n"] >= 100_000
    assert blocks < 600, f"Python's allocated blocks grew by {blocks} over {ops['n']} ops"
    assert live == 0 and cached == 0 and tensors == 0
    assert np.isfinite(acc.numpy()).all()


def test_the_pending_queue_is_bounded(monkeypatch):
    monkeypatch.setattr(engine_module, "MAX_PENDING", 64)
    engine = CPU.engine
    lf.sync()
    x = lf.ones(4)
    longest = 0
    with lf.testing.stats_delta(CPU) as d:
        y = x
        for _ in range(2000):                        # one long chain, never synced by the user
            y = y * 1.0001 + 0.0
            longest = max(longest, len(engine.pending))
    assert longest <= 64
    assert d.fusion_cache_hits + d.fusion_cache_misses >= 2000 * 2 // 64 - 1   # bounded drains ran
    np.testing.assert_allclose(y.numpy(), np.full(4, 1.0001 ** 2000, dtype=np.float32), rtol=1e-3)


def test_the_plan_cache_is_bounded_and_counts_evictions(monkeypatch):
    monkeypatch.setattr(engine_module, "PLAN_CACHE_SIZE", 8)
    engine = CPU.engine
    lf.sync()
    engine.plans.clear()
    x = lf.tensor(np.arange(64, dtype=np.float32))
    with lf.testing.stats_delta(CPU) as d:
        for n in range(1, 31):                       # 30 structurally different plans
            assert (x[:n] + 1).sum().item() == n * (n + 1) / 2
            assert len(engine.plans) <= 8
    assert d.fusion_cache_misses == 30 and d.plan_cache_evictions == 30 - 8
    assert lf.stats(CPU).plan_cache_evictions >= d.plan_cache_evictions
    with lf.testing.stats_delta(CPU) as again:
        assert (x[:30] + 1).sum().item() == 465.0    # recent: still cached
        assert (x[:1] + 1).sum().item() == 1.0       # evicted: rebuilt, right
    assert again.fusion_cache_hits == 1 and again.fusion_cache_misses == 1


def test_10k_replays_allocate_nothing():
    x = lf.tensor(np.linspace(-1, 1, 256, dtype=np.float32).reshape(16, 16))
    w = lf.tensor(np.eye(16, dtype=np.float32))
    g = lf.capture(CPU, lambda: ((x @ w).relu() + x).softmax(-1))
    want = g.replay().numpy().copy()

    def replay(i):
        g.replay()
    with no_fresh_allocations(CPU):
        blocks, live, cached, tensors = flat_footprint(replay, 10_000, 100)
    assert blocks < 1_000 and live == 0 and cached == 0 and tensors == 0
    np.testing.assert_array_equal(g.output.numpy(), want)


def test_pool_info_reports_live_cached_and_peak_bytes():
    lf.sync()
    gc.collect()
    before = pool_info(CPU)
    assert set(before) >= {"live_bytes", "cached_bytes", "peak_live_bytes", "persistent", "capturing"}
    t = lf.empty(1 << 18)                            # 1 MiB
    during = pool_info(CPU)
    assert during["live_bytes"] >= before["live_bytes"] + (1 << 20)
    assert during["peak_live_bytes"] >= during["live_bytes"]
    del t
    gc.collect()
    after = pool_info(CPU)
    assert after["live_bytes"] == before["live_bytes"]
    assert after["cached_bytes"] >= before["cached_bytes"] + (1 << 20) or after["cached_bytes"] > 0


def test_the_stress_script_runs_random_programs_without_mismatches():
    env = dict(os.environ, PYTHONPATH=str(ROOT), LAZYFUSE_AUTOTUNE="0")
    proc = subprocess.run([sys.executable, "-m", "bench.stress", "--seconds", "6", "--no-publish"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    rows = {m.group(1): int(m.group(2)) for m in re.finditer(r"^\| (cpu|interpreter) \| [\d.]+ \| (\d+) \| 0 \|",
                                                            proc.stdout, re.M)}
    assert set(rows) == {"cpu", "interpreter"} and all(n > 0 for n in rows.values()), proc.stdout
    assert "Mismatches: 0." in proc.stdout
