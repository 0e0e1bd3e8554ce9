"""Issue 4's numbers: whole-program pieces against torch eager and warm torch.compile.

    python -m bench.programs [--quick] [--only CASE ...]

softmax and layer_norm over (4096, 1024) float32, linear+gelu (1024x1024 @ 1024x4096), and a
pre-norm transformer block forward at batch 1 x 128 tokens x 512 wide; lazyfuse's steady state
(plan cached, drained each call) and its captured graph's replay, in the same process as the
peers, all called round-robin. Where torch sees a GPU,
linear+gelu also runs on ``cuda`` (lazyfuse: one matmul-template kernel with bias and gelu in
its epilogue) in float32 and bfloat16, against cuBLAS + eager gelu and torch.compile, every
timed call ending in a device synchronize.
"""
from __future__ import annotations

import argparse
import sys

import torch

import lazyfuse as lf
from bench.common import compiled, heading, machine, publish, timeit_interleaved

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


def measure(name, ft, fl, inputs, reps: int, min_time: float) -> dict:
    device = "cuda" if inputs[0].is_cuda else "cpu"
    wait = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    li = [lf.tensor(i, device=device) for i in inputs]

    def run():
        out = fl(*li)
        lf.sync(device)
        wait()
        return out

    graph = lf.capture(device, lambda: fl(*li))

    def replay():
        out = graph.replay()
        lf.sync(device)
        wait()
        return out

    def timed(fn):
        return lambda: (fn(*inputs), wait())

    ref = ft(*[i.double() for i in inputs]).to(inputs[0].dtype).float().cpu()
    err = max(float((run().torch().float() - ref).abs().max()), float((replay().torch().float() - ref).abs().max()))
    before = lf.stats(device)
    run()
    kernels = (lf.stats(device) - before).kernels_launched
    peers = {"lazyfuse": run, "captured": replay, "eager": timed(ft)}
    cfn = compiled(ft)
    if cfn is not None:
        for _ in range(3):
            cfn(*inputs)   # torch.compile's first calls compile and autotune
        peers["compile"] = timed(cfn)
    t = timeit_interleaved(peers, reps, min_time=min_time)
    t_c = t.get("compile", float("nan"))
    return {"case": name, "kernels": kernels, "lazyfuse_ms": t["lazyfuse"] * 1e3, "captured_ms": t["captured"] * 1e3,
            "eager_ms": t["eager"] * 1e3, "compile_ms": t_c * 1e3, "vs_compile": t_c / t["lazyfuse"],
            "captured_vs_compile": t_c / t["captured"], "vs_eager": t["eager"] / t["lazyfuse"], "max_err": err}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", nargs="+", metavar="CASE",
                    help="run only the cases whose name starts with one of these (softmax, transformer, ...)")
    args = ap.parse_args(argv)
    reps = 3 if args.quick else 7

    def chosen(name):
        return not args.only or any(name.startswith(prefix) for prefix in args.only)

    min_time = 0.0 if args.quick else 2.0
    rows = [measure(name, ft, fl, inputs, reps, min_time) for name, ft, fl, inputs in cases(args.quick)
            if chosen(name)]
    rows += [measure(name, ft, fl, inputs, reps * 3, min_time) for name, ft, fl, inputs in gpu_cases(args.quick)
             if chosen(name)]
    info = machine()
    lines = heading("whole-program benchmarks", info, "torch") + [
             "Medians over at least 2 s of calls per case, the peers called round-robin. *lazyfuse*: recorded "
             "and drained each call (plan cached); *captured*: the same closure as an `lf.capture` graph, "
             "replayed.", "",
             "| case | lazyfuse kernels | lazyfuse ms | captured ms | eager ms | torch.compile ms | speed vs compile "
             "| captured vs compile | vs eager | max err |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['case']} | {r['kernels']} | {r['lazyfuse_ms']:.2f} | {r['captured_ms']:.2f} | "
                     f"{r['eager_ms']:.2f} | {r['compile_ms']:.2f} | {r['vs_compile']:.2f}x | "
                     f"{r['captured_vs_compile']:.2f}x | {r['vs_eager']:.2f}x | {r['max_err']:.1e} |")
    ratios = {f"{r['case']} vs {peer}": r[key] for r in rows for peer, key in (
        ("eager", "vs_eager"), ("torch.compile", "vs_compile"), ("torch.compile, captured", "captured_vs_compile"))}
    publish("programs", {"machine": info, "cases": rows}, lines, ratios)
    return 0


if __name__ == "__main__":
    sys.exit(main())
