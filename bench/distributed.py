"""Issue 21's numbers: a data-parallel MLP training step on 2 CPU ranks (gloo on 127.0.0.1), the
gradients averaged by ``lf.distributed`` inside the captured step, against torch's own
``DistributedDataParallel`` on the same model, in one run.

    python -m bench.distributed [--quick] [--out DIR]    (also run by python -m lazyfuse bench)

It starts the two ranks itself (one thread each: the ranks share the machine's cores) and
waits for them within a deadline. Each rank runs the step of bench/training.py on its own
batch (3 linear layers, gelu, MSE, backward, the gradient all-reduce, AdamW); the steps of the
two ranks meet at every all-reduce, so every rank times the same sequence: a fixed number of
rounds, each one step of every peer, never a time floor (ranks would disagree on when to stop
and deadlock). Reported: the slower rank's median.
"""
from __future__ import annotations

import argparse
import datetime
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

import lazyfuse as lf
from bench.common import configure, configure_options, heading, machine, publish

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
import train_mlp  # noqa: E402

CONFIGS = ((32, 64), (64, 256))   # (per-rank batch, width): 3 linear layers of width x width, as bench.training
WORLD = 2


def lf_step(batch, sizes, all_reduce: bool, bucket_bytes: int = lf.distributed.data_parallel.DEFAULT_BUCKET_BYTES):
    """A captured lazyfuse training step (with or without the gradient all-reduce) and its replay."""
    dev = lf.device("cpu")
    rank, world = dist.get_rank(), dist.get_world_size()
    xs, ys = train_mlp.make_data(1, batch * world, sizes)
    params = [lf.tensor(a, requires_grad=True) for a in train_mlp.init_params(sizes)]
    ddp = lf.distributed.DataParallel(params, bucket_bytes=bucket_bytes) if all_reduce else None
    opt = lf.optim.AdamW(params, lr=1e-3)
    rows = slice(rank * batch, (rank + 1) * batch)
    x, y = lf.tensor(xs[0][rows]), lf.tensor(ys[0][rows])

    def step():
        opt.zero_grad(set_to_none=False)
        loss = ((train_mlp.forward(params, x, lf.nn.functional.gelu, lf.nn.functional.linear) - y) ** 2).mean()
        loss.backward()
        if ddp is not None:
            ddp.all_reduce_gradients()
        opt.step()
        return loss
    graph = lf.capture(dev, step)

    def replay():
        x.copy_(xs[0][rows])   # a training step refreshes its inputs
        graph.replay()
        lf.sync(dev)
    return replay, graph.num_launches


def torch_ddp_step(batch, sizes):
    rank, world = dist.get_rank(), dist.get_world_size()
    layers = []
    arrays = train_mlp.init_params(sizes)
    for k in range(0, len(arrays), 2):
        lin = torch.nn.Linear(sizes[k // 2], sizes[k // 2 + 1])
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(arrays[k]))
            lin.bias.copy_(torch.from_numpy(arrays[k + 1]))
        layers += [lin, torch.nn.GELU()]
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(*layers[:-1]))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    xs, ys = train_mlp.make_data(1, batch * world, sizes)
    rows = slice(rank * batch, (rank + 1) * batch)
    x, y = torch.tensor(xs[0][rows]), torch.tensor(ys[0][rows])

    def step():
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
    return step


