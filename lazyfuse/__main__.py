"""``python -m lazyfuse demo`` (the main job) and ``python -m lazyfuse bench``."""
from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lazyfuse")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="greedy decoding with a KV cache: torch eager vs lazyfuse lazy vs captured")
    demo.add_argument("--device", default=None, help="cpu, cuda, interpreter (default: cuda if present, else cpu)")
    demo.add_argument("--hidden", type=int, default=64)
    demo.add_argument("--layers", type=int, default=2)
    demo.add_argument("--heads", type=int, default=4)
    demo.add_argument("--vocab", type=int, default=256)
    demo.add_argument("--steps", type=int, default=32)
    bench = sub.add_parser("bench", help="the benchmark suite against torch eager and torch.compile")
    bench.add_argument("--quick", action="store_true")
    args, rest = parser.parse_known_args(argv)
    if args.command == "demo":
        from .demo import run_demo
        return run_demo(args)
    try:
        from bench.run import main as bench_main  # bench/ lives beside the package, in the checkout
    except ImportError:
        print("python -m lazyfuse bench runs from a checkout of the repository (it needs bench/)", file=sys.stderr)
        return 2
    return bench_main(["--quick"] if args.quick else rest)


if __name__ == "__main__":
    sys.exit(main())
