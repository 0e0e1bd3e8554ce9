"""What one call of each native op costs to *record*: the IR nodes it adds (``lf.stats().ops_recorded``)
and the CPU time of the call at 16 elements, where the kernel is nothing and recording is everything.

A composite op (a Python composition of primitives) records a node per primitive, and a node costs
microseconds of Python; this page finds the ops whose call is many nodes. The ops are
bench/native_ops.py's table plus other common compositions. Times are the best of many calls
(``time.thread_time``, this thread's CPU time: other tenants' load moves it less than wall time);
results are dropped without a drain, so no kernel runs (the queue is drained, untimed, between
rounds). For before/after comparisons that hold on a loaded machine, count instructions instead:
``--callgrind OP --calls N`` only records OP N times, to run under ``valgrind --tool=callgrind``
(with ``LAZYFUSE_MARCH=x86-64-v3``: valgrind stops at AVX-512): the totals of N and of 0 calls,
their difference over N, are the instructions of one call.

    python -m bench.record_cost [--smoke] [--only OP ...] [--out DIR]
    valgrind --tool=callgrind python -m bench.record_cost --callgrind OP --calls N
"""
import argparse
import time

import numpy as np

import lazyfuse as lf
from bench.common import configure, heading, machine, publish
from bench.native_ops import OPS as NATIVE_OPS

SHAPE = (4, 4)   # 16 elements: the kernel is nothing, the recording everything

OPS = dict(NATIVE_OPS)
OPS.update({
    "log10": lambda lib, x, y, m: lib.log10(x),
    "sgn": lambda lib, x, y, m: lib.sgn(x),
    "atan": lambda lib, x, y, m: lib.atan(x),
    "xlogy": lambda lib, x, y, m: lib.xlogy(x, y),
    "logaddexp2": lambda lib, x, y, m: lib.logaddexp2(x, y),
    "softsign": lambda lib, x, y, m: lib.nn.functional.softsign(x),
    "clamp_min": lambda lib, x, y, m: lib.clamp_min(x, 0.0),
    "where(scalars)": lambda lib, x, y, m: lib.where(m, x, 0.0),
    "relu (method)": lambda lib, x, y, m: x.relu(),
    # a transposed operand: the result is laid out as torch's (ops.laid_out), its recording the fast path's
    "x.t() + 1": lambda lib, x, y, m: x.t() + 1,
    "x.t().exp()": lambda lib, x, y, m: x.t().exp(),
})
SMOKE_OPS = ["relu", "sign", "mean(-1)"]
CALLGRIND_WARMUP = 20   # calls before the counted ones: first-call imports and caches stay out of them


def inputs():
    """The realized float32 inputs of every op: ``x`` of both signs, ``y`` positive, a bool mask."""
    dev = lf.device("cpu")
    rng = np.random.default_rng(0)
    x = lf.tensor(rng.standard_normal(SHAPE).astype(np.float32), device=dev)
    y = lf.tensor((rng.random(SHAPE) + 0.5).astype(np.float32), device=dev)
    m = lf.tensor(rng.random(SHAPE) < 0.5, device=dev)
    lf.sync(dev)
    return dev, x, y, m


def nodes_per_call(op, dev, x, y, m) -> int:
    """The nodes one call records (``ops_recorded`` before and after)."""
    before = lf.stats(dev).ops_recorded
    out = op(lf, x, y, m)
    del out
    nodes = lf.stats(dev).ops_recorded - before
    lf.sync(dev)
    return nodes


def record_time(op, dev, x, y, m, calls: int, rounds: int) -> float:
    """Best over ``rounds`` of the mean CPU seconds of one call, over ``calls`` calls a round."""
    best = float("inf")
    for _ in range(rounds):
        t0 = time.thread_time()
        for _ in range(calls):
            op(lf, x, y, m)
        best = min(best, (time.thread_time() - t0) / calls)
        lf.sync(dev)
    return best


def callgrind(name: str, calls: int) -> int:
    """Warm ``name`` up, then record it ``calls`` times and stop: run under callgrind with ``--calls N``
    and ``--calls 0``, the difference of the two totals over N is the instructions of one call."""
    dev, x, y, m = inputs()
    op = OPS[name]
    for _ in range(CALLGRIND_WARMUP):
        op(lf, x, y, m)
    lf.sync(dev)
    for _ in range(calls):
        op(lf, x, y, m)
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--smoke", action="store_true", help="three ops, a few calls: checks the script, no results")
    p.add_argument("--only", nargs="+", choices=sorted(OPS), metavar="OP", help="these ops only (a partial page)")
    p.add_argument("--callgrind", choices=sorted(OPS), metavar="OP",
                   help="only record OP --calls times (run under callgrind; no page)")
    p.add_argument("--calls", type=int, default=1000)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    if args.callgrind:
        return callgrind(args.callgrind, args.calls)
    configure(args.out, smoke=args.smoke)
    dev, x, y, m = inputs()
    calls, rounds = (5, 2) if args.smoke else (200, 15)
    rows = []
    for name in (SMOKE_OPS if args.smoke else args.only or OPS):
        op = OPS[name]
        record_time(op, dev, x, y, m, 3, 1)   # warm: caches, first-call imports
        rows.append({"op": name, "nodes": nodes_per_call(op, dev, x, y, m),
                     "record_us": record_time(op, dev, x, y, m, calls, rounds) * 1e6})
    rows.sort(key=lambda r: -r["record_us"])
    info = machine()
    lines = heading("record cost per call at 16 elements", info) + [
        "Each op called on realized (4, 4) float32 inputs, its result dropped (no drain, no kernel). nodes: "
        "`lf.stats().ops_recorded` added by one call; record us: the best over rounds of the mean CPU time "
        "(`time.thread_time`) of one call. Sorted by record time.", "",
        "| op | nodes | record us |", "|---|---|---|"]
    lines += [f"| {r['op']} | {r['nodes']} | {r['record_us']:.1f} |" for r in rows]
    publish("record_cost", {"machine": info, "ops": rows}, lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
