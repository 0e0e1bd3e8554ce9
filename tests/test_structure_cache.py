"""A new size of a known structure plans from the cached structure (issue 20).

The plan key holds the sizes, so a new batch size misses the plan cache; its size-free
structure (runtime.structure) finds the plan an earlier size built, whose groups are lowered
at the new sizes and keep their compiled kernels where the code is the same
(``lf.stats().plans_rebound``): no planner run (``plans_built``), no compiler, no tuning. Where
the code differs at the new sizes (a kernel turning parallel, another tuning class) the drain
plans from scratch. (Random programs at three sizes: tests/test_shape_generic.py.)
"""
import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

import lazyfuse as lf
from lazyfuse.codegen import autotune
from lazyfuse.ir.dtypes import float32
from lazyfuse.ir.node import Op
from lazyfuse.ir.view import View
from lazyfuse.runtime import cpu
from lazyfuse.runtime.build import trace
from lazyfuse.runtime.structure import structure_key

DEVICES = ["cpu", "interpreter"]


def program(lib, x, w):
    """A fused chain into a row reduction, a softmax and a column reduction: two kernels."""
    y = ((x * 2 + 1).tanh() * x.exp()).sum(-1, keepdim=True)
    return (x * w - y).softmax(-1) + x.sum(0)


def run(dev, n: int, cols: int = 24, seed: int = 0):
    """``program`` at ``(n, cols)`` on ``dev``, checked against float64 torch; the stats it moved."""
    rng = np.random.default_rng(seed + n)
    a = rng.standard_normal((n, cols)).astype(np.float32)
    w = rng.standard_normal(cols).astype(np.float32)
    before = lf.stats(dev)
    got = program(lf, lf.tensor(a, device=dev), lf.tensor(w, device=dev)).numpy()
    moved = lf.stats(dev) - before
    want = program(torch, torch.from_numpy(a).double(), torch.from_numpy(w).double()).numpy()
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
    return moved


@pytest.mark.parametrize("device", DEVICES)
def test_a_second_size_plans_from_the_first_sizes_structure(device):
    dev = lf.device(device)
    cols = {"cpu": 24, "interpreter": 40}[device]   # a structure no other test of this device built
    first = run(dev, 5, cols)
    for n in (6, 7):
        d = run(dev, n, cols)
        assert (d.fusion_cache_misses, d.plans_built, d.plans_rebound) == (1, 0, 1), d
        assert (d.compiler_runs, d.autotune_runs) == (0, 0)
        assert d.kernels_launched == first.kernels_launched == 2
    again = run(dev, 6, cols)   # a size met before: its own plan, the steady state
    assert (again.fusion_cache_hits, again.plans_built, again.plans_rebound) == (1, 0, 0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("where", ["before", "after"])
def test_values_left_unread_cost_a_rebinding_not_a_planning(device, where):
    """A drain whose tape also holds nodes no live result reads (a value a run left unread, a
    result dropped before the drain) is another key: it misses the plan cache. Its structure
    leaves those nodes out (runtime.structure.live_parts), so it finds the plan the program
    built when recorded alone and rebinds it: no planner, no compiler, the same kernels and
    values; the next drain with the same leftovers hits its own plan."""
    dev = lf.device(device)
    cols = {"cpu": 60, "interpreter": 56}[device]   # a structure no other test of this device built
    rng = np.random.default_rng(7)
    a = rng.standard_normal((9, cols)).astype(np.float32)
    w = rng.standard_normal(cols).astype(np.float32)
    x, lw = lf.tensor(a, device=dev), lf.tensor(w, device=dev)
    alone = program(lf, x, lw).numpy()
    want = program(torch, torch.from_numpy(a).double(), torch.from_numpy(w).double()).numpy()
    np.testing.assert_allclose(alone, want, rtol=2e-5, atol=2e-5)

    def with_leftover():
        left = (x * 3.0).exp() if where == "before" else None   # recorded, never read
        out = program(lf, x, lw)
        if where == "after":
            left = (lw - 1.0).abs()
        del left
        before = lf.stats(dev)
        got = out.numpy()
        return got, lf.stats(dev) - before

    got, d = with_leftover()
    assert (d.fusion_cache_misses, d.plans_built, d.plans_rebound, d.compiler_runs) == (1, 0, 1, 0), d
    assert (d.kernels_launched, d.ops_elided) == (2, 2), d
    np.testing.assert_array_equal(got, alone)
    got, d = with_leftover()
    assert (d.fusion_cache_hits, d.plans_built, d.plans_rebound) == (1, 0, 0), d
    np.testing.assert_array_equal(got, alone)


def test_a_size_1_dim_is_another_structure():
    dev = lf.device("cpu")
    run(dev, 5, 28)
    d = run(dev, 1, 28)   # the row loop goes away: other code
    assert d.plans_built == 1 and d.plans_rebound == 0


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(2, 70), min_size=1, max_size=4, unique=True))
def test_every_size_equals_torch_with_the_same_kernels(sizes):
    dev = lf.device("cpu")
    for n in sizes:
        d = run(dev, n, 20, seed=len(sizes))
        assert d.kernels_launched == 2
        assert d.plans_built + d.plans_rebound + d.fusion_cache_hits == 1, d
        if not d.plans_built:
            assert d.compiler_runs == 0, d


