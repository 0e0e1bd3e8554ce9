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


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """What a new process with an empty cache folder starts with: no C library or Triton module
    loaded, no plan (or plan structure) cached on the cpu and interpreter engines, nothing pending
    from an earlier test (it would join the first drain). The next new kernel compiles."""
    from collections import OrderedDict

    import lazyfuse as lf
    from lazyfuse.codegen import c_compile
    from lazyfuse.runtime import triton_devices

    monkeypatch.setenv("LAZYFUSE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(c_compile, "_loaded", c_compile.LibraryCache())
    monkeypatch.setattr(c_compile, "_holder", {})
    monkeypatch.setattr(triton_devices, "_loaded", OrderedDict())
    engines = [lf.device(kind).engine for kind in ("cpu", "interpreter")]

    def forget_plans():
        for engine in engines:
            for cache in (engine.plans, engine.structures, engine.planned):
                cache.clear()

    for kind in ("cpu", "interpreter"):
        lf.sync(lf.device(kind))
    forget_plans()
    yield tmp_path
    forget_plans()
