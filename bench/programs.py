"""Issue 4's numbers: whole-program pieces against torch eager and warm torch.compile.

    python -m bench.programs [--quick] [--only CASE ...]

softmax and layer_norm over (4096, 1024) float32, linear+gelu (1024x1024 @ 1024x4096), and a
pre-norm transformer block forward at batch 1 x 128 tokens x 512 wide; lazyfuse's steady state
(plan cached, drained each call) in the same process as the peers. Where torch sees a GPU,
linear+gelu also runs on ``cuda`` (lazyfuse: one matmul-template kernel with bias and gelu in
its epilogue) in float32 and bfloat16, against cuBLAS + eager gelu and torch.compile, every
timed call ending in a device synchronize.
"""
from __future__ import annotations

import argparse
import sys

import torch

import lazyfuse as lf
from bench.common import compiled, heading, machine, publish, timeit

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1] / "examples"))
from transformer_block import block_lf, block_torch, make_weights  # noqa: E402

F = lf.nn.functional
tf = torch.nn.functional


def cases(quick: bool):
    g = torch.Generator().manual_seed(0)
    rows, cols = (1024, 1024) if quick else (4096, 1024)
    x = torch.randn(rows, cols, generator=g)
    w = torch.ones(cols)
    yield "softmax", (lambda a: torch.softmax(a, -1)), (lambda a: F.softmax(a, -1)), (x,)
    yield "layer_norm", (lambda a, b: tf.layer_norm(a, (cols,), b)), (lambda a, b: F.layer_norm(a, (cols,), b)), (x, w)
    m = 256 if quick else 1024
    a, wl, bl = torch.randn(m, 1024, generator=g), torch.randn(4096, 1024, generator=g) / 32, torch.randn(4096, generator=g)
    yield "linear+gelu", (lambda p, q, r: tf.gelu(tf.linear(p, q, r))), (lambda p, q, r: F.gelu(F.linear(p, q, r))), \
        (a, wl, bl)
    d, t = 512, (32 if quick else 128)
    p = make_weights(d)
    xb = torch.randn(1, t, d, generator=g)
    names = sorted(p)
    yield "transformer block", (lambda xx, *ws: block_torch(xx, dict(zip(names, ws)), 8)), \
        (lambda xx, *ws: block_lf(xx, dict(zip(names, ws)), 8)), (xb, *[p[k] for k in names])


def gpu_cases(quick: bool):
    """linear+gelu on the GPU: the matmul template with its epilogue, float32 and bfloat16."""
    if not torch.cuda.is_available():
        return
    g = torch.Generator().manual_seed(0)
    m = 256 if quick else 1024
    a, wl, bl = torch.randn(m, 1024, generator=g), torch.randn(4096, 1024, generator=g) / 32, torch.randn(4096, generator=g)
    for dtype in (torch.float32, torch.bfloat16):
        yield f"linear+gelu cuda {str(dtype)[6:]}", (lambda p, q, r: tf.gelu(tf.linear(p, q, r))), \
            (lambda p, q, r: F.gelu(F.linear(p, q, r))), tuple(t.to("cuda", dtype) for t in (a, wl, bl))


def measure(name, ft, fl, inputs, reps: int) -> dict:
    device = "cuda" if inputs[0].is_cuda else "cpu"
    wait = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    li = [lf.tensor(i, device=device) for i in inputs]

    def run():
        out = fl(*li)
        lf.sync(device)
        wait()
        return out

    def timed(fn):
        return lambda: (fn(*inputs), wait())

    ref = ft(*[i.double() for i in inputs]).to(inputs[0].dtype).float().cpu()
    err = float((run().torch().float() - ref).abs().max())
    before = lf.stats(device)
    run()
    kernels = (lf.stats(device) - before).kernels_launched
    t_lf = timeit(run, reps)
    t_eager = timeit(timed(ft), reps)
    cfn = compiled(ft)
    t_c = timeit(timed(cfn), reps, warmup=3) if cfn is not None else float("nan")
    return {"case": name, "kernels": kernels, "lazyfuse_ms": t_lf * 1e3, "eager_ms": t_eager * 1e3,
            "compile_ms": t_c * 1e3, "vs_compile": t_c / t_lf, "vs_eager": t_eager / t_lf, "max_err": err}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", nargs="+", metavar="CASE",
                    help="run only the cases whose name starts with one of these (softmax, transformer, ...)")
    args = ap.parse_args(argv)
    reps = 3 if args.quick else 7

    def chosen(name):
        return not args.only or any(name.startswith(prefix) for prefix in args.only)

    rows = [measure(name, ft, fl, inputs, reps) for name, ft, fl, inputs in cases(args.quick) if chosen(name)]
    rows += [measure(name, ft, fl, inputs, reps * 3) for name, ft, fl, inputs in gpu_cases(args.quick)
             if chosen(name)]
    info = machine()
    lines = heading("whole-program benchmarks", info, "torch") + [
             "| case | lazyfuse kernels | lazyfuse ms | eager ms | torch.compile ms | speed vs compile | vs eager | max err |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['case']} | {r['kernels']} | {r['lazyfuse_ms']:.2f} | {r['eager_ms']:.2f} | "
                     f"{r['compile_ms']:.2f} | {r['vs_compile']:.2f}x | {r['vs_eager']:.2f}x | {r['max_err']:.1e} |")
    ratios = {f"{r['case']} vs {peer}": r[key] for r in rows for peer, key in (("eager", "vs_eager"),
                                                                              ("torch.compile", "vs_compile"))}
    publish("programs", {"machine": info, "cases": rows}, lines, ratios)
    return 0


if __name__ == "__main__":
    sys.exit(main())
