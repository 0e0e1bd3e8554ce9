"""Native ops against their torch eager call at 2^20 elements: issue 18's bar that a native
(fused, generated) op is never slower than torch's own kernel for it.

Each op runs on a realized (1024, 1024) float32 input (a second one for binary ops, a bool mask
for ``masked_fill``/``where``), three ways: *kernel*, the op captured once with ``lf.capture`` and
timed by ``Graph.replay()`` (the generated kernel's launch alone: no recording, no planning);
*drained*, the op recorded and drained with its result held (the plan cached: the steady state,
the kernel plus a single drain's fixed cost); *torch*, the same op called eagerly. All three are
called round-robin (``timeit_interleaved``) with the same thread count, decided afresh after the
op's compile (``settle_threads``), and the page lists each
ratio and the ops where lazyfuse was slower, for the kernel alone and for the drain.

    python -m bench.native_ops [--smoke] [--only OP ...] [--out DIR]
"""
import argparse

import numpy as np
import torch

import lazyfuse as lf
from bench.common import configure, heading, machine, match_threads, publish, settle_threads, timeit_interleaved

SHAPE = (1024, 1024)   # 2^20 elements

# name -> f(lib, x, y, mask): the same call on lazyfuse and on torch (lazyfuse answers to torch's names)
UNARY = ["exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "erfc", "log1p", "expm1", "log2", "exp2",
         "sin", "cos", "abs", "neg", "floor", "ceil", "round", "trunc", "frac", "sign", "square", "reciprocal",
         "isnan", "isfinite", "nan_to_num"]
ACTIVATIONS = ["relu", "gelu", "silu", "elu", "selu", "celu", "softplus", "hardtanh", "hardswish",
               "hardsigmoid", "mish", "logsigmoid", "leaky_relu", "relu6"]
BINARY = ["add", "sub", "mul", "div", "maximum", "minimum", "atan2", "hypot", "fmod", "remainder", "copysign",
          "logaddexp", "pow"]
OPS = {name: (lambda n: lambda lib, x, y, m: getattr(lib, n)(x))(name) for name in UNARY}
OPS.update({name: (lambda n: lambda lib, x, y, m: getattr(lib.nn.functional, n)(x))(name) for name in ACTIVATIONS})
OPS.update({name: (lambda n: lambda lib, x, y, m: getattr(lib, n)(x, y))(name) for name in BINARY})
OPS.update({
    "clamp": lambda lib, x, y, m: lib.clamp(x, -0.5, 0.5),
    "lerp": lambda lib, x, y, m: lib.lerp(x, y, 0.3),
    "addcmul": lambda lib, x, y, m: lib.addcmul(x, x, y, value=0.5),
    "addcdiv": lambda lib, x, y, m: lib.addcdiv(x, x, y, value=0.5),
    "where": lambda lib, x, y, m: lib.where(m, x, y),
    "masked_fill": lambda lib, x, y, m: x.masked_fill(m, 0.0),
    "tril": lambda lib, x, y, m: lib.tril(x),
    "flip": lambda lib, x, y, m: lib.flip(x, (1,)),
    "roll": lambda lib, x, y, m: lib.roll(x, 3, 1),
    "sum(-1)": lambda lib, x, y, m: x.sum(-1),
    "sum(0)": lambda lib, x, y, m: x.sum(0),
    "mean(-1)": lambda lib, x, y, m: x.mean(-1),
    "amax(-1)": lambda lib, x, y, m: x.amax(-1),
    "prod(-1)": lambda lib, x, y, m: x.prod(-1),
    "var(-1)": lambda lib, x, y, m: x.var(-1),
    "logsumexp(-1)": lambda lib, x, y, m: lib.logsumexp(x, -1),
    "softmax(-1)": lambda lib, x, y, m: x.softmax(-1),
    "log_softmax(-1)": lambda lib, x, y, m: x.log_softmax(-1),
    "cumsum(-1)": lambda lib, x, y, m: x.cumsum(-1),
    "cumsum(0)": lambda lib, x, y, m: x.cumsum(0),
    "any(-1)": lambda lib, x, y, m: m.any(-1),
    "layer_norm": lambda lib, x, y, m: lib.nn.functional.layer_norm(x, tuple(x.shape[-1:])),
})
SMOKE_OPS = ["exp", "add", "sum(-1)"]


