"""The benchmark pages' honesty rules (bench/common.py): a smoke run or a run under load says so
on the chart itself, and a noisy run says so on the page."""
from __future__ import annotations

import matplotlib
import matplotlib.figure
import pytest

from bench import common


@pytest.fixture
def figures(monkeypatch, tmp_path):
    matplotlib.use("Agg")
    saved = []
    real = matplotlib.figure.Figure.savefig
    monkeypatch.setattr(matplotlib.figure.Figure, "savefig",
                        lambda fig, path, **kw: (saved.append([t.get_text() for t in fig.texts]), real(fig, path, **kw)))
    yield saved
    common.configure()


@pytest.mark.parametrize("smoke,busy,label", [(True, 0, common.SMOKE_LABEL), (False, 1, "under load: 1 busy"),
                                              (False, 0, None)])
def test_charts_carry_the_smoke_and_load_labels(figures, tmp_path, smoke, busy, label):
    common.configure(tmp_path, smoke=smoke, busy=busy)
    common.publish("t", {}, ["# page"], {"a": 2.0})
    texts = " ".join(figures[-1])
    assert (label in texts) if label else not texts


def test_a_noisy_run_says_so_on_the_page(tmp_path, monkeypatch):
    common.configure(tmp_path)
    ticks = iter(range(10_000))
    # each call of "jumpy" alternates 1 and 5 time units; "steady" takes 1 every time
    clock = {"t": 0.0}
    monkeypatch.setattr(common.time, "perf_counter", lambda: clock["t"])

    def calls(cost):
        def run():
            clock["t"] += cost()
        return run
    common.timeit_interleaved({"steady": calls(lambda: 1.0),
                               "jumpy": calls(lambda: 5.0 if next(ticks) % 2 else 1.0)}, reps=20, warmup=0)
    md = common.publish("t", {}, ["# page"]).with_suffix(".md").read_text()
    assert "noisy" in md and "jumpy" in md and "steady" not in md
    md = common.publish("t", {}, ["# page"]).with_suffix(".md").read_text()
    assert "noisy" not in md    # the record starts again for the next page
