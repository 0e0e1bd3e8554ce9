"""What an extern adds to torch's own call: ``lf.extern(torch.cumsum, x, 1)`` recorded and
drained (steady state) against ``torch.cumsum(x, 1, out=buf)`` eager, at a few sizes.

    python -m bench.extern_overhead [--smoke]

The issue's bar: at most 5 us of lazyfuse overhead per extern. Timings on a shared machine are
noisy; the numbers printed are per call, medians of interleaved runs.
"""
import argparse

import torch

import lazyfuse as lf
from bench.common import timeit_interleaved


def main(smoke=False):
    dev = lf.device("cpu")
    sizes = [(64, 64)] if smoke else [(64, 64), (256, 1024), (1024, 1024)]
    rows = []
    for shape in sizes:
        xt = torch.randn(*shape)
        x = lf.tensor(xt, device=dev)
        out = torch.empty_like(xt)

        def lazy():   # record, then drain: one extern launch (steady-state plan)
            y = lf.extern(torch.cumsum, x, 1)
            lf.sync(dev)
            return y

        def eager():
            return torch.cumsum(xt, 1, out=out)

        t = timeit_interleaved({"lazyfuse": lazy, "torch": eager}, reps=3 if smoke else 30, warmup=2)
        rows.append((shape, t["lazyfuse"] * 1e6, t["torch"] * 1e6))
    for shape, a, b in rows:
        print(f"{str(shape):14s} lazyfuse {a:8.1f} us   torch {b:8.1f} us   overhead {a - b:7.1f} us")
    return rows


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--smoke", action="store_true")
    main(p.parse_args().smoke)
