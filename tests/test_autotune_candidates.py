"""Every autotune candidate runs, on every device's printer, and on a second compiler target.

The rest of the suite runs with autotuning off (tests/conftest.py), so only each kernel's
heuristic default ever ran there, while a user with autotuning on runs whichever candidate
wins. A candidate of a small batched product once segfaulted on AVX-512 CPUs (gcc stored to a
misaligned stack array; see ``c_printer.local_array``) and the suite could not see it. Here
the differential random programs (tests/test_differential.py, at a small scale) and the
whole-program cases (tests/test_programs*.py), the fused index checks (each candidate sets the
kernel's error flag: tests/test_data_errors.py), sin and cos in every kernel kind with elements
for either of their passes (tests/test_native_kernels.py), plus the shapes that crashed, run once per
candidate index with ``LAZYFUSE_AUTOTUNE_FORCE`` set, in a subprocess each: a crash is a
failed test naming the candidate, not a dead test worker.

On x86-64 the C kernels also run for a second ``-march`` target this CPU can execute
(``LAZYFUSE_MARCH``): ``skylake-avx512`` where the CPU has that ISA — gcc's tuning for Intel's
AVX-512 targets is what exposed the crash, even on an AMD CPU with AVX-512 — else
``x86-64-v2``.
"""
from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import lazyfuse as lf
from lazyfuse.codegen.triton_printer import INTERPRETER_MAX_CANDIDATES
from lazyfuse.runtime.cpu import MAX_CANDIDATES

ROOT = Path(__file__).resolve().parent.parent
F = lf.nn.functional

