"""The lazy path's own CPU time per call: recording and the cache-hit drain, against the replay of
the same closure's captured graph (the kernels alone, nearly).

    python -m bench.drain [--quick]

One op drained alone (``-x``: issue 18's bar ``out = op(x); lf.sync()``, at 64 x 64 where the
kernel is nothing and at 1024 x 1024), the transformer block of ``bench.programs`` (1 x 128 x
512) and a 64-wide one, and the decode step of ``bench.capture`` at hidden 256, on one thread (``torch.set_num_threads(1)`` and
``LAZYFUSE_THREADS=1``): per call, the thread's CPU time (``time.thread_time``) of recording, of
the drain, and of a replay, the three interleaved call by call; the best and the median of
many calls. *overhead* is lazy (recording + drain) minus the replay: what the lazy path adds to
the kernels. *bytecodes* is what the interpreter ran for one call's recording + drain (counted
by ``sys.settrace``): the same on every machine whatever its load, so a change to the fixed cost
shows there first. Prints a table; writes nothing.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("LAZYFUSE_THREADS", "1")   # (read when the device starts: before lazyfuse runs)

import torch  # noqa: E402

import lazyfuse as lf  # noqa: E402
from bench.capture import make  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from transformer_block import block_lf, make_weights  # noqa: E402


def workloads(quick: bool):
    for n in (64,) + (() if quick else (1024,)):
        x = lf.tensor(torch.randn(n, n, generator=torch.Generator().manual_seed(0)))
        yield f"one op (-x), {n} x {n}", (lambda x=x: -x)
    for d, t in ((64, 1),) + (() if quick else ((512, 128),)):
        p = make_weights(d)
        x = lf.tensor(torch.randn(1, t, d, generator=torch.Generator().manual_seed(0)))
        w = {k: lf.tensor(v) for k, v in p.items()}
        yield f"transformer block 1 x {t} x {d}", (lambda x=x, w=w: block_lf(x, w, 8))
    _, _, _, step, _ = make(256)
    yield "decode step, hidden 256", step


def measure(record, calls: int) -> dict:
    graph = lf.capture("cpu", record)
    clock = time.thread_time
    times = {"record": [], "drain": [], "replay": []}
    for k in range(calls + 5):
        t0 = clock()
        out = record()
        t1 = clock()
        lf.sync()
        t2 = clock()
        graph.replay()
        t3 = clock()
        del out
        if k >= 5:   # (the first calls warm the caches)
            for name, dt in (("record", t1 - t0), ("drain", t2 - t1), ("replay", t3 - t2)):
                times[name].append(dt * 1e6)
    times["lazy"] = [r + d for r, d in zip(times["record"], times["drain"])]
    times["overhead"] = [lz - rp for lz, rp in zip(times["lazy"], times["replay"])]
    return {name: (min(v), statistics.median(v)) for name, v in times.items()}


def bytecodes(record, calls: int = 3) -> tuple:
    """The bytecodes the interpreter runs for one steady-state call: its recording, its drain
    (the previous call's result held across it, as in ``measure``); the fewest of ``calls``
    (a call may meet the thread budget's new sampling window: runtime/threads.py)."""
    count = [0]

    def trace(frame, event, arg):
        frame.f_trace_opcodes = True
        if event == "opcode":
            count[0] += 1
        return trace
    held = record()
    lf.sync()
    best = None
    for _ in range(calls):
        counts = []
        for phase in (record, lf.sync):
            count[0] = 0
            sys.settrace(trace)
            try:
                out = phase()
            finally:
                sys.settrace(None)
            counts.append(count[0])
            held = out if phase is record else held
        best = counts if best is None else [min(a, b) for a, b in zip(best, counts)]
    del held
    return tuple(best)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="the small block and the decode step, few calls")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    print("CPU time per call, us (best / median), one thread; overhead = lazy - replay")
    print("| workload | record | drain | lazy | replay | overhead | bytecodes (record + drain) |")
    print("|---|---|---|---|---|---|---|")
    for name, record in workloads(args.quick):
        calls = 20 if args.quick else (100 if "128" in name else 1500)
        r = measure(record, calls)
        cells = " | ".join(f"{r[k][0]:.1f} / {r[k][1]:.1f}" for k in ("record", "drain", "lazy", "replay", "overhead"))
        rec, drain = bytecodes(record)
        print(f"| {name} | {cells} | {rec} + {drain} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
