"""Compiler runs, why a drain recompiled, and the bound on loaded kernel libraries.

``lf.stats().compiler_runs`` counts real compiler invocations (a library found in memory or on
disk counts 0), apart from ``fusion_cache_misses`` (plans built). On a plan-cache miss the
engine says what differed from the nearest cached plan (``lf.explain(...).recompiles``, and
``LAZYFUSE_DEBUG``'s drain report). Loaded libraries are bounded: one no plan or graph uses
is unloaded past ``LAZYFUSE_MAX_LOADED_LIBRARIES``, so ``/proc/self/maps`` stays flat over any
number of distinct kernels.
"""
from pathlib import Path

import numpy as np
import pytest
import torch

import lazyfuse as lf
from lazyfuse.codegen import c_compile
from lazyfuse.runtime import engine

CPU = lf.device("cpu")


def run(x):
    return ((x * 2 + 1).tanh() * x.exp()).sum(-1)


def data(*shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def test_compiler_runs_counts_compilations_apart_from_plan_builds(fresh_cache):
    a = data(6, 16)
    before = lf.stats(CPU)
    np.testing.assert_allclose(run(lf.tensor(a)).numpy(), run(torch.from_numpy(a)).numpy(), rtol=1e-5)
    first = lf.stats(CPU) - before
    assert (first.fusion_cache_misses, first.compiler_runs) == (1, 1)   # one library per plan
    run(lf.tensor(a)).numpy()                                             # steady state
    CPU.engine.plans.clear()
    run(lf.tensor(a)).numpy()                                             # a re-plan: the library is loaded
    c_compile._loaded = c_compile.LibraryCache()
    CPU.engine.plans.clear()
    np.testing.assert_allclose(run(lf.tensor(a)).numpy(), run(torch.from_numpy(a)).numpy(), rtol=1e-5)  # on disk
    later = lf.stats(CPU) - before
    assert (later.fusion_cache_misses, later.fusion_cache_hits, later.compiler_runs) == (3, 1, 1)


def test_interpreter_counts_triton_module_builds(fresh_cache):
    dev = lf.device("interpreter")
    a = data(3, 5, seed=1)
    before = lf.stats(dev)
    x = lf.tensor(a, device=dev)
    np.testing.assert_allclose((x.exp() + 1).numpy(), np.exp(a) + 1, rtol=1e-5)
    (lf.tensor(a, device=dev).exp() + 1).numpy()
    d = lf.stats(dev) - before
    assert d.fusion_cache_misses == 1 and d.compiler_runs >= 1
    dev.engine.plans.clear()
    runs = lf.stats(dev).compiler_runs
    (lf.tensor(a, device=dev).exp() + 1).numpy()
    assert lf.stats(dev).compiler_runs == runs   # the module is loaded: a re-plan builds nothing


def latest_miss(dev=CPU) -> str:
    return str(dev.engine.misses.misses[-1])


def test_each_miss_says_what_differed_from_the_nearest_cached_plan(fresh_cache):
    run(lf.tensor(data(5, 16))).numpy()
    assert "no cached plan" in latest_miss()
    run(lf.tensor(data(7, 16))).numpy()
    assert "shape (7, 16) vs (5, 16) cached at %0 buffer" in latest_miss()
    run(lf.tensor(data(5, 16, dtype=np.float64))).numpy()
    assert "dtype float64 vs float32 cached" in latest_miss()
    run(lf.tensor(data(16, 5)).T).numpy()
    assert "new op(s) view" in latest_miss()
    run(lf.tensor(data(16, 5)).T.contiguous().T.T).numpy()   # another stride pattern of the same ops
    x = lf.tensor(data(5, 16))
    ((x * 2 + 1).sigmoid() * x.exp()).sum(-1).numpy()
    assert "op(s) sigmoid at %5 where the cached plan has tanh" in latest_miss()
    y = lf.tensor(data(5, 16))[:, ::2]
    run(y).numpy()
    z = lf.tensor(data(5, 16))[:, 1::2]
    run(z).numpy()
    assert "strides (16, 2) offset 1 vs (16, 2) offset 0 cached (a stride pattern)" in latest_miss()
    # lf.explain reports the device's recent misses, newest last
    explained = lf.explain(run(lf.tensor(data(5, 16))))
    assert explained.recompiles[-1] == latest_miss() and "recent plan-cache misses" in str(explained)


def test_debug_drain_report_says_why_a_build_happened(fresh_cache, monkeypatch, capsys):
    from lazyfuse.explain import print_drain
    monkeypatch.setattr(engine, "drain_hook", print_drain)
    run(lf.tensor(data(4, 8))).numpy()
    run(lf.tensor(data(9, 8))).numpy()
    run(lf.tensor(data(9, 8))).numpy()
    out = capsys.readouterr().out
    assert out.count("build path") == 2 and out.count("steady-state path") == 1
    assert "why: plan-cache miss on cpu (9 nodes): the nearest of 1 cached plan(s) differs in shape (9, 8) vs " \
           "(4, 8) cached" in out


def mapped_libraries(folder: Path) -> int:
    """How many memory mappings of this process come from libraries in ``folder``."""
    return sum(1 for line in Path("/proc/self/maps").read_text().splitlines() if str(folder) in line)


def test_unused_libraries_are_unloaded_past_the_bound(fresh_cache, monkeypatch):
    """Hundreds of distinct libraries (small ones: the bound, not the kernels, is under test),
    none kept by a plan: the mappings stay flat; one still held survives and still runs."""
    import ctypes
    monkeypatch.setattr(c_compile, "MAX_LOADED", 4)
    c_compile._loaded = c_compile.LibraryCache()
    src = "#include <stdint.h>\nvoid f(char **a, const int64_t *m) {{ *(int64_t *)a[0] = {}; }}\n"
    held = c_compile.function(c_compile.build(src.format(-1)), "f")
    peak = 0
    for i in range(200):
        c_compile.function(c_compile.build(src.format(i)), "f")
        peak = max(peak, mapped_libraries(fresh_cache / "c"))
    assert c_compile._loaded.unloaded >= 190
    per_library = mapped_libraries(fresh_cache / "c") / max(len(c_compile._loaded), 1)
    assert peak <= 3 * 4 * max(per_library, 1) + 16   # bounded by a few times the bound, not 200
    out = ctypes.c_int64(0)
    argv = (ctypes.c_void_p * 1)(ctypes.addressof(out))
    held(ctypes.addressof(argv), None)
    assert out.value == -1
    again = c_compile.function(c_compile.build(src.format(7)), "f")   # unloaded, found on disk, reloaded
    again(ctypes.addressof(argv), None)
    assert out.value == 7


def distinct_programs(count: int):
    """``count`` programs of distinct kernels (and so distinct libraries)."""
    for i in range(count):
        n = 3 + i % 17
        yield n, (lambda x, k=i: (x * (k % 5 + 1)).tanh() + x.reshape(-1)[: 1 + k // 17].sum())


@pytest.mark.parametrize("count", [12, pytest.param(300, marks=pytest.mark.slow)])
def test_a_process_meeting_many_kernels_keeps_its_mappings_flat(fresh_cache, monkeypatch, count):
    """Real kernels through the engine with a small bound on libraries and plans: results stay
    right, the mappings stay flat, and a graph captured first still replays correctly at the end
    (its libraries are held by the graph, whatever the bound)."""
    monkeypatch.setattr(c_compile, "MAX_LOADED", 3)
    monkeypatch.setattr(engine, "PLAN_CACHE_SIZE", 3)
    c_compile._loaded = c_compile.LibraryCache()
    x = lf.tensor(data(8, seed=2))
    graph = lf.capture(CPU, lambda: (x * 3).exp().sum())
    counts = []
    for n, prog in distinct_programs(count):
        a = data(n, 4, seed=n)
        got = prog(lf.tensor(a)).numpy()
        np.testing.assert_allclose(got, prog(torch.from_numpy(a)).numpy(), rtol=1e-5, atol=1e-6)
        counts.append(mapped_libraries(fresh_cache / "c"))
    assert max(counts[len(counts) // 2:]) <= max(counts[: len(counts) // 2]) + 10   # flat, not growing
    x.copy_(data(8, seed=3))
    np.testing.assert_allclose(graph.replay().numpy(), np.exp(data(8, seed=3).astype(np.float64) * 3).sum(),
                               rtol=1e-5)
