"""Issue 8's numbers: one MLP training step (forward, backward, AdamW) lazily and captured,
against torch eager and warm ``torch.compile``.

    python -m bench.training [--quick]

At batch 32 with 3 layers of 64 launch overhead dominates (every matmul is a fused reduction);
at batch 64 with 3 layers of 256 the matmuls go to BLAS, and the captured step is reported
against the GEMM floor: the step's GEMM FLOPs over the GEMM rate measured in this run.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

import lazyfuse as lf
from bench.common import compiled, heading, machine, publish, timeit

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import train_mlp  # noqa: E402

CONFIGS = ((32, 64), (64, 256))   # (batch, width): 3 linear layers of width x width


def gemm_flops(batch: int, sizes) -> int:
    """Forward (x @ W.T), weight gradients and input gradients (none for the first layer's input)."""
    per_layer = [2 * batch * i * o for i, o in zip(sizes, sizes[1:])]
    return 3 * sum(per_layer) - per_layer[0]


def gemm_rate(batch: int, width: int) -> float:
    """FLOP/s of torch's float32 GEMM on the step's own shape."""
    a, b = torch.randn(batch, width), torch.randn(width, width)
    return 2 * batch * width * width / timeit(lambda: a @ b.T, reps=200, warmup=20, min_time=0.5)


def torch_step(batch: int, sizes):
    params = [torch.tensor(a, requires_grad=True) for a in train_mlp.init_params(sizes)]
    opt = torch.optim.AdamW(params, lr=1e-3)
    xs, ys = train_mlp.make_data(1, batch, sizes)
    x, y = torch.tensor(xs[0]), torch.tensor(ys[0])

    def step():
        opt.zero_grad()
        loss = ((train_mlp.forward(params, x, torch.nn.functional.gelu, torch.nn.functional.linear) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss
    return step


def bench(batch: int, width: int, reps: int) -> dict:
    sizes = (width,) * 4
    dev = lf.device("cpu")
    xs, ys = train_mlp.make_data(1, batch, sizes)
    _, step, inputs = train_mlp.lf_trainer(sizes, dev, lr=1e-3)
    inputs["x"], inputs["y"] = lf.tensor(xs[0]), lf.tensor(ys[0])

    def lazy():
        step()
        lf.sync(dev)

    t_lazy = timeit(lazy, reps=reps, warmup=3, min_time=1.0)
    _, step, inputs = train_mlp.lf_trainer(sizes, dev, lr=1e-3)
    inputs["x"], inputs["y"] = lf.tensor(xs[0]), lf.tensor(ys[0])
    graph = lf.capture(dev, step)

    def replay():
        inputs["x"].copy_(xs[0])      # a training step refreshes its inputs
        graph.replay()
        lf.sync(dev)

    t_replay = timeit(replay, reps=reps, warmup=5, min_time=1.0)
    eager = torch_step(batch, sizes)
    t_eager = timeit(eager, reps=reps, warmup=3, min_time=1.0)
    cfn = compiled(torch_step(batch, sizes))
    try:
        t_compile = timeit(cfn, reps=reps, warmup=3, min_time=1.0) if cfn is not None else float("nan")
    except Exception:  # noqa: BLE001 (inductor unavailable here)
        t_compile = float("nan")
    floor = gemm_flops(batch, sizes) / gemm_rate(batch, width)
    return {"batch": batch, "width": width, "launches": graph.num_launches, "lazy_us": t_lazy * 1e6,
            "replay_us": t_replay * 1e6, "eager_us": t_eager * 1e6, "compile_us": t_compile * 1e6,
            "replay_vs_eager": t_eager / t_replay, "replay_vs_compile": t_compile / t_replay,
            "gemm_floor_us": floor * 1e6, "replay_vs_floor": t_replay / floor}


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    reps = 20 if args.quick else 200
    rows = [bench(b, w, reps) for b, w in CONFIGS]
    info = machine()
    lines = heading("training-step benchmarks", info, "torch") + [
             "One MLP training step (3 linear layers, gelu, MSE loss, backward, AdamW), float32, median:", "",
             "| batch x width | launches | lazy us | captured us | torch eager us | torch.compile us | captured vs eager "
             "| captured vs compile | GEMM floor us | captured / floor |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['batch']} x {r['width']} | {r['launches']} | {r['lazy_us']:.0f} | {r['replay_us']:.0f} | "
                     f"{r['eager_us']:.0f} | {r['compile_us']:.0f} | {r['replay_vs_eager']:.1f}x | "
                     f"{r['replay_vs_compile']:.1f}x | {r['gemm_floor_us']:.1f} | {r['replay_vs_floor']:.1f}x |")
    lines += ["", "captured: refresh the input with copy_, Graph.replay(), drain. GEMM floor: the step's GEMM FLOPs "
              "(forward, weight and input gradients) over torch's float32 GEMM rate on the step's shape, measured "
              "in this run.", ""]
    ratios = {f"train {r['batch']}x{r['width']} captured vs {peer}": r[key] for r in rows
              for peer, key in (("eager", "replay_vs_eager"), ("torch.compile", "replay_vs_compile"))}
    publish("training", {"machine": info, "training_step": rows}, lines, ratios)
    return 0


if __name__ == "__main__":
    sys.exit(main())
