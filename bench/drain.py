"""The lazy path's own CPU time per call: recording and the cache-hit drain, against the replay of
the same closure's captured graph (the kernels alone, nearly).

    python -m bench.drain [--quick]

The transformer block of ``bench.programs`` (1 x 128 x 512) and a 64-wide one, and the decode
step of ``bench.capture`` at hidden 256, on one thread (``torch.set_num_threads(1)`` and
``LAZYFUSE_THREADS=1``): per call, the thread's CPU time (``time.thread_time``) of recording, of
the drain, and of a replay, the three interleaved call by call; the best and the median of
many calls. *overhead* is lazy (recording + drain) minus the replay: what the lazy path adds to
the kernels. Prints a table; writes nothing.
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="the small block and the decode step, few calls")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    print("CPU time per call, us (best / median), one thread; overhead = lazy - replay")
    print("| workload | record | drain | lazy | replay | overhead |")
    print("|---|---|---|---|---|---|")
    for name, record in workloads(args.quick):
        calls = 20 if args.quick else (100 if "128" in name else 1500)
        r = measure(record, calls)
        cells = " | ".join(f"{r[k][0]:.0f} / {r[k][1]:.0f}" for k in ("record", "drain", "lazy", "replay", "overhead"))
        print(f"| {name} | {cells} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
