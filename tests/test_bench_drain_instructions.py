"""bench/drain_instructions.py: its child program runs every workload (a plain run, as the script
makes before valgrind's), and under callgrind it reports a per-call count (slow: valgrind)."""
import os
import shutil

import pytest

from bench import drain_instructions


def environment():
    return dict(os.environ, LAZYFUSE_MARCH="x86-64-v3", LAZYFUSE_THREADS="1")


def test_every_workload_runs_in_the_child_program():
    assert drain_instructions.run(list(drain_instructions.WORKLOADS), 8, 2, environment(), valgrind=False) == []


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind")
def test_callgrind_counts_one_call():
    (count,) = drain_instructions.run(["relu"], 8, 5, environment(), valgrind=True)
    assert 10_000 < count < 1_000_000, count
