"""examples/gpt.py: nanoGPT's model on lazyfuse trains to torch eager's losses and samples."""
import runpy
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_gpt_trains_to_torch_losses_and_generates():
    module = runpy.run_path(str(ROOT / "examples" / "gpt.py"))
    assert module["main"](device="cpu", steps=3, batch=2, tokens=4, verbose=False)
