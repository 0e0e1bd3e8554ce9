"""The command line: the main job prints the table the README promises; `bench --quick` writes
its tables, JSON and PNG charts into --out (never over the committed results)."""
import json
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


def _strict_json(text: str):
    def refuse(name):
        raise ValueError(f"non-standard JSON constant {name}")
    return json.loads(text, parse_constant=refuse)


def test_bench_quick_writes_tables_json_and_charts_into_out(tmp_path):
    results = ROOT / "bench" / "results"
    before = {p.name: p.read_bytes() for p in results.iterdir()}
    out = subprocess.run([sys.executable, "-m", "lazyfuse", "bench", "--quick", "--out", str(tmp_path)],
                         capture_output=True, text=True, cwd=ROOT, timeout=600,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout
    assert "Traceback" not in text + out.stderr
    columns = {"core": ("lazyfuse ms", "torch eager ms", "torch.compile ms", "lazyfuse vs eager", "max err"),
               "programs": ("case", "lazyfuse kernels", "lazyfuse ms", "eager ms", "vs eager", "max err"),
               "capture": ("hidden", "launches", "replay us", "eager us", "replay vs eager", "max err"),
               "autotune": ("case", "default ms", "tuned ms", "gain", "tuned config"),
               "contention": ("variant", "quiet us", "busy us", "slowdown"),
               "distributed": ("batch x width (per rank)", "lazyfuse captured us", "torch DDP us",
                               "lazyfuse vs torch DDP")}
    for name, cols in columns.items():
        md = next(tmp_path.glob(f"{name}-*.md")).read_text()
        table = [ln for ln in md.splitlines() if ln.startswith("|")]
        header = [c.strip() for c in table[0].strip("|").split("|")]
        assert all(c in header for c in cols), (name, header)
        rows = [[c.strip() for c in ln.strip("|").split("|")] for ln in table[2:]]
        assert rows and all(len(r) == len(header) for r in rows)
        for r in rows:                      # no error rows: every cell a value or n/a (a skipped peer)
            assert not any(word in " ".join(r).lower() for word in ("error", "fail", "nan", "inf "))
            err = r[header.index("max err")] if "max err" in header else "0"
            assert float(err) < 1e-3
        assert md in text                   # the same table was printed
        payload = _strict_json(next(tmp_path.glob(f"{name}-*.json")).read_text())
        assert payload["machine"]["cores"] >= 1
        png = next(tmp_path.glob(f"{name}-*.png"))
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        import matplotlib.image
        image = matplotlib.image.imread(png)
        assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100
    assert {p.name: p.read_bytes() for p in results.iterdir()} == before   # committed results untouched
