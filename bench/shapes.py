"""Issue 20's numbers: what shape-generic C kernels cost, and what a new size costs.

    python -m bench.shapes [--quick]

genericity: each workload's steady state with sizes printed as runtime values (the default)
against the same kernels with every size a literal (``LAZYFUSE_SHAPE_GENERIC=0``, one library
per size, as before issue 20), each in a process of its own. new size: a program run at sizes
it has not met, in a fresh cache — compiler runs, and the milliseconds of a new size's first
drain once its library is built (planning and lowering only).
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

WORKLOADS = ("chain", "row_sum", "col_sum", "softmax", "gemv")


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
    h = 256 if quick else 1024
    v, w = lf.tensor(torch.randn(1, h, generator=g)), lf.tensor(torch.randn(h, h, generator=g))
    return lambda: lf.nn.functional.linear(v, w)


def child_steady(name: str, quick: bool) -> float:
    """Median milliseconds of a workload's steady state (this process's sizes setting)."""
    import lazyfuse as lf
    from bench import common
    common.configure(smoke=quick)
    from bench.common import timeit
    fn = workload(name, quick)

    def step():
        out = fn()
        lf.sync()
        return out
    return timeit(step, reps=3 if quick else 15, warmup=3) * 1e3


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
               LAZYFUSE_AUTOTUNE="0")
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
            ms = {g: in_child(["steady", name, *quick], g, cache) for g in (False, True)}
            rows.append({"workload": name, "specialised_ms": ms[False], "generic_ms": ms[True],
                         "generic_vs_specialised": ms[True] / ms[False]})
    new = {}
    for generic in (False, True):
        with tempfile.TemporaryDirectory() as cache:
            new[generic] = in_child(["new_sizes", *quick], generic, cache)
    lines = heading("Shape-generic kernels (issue 20)", machine(), "cc")
    lines += ["Steady state, median ms; generic / specialised > 1 means genericity costs time.", "",
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
