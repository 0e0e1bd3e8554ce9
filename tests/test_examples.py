"""The examples run and check themselves against torch; the README's tour prints what it says."""
import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))


@pytest.mark.parametrize("name", ["mlp", "transformer_block", "decode", "train_mlp"])
def test_example_matches_torch_on_cpu(name):
    module = runpy.run_path(str(ROOT / "examples" / f"{name}.py"))
    assert module["main"](device="cpu")


def test_mlp_example_on_the_interpreter():
    module = runpy.run_path(str(ROOT / "examples" / "mlp.py"))
    assert module["main"](batch=4, sizes=(8, 16, 4), device="interpreter") < 1e-4


def test_tour_prints_the_counts_the_readme_claims():
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "tour.py")], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "7 2 1" in lines
    assert any("hold_outputs" in ln and "elided" not in ln or "new fused plan" in ln for ln in lines)
    assert any("warmup_iters" in ln and "metadata" in ln for ln in lines)
