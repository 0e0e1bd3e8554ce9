"""Issue 3's CPU numbers: tuned C kernels against the heuristic default, same process kind.

    python -m bench.autotune [--quick]

Each case runs twice in a fresh subprocess with its own cache folder: once with
``LAZYFUSE_AUTOTUNE=0`` (the heuristic default config) and once tuned; the steady-state
time of the drained program is compared. Cases: the fused elementwise chain, a row reduction
(sum over the contiguous dim) and a column reduction (sum over the strided dim).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.common import heading, machine, publish

ROOT = Path(__file__).resolve().parents[1]

CASE = r"""
import json, sys, time, statistics, torch, lazyfuse as lf
case, n = sys.argv[1], int(sys.argv[2])
g = torch.Generator().manual_seed(0)
if case == "chain":
    x, y = lf.tensor(torch.randn(n, generator=g)), lf.tensor(torch.randn(n, generator=g))
    fn = lambda: (x * y + 1).tanh() * (-x * x).exp() + y.sigmoid()
else:
    side = int(n ** 0.5)
    x = lf.tensor(torch.randn(side, side, generator=g))
    fn = (lambda: (x * 2).sum(1)) if case == "row" else (lambda: (x * 2).sum(0))
def run():
    out = fn(); lf.sync(); return out
for _ in range(3): run()
times = []
for _ in range(15):
    t = time.perf_counter(); run(); times.append(time.perf_counter() - t)
s = lf.stats()
configs = [st.config.label() for p in lf.device("cpu").engine.plans.values() for st in p.steps if st.config]
print(json.dumps({"ms": statistics.median(times) * 1e3, "autotune_runs": s.autotune_runs, "configs": configs}))
"""


def run_case(case: str, n: int, tuned: bool) -> dict:
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "LAZYFUSE_CACHE_DIR": cache,
               "LAZYFUSE_AUTOTUNE": "1" if tuned else "0"}
        out = subprocess.run([sys.executable, "-c", CASE, case, str(n)], capture_output=True, text=True, env=env,
                             timeout=900, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    n = 1 << (20 if args.quick else 24)
    rows = []
    for case in ("chain",) if args.quick else ("chain", "row", "column"):
        default, tuned = run_case(case, n, False), run_case(case, n, True)
        rows.append({"case": case, "n": n, "default_ms": default["ms"], "tuned_ms": tuned["ms"],
                     "gain": default["ms"] / tuned["ms"], "tuned_configs": tuned["configs"],
                     "default_configs": default["configs"]})
    info = machine()
    lines = heading("autotuning on the CPU", info, "cc") + [
             "Steady-state time of each drained program, heuristic default vs tuned config (fresh process and "
             "cache each), median of 15:", "",
             "| case | elements | default ms | tuned ms | gain | tuned config |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['case']} | 2^{r['n'].bit_length() - 1} | {r['default_ms']:.2f} | {r['tuned_ms']:.2f} | "
                     f"{r['gain']:.2f}x | {'; '.join(r['tuned_configs'])} |")
    publish("autotune", {"machine": info, "cases": rows}, lines, {f"{r['case']} tuned vs default": r["gain"]
                                                                  for r in rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
