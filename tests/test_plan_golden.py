"""The planner's result is pinned: the plans of the program cases, a transformer block and a
2-layer GPT training step (tests/plan_golden.py records them) equal the golden ones recorded
before the planner was rewritten for speed (issue 15: same partition, same boundary reasons)."""
import json

import plan_golden


def test_plans_equal_the_golden_plans():
    golden = json.loads(plan_golden.GOLDEN.read_text())
    got = json.loads(json.dumps(plan_golden.record()))   # tuples as lists, as in the file
    assert sorted(got) == sorted(golden)
    for name in golden:
        assert len(got[name]) == len(golden[name]), name
        for k, (a, b) in enumerate(zip(got[name], golden[name])):
            for part in ("forced", "cpu", "template"):
                assert a[part] == b[part], f"{name}, drain {k}: the {part} plan changed"
