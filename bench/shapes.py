"""Issue 20's numbers: what shape-generic C kernels cost, and what a new size costs.

    python -m bench.shapes [--quick]

genericity: each workload's kernels with sizes printed as runtime values (the default) against
the same kernels with every size a literal (what ``LAZYFUSE_SHAPE_GENERIC=0`` prints: one
library per size, as before issue 20), both captured in one process and their replays timed
round-robin (the kernels alone, and a machine's drift weighs on both alike). new size: a
program run at sizes it has not met, in a fresh cache — compiler runs, and the milliseconds of
a new size's first drain once its library is built.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from bench.common import heading, machine, publish

WORKLOADS = ("chain", "row_sum", "col_sum", "softmax", "gemv", "gemv_small")


def workload(name: str, quick: bool):
    """``(fn, inputs)`` of a workload (lazyfuse imported by the caller's process)."""
    import torch
    import lazyfuse as lf
    g = torch.Generator().manual_seed(0)
    rows, cols = (256, 512) if quick else (4096, 1024)
    if name == "chain":
        n = 1 << (18 if quick else 24)
        x, y = lf.tensor(torch.randn(n, generator=g)), lf.tensor(torch.randn(n, generator=g))
        return lambda: (x * y + 1).tanh() * (-x * x).exp() + y.sigmoid()
    x = lf.tensor(torch.randn(rows, cols, generator=g))
    if name == "row_sum":
        return lambda: x.sum(-1)
    if name == "col_sum":
        return lambda: x.sum(0)
    if name == "softmax":
        return lambda: x.softmax(-1)
    # the decode step's GEMVs: a hidden-1024 and a hidden-256 linear of one token
    h = (64 if name == "gemv_small" else 256) if quick else (256 if name == "gemv_small" else 1024)
    v, w = lf.tensor(torch.randn(1, h, generator=g)), lf.tensor(torch.randn(h, h, generator=g))
    return lambda: lf.nn.functional.linear(v, w)


def child_steady(name: str, quick: bool) -> dict:
    """Median milliseconds of a workload's kernels, sizes as runtime values and as literals:
    each variant captured, the two graphs' replays timed round-robin."""
    import lazyfuse as lf
    from lazyfuse.codegen import c_printer
    from bench import common
    common.configure(smoke=quick)
    dev = lf.device("cpu")
    fn = workload(name, quick)
    graphs = {}
    for generic in (True, False):
        c_printer.SHAPE_GENERIC = generic   # what LAZYFUSE_SHAPE_GENERIC sets at import
        lf.sync(dev)
        for cache in (dev.engine.plans, dev.engine.planned, dev.engine.structures):
            cache.clear()
        graphs["generic" if generic else "specialised"] = lf.capture(dev, fn)
    ms = common.timeit_interleaved({k: g.replay for k, g in graphs.items()}, reps=3 if quick else 25, warmup=3)
    return {k: v * 1e3 for k, v in ms.items()}


def child_new_sizes(quick: bool) -> dict:
    """A row-reduction program over many batch sizes in this (fresh-cache) process."""
    import numpy as np
    import lazyfuse as lf
    sizes = list(range(3, 3 + (8 if quick else 40)))
    first_ms = []
    before = lf.stats().compiler_runs
    for n in sizes:
        x = lf.tensor(np.random.default_rng(n).standard_normal((n, 64)).astype(np.float32))
        t0 = time.perf_counter()
        ((x * 2 + 1).tanh() * x.exp()).sum(-1).numpy()
        first_ms.append((time.perf_counter() - t0) * 1e3)
    return {"sizes": len(sizes), "compiler_runs": lf.stats().compiler_runs - before,
            "first_drain_ms_after_the_first": sorted(first_ms[1:])[len(first_ms[1:]) // 2]}


def in_child(args: list, generic: bool, cache: str) -> dict:
    env = dict(os.environ, LAZYFUSE_SHAPE_GENERIC="1" if generic else "0", LAZYFUSE_CACHE_DIR=cache,
               LAZYFUSE_AUTOTUNE="0", LAZYFUSE_PLAN_STORE="0")   # each variant builds its own plans
    out = subprocess.run([sys.executable, "-m", "bench.shapes", "--child", *args], env=env, capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--child", nargs="+")
    args = p.parse_args(argv)
    if args.child:
        kind, *rest = args.child
        result = child_new_sizes(args.quick) if kind == "new_sizes" else child_steady(rest[0], args.quick)
        print(json.dumps(result))
        return 0
    quick = ["--quick"] if args.quick else []
    rows = []
    with tempfile.TemporaryDirectory() as cache:
        for name in WORKLOADS:
            ms = in_child(["steady", name, *quick], True, cache)
            rows.append({"workload": name, "specialised_ms": ms["specialised"], "generic_ms": ms["generic"],
                         "generic_vs_specialised": ms["generic"] / ms["specialised"]})
    new = {}
    for generic in (False, True):
        with tempfile.TemporaryDirectory() as cache:
            new[generic] = in_child(["new_sizes", *quick], generic, cache)
    lines = heading("Shape-generic kernels (issue 20)", machine(), "cc")
    lines += ["Captured replays timed round-robin, median ms; generic / specialised > 1 means genericity costs "
              "time.", "",
              "| workload | specialised ms | generic ms | generic / specialised |", "|---|---|---|---|"]
    lines += [f"| {r['workload']} | {r['specialised_ms']:.3f} | {r['generic_ms']:.3f} | "
              f"{r['generic_vs_specialised']:.3f} |" for r in rows]
    lines += ["", "New sizes of one program (a row reduction over (n, 64)), fresh cache:", "",
              "| kernels | sizes | compiler runs | first drain of a new size, ms (median) |", "|---|---|---|---|"]
    lines += [f"| {'generic' if g else 'specialised'} | {r['sizes']} | {r['compiler_runs']} | "
              f"{r['first_drain_ms_after_the_first']:.2f} |" for g, r in new.items()]
    publish("shapes", {"steady": rows, "new_sizes": {str(k): v for k, v in new.items()}}, lines,
            {r["workload"]: 1 / r["generic_vs_specialised"] for r in rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
