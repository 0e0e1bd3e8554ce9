"""The generated kernels are pinned: every C and Triton source of the program cases, at every
candidate config, equals the one recorded in tests/golden/kernel_sources.json (tests/kernel_golden.py
records them, and says how to re-record after a change that means to alter a kernel)."""
import json

import kernel_golden


def test_kernel_sources_equal_the_golden_ones():
    golden = json.loads(kernel_golden.GOLDEN.read_text())
    got = json.loads(json.dumps(kernel_golden.record()))   # tuples as lists, as in the file
    assert sorted(got) == sorted(golden)
    changed = [f"{program}: {name} {config}" for program, steps in golden.items()
               for (name, kind, sources), (_, _, now) in zip(steps, got[program])
               for config in sorted(set(sources) | set(now)) if sources.get(config) != now.get(config)]
    assert [len(s) for s in got.values()] == [len(golden[p]) for p in got], "a program's step count changed"
    assert changed == [], f"{len(changed)} kernel source(s) changed, the first: {changed[:5]}"