def inputs(dev) -> tuple:
    """The ops' inputs: x, y and the mask on ``dev``, then the same three as torch tensors. A positive
    y keeps div/fmod/pow/log finite; x spans both signs."""
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal(SHAPE).astype(np.float32)
    y_np = (rng.random(SHAPE) + 0.5).astype(np.float32)
    m_np = rng.random(SHAPE) < 0.5
    return tuple(lf.tensor(a, device=dev) for a in (x_np, y_np, m_np)) + \
        tuple(torch.from_numpy(a) for a in (x_np, y_np, m_np))


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--smoke", action="store_true", help="three ops, a few calls: checks the script, no results")
    p.add_argument("--only", nargs="+", choices=sorted(OPS), metavar="OP", help="these ops only (a partial page)")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    configure(args.out, smoke=args.smoke)
    match_threads()
    dev = lf.device("cpu")
    x, y, m, xt, yt, mt = inputs(dev)
    rows = []
    for name in (SMOKE_OPS if args.smoke else args.only or OPS):
        op = OPS[name]
        want = op(torch, xt.double(), yt.double(), mt)
        got = op(lf, x, y, m)
        err = float(np.nanmax(np.abs(got.numpy().astype(np.float64) - want.numpy())) if want.dtype != torch.bool
                    else (got.numpy() != want.numpy()).sum())

        def lazy(op=op):
            out = op(lf, x, y, m)
            lf.sync(dev)
            return out

        graph = lf.capture(dev, lambda op=op: op(lf, x, y, m))
        settle_threads()   # (the op's compile just ran: see settle_threads)
        t = timeit_interleaved({"kernel": graph.replay, "lazyfuse": lazy, "torch": lambda op=op: op(torch, xt, yt, mt)},
                               reps=20, warmup=3, min_time=0.3)
        del graph
        rows.append({"op": name, "kernel_us": t["kernel"] * 1e6, "lazyfuse_us": t["lazyfuse"] * 1e6,
                     "torch_us": t["torch"] * 1e6, "kernel_speedup": t["torch"] / t["kernel"],
                     "speedup": t["torch"] / t["lazyfuse"], "max_err": err})
    info = machine()
    slower = [r["op"] for r in rows if r["speedup"] < 1.0]
    kernel_slower = [r["op"] for r in rows if r["kernel_speedup"] < 1.0]
    lines = heading("native ops vs torch eager at 2^20 elements", info, "torch") + [
        "Each op on realized (1024, 1024) float32 inputs, medians, the three called round-robin. "
        "kernel: the op captured once with `lf.capture` and timed by `replay()` (its kernel alone: no "
        "recording, no planning); drained: the op recorded and drained alone (plan cached: the kernel plus "
        "a single drain's fixed cost); torch: the eager call. max err: against float64 torch "
        "(bool results: elements that differ).", "",
        "| op | kernel us | drained us | torch eager us | torch / kernel | torch / drained | max err |",
        "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['op']} | {r['kernel_us']:.0f} | {r['lazyfuse_us']:.0f} | {r['torch_us']:.0f} | "
              f"{r['kernel_speedup']:.2f}x | {r['speedup']:.2f}x | {r['max_err']:.1e} |" for r in rows]
    lines += ["", f"Kernel at least torch's speed: {len(rows) - len(kernel_slower)} of {len(rows)}; "
              f"drained alone: {len(rows) - len(slower)} of {len(rows)}.", "",
              f"Kernel slower than torch eager: {', '.join(kernel_slower) if kernel_slower else 'none'}.",
              f"Drained alone slower than torch eager: {', '.join(slower) if slower else 'none'}."]
    publish("native_ops", {"machine": info, "ops": rows, "slower": slower, "kernel_slower": kernel_slower}, lines,
            {r["op"]: r["speedup"] for r in rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
