"""Issue 15's numbers: the build path at the size of a real model — where a cold drain's time
goes (plan, lower, compile, autotune), and how each part grows with the program.

    python -m bench.build [--quick] [--targets]

Workloads, each on ``cpu`` with empty caches (a fresh cache folder for the run): the transformer
block of bench/programs.py (forward), a GPT training step at 2 and 4 layers (examples/gpt_step.py;
steps 1 and 2 are two programs: AdamW's first step creates its state), and a synthetic chain of
N recorded ops for N = 100, 1000, 4000 (elementwise ops with a row reduction every 16). The
chain's growth with N is fitted as t ~ N^k per phase (least squares on log-log).

Then the issue's targets, each in its own process so that nothing of the build path is already
in memory: the 0.41M GPT (2 layers x 128) and the 3.2M one (4 x 256), steps 1 and 2 lazily and
``lf.capture`` of the step (its three warmup steps, the capture and one replay), cold (an empty
cache folder) and warm (a second process on that folder). Each row gives the wall time and the
CPU seconds of the process and its compilers (on a busy machine the CPU seconds are the steadier
figure: wall time there is CPU time spread over the cores other tenants leave). ``--targets``
runs only these.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import resource
import subprocess
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


# (layers, width) -> the seconds each target allows: (cold, warm); None where the issue sets none
TARGETS = {(2, 128): (5.0, 1.0), (4, 256): (15.0, None)}
MODES = ("lazy", "capture")
TUNE_AFTER = ("1", "3")   # LAZYFUSE_AUTOTUNE_AFTER: tuned on the build path (the default), or at run 3


def cpu_seconds() -> float:
    """User + system seconds of this process and its finished children (the compilers)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def target_child(mode: str, layers: int, width: int, quick: bool) -> dict:
    """(Run in a fresh process.) Seconds from a built model to the end of ``mode``: the losses of
    steps 1 and 2 read (``lazy``), or ``lf.capture`` of the step and one replay's loss read."""
    shape = dict(vocab=65, block=8 if quick else 64, width=width, layers=layers, heads=4, batch=2 if quick else 8)
    _, step = gpt.lf_trainer(device="cpu", **shape)
    dev = lf.device("cpu")
    before = lf.stats(dev)
    wall, cpu = time.perf_counter(), cpu_seconds()
    if mode == "lazy":
        for _ in range(2):
            step().item()
    else:
        lf.capture(dev, step).replay().item()
    done = lf.stats(dev) - before
    return {"wall_s": time.perf_counter() - wall, "cpu_s": cpu_seconds() - cpu,
            "compiler_runs": done.compiler_runs, "autotune_runs": done.autotune_runs}


def run_target(mode: str, layers: int, width: int, cache: str, quick: bool, tune_after: str) -> dict:
    env = {**os.environ, "LAZYFUSE_CACHE_DIR": cache, "LAZYFUSE_AUTOTUNE_AFTER": tune_after}
    cmd = [sys.executable, "-m", "bench.build", "--child", mode, str(layers), str(width)] + (["--quick"] if quick else [])
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600,
                         cwd=Path(__file__).resolve().parents[1])
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def targets(quick: bool) -> list:
    """The issue's target rows: per model, mode and tuning setting, a cold process, then a warm one.
    Tuning runs on the build path by default (``LAZYFUSE_AUTOTUNE_AFTER=1``); ``3`` defers it to a
    plan's third run, the fast cold start."""
    rows = []
    for (layers, width), (cold_goal, warm_goal) in TARGETS.items():
        if quick and layers > 2:
            continue
        for tune_after in TUNE_AFTER[:1] if quick else TUNE_AFTER:
            for mode in MODES[:1] if quick else MODES:   # the smoke run: one cold and one warm process
                with tempfile.TemporaryDirectory(prefix="lazyfuse-build-target-") as cache:
                    for state, goal in (("cold", cold_goal), ("warm", warm_goal)):
                        r = run_target(mode, layers, width, cache, quick, tune_after)
                        rows.append({"model": f"{layers} x {width}", "mode": mode, "tune_after": tune_after,
                                     "cache": state, "goal_s": goal, **r})
    return rows


def target_lines(rows: list) -> list:
    lines = ["The issue's targets, each a fresh process from a built model (cold: empty cache folder; warm: a "
             "second process on it). `lazy`: steps 1 and 2; `capture`: `lf.capture` (3 warmup steps, the "
             "capture) and one replay. `tuned at run`: `LAZYFUSE_AUTOTUNE_AFTER` (1, the default: on the build "
             "path; 3: the fast cold start)", "",
             "| GPT | mode | tuned at run | cache | wall s | CPU s | compiler runs | autotune runs | target |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        goal = "-" if r["goal_s"] is None else f"< {r['goal_s']:g} s: {'met' if r['wall_s'] < r['goal_s'] else 'not met'}"
        lines.append(f"| {r['model']} | {r['mode']} | {r['tune_after']} | {r['cache']} | {r['wall_s']:.2f} | {r['cpu_s']:.2f} | "
                     f"{r['compiler_runs']} | {r['autotune_runs']} | {goal} |")
    return lines


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
    p.add_argument("--targets", action="store_true", help="only the issue's cold/warm target rows")
    p.add_argument("--child", nargs=3, metavar=("MODE", "LAYERS", "WIDTH"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(target_child(args.child[0], int(args.child[1]), int(args.child[2]), args.quick)))
        return 0
    info = machine()
    goals = targets(args.quick)
    if args.targets:
        publish("build-targets", {"machine": info, "targets": goals},
                heading("build-path targets", info) + target_lines(goals))
        return 0
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
    lines = heading("build-path benchmarks", info) + [
        "Cold build path on `cpu` (empty caches), seconds per phase (steps 1 and 2 of the GPT: two builds):", "",
        "| workload | ops | drains built | kernels | compiler runs | plan s | lower s | compile s | autotune s | wall s |",
        "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows + chains:
        lines.append(f"| {r['workload']} | {r['ops']} | {r['drains_built']} | {r['kernels']} | {r['compiler_runs']} | "
                     f"{r['plan']:.3f} | {r['lower']:.3f} | {r['compile']:.2f} | {r['autotune']:.2f} | {r['wall_s']:.2f} |")
    lines += ["", "Growth with the chain's length N = " + ", ".join(map(str, sizes)) + " (t ~ N^k): " +
              ", ".join(f"{phase} k = {k:.2f}" for phase, k in growth.items()), ""] + target_lines(goals)
    publish("build", {"machine": info, "workloads": rows, "chain": chains, "chain_growth_exponent": growth,
                      "targets": goals}, lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
