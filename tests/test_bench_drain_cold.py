"""bench/drain_cold.py, the breakdown of a single op's drain at (1024, 1024): it runs, and its
parts are the lazy call's (record + sync + drop make the drained time, less the replay the fixed cost)."""
import lazyfuse as lf
from bench import drain_cold, native_ops


def test_the_parts_make_the_drained_time():
    r = drain_cold.measure("add", 5, *native_ops.inputs(lf.device("cpu")))
    assert all(r[k] > 0 for k in ("replay", "record", "record hot", "sync", "drop", "torch")), r
    assert r["drained"] >= r["sync"] and abs(r["fixed"] - (r["drained"] - r["replay"])) < 1e-9, r
