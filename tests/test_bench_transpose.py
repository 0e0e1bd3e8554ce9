"""bench/transpose.py's smoke run: each case it times is computed right (against float64 torch) and
lands on the page with both timings (drained, torch)."""
import json

from bench import common, transpose


def test_the_transpose_page_lists_each_case_with_both_timings(tmp_path):
    try:
        assert transpose.main(["--smoke", "--out", str(tmp_path)]) == 0
    finally:
        common.configure(None)
    (page,) = tmp_path.glob("transpose-*.json")
    rows = json.loads(page.read_text())["cases"]
    assert [r["case"] for r in rows] == list(transpose.SMOKE_CASES)
    for r in rows:
        assert r["lazyfuse_us"] > 0 and r["torch_us"] > 0
        assert r["max_err"] < 1e-5, r
    markdown = next(tmp_path.glob("transpose-*.md")).read_text()
    assert all(f"| {name} |" in markdown for name in transpose.SMOKE_CASES)
