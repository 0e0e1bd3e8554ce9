"""The README's tour, runnable: lazy ops, elision, fusion counts, capture, replay, the two bugs."""
import numpy as np

import lazyfuse as lf

dev = lf.device("cpu")
x = lf.tensor(np.linspace(-2, 2, 8, dtype=np.float32))
lf.reset_stats(dev)

y = (x * 2 + 1).tanh() * x.exp()          # records 5 ops, runs nothing
dropped = (x - 3).sigmoid()               # recorded...
del dropped                               # ...and dropped before the drain: elided
print(y.numpy())                          # a host read drains: 1 fused kernel
s = lf.stats(dev)
print(s.ops_recorded, s.ops_elided, s.kernels_launched)        # 7 2 1

w = lf.tensor(np.eye(8, dtype=np.float32))
step = lambda: lf.nn.functional.softmax(x @ w, -1)             # noqa: E731
graph = lf.capture(dev, step)              # warm up 3x (holding outputs), then record
x.copy_(np.ones(8, dtype=np.float32))      # refresh the input in place
print(graph.replay().numpy())              # one dispatch of the recorded launches

for kwargs in ({"hold_outputs": False}, {"warmup_iters": 1}):   # the two bugs, on purpose
    try:
        lf.capture(dev, step, **kwargs)
    except lf.CaptureAllocationError as e:
        print(kwargs, "->", str(e).split(". ")[0])
