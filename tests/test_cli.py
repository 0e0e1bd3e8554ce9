"""The main job runs from the command line and prints the table the README promises."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_demo_prints_the_three_way_table():
    out = subprocess.run([sys.executable, "-m", "lazyfuse", "demo", "--steps", "4", "--vocab", "32", "--layers", "1",
                          "--hidden", "32"], capture_output=True, text=True, cwd=ROOT, timeout=600,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout
    for column in ("ops/step", "kernels/step", "time/step", "speedup", "max err"):
        assert column in text
    for row in ("torch eager", "lazyfuse lazy + fused", "lazyfuse captured"):
        assert row in text
    assert "device cpu" in text and "backend c" in text
    assert "logits match torch" in text
