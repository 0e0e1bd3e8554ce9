"""Test-session defaults: a private compile/tuning cache, and autotuning off unless a test turns
it on (tests/test_autotune.py does): tuning every randomly generated kernel would only slow
the suite, and the heuristic default runs the very same code path minus the benchmarking.
The plan store is off too unless a test turns it on (tests/test_plan_store.py does): with it,
a plan one test built would reach another test from the disk, past the build path that test
patches or counts."""
import os
import tempfile

import pytest

os.environ.setdefault("LAZYFUSE_AUTOTUNE", "0")
os.environ.setdefault("LAZYFUSE_PLAN_STORE", "0")
os.environ.setdefault("LAZYFUSE_CACHE_DIR", os.path.join(tempfile.gettempdir(), "lazyfuse-test-cache"))


@pytest.fixture
def last_candidate_wins(monkeypatch):
    """The autotuner's timing replaced: each candidate benchmarked runs once and the last one is
    the fastest, so a test can tell a tuned choice from the heuristic default. Returns the runs."""
    from lazyfuse.codegen import autotune
    timed = []

    def last_wins(run, *args, **kwargs):
        timed.append(run)
        run()
        return 1.0 / len(timed)
    monkeypatch.setattr(autotune, "benchmark", last_wins)
    return timed
