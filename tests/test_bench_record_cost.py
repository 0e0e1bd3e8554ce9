"""bench/record_cost.py's smoke run: each op lands on the page with the nodes one call records (its
``ops_recorded`` delta, which tests/test_one_node_ops.py pins for the ops cut to one node) and a
record time; and its ``--callgrind`` mode records the op the number of times asked."""
import json

import lazyfuse as lf
from bench import common, record_cost


def test_the_record_cost_page_lists_nodes_and_time_per_call(tmp_path):
    try:
        assert record_cost.main(["--smoke", "--out", str(tmp_path)]) == 0
    finally:
        common.configure(None)
    (page,) = tmp_path.glob("record_cost-*.json")
    rows = {r["op"]: r for r in json.loads(page.read_text())["ops"]}
    assert set(rows) == set(record_cost.SMOKE_OPS)
    assert rows["relu"]["nodes"] == 1 and rows["sign"]["nodes"] == 1
    assert rows["mean(-1)"]["nodes"] == 2   # a sum and a division
    assert all(r["record_us"] > 0 for r in rows.values())
    assert "| sign | 1 |" in next(tmp_path.glob("record_cost-*.md")).read_text()


def test_the_callgrind_mode_records_the_op_as_many_times_as_asked():
    before = lf.stats(lf.device("cpu")).ops_recorded
    assert record_cost.main(["--callgrind", "atan2", "--calls", "7"]) == 0
    assert lf.stats(lf.device("cpu")).ops_recorded - before == record_cost.CALLGRIND_WARMUP + 7
