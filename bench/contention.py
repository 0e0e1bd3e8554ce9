"""A shared machine: the same work on a quiet machine and beside one competing busy process, in
one run, so the slowdown of each variant is read against its own quiet time.

    python -m bench.contention [--quick]

Goals (issue 14): the captured 32x64 MLP training step stays within 3x of its quiet time, and
the lazy fused chain (``bench.core``'s, 2^20 floats) slows down at most 2x as much as torch
eager's own chain does. Every variant is the median of round-robin calls
(``timeit_interleaved``); torch runs with the thread count lazyfuse's kernels get.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

import lazyfuse as lf
from bench.common import BusyProcesses, heading, machine, match_threads, publish, timeit_interleaved
from bench.core import chain_lf, chain_torch
from bench.training import torch_step

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import train_mlp  # noqa: E402

GOAL_CAPTURED = 3.0      # captured training step: busy / quiet at most this
GOAL_CHAIN = 2.0         # lazy chain's slowdown over torch eager's at most this


def variants(n_chain: int) -> dict:
    dev = lf.device("cpu")
    g = torch.Generator().manual_seed(0)
    xt, yt = torch.randn(n_chain, generator=g), torch.randn(n_chain, generator=g)
    x, y = lf.tensor(xt), lf.tensor(yt)

    def chain():
        out = chain_lf(x, y)
        lf.sync()
        return out

    sizes = (64,) * 4
    xs, ys = train_mlp.make_data(1, 32, sizes)
    _, step, inputs = train_mlp.lf_trainer(sizes, dev, lr=1e-3)
    inputs["x"], inputs["y"] = lf.tensor(xs[0]), lf.tensor(ys[0])
    graph = lf.capture(dev, step)

    def replay():
        inputs["x"].copy_(xs[0])
        graph.replay()
        lf.sync(dev)

    return {"lazyfuse chain": chain, "torch eager chain": lambda: chain_torch(xt, yt),
            "lazyfuse captured train 32x64": replay, "torch eager train 32x64": torch_step(32, sizes)}


def measure(fns: dict, reps: int, busy: int) -> dict:
    with BusyProcesses(busy):
        match_threads()
        times = timeit_interleaved(fns, reps=reps, warmup=3, min_time=0.5 if reps > 20 else 0.0)
        threads = torch.get_num_threads()
    return {"threads": threads, "us": {k: v * 1e6 for k, v in times.items()}}


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    reps = 10 if args.quick else 300
    fns = variants(1 << 16 if args.quick else 1 << 20)
    quiet, busy = measure(fns, reps, 0), measure(fns, reps, 1)
    slow = {k: busy["us"][k] / quiet["us"][k] for k in fns}
    captured = slow["lazyfuse captured train 32x64"]
    chain = slow["lazyfuse chain"] / slow["torch eager chain"]
    info = machine()
    lines = heading("shared-machine benchmarks", info, "torch") + [
        "Each variant quiet, then beside one busy process (`while True: pass`), in one run; median of "
        "round-robin calls, torch with lazyfuse's thread count "
        f"(quiet: {quiet['threads']}, busy: {busy['threads']}).", "",
        "| variant | quiet us | busy us | slowdown |", "|---|---|---|---|"]
    for k in fns:
        lines.append(f"| {k} | {quiet['us'][k]:.1f} | {busy['us'][k]:.1f} | {slow[k]:.2f}x |")
    lines += ["", f"- captured training step under load: {captured:.2f}x its quiet time "
              f"(goal <= {GOAL_CAPTURED}x: {'met' if captured <= GOAL_CAPTURED else 'NOT met'})",
              f"- lazy chain's slowdown over torch eager's: {chain:.2f}x "
              f"(goal <= {GOAL_CHAIN}x: {'met' if chain <= GOAL_CHAIN else 'NOT met'})", ""]
    ratios = {"captured train: goal / slowdown": GOAL_CAPTURED / captured,
              "lazy chain: goal / (slowdown vs eager's)": GOAL_CHAIN / chain}
    publish("contention", {"machine": info, "quiet": quiet, "busy": busy, "slowdown": slow,
                           "captured_slowdown": captured, "chain_slowdown_vs_eager": chain}, lines, ratios)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
