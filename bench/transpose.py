"""Pointwise kernels and softmax over transposed / permuted inputs against torch eager.

A pointwise C kernel writes its output contiguously, so a transposed input is read with a large
stride in the inner loop; the C printer then walks the two dims in tiles (``c_printer``,
``CConfig.transpose_tile``). Each case runs on a realized input two ways, called round-robin
(``timeit_interleaved``) with the same thread count: *drained*, the op recorded and drained with
its result held (plan cached: the kernel plus a drain's fixed cost), and *torch*, the eager call
(which keeps a transposed input's layout for ``x.t() + 1``, and transposes for real in
``x.t().contiguous()`` and ``x + x.t()``).

    python -m bench.transpose [--smoke] [--out DIR]
"""
import argparse

import numpy as np
import torch

import lazyfuse as lf
from bench.common import configure, heading, machine, match_threads, publish, settle_threads, timeit_interleaved

# name -> (f(lib, x), the input's shape, dtype); ``lib`` is lazyfuse or torch (the same names)
CASES = {}
for n in (1024, 2048):
    CASES.update({
        f"x.t() + 1, {n}^2": (lambda lib, x: x.t() + 1, (n, n), "float32"),
        f"x + x.t(), {n}^2": (lambda lib, x: x + x.t(), (n, n), "float32"),
        f"x.t().contiguous(), {n}^2": (lambda lib, x: x.t().contiguous(), (n, n), "float32"),
        f"softmax(x.t(), -1), {n}^2": (lambda lib, x: lib.softmax(x.t(), -1), (n, n), "float32"),
    })
CASES.update({
    "x.permute(0, 2, 1) * 2, 64x256x256": (lambda lib, x: x.permute(0, 2, 1) * 2, (64, 256, 256), "float32"),
    "x.transpose(-1, -2) + 1, 64x256x256 float16": (lambda lib, x: x.transpose(-1, -2) + 1, (64, 256, 256),
                                                    "float16"),
    "x.t() + 1, 2048^2 float16": (lambda lib, x: x.t() + 1, (2048, 2048), "float16"),
})
SMOKE_CASES = {"x.t() + 1, small": (lambda lib, x: x.t() + 1, (96, 80), "float32"),
               "softmax(x.t(), -1), small": (lambda lib, x: lib.softmax(x.t(), -1), (96, 80), "float32")}


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--smoke", action="store_true", help="two small cases, a few calls: checks the script, no results")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    configure(args.out, smoke=args.smoke)
    match_threads()
    dev = lf.device("cpu")
    rng = np.random.default_rng(0)
    rows = []
    for name, (op, shape, dtype) in (SMOKE_CASES if args.smoke else CASES).items():
        xt = torch.from_numpy(rng.standard_normal(shape).astype(np.float32)).to(getattr(torch, dtype))
        x = lf.tensor(xt, device=dev)
        want = op(torch, xt.double())
        err = float((op(lf, x).torch().double() - want).abs().max())

        def drained(op=op, x=x):
            out = op(lf, x)
            lf.sync(dev)
            return out

        drained()
        settle_threads()   # (the case's compile just ran: see settle_threads)
        t = timeit_interleaved({"lazyfuse": drained, "torch": lambda op=op, xt=xt: op(torch, xt)},
                               reps=3 if args.smoke else 30, warmup=1 if args.smoke else 3,
                               min_time=0.0 if args.smoke else 0.3)
        rows.append({"case": name, "lazyfuse_us": t["lazyfuse"] * 1e6, "torch_us": t["torch"] * 1e6,
                     "speedup": t["torch"] / t["lazyfuse"], "max_err": err})
    info = machine()
    lines = heading("transposed / permuted inputs vs torch eager", info, "torch") + [
        "Each case on a realized input, medians, the two called round-robin. drained: the op recorded "
        "and drained alone (plan cached); torch: the eager call. max err: against float64 torch.", "",
        "| case | drained us | torch eager us | torch / drained | max err |", "|---|---|---|---|---|"]
    lines += [f"| {r['case']} | {r['lazyfuse_us']:.0f} | {r['torch_us']:.0f} | {r['speedup']:.2f}x | "
              f"{r['max_err']:.1e} |" for r in rows]
    publish("transpose", {"machine": info, "cases": rows}, lines, {r["case"]: r["speedup"] for r in rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
