"""Every generated kernel of the program cases, as text, to diff two checkouts of a code change
that must not change what is generated (a printer or engine refactor):

    PYTHONPATH=. python -m bench.kernel_sources OUT.txt [--devices cpu,interpreter]

For each case of tests/programs_cases.py (at small and larger sizes, with matmuls fused and as
the matmul path) and a small MLP training step, it writes ``lf.explain``'s text, the digest of
each drained plan's structural key, each step's bound slots and metadata header and compiled
source (heuristic configs: autotuning off), and the candidate configs each kernel would be
tuned over on the CPU, a GPU and the interpreter. Run it in both checkouts, then ``diff``.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import sys
from pathlib import Path

os.environ["LAZYFUSE_AUTOTUNE"] = "0"   # before lazyfuse reads it: heuristic configs, no timing

import torch  # noqa: E402

import lazyfuse as lf  # noqa: E402
from lazyfuse.codegen.triton_printer import candidate_configs  # noqa: E402
from lazyfuse.runtime import engine  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from programs_cases import CASES, inline_matmul_threshold  # noqa: E402

SHAPES = ((5, 6, 7), (64, 300, 40), (8, 5000, 8))


def _candidates(kernel) -> list:
    os.environ["LAZYFUSE_AUTOTUNE"] = "1"   # the candidate lists are what autotuning would try
    try:
        lines = []
        if kernel.matmul is None:   # the C backend takes matmuls as library calls
            lines.append("  c: " + " ".join(c.label() for c in lf.device("cpu").backend.candidates(kernel)))
        lines.append("  gpu: " + " ".join(c.label() for c in candidate_configs(kernel, False)))
        lines.append("  interpreter: " + " ".join(c.label() for c in candidate_configs(kernel, True)))
        return lines
    finally:
        os.environ["LAZYFUSE_AUTOTUNE"] = "0"


def _train_step(device):
    g = torch.Generator().manual_seed(1)
    x = lf.tensor(torch.randn(4, 8, generator=g), device=device)
    w1 = lf.tensor(torch.randn(8, 16, generator=g), device=device, requires_grad=True)
    w2 = lf.tensor(torch.randn(16, 3, generator=g), device=device, requires_grad=True)
    loss = (lf.nn.functional.gelu(x @ w1).softmax(-1) @ w2).pow(2).mean()
    loss.backward()
    return w1.grad * 1 + w2.grad.sum()


def report(devices) -> str:
    out, plans = [], []
    saved, engine.drain_hook = engine.drain_hook, lambda device, plan, build: plans.append(plan)
    try:
        def record(tag, make):
            plans.clear()
            t = make()
            out.append(f"##### {tag}\n{lf.explain(t)}")
            t.torch()
            for p in plans:
                out.append(f"plan key {hashlib.sha256(repr(p.key.parts).encode()).hexdigest()[:16]}")
                for st in p.steps:
                    out.append(f"-- {st.name} {st.kind} slots {st.slots} scalars {st.scalars} header {st.header}")
                    out.append(st.source)
                    if st.kind == "kernel":
                        out.extend(_candidates(st.kernel))

        for device in devices:
            for threshold in (None, 0):
                for name, (program, make) in CASES.items():
                    for shape in SHAPES:
                        inputs = make(torch.Generator().manual_seed(0), *shape)
                        with inline_matmul_threshold(lf.ops.INLINE_MATMUL if threshold is None else threshold):
                            record(f"{device} {name} {shape} inline_matmul={threshold}",
                                   lambda: program(lf, *[lf.tensor(t, device=device) for t in inputs]))
            record(f"{device} training step", lambda: _train_step(device))
    finally:
        engine.drain_hook = saved
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.kernel_sources", description=__doc__.split("\n\n")[0])
    p.add_argument("out", help="the text file to write")
    p.add_argument("--devices", default="cpu,interpreter")
    args = p.parse_args(argv)
    Path(args.out).write_text(report(args.devices.split(",")))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
