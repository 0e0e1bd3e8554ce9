"""Instructions per steady-state call of one op (or a short chain) recorded and drained alone,
counted by callgrind: repeatable on a loaded machine, where timings are not.

    python -m bench.drain_instructions [--calls N] [--size N] [WORKLOAD ...]

All workloads run in one process under ``valgrind --tool=callgrind``, each warmed up (its build
path, first steady-state run, tuning) and then called N times between two marker calls
(``os.getppid``, on which callgrind dumps its counters: ``--dump-before``); the dump of those N
calls over N is one call's instructions (the loop's own few bytecodes included). ``LAZYFUSE_MARCH`` is set
to ``x86-64-v3`` (valgrind stops at AVX-512 instructions) and the kernel cache is warmed by a
plain run first. Workloads: relu, add, sum (``sum(-1)``), chain5 (five elementwise ops, one
kernel), each on a realized float32 input (64 x 64 by default: the kernel is nothing).
Prints a table; writes nothing but valgrind's output files in a temporary directory.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile

WORKLOADS = {
    "relu": "lambda x, y: F.relu(x)",
    "add": "lambda x, y: x + y",
    "sum": "lambda x, y: x.sum(-1)",
    "chain5": "lambda x, y: ((x * y + 1.0).relu() - y).exp() * 0.5",
}

CHILD = """
import os
import torch
import lazyfuse as lf
import lazyfuse.nn.functional as F
n, calls = {size}, {calls}
g = torch.Generator().manual_seed(0)
x = lf.tensor(torch.randn(n, n, generator=g))
y = lf.tensor(torch.randn(n, n, generator=g))
dev = lf.device("cpu")
for op in ({ops},):
    held = None
    for _ in range(20):   # the build path, the first steady-state run, tuning, memos
        held = op(x, y); lf.sync(dev)
    os.getppid()
    for _ in range(calls):
        held = op(x, y); lf.sync(dev)
    os.getppid()
"""


def run(workloads, size: int, calls: int, env: dict, valgrind: bool) -> list:
    """The instructions per call of each workload (valgrind), or nothing (a plain warm-up run)."""
    code = CHILD.format(size=size, calls=calls, ops=", ".join(WORKLOADS[w] for w in workloads))
    if not valgrind:
        subprocess.run([sys.executable, "-c", code.replace(f"calls = {calls}", "calls = 1")], env=env, check=True)
        return []
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        done = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                               "--dump-before=getppid", "--dump-instr=no", sys.executable, "-c", code],
                              env=env, capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(done.stderr[-2000:])
        totals = []
        for k in range(1, 2 * len(workloads) + 1):
            with open(f"{out}.{k}") as f:
                totals.append(int(re.search(r"^summary:\s*(\d+)", f.read(), re.M).group(1)))
        # dumps 1, 3, ...: up to a warm-up's end; 2, 4, ...: the measured calls
        return [totals[2 * j + 1] / calls for j in range(len(workloads))]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("workloads", nargs="*", default=list(WORKLOADS))
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--size", type=int, default=64)
    args = ap.parse_args(argv)
    env = dict(os.environ, LAZYFUSE_MARCH="x86-64-v3", LAZYFUSE_THREADS="1", OMP_NUM_THREADS="1",
               PYTHONHASHSEED="0")
    run(args.workloads, args.size, args.calls, env, valgrind=False)   # the kernels compiled outside valgrind
    counts = run(args.workloads, args.size, args.calls, env, valgrind=True)
    print(f"instructions per call (record + drain), {args.size} x {args.size} float32, callgrind")
    print("| workload | instructions |")
    print("|---|---|")
    for w, c in zip(args.workloads, counts):
        print(f"| {w} | {c:,.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
