"""The planner's cost grows near-linearly with the drain (issue 15).

Planning a program 8 times larger is compared with ``trace`` (a linear walk over the same
graph) at both sizes: the planner's growth over trace's would be 1 for a linear planner, 1.4
for N log N and 8 for a quadratic one; measured here it is 3-4 (the larger graphs' dicts and
sets fall out of the caches) and the planner before issue 15 reached ~340 on the optimizer step.
Nothing is compiled; each measurement is the best of several runs, the two sizes interleaved
and the garbage collector off, so a loaded machine slows both sides alike.
"""
import gc
import time

import numpy as np

import lazyfuse as lf
from bench.build import chain
from lazyfuse.ir.planner import DrainGraph, plan
from lazyfuse.runtime.build import trace

GROWTH = 8
BOUND = 10.0


def _best(fn, runs):
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def _relative_growth(build, small: int, runs: int = 5) -> float:
    lf.sync()
    storages = {n: [t._storage for t in build(n)] for n in (small, small * GROWTH)}
    times = {}
    gc.disable()
    try:
        for _ in range(runs):
            for n, roots in storages.items():
                nodes, _, _, targets = trace(roots)
                t_trace = _best(lambda: trace(roots), 1)
                t_plan = _best(lambda: plan(DrainGraph(nodes, [r for r, _ in targets], [t for _, t in targets])), 1)
                old = times.get(n, (float("inf"), float("inf")))
                times[n] = (min(old[0], t_plan), min(old[1], t_trace))
    finally:
        gc.enable()
        lf.sync()
    (plan_s, trace_s), (plan_l, trace_l) = times[small], times[small * GROWTH]
    return (plan_l / plan_s) / (trace_l / trace_s)


def _chain(n):
    return [chain(lf.tensor(np.ones((4, 8), np.float32)), n)]


def _adamw_step(n_params):
    """An optimizer step over ``n_params`` parameters: multi-output and foreach merges."""
    params = [lf.tensor(np.full((3, 5), k, np.float32), requires_grad=True) for k in range(n_params)]
    for p in params:
        p.grad = lf.tensor(np.ones((3, 5), np.float32))
    opt = lf.optim.AdamW(params, lr=1e-2)
    lf.sync()
    opt.step()
    return params + [t for pair in opt.state.values() for t in pair]


def test_planning_a_chain_grows_near_linearly():
    growth = _relative_growth(_chain, 250)
    assert growth < BOUND, f"planning grew {growth:.1f}x more than a linear walk from 250 to 2000 ops"


def test_planning_an_optimizer_step_grows_near_linearly():
    growth = _relative_growth(_adamw_step, 12)
    assert growth < BOUND, f"planning grew {growth:.1f}x more than a linear walk from 12 to 96 parameters"
