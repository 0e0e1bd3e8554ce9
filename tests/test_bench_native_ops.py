"""bench/native_ops.py's smoke run: each op it times is computed right (against float64 torch) and
lands on the page with its three timings (kernel replayed, drained, torch); an op name that starts
with "nan" is not taken for a NaN cell; every op the page calls native is native (no extern)."""
import json

from bench import common, native_ops


def test_the_native_ops_page_lists_each_op_with_both_timings(tmp_path, monkeypatch):
    monkeypatch.setattr(native_ops, "SMOKE_OPS", ["exp", "nan_to_num", "maximum", "sum(-1)"])
    try:
        assert native_ops.main(["--smoke", "--out", str(tmp_path)]) == 0
    finally:
        common.configure(None)
    (page,) = tmp_path.glob("native_ops-*.json")
    rows = json.loads(page.read_text())["ops"]
    assert [r["op"] for r in rows] == native_ops.SMOKE_OPS
    for r in rows:
        assert r["kernel_us"] > 0 and r["lazyfuse_us"] > 0 and r["torch_us"] > 0
        assert r["max_err"] < 1e-4, r   # (float32 against float64: sums of 1024 values reach ~2e-5)
    markdown = next(tmp_path.glob("native_ops-*.md")).read_text()
    assert "| nan_to_num |" in markdown
    assert "Kernel at least torch's speed: " in markdown and "; drained alone: " in markdown


def test_every_op_of_the_page_is_native():
    # (lf.exp, lf.clamp... reached torch's function as externs once: the page timed torch twice)
    import lazyfuse as lf
    import torch
    x, y = lf.randn(4, 8), lf.rand(4, 8) + 0.5
    m = x > 0
    for name, op in native_ops.OPS.items():
        lf.sync()
        before = lf.stats().extern_launches
        out = op(lf, x, y, m)
        want = op(torch, x.torch(), y.torch(), m.torch())
        torch.testing.assert_close(out.torch(), want, equal_nan=True, msg=name)
        assert lf.stats().extern_launches == before, f"{name} ran an extern"