def timed_rounds(fns: dict, reps: int, warmup: int) -> dict:
    """Median seconds of each of ``fns`` over ``reps`` round-robin rounds: the same count on every rank."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times = {name: [] for name in fns}
    for _ in range(reps):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    medians = torch.tensor([float(np.median(times[name])) for name in fns], dtype=torch.float64)
    dist.all_reduce(medians, dist.ReduceOp.MAX)   # the slower rank's median
    return dict(zip(fns, medians.tolist()))


def bench(batch: int, width: int, reps: int, warmup: int) -> dict:
    sizes = (width,) * 4
    ddp, launches = lf_step(batch, sizes, all_reduce=True)
    # one bucket per layer's weight (its bias joins the next): three all-reduces, the first two
    # launched while the earlier layers' backward still runs (the overlap); the default 25 MB
    # bucket holds every gradient here, so its one all-reduce can only start after backward
    layered, _ = lf_step(batch, sizes, all_reduce=True, bucket_bytes=4 * width * width)
    alone, _ = lf_step(batch, sizes, all_reduce=False)
    t = timed_rounds({"lf_ddp": ddp, "lf_layered": layered, "lf_alone": alone,
                      "torch_ddp": torch_ddp_step(batch, sizes)}, reps, warmup)
    grad_bytes = 4 * sum(i * o + o for i, o in zip(sizes, sizes[1:]))
    return {"batch": batch, "width": width, "grad_bytes": grad_bytes, "launches": launches,
            "lf_captured_ddp_us": t["lf_ddp"] * 1e6, "lf_captured_layer_buckets_us": t["lf_layered"] * 1e6,
            "lf_captured_no_allreduce_us": t["lf_alone"] * 1e6,
            "torch_ddp_us": t["torch_ddp"] * 1e6, "lf_vs_torch_ddp": t["torch_ddp"] / t["lf_ddp"]}


def rank_main(args) -> int:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=args.rank, world_size=WORLD,
                            timeout=datetime.timedelta(seconds=120))
    configure(args.out, smoke=args.quick, busy=args.busy)
    reps, warmup = (3, 1) if args.quick else (200, 5)
    rows = [bench(b, w, reps, warmup) for b, w in CONFIGS]
    if args.rank == 0:
        info = machine()
        lines = heading("data-parallel training step", info, "torch") + [
            f"One MLP training step on each of {WORLD} CPU ranks (gloo, 127.0.0.1, one thread per rank), its "
            "gradients averaged over the ranks, AdamW; float32; the slower rank's median:", "",
            "| batch x width (per rank) | gradient bytes | launches | lazyfuse captured us | lazyfuse captured, "
            "a bucket per layer us | lazyfuse captured, no all-reduce us | torch DDP us | lazyfuse vs torch DDP |",
            "|---|---|---|---|---|---|---|---|"]
        for r in rows:
            lines.append(f"| {r['batch']} x {r['width']} | {r['grad_bytes']} | {r['launches']} | "
                         f"{r['lf_captured_ddp_us']:.0f} | {r['lf_captured_layer_buckets_us']:.0f} | "
                         f"{r['lf_captured_no_allreduce_us']:.0f} | "
                         f"{r['torch_ddp_us']:.0f} | {r['lf_vs_torch_ddp']:.2f}x |")
        lines += ["", "lazyfuse captured: refresh the input with copy_, Graph.replay() of forward + backward + one "
                  "all_reduce(avg) per 25 MB gradient bucket (so one here) + AdamW, drain; a bucket per layer: "
                  "three all-reduces, launched asynchronously as each layer's gradients are ready, overlapping the "
                  "rest of backward. torch DDP: "
                  "DistributedDataParallel (its own buckets, all-reduce overlapped with backward) + torch.optim.AdamW, "
                  "eager.", ""]
        publish("distributed", {"machine": info, "world": WORLD, "ddp_step": rows}, lines,
                {f"ddp {r['batch']}x{r['width']} captured vs torch DDP": r["lf_vs_torch_ddp"] for r in rows})
    dist.destroy_process_group()
    return 0


def launch(args, deadline: float = 1800) -> int:
    """Start the ranks (this script with --rank) and wait for them; kill them past ``deadline``."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # the ranks publish: they write where this process would (python -m lazyfuse bench's --out,
    # --busy and --quick), or where this script's own options say
    extra = configure_options() + (["--quick"] if args.quick else []) + (["--out", args.out] if args.out else [])
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-m", "bench.distributed", "--rank", str(r), "--port", str(port),
                               *extra], cwd=ROOT, env=env, start_new_session=True) for r in range(WORLD)]
    end = time.monotonic() + deadline
    try:
        for p in procs:
            p.wait(timeout=max(0.1, end - time.monotonic()))
    except subprocess.TimeoutExpired:
        print(f"bench.distributed: the ranks ran past {deadline} s; killed", file=sys.stderr)
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    return max(abs(p.returncode) for p in procs)


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--out", default=None)
    p.add_argument("--busy", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--rank", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    return launch(args) if args.rank is None else rank_main(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
