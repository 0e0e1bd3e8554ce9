"""``python -m lazyfuse bench``: every benchmark script in one command.

``--quick``: a smoke run for CI (small sizes, at most 3 repeats, no torch.compile peer, one
autotune case): it checks that every script works, in well under a minute; its numbers are not
results.
``--out DIR``: write the reports there instead of bench/results/.
``--busy N``: run with N competing busy processes (one core each), to see how lazyfuse and its
peers hold up on a shared machine; every page and chart says so.
"""
from __future__ import annotations

import argparse
import sys
import time

from bench import autotune, build, capture, common, contention, core, distributed, programs, shapes, training, \
    warm_start

SCRIPTS = {"core": core, "programs": programs, "capture": capture, "autotune": autotune, "training": training,
           "contention": contention, "build": build, "shapes": shapes,
           "warm_start": warm_start, "distributed": distributed}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m lazyfuse bench")
    p.add_argument("--quick", action="store_true", help="small sizes and few repeats")
    p.add_argument("--out", default=None, help="folder for the reports (default: bench/results/)")
    p.add_argument("--only", nargs="+", choices=sorted(SCRIPTS), default=list(SCRIPTS), help="run these scripts only")
    p.add_argument("--busy", type=int, default=0, metavar="N", help="run with N competing busy processes")
    args = p.parse_args(argv)
    common.configure(args.out, smoke=args.quick, busy=args.busy)
    status = 0
    for name in args.only:
        start = time.perf_counter()
        # the contention script starts its own load (quiet, then busy, in one run)
        with common.BusyProcesses(0 if name == "contention" else args.busy):
            common.match_threads()
            status |= SCRIPTS[name].main(["--quick"] if args.quick else [])
        print(f"[bench] {name}: {time.perf_counter() - start:.0f} s\n")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
