"""The generated kernels of the program cases, pinned: a digest of every C and Triton source each
kernel would be built with (every candidate config), recorded in tests/golden/kernel_sources.json.

tests/test_kernel_golden.py compares against it, so a printer or engine refactor that must not
change what is generated is checked without running anything: each case is recorded, planned
and lowered as the build path does (runtime/build.py) and printed, never compiled. A change that
does alter a kernel re-records the file, and says why in its commit:

    PYTHONPATH=. python tests/kernel_golden.py

``bench/kernel_sources.py`` writes the full texts (and runs the plans) for a diff by eye.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import torch

import lazyfuse as lf
from lazyfuse.codegen.triton_printer import candidate_configs, print_triton
from lazyfuse.codegen.c_printer import print_c
from lazyfuse.ir.planner import DrainGraph
from lazyfuse.runtime.backend import StepKind
from lazyfuse.runtime.build import lower_steps, matmul_template, plan_and_lower, trace

sys.path.insert(0, str(Path(__file__).resolve().parent))
from programs_cases import CASES, inline_matmul_threshold  # noqa: E402

GOLDEN = Path(__file__).resolve().parent / "golden" / "kernel_sources.json"
SHAPES = ((5, 6, 7), (64, 300, 40))
DEVICES = ("cpu", "interpreter")   # the C printer; the Triton printer (with the matmul template)


def _digest(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def _sources(device, kernel) -> dict:
    """Config label -> digest of the source, for every candidate config of ``kernel``."""
    if device.kind == "cpu":
        return {cfg.label(): _digest(print_c(kernel, cfg)) for cfg in device.backend.candidates(kernel)}
    out = {}
    for interpreted in (False, True):   # a GPU's candidates, then the interpreter's
        for cfg in candidate_configs(kernel, interpreted):
            out[f"{'interpreter' if interpreted else 'gpu'} {cfg.label()}"] = _digest(print_triton(kernel, cfg)[1])
    return out


def _kernels(device, result) -> list:
    """The kernels the next drain of ``result`` would build, planned and lowered, not run."""
    nodes, _leaves, _scalars, targets = trace([result._storage])
    graph = DrainGraph(nodes, [r for r, _ in targets], [t for _, t in targets])
    _, steps = plan_and_lower(graph, matmul_template(device), lambda p: lower_steps(nodes, p))
    return [[st.name, str(st.kind), _sources(device, st.kernel) if st.kind is StepKind.KERNEL else {}]
            for st in steps]


def record() -> dict:
    saved = os.environ.get("LAZYFUSE_AUTOTUNE")
    os.environ["LAZYFUSE_AUTOTUNE"] = "1"   # every candidate autotuning would try, not only the default
    try:
        out = {}
        for name in DEVICES:
            device = lf.device(name)
            for threshold in (None, 0):
                for case, (program, make) in CASES.items():
                    for shape in SHAPES:
                        inputs = make(torch.Generator().manual_seed(0), *shape)
                        with inline_matmul_threshold(lf.ops.INLINE_MATMUL if threshold is None else threshold):
                            result = program(lf, *[lf.tensor(t, device=name) for t in inputs])
                            key = f"{name} {case} {'x'.join(map(str, shape))} inline_matmul={threshold}"
                            out[key] = _kernels(device, result)
                        del result
                        lf.sync(name)   # the dropped result: elided, nothing runs
        return out
    finally:
        if saved is None:
            os.environ.pop("LAZYFUSE_AUTOTUNE", None)
        else:
            os.environ["LAZYFUSE_AUTOTUNE"] = saved


if __name__ == "__main__":
    GOLDEN.parent.mkdir(exist_ok=True)
    data = record()
    GOLDEN.write_text("{\n" + ",\n".join(f"{json.dumps(k)}: {json.dumps(v, separators=(',', ':'))}"
                                         for k, v in data.items()) + "\n}\n")
    print(f"wrote {GOLDEN}: {len(data)} programs, {sum(len(v) for v in data.values())} steps")
