"""Autotuning on the Triton backend (interpreter device): real tuning once on scratch buffers,
the cached choice in the next process, failing candidates skipped, results independent of the
choice; plus torch's logical bool arithmetic in the Triton printer."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

import lazyfuse as lf
from lazyfuse.codegen import triton_printer
from lazyfuse.codegen.triton_printer import TritonConfig, candidate_configs, default_config

ROOT = Path(__file__).resolve().parents[1]
DEV = "interpreter"

PROGRAM = textwrap.dedent("""
    import hashlib, json, numpy as np, lazyfuse as lf
    d = "interpreter"
    xn = (np.arange(48 * 300, dtype=np.float32).reshape(48, 300) % 13) / 4   # sums are exact
    x = lf.tensor(xn, device=d)
    rows = (x * 2).sum(1)          # a row reduction: persistent vs looped
    cols = (x - 1).sum(0)          # a column reduction
    pw = (x * 3 + 1).tanh()        # a pointwise kernel: two BLOCK sizes
    y = lf.tensor(np.ones(5000, dtype=np.float32), device=d)
    y.add_(1)
    y.mul_(3)                      # in place: tuning ran on scratch copies, or y would not be 6
    outs = [r.numpy() for r in (rows, cols, pw, y)]
    ok = bool(np.array_equal(outs[0], (xn * 2).sum(1)) and np.array_equal(outs[1], (xn - 1).sum(0))
              and np.allclose(outs[2], np.tanh(xn * 3 + 1), rtol=1e-5, atol=1e-6) and (outs[3] == 6).all())
    digest = hashlib.sha256(b"".join(o.tobytes() for o in outs)).hexdigest()
    print(json.dumps({"autotune_runs": lf.stats(d).autotune_runs, "ok": ok, "digest": digest}))
""")


def run_program(cache: Path, **env):
    full = {**os.environ, "LAZYFUSE_CACHE_DIR": str(cache), "LAZYFUSE_AUTOTUNE": "1", "LAZYFUSE_AUTOTUNE_AFTER": "1",
            "PYTHONPATH": str(ROOT), **env}
    out = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, env=full, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_first_process_tunes_second_finds_the_cached_choice_and_off_gives_the_same_results(tmp_path):
    first = run_program(tmp_path / "on")
    assert first["ok"] and first["autotune_runs"] >= 1
    entries = list((tmp_path / "on" / "autotune").glob("*.json"))
    assert entries
    for p in entries:
        entry = json.loads(p.read_text())
        assert entry["backend"].startswith("triton|interpreter|") and entry["config"] in entry["timings_us"]
    second = run_program(tmp_path / "on")
    assert second["ok"] and second["autotune_runs"] == 0
    assert second["digest"] == first["digest"]
    off = run_program(tmp_path / "off", LAZYFUSE_AUTOTUNE="0")
    assert off["ok"] and off["autotune_runs"] == 0 and off["digest"] == first["digest"]
    assert not list((tmp_path / "off" / "autotune").glob("*.json"))


def test_candidate_sets():
    dev = lf.device(DEV)
    # the interpreter's set stays small; GPUs try more, the default always first
    from lazyfuse.codegen.kernel import Kernel
    from lazyfuse.codegen.index import Var
    pointwise = Kernel("k", (Var("p0", 100_000),), (), (), (), (), ())
    interp = candidate_configs(pointwise, True)
    gpu = candidate_configs(pointwise, False)
    assert interp[0] == default_config(pointwise, True) and len(interp) == 2
    assert gpu[0] == default_config(pointwise, False) and len(gpu) >= 4 and len(set(gpu)) == len(gpu)
    assert TritonConfig(128, 64, 4, 3).label() == "block=128,block_r=64,num_warps=4,num_stages=3"
    assert dev.backend.candidates(pointwise) in ([interp[0]], interp)


def _break(monkeypatch, how: str, which):
    """Make the printed source of the configs ``which(cfg, kernel)`` selects fail to import or to run."""
    real = triton_printer.TritonPrinter.function
    bad = {"import": "    this is not valid python (\n", "run": "    raise RuntimeError('a broken candidate')\n"}[how]

    def function(self, name):
        src = real(self, name)
        return src.replace("):\n", "):\n" + bad, 1) if which(self.cfg, self.k) else src

    monkeypatch.setattr(triton_printer.TritonPrinter, "function", function)
    return real


@pytest.fixture
def tuning(monkeypatch, tmp_path):
    monkeypatch.setenv("LAZYFUSE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("LAZYFUSE_AUTOTUNE", "1")
    monkeypatch.setenv("LAZYFUSE_AUTOTUNE_AFTER", "1")   # tuned at the build
    dev = lf.device(DEV)
    monkeypatch.setattr(dev.backend, "_tuners", {})   # a fresh tuner reads the private cache folder
    # and no plan of another test (or of the same structure at other sizes) spares the tuning
    monkeypatch.setattr(dev.engine, "plans", type(dev.engine.plans)())
    monkeypatch.setattr(dev.engine, "structures", type(dev.engine.structures)())
    return dev


@pytest.mark.parametrize("how,rows", [("import", 37), ("run", 41)])
def test_a_failing_candidate_is_skipped(tuning, monkeypatch, tmp_path, how, rows):
    _break(monkeypatch, how, lambda cfg, k: cfg != default_config(k, True))
    xn = np.arange(rows * 150, dtype=np.float32).reshape(rows, 150) % 7
    x = lf.tensor(xn, device=tuning)
    before = tuning.stats.autotune_runs
    np.testing.assert_array_equal((x * 2).sum(1).numpy(), (xn * 2).sum(1))
    np.testing.assert_array_equal((x + 0.5).numpy(), xn + 0.5)
    assert tuning.stats.autotune_runs - before == 2
    entries = [json.loads(p.read_text()) for p in (tmp_path / "autotune").glob("*.json")]
    assert len(entries) == 2
    for e in entries:   # only the working default was timed
        assert list(e["timings_us"]) == [e["config"]]


@pytest.mark.parametrize("how,rows", [("import", 43), ("run", 47)])
def test_every_candidate_failing_raises_compile_error_and_the_engine_still_works(tuning, monkeypatch, how, rows):
    keep = lf.tensor(np.array([1.0, 2.0], dtype=np.float32), device=tuning) + 1
    keep.numpy()
    real = _break(monkeypatch, how, lambda cfg, k: True)
    x = lf.tensor(np.ones((rows, 64), dtype=np.float32), device=tuning)
    what = "compile" if how == "import" else "run"
    with pytest.raises(lf.CompileError, match=f"kernel .* every candidate failed to {what}"):
        ((x + 5.5) * 7).numpy()
    monkeypatch.setattr(triton_printer.TritonPrinter, "function", real)
    np.testing.assert_allclose(keep.numpy(), [2.0, 3.0])
    np.testing.assert_allclose((keep * 2).numpy(), [4.0, 6.0])
    np.testing.assert_allclose(((x + 5.5) * 7).numpy(), np.full((rows, 64), 45.5))


def test_bool_arithmetic_is_logical():
    bt = torch.tensor([True, False, True, False] * 40)
    b = lf.tensor(bt, device=DEV)
    out = (b + b).int().torch()
    assert torch.equal(out, (bt + bt).int()) and out.max().item() == 1
    assert torch.equal(out[bt], torch.ones(80, dtype=torch.int32))
    assert torch.equal((b * b).int().torch(), (bt * bt).int())
    assert torch.equal((b + b).torch(), bt + bt)
    assert torch.equal(((b + b) * 3).torch(), (bt + bt) * 3)
