"""Test-session defaults: a private compile/tuning cache, and autotuning off unless a test turns
it on (tests/test_autotune.py does): tuning every randomly generated kernel would only slow
the suite, and the heuristic default runs the very same code path minus the benchmarking.
The plan store is off too unless a test turns it on (tests/test_plan_store.py does): with it,
a plan one test built would reach another test from the disk, past the build path that test
patches or counts."""
import os
import tempfile

os.environ.setdefault("LAZYFUSE_AUTOTUNE", "0")
os.environ.setdefault("LAZYFUSE_PLAN_STORE", "0")
os.environ.setdefault("LAZYFUSE_CACHE_DIR", os.path.join(tempfile.gettempdir(), "lazyfuse-test-cache"))