def test_code_that_changes_with_the_size_plans_anew(monkeypatch):
    """A kernel over the parallel threshold prints an OpenMP loop: the cached serial plan does
    not serve it, so the drain plans (and compiles) instead of reusing the wrong code."""
    dev = lf.device("cpu")
    monkeypatch.setenv("LAZYFUSE_PARALLEL_THRESHOLD", "4096")
    small = run(dev, 8, 36)
    big = run(dev, 400, 36)     # 400 x 36 elements: over the threshold
    assert big.plans_built == 1 and big.plans_rebound == 0, big
    assert big.kernels_launched == small.kernels_launched
    assert run(dev, 9, 36).plans_rebound == 1   # the small structure's plan still serves small sizes


def test_a_tuned_choice_serves_its_size_class_only(monkeypatch, tmp_path):
    """With tuning on, a new size in the tuned size class takes the tuned config (no benchmark);
    one in another class plans and tunes for its own class."""
    monkeypatch.setenv("LAZYFUSE_AUTOTUNE", "1")
    monkeypatch.setenv("LAZYFUSE_CACHE_DIR", str(tmp_path))
    dev = lf.device("cpu")
    monkeypatch.setattr(dev.backend, "tuner", None)
    monkeypatch.setattr(autotune, "benchmark", lambda run, *a, **k: (run(), 1.0)[1])
    monkeypatch.setattr(cpu, "VARIANT_WORK_FACTOR", 0)   # (small kernels: tuned over their variants too)
    tuned = run(dev, 5, 44)
    assert tuned.autotune_runs > 0
    same_class = run(dev, 7, 44)    # rows 5 and 7 round to 8
    assert (same_class.plans_rebound, same_class.autotune_runs) == (1, 0)
    other = run(dev, 12, 44)        # 16
    assert other.plans_built == 1 and other.autotune_runs > 0


def test_the_debug_line_says_a_plan_came_from_its_structure(capsys):
    import importlib
    explain = importlib.import_module("lazyfuse.explain")
    dev = lf.device("cpu")
    run(dev, 5, 52)
    saved, explain.engine.drain_hook = explain.engine.drain_hook, explain.print_drain
    try:
        run(dev, 6, 52)
    finally:
        explain.engine.drain_hook = saved
    assert "(build path, from its structure's cached plan)" in capsys.readouterr().out


def desc(op, shape, *rest):
    return (op, float32, shape, *rest)


def test_the_structure_renames_sizes_one_to_one():
    def key(rows, cols, stride):
        view = View((cols, rows), (1, stride))
        descs = (desc(Op.BUFFER, (rows, cols), 0), desc(Op.VIEW, (cols, rows), view, (0,)),
                 desc(Op.EXP, (cols, rows), None, (1,)))
        return structure_key((descs, ((2, None),)))
    assert key(5, 8, 8) == key(6, 9, 9)       # sizes renamed, the stride still the row length
    assert key(5, 8, 8) != key(5, 5, 5)       # two sizes equal: another structure
    assert key(5, 8, 8) != key(1, 8, 8)       # a size 1
    assert key(5, 8, 8) != key(5, 8, 16)      # a stride that is no size of the program


def test_a_plans_graph_is_its_drains_dag_without_the_buffers():
    """The graph a cached plan keeps (``lf.explain`` and a rebind at other sizes read it) is made
    from its key when first read: node for node the drain's traced DAG (op, dtype, shape,
    attribute, sources, a scalar's value), with no buffer."""
    dev = lf.device("cpu")
    lf.sync(dev)
    x = lf.tensor(np.arange(24, dtype=np.float32).reshape(4, 6))
    y = (x * 2.5 + 1)[:, ::2].T.exp()        # scalars, a strided slice, a transpose
    z = lf.tensor(np.ones(3, np.float32))
    z.add_(y.sum(1))                          # an in-place write into a live buffer
    nodes, _, _, targets = trace(dev.engine._live_roots())
    lf.sync(dev)
    plan = next(reversed(dev.engine.plans.values()))
    assert plan._graph is None                # not made at the build
    graph = plan.graph
    assert graph is plan.graph and len(graph.nodes) == len(nodes)
    at, at_traced = {id(n): i for i, n in enumerate(graph.nodes)}, {id(n): i for i, n in enumerate(nodes)}
    for made, traced in zip(graph.nodes, nodes):
        assert (made.op, made.dtype, made.shape) == (traced.op, traced.dtype, traced.shape)
        assert [at[id(s)] for s in made.srcs] == [at_traced[id(s)] for s in traced.srcs]
        assert made.arg is None if traced.op is Op.BUFFER else made.arg == traced.arg
    assert (graph.roots, graph.root_targets) == ([r for r, _ in targets], [t for _, t in targets])
    assert {n.op for n in graph.nodes} >= {Op.BUFFER, Op.SCALAR, Op.VIEW, Op.EXP, Op.SUM}
    np.testing.assert_allclose(z.numpy(), 1 + np.exp(np.arange(24).reshape(4, 6)[:, ::2].T * 2.5 + 1).sum(1),
                               rtol=1e-5)
