"""Golden fusion plans: what the planner makes of the program cases and of a small GPT training
step, recorded so that a change to the planner's *algorithm* can be shown not to change its
*result* (tests/test_plan_golden.py).

Every drain of the recorded programs runs on ``cpu``; each drain graph is planned twice: as
the CPU planned it (with the nodes the lowering forced, matmul a library call) and with a
matmul template (a Triton device's capability), so both planner paths are pinned. A plan is
written as its kernels in execution order — outputs, inlined members, boundary reason, the
matmul it computes, the materialized values it reads, its foreach parts — and its buffer slots.

    python tests/plan_golden.py      # re-record tests/golden/plans.json (only on purpose)
"""
from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import torch

import lazyfuse as lf
import lazyfuse.runtime.build as build

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "examples"))
from programs_cases import inline_matmul_threshold  # noqa: E402

GOLDEN = Path(__file__).resolve().parent / "golden" / "plans.json"
TEMPLATE = frozenset({"float32", "float16", "bfloat16"})


def fingerprint(planned) -> dict:
    return {"kernels": [[grp.id, grp.output, list(grp.extra), sorted(grp.members), grp.reason, grp.matmul,
                         list(grp.inputs), [[list(p.outputs), list(p.inputs)] for p in grp.parts]]
                        for grp in planned.groups],
            "slots": sorted([i, *slot] for i, slot in planned.slots.items()), "temps": planned.n_temps}


@contextlib.contextmanager
def recording(into: list):
    """Record every drain's plans (as the CPU made it, and with a matmul template) into ``into``.
    The cpu engine's plan caches start empty, so that every drain plans: a plan cached by an
    earlier test, or one of the same structure at other sizes, would skip the planner."""
    engine = lf.device("cpu").engine
    engine.plans.clear()
    engine.structures.clear()
    real = build.make_plan

    def make_plan(graph, forced, template):
        planned = real(graph, forced, template)
        into.append({"forced": sorted([i, why] for i, why in forced.items()), "cpu": fingerprint(planned),
                     "template": fingerprint(real(graph, {}, TEMPLATE))})
        return planned
    build.make_plan = make_plan
    try:
        yield
    finally:
        build.make_plan = real


def program_cases() -> dict:
    from programs_cases import CASES, MATMUL_CASES, run_case
    out = {}
    for name in CASES:
        for path in ("inline", "matmul") if name in MATMUL_CASES else ("inline",):
            plans = out[f"{name}/{path}"] = []
            with recording(plans), inline_matmul_threshold(0 if path == "matmul" else lf.ops.INLINE_MATMUL):
                run_case("cpu", name, torch.float32, 3, 4, 5, seed=0)
    return out


def transformer_block() -> dict:
    """A transformer block's forward with every matmul a library call (bench/programs.py's block)."""
    import transformer_block as tb
    p = {k: lf.tensor(v) for k, v in tb.make_weights(16).items()}
    x = lf.tensor(torch.randn(2, 8, 16, generator=torch.Generator().manual_seed(0)))
    plans = []
    with recording(plans), inline_matmul_threshold(0):
        tb.block_lf(x, p, 2).numpy()
    return {"transformer_block/matmul": plans}


def gpt_steps(steps: int = 2) -> dict:
    """The plans of a 2-layer GPT's first ``steps`` training steps (step 1 creates AdamW's state,
    step 2 is the steady program), its matmuls fused reductions ("inline") or library calls."""
    import gpt_step as gpt
    out = {}
    for path in ("inline", "matmul"):
        with inline_matmul_threshold(0 if path == "matmul" else lf.ops.INLINE_MATMUL):
            _, step = gpt.lf_trainer(device="cpu")
            for k in range(steps):
                plans = out[f"gpt/{path}/step{k + 1}"] = []
                with recording(plans):
                    step()
                    lf.sync("cpu")
    return out


def record() -> dict:
    return {**program_cases(), **transformer_block(), **gpt_steps()}


if __name__ == "__main__":
    GOLDEN.parent.mkdir(exist_ok=True)
    data = record()
    GOLDEN.write_text("{\n" + ",\n".join(f"{json.dumps(k)}: {json.dumps(v, separators=(',', ':'))}"
                                         for k, v in data.items()) + "\n}\n")
    print(f"wrote {GOLDEN}: {sum(len(v) for v in data.values())} drains")
