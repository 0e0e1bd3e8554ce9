"""What an extern adds to torch's own call: chains of ``lf.extern(torch.cumsum, y, 1)`` against
the same chain of ``torch.cumsum(y, 1, out=buf)`` eager (one output buffer per step, as the
pool gives), at a few sizes:

* ``chain``: the marginal cost of one more extern in a drain (record and launch): a chain of
  ``CHAIN`` externs drained once less a chain of one, per extern, less the same for torch.
  This is the issue's "lazyfuse overhead per extern" (the drain's fixed cost is every op's,
  not the extern's);
* ``replay``: the chain captured (``lf.capture``) and replayed, per extern, less torch's chain
  per call: the launch alone;
* ``single``: one extern recorded and drained (the steady-state plan), less torch's call: the
  drain's fixed cost included.

    python -m bench.extern_overhead [--smoke]

The issue's bar: at most 5 us per extern. Timings on a shared machine are noisy; the numbers
printed are per call, medians of interleaved runs.
"""
import argparse

import torch

import lazyfuse as lf
from bench.common import timeit_interleaved

CHAIN = 8


def main(smoke=False):
    dev = lf.device("cpu")
    sizes = [(64, 64)] if smoke else [(64, 64), (256, 1024), (1024, 1024)]
    rows = []
    for shape in sizes:
        xt = torch.randn(*shape)
        x = lf.tensor(xt, device=dev)
        outs = [torch.empty_like(xt) for _ in range(CHAIN)]

        def chain(n):
            y = x
            for _ in range(n):
                y = lf.extern(torch.cumsum, y, 1)
            return y

        def drained(n):
            def run():
                y = chain(n)
                lf.sync(dev)
                return y
            return run

        graph = lf.capture(dev, lambda: chain(CHAIN))

        def eager(n):
            def run():
                y = xt
                for out in outs[:n]:
                    y = torch.cumsum(y, 1, out=out)
                return y
            return run

        t = timeit_interleaved({"one": drained(1), "many": drained(CHAIN), "replay": graph.replay,
                                "torch one": eager(1), "torch many": eager(CHAIN)}, reps=3 if smoke else 200, warmup=2)
        us = {k: v * 1e6 for k, v in t.items()}
        torch_step = (us["torch many"] - us["torch one"]) / (CHAIN - 1)
        rows.append({"shape": shape, "torch": us["torch one"],
                     "chain": (us["many"] - us["one"]) / (CHAIN - 1) - torch_step,
                     "replay": (us["replay"] - us["torch many"]) / CHAIN, "single": us["one"] - us["torch one"]})
    for r in rows:
        print(f"{str(r['shape']):14s} torch {r['torch']:8.1f} us   overhead per extern: chain {r['chain']:6.1f} us, "
              f"replay {r['replay']:6.1f} us; one extern drained alone {r['single']:6.1f} us")
    return rows


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--smoke", action="store_true")
    main(p.parse_args().smoke)
