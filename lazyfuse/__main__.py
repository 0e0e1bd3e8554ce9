"""``python -m lazyfuse demo`` (the main job), ``python -m lazyfuse bench`` (the benchmark suite)
``python -m lazyfuse explain script.py [args]`` (every drain of a script, explained) and
``python -m lazyfuse config`` (the ``LAZYFUSE_*`` knobs, their current values and help)."""
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
    bench.add_argument("--quick", action="store_true", help="small sizes and few repeats (well under a minute)")
    bench.add_argument("--out", default=None, help="folder for the JSON, Markdown and PNG reports "
                                                   "(default: bench/results/)")
    explain = sub.add_parser("explain", help="run a script and explain each drain: recorded IR, fusion groups, "
                                             "why each group ends, kernel source, autotune choice")
    explain.add_argument("--dot", metavar="DIR", default=None,
                         help="also write each fused plan's graph to DIR (plan-N.dot, or .png/.svg with --format)")
    explain.add_argument("--format", choices=("dot", "png", "svg"), default="dot",
                         help="png/svg render through Graphviz's dot when it is installed (else .dot files)")
    explain.add_argument("script", help="the Python script to run")
    explain.add_argument("args", nargs=argparse.REMAINDER, help="arguments passed to the script")
    config = sub.add_parser("config", help="the LAZYFUSE_* environment knobs: current value, default, help")
    config.add_argument("--markdown", action="store_true", help="the README's table of knobs instead")
    args, rest = parser.parse_known_args(argv)
    if args.command == "config":
        from . import config as knobs
        print(knobs.markdown_table() if args.markdown else knobs.describe().rstrip())
        return 0
    if args.command == "demo":
        from .demo import run_demo
        return run_demo(args)
    if args.command == "explain":
        from pathlib import Path
        if not Path(args.script).is_file():
            print(f"python -m lazyfuse explain: no script at {args.script}", file=sys.stderr)
            return 2
        from .explain import explain_script
        explain_script(args.script, args.args, dot_dir=args.dot, dot_format=args.format)
        return 0
    try:
        from bench.run import main as bench_main  # bench/ lives beside the package, in the checkout
    except ImportError:
        print("python -m lazyfuse bench runs from a checkout of the repository (it needs bench/)", file=sys.stderr)
        return 2
    return bench_main((["--quick"] if args.quick else []) + (["--out", args.out] if args.out else []) + rest)


if __name__ == "__main__":
    sys.exit(main())
