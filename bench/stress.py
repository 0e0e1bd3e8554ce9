"""Issue 7's stress run: random programs on ``cpu`` and ``interpreter`` against torch eager.

    python -m bench.stress [--seconds 600] [--devices cpu,interpreter] [--seed 7] [--no-publish]

The programs are tests/test_differential.py's (drawn by tests/programs.py: random ops, views,
in-place writes, drops, drains and reads, every live value compared with torch at the end),
drawn by hypothesis in batches, each batch from a fixed seed (``--seed`` + batch number), so a
run is reproducible batch by batch. It reports programs run, mismatches (must be 0, each with
its program log), and memory: the process's peak RSS and each device pool's peak live bytes.
Exit status 1 when any program mismatched.
"""
from __future__ import annotations

import argparse
import os
import resource
import sys
import time
import warnings
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

import lazyfuse as lf
from bench.common import heading, machine, publish

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from programs import ALL_DTYPES, run_program  # noqa: E402

BATCH = 5   # programs per hypothesis run: the time limit is checked between batches


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def stress_device(name: str, seconds: float, first_seed: int) -> dict:
    """Run batches of random programs on device ``name`` until ``seconds`` have passed."""
    os.environ["LAZYFUSE_DEVICE"] = name   # the programs create their tensors on the default device
    counter = {"programs": 0}

    @settings(database=None, deadline=None, max_examples=BATCH, phases=[Phase.generate], print_blob=True,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def program(data):
        counter["programs"] += 1
        run_program(data, ALL_DTYPES)

    mismatches, batches = [], 0
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        batch_seed = first_seed + batches
        batches += 1
        try:
            seed(batch_seed)(program)()
        except Exception as e:  # noqa: BLE001 (a mismatch: keep the program's log and go on)
            mismatches.append({"seed": batch_seed, "error": f"{type(e).__name__}: {e}"[-4000:]})
    pool = lf.testing.pool_info(name)
    return {"device": name, "seconds": round(time.monotonic() - start, 1), "batches": batches,
            "programs": counter["programs"], "mismatches": mismatches,
            "pool_peak_live_mb": round(pool["peak_live_bytes"] / 2 ** 20, 2),
            "pool_cached_mb": round(pool["cached_bytes"] / 2 ** 20, 2), "peak_rss_mb": round(peak_rss_mb(), 1)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=600.0, help="total time, split over the devices")
    p.add_argument("--devices", default="cpu,interpreter")
    p.add_argument("--interpreter-share", type=float, default=0.25,
                   help="fraction of the time the interpreter gets (its programs run ~20x slower)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--no-publish", action="store_true", help="print the report, write nothing")
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")
    devices = [d.strip() for d in args.devices.split(",") if d.strip()]
    shares = {d: (args.interpreter_share if d == "interpreter" and len(devices) > 1 else 1.0) for d in devices}
    rest = [d for d in devices if shares[d] == 1.0]
    for d in rest:
        shares[d] = (1.0 - sum(v for k, v in shares.items() if k not in rest)) / len(rest)
    rss_start = peak_rss_mb()
    runs = [stress_device(d, args.seconds * shares[d], args.seed) for d in devices]
    info = machine()
    total = sum(len(r["mismatches"]) for r in runs)
    lines = heading("stress run", info, "torch", "cc") + [
             f"Random programs of tests/programs.py (every dtype, seed {args.seed} + batch, {BATCH} per batch), "
             "each compared with torch eager.", "",
             "| device | seconds | programs | mismatches | pool peak live MB | pool cached MB | peak RSS MB |",
             "|---|---|---|---|---|---|---|"]
    for r in runs:
        lines.append(f"| {r['device']} | {r['seconds']} | {r['programs']} | {len(r['mismatches'])} | "
                     f"{r['pool_peak_live_mb']} | {r['pool_cached_mb']} | {r['peak_rss_mb']} |")
    lines += ["", f"Peak RSS at start {rss_start:.1f} MB. Mismatches: {total}."]
    for r in runs:
        for m in r["mismatches"]:
            lines += ["", f"## mismatch on {r['device']} (seed {m['seed']})", "", "```", m["error"], "```"]
    payload = {"machine": info, "seed": args.seed, "batch": BATCH, "peak_rss_start_mb": round(rss_start, 1),
               "runs": runs, "mismatches": total}
    if args.no_publish:
        print("\n".join(lines))
    else:
        publish("stress", payload, lines)
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
