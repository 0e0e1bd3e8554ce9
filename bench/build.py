"""Issue 15's numbers: the build path at the size of a real model — where a cold drain's time
goes (plan, lower, compile, autotune), and how each part grows with the program.

    python -m bench.build [--quick]

Workloads, each on ``cpu`` with empty caches (a fresh cache folder for the run): the transformer
block of bench/programs.py (forward), a GPT training step at 2 and 4 layers (examples/gpt_step.py;
steps 1 and 2 are two programs: AdamW's first step creates its state), and a synthetic chain of
N recorded ops for N = 100, 1000, 4000 (elementwise ops with a row reduction every 16). The
chain's growth with N is fitted as t ~ N^k per phase (least squares on log-log).
"""
from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

import lazyfuse as lf
import lazyfuse.codegen.autotune as autotune
import lazyfuse.codegen.c_compile as c_compile
import lazyfuse.runtime.build as build_path
from bench.common import heading, machine, publish

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import gpt_step as gpt  # noqa: E402
import transformer_block as tb  # noqa: E402

PHASES = ("plan", "lower", "compile", "autotune")
CHAIN_SIZES = (100, 1000, 4000)


def chain(x, n: int):
    """``n`` recorded ops on ``x``: a chain of elementwise ops, a row reduction every 16th."""
    for k in range(n):
        r = k % 16
        if r == 15:
            x = x - x.amax(-1, keepdim=True)
        elif r % 3 == 0:
            x = x * 0.999
        elif r % 3 == 1:
            x = x + 0.001
        else:
            x = x.tanh()
    return x


@contextlib.contextmanager
def build_timer(device):
    """Seconds spent per phase of the build path while the block runs (``times``: phase -> s,
    and ``compiler_runs``: C compiler invocations)."""
    times = {**dict.fromkeys(PHASES, 0.0), "compiler_runs": 0}
    backend_cls = type(device.backend)
    real_plan, real_lower = build_path.make_plan, build_path.lower_steps
    real_compile, real_choose, real_cc = backend_cls.compile_plan, autotune.choose, c_compile._compile

    def timed(phase, fn):
        def run(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                times[phase] += time.perf_counter() - start
        return run

    build_path.make_plan = timed("plan", real_plan)
    build_path.lower_steps = timed("lower", real_lower)
    backend_cls.compile_plan = timed("compile", real_compile)   # autotuning included: taken out below
    autotune.choose = timed("autotune", real_choose)

    def cc(*args, **kwargs):
        times["compiler_runs"] += 1
        return real_cc(*args, **kwargs)
    c_compile._compile = cc
    try:
        yield times
    finally:
        build_path.make_plan, build_path.lower_steps = real_plan, real_lower
        backend_cls.compile_plan, autotune.choose, c_compile._compile = real_compile, real_choose, real_cc
        times["compile"] -= times["autotune"]


def measure(name: str, run) -> dict:
    """Time ``run()`` (which drains) with its build path split into phases."""
    dev = lf.device("cpu")
    before = lf.stats(dev)
    ops, builds = before.ops_recorded, before.fusion_cache_misses
    start = time.perf_counter()
    with build_timer(dev) as times:
        kernels = run()
    wall = time.perf_counter() - start
    after = lf.stats(dev)
    return {"workload": name, "ops": after.ops_recorded - ops, "drains_built": after.fusion_cache_misses - builds,
            "kernels": kernels, "wall_s": wall, **times}


def block_run(d: int, t: int):
    p = {k: lf.tensor(v) for k, v in tb.make_weights(d).items()}
    x = lf.tensor(torch.randn(1, t, d, generator=torch.Generator().manual_seed(0)))

    def run():
        with lf.testing.count_launches("cpu") as c:
            tb.block_lf(x, p, 8).numpy()
        return c.kernels_launched
    return run


def gpt_run(layers: int, width: int, quick: bool):
    shape = dict(vocab=65, block=8 if quick else 64, width=width, layers=layers, heads=4, batch=2 if quick else 8)

    def run():
        _, step = gpt.lf_trainer(device="cpu", **shape)
        with lf.testing.count_launches("cpu") as c:
            for _ in range(2):
                step().item()
        return c.kernels_launched
    return run


def chain_run(n: int):
    x = lf.tensor(torch.randn(32, 64, generator=torch.Generator().manual_seed(0)))

    def run():
        with lf.testing.count_launches("cpu") as c:
            chain(x, n).numpy()
        return c.kernels_launched
    return run


def exponent(sizes, values) -> float:
    """k of the least-squares fit values ~ sizes^k (NaN when a value is not positive)."""
    if min(values) <= 0:
        return float("nan")
    xs, ys = [math.log(s) for s in sizes], [math.log(v) for v in values]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    # the smoke run only checks that the script works: one small GPT, short chains, no tuning
    # (a cold GPT step compiles for minutes on a loaded 2-core machine)
    gpts = ((1, 16),) if args.quick else ((2, 128), (4, 256))
    sizes = (50, 100, 200) if args.quick else CHAIN_SIZES
    saved = {k: os.environ.get(k) for k in ("LAZYFUSE_CACHE_DIR", "LAZYFUSE_AUTOTUNE")}
    with tempfile.TemporaryDirectory(prefix="lazyfuse-build-bench-") as cold:
        os.environ["LAZYFUSE_CACHE_DIR"] = cold   # empty caches: every compile and tuning is a cold one
        if args.quick:
            os.environ["LAZYFUSE_AUTOTUNE"] = "0"
        try:
            rows = [measure("transformer block", block_run(32 if args.quick else 512, 8 if args.quick else 128))]
            rows += [measure(f"GPT step, {layers} layer{'s' if layers > 1 else ''} x {width}",
                             gpt_run(layers, width, args.quick)) for layers, width in gpts]
            chains = [measure(f"chain of {n} ops", chain_run(n)) for n in sizes]
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    growth = {phase: exponent(sizes, [r[phase] for r in chains]) for phase in (*PHASES, "wall_s")}
    info = machine()
    lines = heading("build-path benchmarks", info) + [
        "Cold build path on `cpu` (empty caches), seconds per phase (steps 1 and 2 of the GPT: two builds):", "",
        "| workload | ops | drains built | kernels | compiler runs | plan s | lower s | compile s | autotune s | wall s |",
        "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows + chains:
        lines.append(f"| {r['workload']} | {r['ops']} | {r['drains_built']} | {r['kernels']} | {r['compiler_runs']} | "
                     f"{r['plan']:.3f} | {r['lower']:.3f} | {r['compile']:.2f} | {r['autotune']:.2f} | {r['wall_s']:.2f} |")
    lines += ["", "Growth with the chain's length N = " + ", ".join(map(str, sizes)) + " (t ~ N^k): " +
              ", ".join(f"{phase} k = {k:.2f}" for phase, k in growth.items()), ""]
    publish("build", {"machine": info, "workloads": rows, "chain": chains, "chain_growth_exponent": growth}, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
