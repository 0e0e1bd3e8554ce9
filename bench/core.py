"""Issue 2's numbers: the fused elementwise chain and the per-op recording overhead.

    python -m bench.core [--quick]

chain: ``tanh(x*y+1)*exp(-x*x)+sigmoid(y)`` over float32, lazyfuse's steady state (plan
cached, output buffer pooled) against torch eager and warm ``torch.compile`` in this process.
overhead: 20 small elementwise ops recorded and drained per step, steady state, divided by 20.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np
import torch

import lazyfuse as lf
from bench.common import compiled, heading, machine, publish, timeit


def chain_torch(x, y):
    return torch.tanh(x * y + 1) * torch.exp(-x * x) + torch.sigmoid(y)


def chain_lf(x, y):
    return (x * y + 1).tanh() * (-x * x).exp() + y.sigmoid()


def bench_chain(n: int, reps: int) -> dict:
    g = torch.Generator().manual_seed(0)
    xt, yt = torch.randn(n, generator=g), torch.randn(n, generator=g)
    x, y = lf.tensor(xt), lf.tensor(yt)
    ref = chain_torch(xt.double(), yt.double())

    def run_lf():
        out = chain_lf(x, y)
        lf.sync()
        return out

    err = float((torch.from_numpy(run_lf().numpy()).double() - ref).abs().max())
    t_lf = timeit(run_lf, reps)
    t_eager = timeit(lambda: chain_torch(xt, yt), reps)
    cfn = compiled(chain_torch)
    t_compile = timeit(lambda: cfn(xt, yt), reps, warmup=3) if cfn is not None else float("nan")
    return {"n": n, "lazyfuse_ms": t_lf * 1e3, "eager_ms": t_eager * 1e3, "compile_ms": t_compile * 1e3,
            "vs_eager": t_eager / t_lf, "vs_compile": t_lf / t_compile, "max_err": err}


def bench_overhead(reps: int) -> dict:
    a = lf.tensor(np.ones(16, np.float32))

    def step():
        b = a
        for _ in range(10):
            b = b * 1.0001 + 0.5
        lf.sync()
        return b

    t = timeit(step, reps=reps, warmup=5, min_time=1.0)
    at = torch.ones(16)

    def step_torch():
        b = at
        for _ in range(10):
            b = b * 1.0001 + 0.5
        return b

    te = timeit(step_torch, reps=reps, warmup=5, min_time=1.0)
    return {"ops_per_step": 20, "lazyfuse_us_per_op": t / 20 * 1e6, "eager_us_per_op": te / 20 * 1e6}


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    sizes = [1 << 20] if args.quick else [1 << 20, 1 << 22, 1 << 24]
    reps = 3 if args.quick else 7
    chains = [bench_chain(n, reps) for n in sizes]
    over = bench_overhead(50 if args.quick else 300)
    info = machine()
    lines = heading("core benchmarks", info, "torch", "cc") + [
             "`tanh(x*y+1)*exp(-x*x)+sigmoid(y)`, float32, median of repeats, one process:", "",
             "| n | lazyfuse ms | torch eager ms | torch.compile ms | lazyfuse vs eager | lazyfuse / compile | max err |",
             "|---|---|---|---|---|---|---|"]
    for c in chains:
        lines.append(f"| 2^{c['n'].bit_length() - 1} | {c['lazyfuse_ms']:.2f} | {c['eager_ms']:.2f} | "
                     f"{c['compile_ms']:.2f} | {c['vs_eager']:.1f}x faster | {c['vs_compile']:.2f}x the time | "
                     f"{c['max_err']:.1e} |")
    lines += ["", f"Per-op overhead (small tensors, steady state, drain included): "
                  f"{over['lazyfuse_us_per_op']:.2f} us/op (torch eager: {over['eager_us_per_op']:.2f} us/op)", ""]
    ratios = {}
    for c in chains:
        size = f"chain 2^{c['n'].bit_length() - 1}"
        ratios.update({f"{size} vs eager": c["vs_eager"], f"{size} vs torch.compile": 1 / c["vs_compile"]})
    publish("core", {"machine": info, "chain": chains, "overhead": over}, lines, ratios)
    return 0


if __name__ == "__main__":
    sys.exit(main())
