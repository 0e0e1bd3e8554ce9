"""bench/drain.py's bytecode count, the machine-independent measure of a drain's fixed cost: the
same for every steady-state call, and a build drain runs more than the steady state after it."""
import torch

import lazyfuse as lf
from bench import drain
from lazyfuse.runtime import threads


def test_a_steady_drains_bytecodes_are_the_same_every_call(monkeypatch):
    monkeypatch.setattr(threads, "SAMPLE_S", 1e9)   # (no new thread-budget decision inside a counted call)
    x = lf.tensor(torch.randn(16, 48, generator=torch.Generator().manual_seed(0)))
    record = lambda: (x * 2.0).exp()  # noqa: E731
    first = drain.bytecodes(record, calls=1)   # the plan's first steady-state drain: metadata, launches made
    steady = [drain.bytecodes(record) for _ in range(3)]
    assert steady[0] == steady[1] == steady[2], steady
    assert first[0] == steady[0][0] and first[1] > steady[0][1] > 0, (first, steady)