SKYLAKE_AVX512_ISA = {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"}


def second_target() -> str | None:
    """A ``-march`` target besides ``native`` that this CPU executes, or None off x86-64."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return None
    try:
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags"))
    except (OSError, StopIteration):
        return "x86-64-v2"
    return "skylake-avx512" if SKYLAKE_AVX512_ISA <= set(flags.split()) else "x86-64-v2"


# -- the shapes that crashed (run in-process with the default candidate, and by every sweep) -----
@pytest.mark.parametrize("r", [2, 3, 5, 6, 7])
def test_batched_product_with_one_row(r):
    g = torch.Generator().manual_seed(r)
    a, b = torch.randn(4, 1, r, generator=g), torch.randn(4, r, 16, generator=g)
    got = (lf.tensor(a) @ lf.tensor(b)).torch()
    torch.testing.assert_close(got.double(), a.double() @ b.double(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kv", [2, 3, 5, 6, 7])
def test_attention_with_one_query(kv):
    g = torch.Generator().manual_seed(kv)
    q, k, v = torch.randn(1, 4, 1, 16, generator=g), torch.randn(1, 4, kv, 16, generator=g), \
        torch.randn(1, 4, kv, 16, generator=g)
    got = F.scaled_dot_product_attention(lf.tensor(q), lf.tensor(k), lf.tensor(v)).torch()
    want = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double())
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5)


# -- the sweeps ------------------------------------------------------------------------------------
SWEEP_TESTS = {
    "cpu": ["tests/test_differential.py", "tests/test_programs.py::test_program_matches_torch_on_cpu",
            "tests/test_autotune_candidates.py::test_batched_product_with_one_row",
            "tests/test_autotune_candidates.py::test_attention_with_one_query",
            "tests/test_data_errors.py::test_checked_ops_raise_under_the_forced_candidate",
            # (sin/cos's two passes, the near one flagging far elements, in each kernel kind)
            "tests/test_native_kernels.py::test_sin_and_cos_in_every_reduction_kernel",
            "tests/test_native_kernels.py::test_sin_and_cos_hold_out_to_the_largest_float"],
    "interpreter": ["tests/test_differential.py",
                    "tests/test_programs_interpreter.py::test_program_matches_torch_on_the_interpreter",
                    "tests/test_autotune_candidates.py::test_batched_product_with_one_row",
                    "tests/test_autotune_candidates.py::test_attention_with_one_query",
                    "tests/test_data_errors.py::test_checked_ops_raise_under_the_forced_candidate"],
}
SCALE = {"cpu": "0.1", "interpreter": "0.05"}


def sweep(device: str, index: int, cache: Path, march: str | None = None) -> None:
    scale = SCALE[device] if march is None else "0.05"   # the second target: a lighter pass
    env = dict(os.environ, LAZYFUSE_DEVICE=device, LAZYFUSE_AUTOTUNE="0", LAZYFUSE_AUTOTUNE_FORCE=str(index),
               LAZYFUSE_CACHE_DIR=str(cache), LF_DIFF_SCALE=scale, LF_DIFF_NO_SHRINK="1",
               PYTHONPATH=str(ROOT))
    if march:
        env["LAZYFUSE_MARCH"] = march
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-p", "no:xdist",
           "-W", "ignore::UserWarning", *SWEEP_TESTS[device]]
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    out = proc.stdout + proc.stderr
    crashed = " (killed by a signal: a crash in generated code)" if proc.returncode < 0 else ""
    assert proc.returncode == 0, (f"{device}, candidate {index}, -march={march or 'native'}: exit "
                                  f"{proc.returncode}{crashed} after {time.monotonic() - start:.0f}s; "
                                  f"the tail of the output:\n{out[-6000:]}")


CPU_SWEEPS = [(march, i) for march in dict.fromkeys([None, second_target()]) for i in range(MAX_CANDIDATES)]


@pytest.mark.parametrize("march,index", CPU_SWEEPS, ids=[f"{m or 'native'}-{i}" for m, i in CPU_SWEEPS])
def test_every_c_candidate_matches_torch(march, index, tmp_path_factory):
    # one cache for all indexes: a plan's library holds every candidate, so it compiles once
    sweep("cpu", index, tmp_path_factory.getbasetemp() / f"candidates-cpu-{march or 'native'}", march)


@pytest.mark.parametrize("index", range(INTERPRETER_MAX_CANDIDATES))
def test_every_triton_candidate_matches_torch_on_the_interpreter(index, tmp_path_factory):
    sweep("interpreter", index, tmp_path_factory.getbasetemp() / "candidates-interpreter")


# -- the knobs themselves ---------------------------------------------------------------------------
def test_a_forced_index_past_a_kernels_candidates_takes_its_last(monkeypatch):
    from lazyfuse.codegen import autotune
    monkeypatch.setenv("LAZYFUSE_AUTOTUNE_FORCE", "99")
    runs = []
    labels = ["a", "b", "c"]
    assert autotune.choose(None, "sig", labels, [lambda: runs.append(1)] * 3, None) == 2
    assert not runs   # forced: nothing benchmarked


def test_a_forced_candidate_that_failed_to_build_is_an_error(monkeypatch):
    from lazyfuse.codegen import autotune
    monkeypatch.setenv("LAZYFUSE_AUTOTUNE_FORCE", "1")
    with pytest.raises(lf.CompileError, match="forced autotune candidate b"):
        autotune.choose(None, "sig", ["a", "b"], [lambda: None, None], None)


def test_a_bad_force_value_names_the_knob(monkeypatch):
    monkeypatch.setenv("LAZYFUSE_AUTOTUNE_FORCE", "fast")
    with pytest.raises(lf.CompileError, match="LAZYFUSE_AUTOTUNE_FORCE='fast'"):
        (lf.tensor(np.ones((3, 7, 1), np.float32)).exp() * 2).numpy()   # a shape no other test drains
    monkeypatch.delenv("LAZYFUSE_AUTOTUNE_FORCE")
    np.testing.assert_allclose((lf.tensor(np.ones((3, 7, 1), np.float32)).exp() * 2).numpy(),
                               np.exp(np.ones((3, 7, 1))) * 2, rtol=1e-6)


def test_the_target_is_part_of_the_library_key(monkeypatch):
    from lazyfuse.codegen import c_compile
    cc = c_compile.compiler()
    if cc is None:
        pytest.skip("no C compiler")
    native = c_compile.library_key("int x;", cc)
    monkeypatch.setenv("LAZYFUSE_MARCH", "x86-64-v2")
    assert c_compile.library_key("int x;", cc) != native
    assert "-march=x86-64-v2" in c_compile.flags()
