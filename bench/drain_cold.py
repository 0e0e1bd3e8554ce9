"""Where a single op's drain time goes at (1024, 1024), in bench.native_ops's round-robin: the
*drained* column's parts, against the replay of the op's captured graph and torch's eager call.

    python -m bench.drain_cold [--calls N] [--only OP ...]

Per round, as native_ops times them: the replay (the kernel, nearly), then the lazy call in its
three parts — *record* (the op's call), *sync* (``lf.sync``: the drain and the kernel) and *drop*
(the result let go: its buffer back to the pool) — then torch's call; medians. *fixed* is
record + sync + drop - replay: what a drain adds to the kernel. *record hot* is a second
recording right after the first: the same bytecodes with warm caches. The difference is the
point: the kernel streams 8 MB through the core's caches, so the Python that follows runs with
them cold, and what it costs is the memory it touches (objects, code, the interpreter's own),
far more than the bytecodes it runs (bench/drain.py counts those). Prints a table; writes nothing.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

import lazyfuse as lf
from bench.common import match_threads, settle_threads
from bench.native_ops import OPS, SHAPE, inputs

DEFAULT = ["exp", "abs", "add", "sum(-1)"]


def measure(name: str, calls: int, x, y, m, xt, yt, mt) -> dict:
    op = OPS[name]
    dev = x.device
    graph = lf.capture(dev, lambda: op(lf, x, y, m))
    settle_threads()
    clock = time.perf_counter_ns
    parts = {k: [] for k in ("replay", "record", "record hot", "sync", "drop", "torch")}
    for k in range(calls + 10):
        t0 = clock()
        graph.replay()
        t1 = clock()
        out = op(lf, x, y, m)
        t2 = clock()
        lf.sync(dev)
        t3 = clock()
        del out
        t4 = clock()
        op(torch, xt, yt, mt)
        t_torch = clock() - t4
        first = op(lf, x, y, m)
        del first
        t5 = clock()
        again = op(lf, x, y, m)   # (warm: right after its twin)
        t6 = clock()
        del again
        lf.sync(dev)   # (nothing live: elided)
        if k >= 10:
            for part, dt in (("replay", t1 - t0), ("record", t2 - t1), ("sync", t3 - t2), ("drop", t4 - t3),
                             ("torch", t_torch), ("record hot", t6 - t5)):
                parts[part].append(dt / 1e3)
    med = {part: statistics.median(v) for part, v in parts.items()}
    med["drained"] = statistics.median([a + b + c for a, b, c in zip(parts["record"], parts["sync"], parts["drop"])])
    med["fixed"] = med["drained"] - med["replay"]
    return med


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=400)
    ap.add_argument("--only", nargs="+", choices=sorted(OPS), metavar="OP", default=DEFAULT)
    args = ap.parse_args(argv)
    match_threads()
    dev = lf.device("cpu")
    x, y, m, xt, yt, mt = inputs(dev)
    cols = ("replay", "record", "record hot", "sync", "drop", "drained", "fixed", "torch")
    print(f"us per call at {SHAPE}, medians of {args.calls} rounds; threads: torch {torch.get_num_threads()}, "
          f"lazyfuse {dev.threads.threads if dev.threads is not None else None}")
    print("| op | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for name in args.only:
        r = measure(name, args.calls, x, y, m, xt, yt, mt)
        print(f"| {name} | " + " | ".join(f"{r[c]:.1f}" for c in cols) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
