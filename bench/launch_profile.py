"""Where a captured nanoGPT training step's replay spends its time, launch by launch.

    python -m bench.launch_profile [--quick] [--top N] [--torch]

The issue-19 step (bench/torch_frontend.py's nanoGPT, AdamW) is captured, then its recorded launch
list is run in order, round after round, at one thread (lazyfuse's and torch's), each launch timed
in CPU time (``time.thread_time_ns``: a busy machine's descheduling is not counted) where it runs
in the sequence: its caches as a replay leaves them (a small torch op right after a large matmul
costs tens of us more than alone). Printed: the median per launch summed by kind (matmul, C
kernel, gather...), the slowest launches with the buffers they bind (and a matmul's operand
layouts), and the whole replay's median. ``--torch`` adds torch.profiler's table of the eager
step at one thread, to set op against op. Numbers from a shared machine are noisy.
"""
from __future__ import annotations

import argparse
import statistics
import time
from collections import defaultdict

import torch

import lazyfuse as lf
from bench.torch_frontend import GPT, _OneThread, gpt_setup, trainer
from lazyfuse.graph.capture import _records


def captured_step(dev, quick: bool):
    cfg, x, y = gpt_setup(quick)
    torch.manual_seed(0)
    return lf.capture(dev, trainer(lf.lazy(GPT(cfg), device=dev), lf.lazy(x, device=dev), lf.lazy(y, device=dev)))


def launch_times(graph, rounds: int) -> list:
    """Microseconds of CPU time of each recorded launch, median over ``rounds`` in-order passes."""
    thunks = graph._hardware.thunks
    times = [[] for _ in thunks]
    for _ in range(rounds):
        for k, launch in enumerate(thunks):
            t0 = time.thread_time_ns()
            launch()
            times[k].append(time.thread_time_ns() - t0)
    return [statistics.median(t) / 1e3 for t in times]


def describe(launch, name, bufs) -> str:
    """A matmul's operands as shape(strides), else the buffers the launch binds."""
    tensors = [a for a in getattr(launch, "args", ()) if isinstance(a, torch.Tensor)]
    if name == "matmul" and tensors:
        return " ".join(f"{tuple(t.shape)}{tuple(t.stride())}" for t in tensors)
    return " ".join(f"{b.dtype.name}[{b.numel}]" for b in bufs)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: a small model, few rounds")
    ap.add_argument("--top", type=int, default=25, help="how many of the slowest launches to list")
    ap.add_argument("--torch", action="store_true", help="also torch.profiler's table of the eager step")
    args = ap.parse_args(argv)
    dev = lf.device("cpu")
    rounds = 3 if args.quick else 15
    print("# launch profile of the captured nanoGPT step, one thread, CPU time (noisy: a shared machine)")
    with _OneThread():
        graph = captured_step(dev, args.quick)
        for _ in range(3):
            graph.replay()
        per_launch = launch_times(graph, rounds)
        replays = []
        for _ in range(rounds):
            t0 = time.thread_time()
            graph.replay()
            replays.append(time.thread_time() - t0)
        records = list(_records(graph._hardware.host))
        by_kind = defaultdict(float)
        for us, (name, *_rest) in zip(per_launch, records):
            by_kind["C kernel" if name.startswith("k") and name[1:].isdigit() else name] += us
        print(f"{len(per_launch)} launches; replay median {statistics.median(replays) * 1e3:.2f} ms, "
              f"launches summed {sum(per_launch) / 1e3:.2f} ms")
        for kind, us in sorted(by_kind.items(), key=lambda kv: -kv[1]):
            print(f"  {kind}: {us / 1e3:.2f} ms")
        order = sorted(range(len(per_launch)), key=lambda k: -per_launch[k])
        for k in order[:args.top]:
            name, bufs = records[k][0], records[k][1]
            print(f"{per_launch[k]:8.1f} us  #{k:<4d} {name:10s} {describe(graph._hardware.thunks[k], name, bufs)[:140]}")
        if args.torch:
            from torch.profiler import ProfilerActivity, profile
            cfg, x, y = gpt_setup(args.quick)
            torch.manual_seed(0)
            step = trainer(GPT(cfg), x, y)
            for _ in range(3):
                step()
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                for _ in range(rounds):
                    step()
            print(f"# torch eager, {rounds} steps")
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
