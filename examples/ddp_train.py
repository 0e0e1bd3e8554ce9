"""Data-parallel training on 2 CPU processes: ``torchrun --nproc_per_node=2 examples/ddp_train.py``.

Each rank trains the same MLP (examples/train_mlp.py's task) on its half of every global
batch; ``lf.distributed.DataParallel`` broadcasts rank 0's parameters at the start and averages
the gradients over the ranks after each backward (in buckets, one all-reduce each), so every
rank takes the same AdamW step a single process takes on the whole batch. The training runs
twice, step by step and as one captured graph per step (forward, backward, the gradient
all-reduces, AdamW and the loss all-reduce in one replay), and both are checked against
torch training on the global batch in one process.

Without torchrun (``python examples/ddp_train.py``) it starts a one-rank gloo group itself.
"""
import datetime
import os

import numpy as np
import torch
import torch.distributed as dist

import lazyfuse as lf
from train_mlp import WARMUP, batch_of, forward, init_params, make_data, train_torch

F = lf.nn.functional
SIZES = (16, 64, 64, 4)
BATCH = 32   # the global batch: each rank gets BATCH // world rows


def local_rows(a, rank, world):
    n = a.shape[0] // world
    return a[rank * n:(rank + 1) * n]


def train_ddp(steps=20, captured=False, bucket_bytes=lf.distributed.data_parallel.DEFAULT_BUCKET_BYTES,
              device="cpu"):
    """(global loss per step, final parameters) of data-parallel training on this rank. The loss
    of a captured warmup step is not observed (nan): ``lf.capture`` runs those steps itself."""
    rank, world = dist.get_rank(), dist.get_world_size()
    dev = lf.device(device)
    xs, ys = make_data(steps, BATCH, SIZES)
    params = [lf.tensor(a, device=dev, requires_grad=True) for a in init_params(SIZES, seed=1 + rank)]
    ddp = lf.distributed.DataParallel(params, bucket_bytes=bucket_bytes)   # rank 0's initial values everywhere
    opt = lf.optim.AdamW(params, lr=1e-2)
    x = lf.tensor(local_rows(xs[0], rank, world), device=dev)
    y = lf.tensor(local_rows(ys[0], rank, world), device=dev)

    def step():
        opt.zero_grad(set_to_none=False)   # in place: a captured step keeps its .grad buffers
        loss = ((forward(params, x, F.gelu, F.linear) - y) ** 2).mean()
        loss.backward()
        ddp.all_reduce_gradients()
        opt.step()
        return lf.distributed.all_reduce(loss.detach(), "avg")   # the loss on the global batch

    losses = [float("nan")] * steps
    graph = lf.capture(dev, step, warmup_iters=WARMUP) if captured else None   # runs steps 0..WARMUP
    if graph is not None:
        losses[WARMUP] = graph.output.item()
    for k in range(WARMUP + 1 if captured else 0, steps):
        x.copy_(local_rows(xs[batch_of(k)], rank, world))
        y.copy_(local_rows(ys[batch_of(k)], rank, world))
        losses[k] = (graph.replay() if captured else step()).item()
    return losses, [p.numpy() for p in params]


def train_single(steps=20):
    """The reference: torch, one process, the global batch, the same batch schedule."""
    xs, ys = make_data(steps, BATCH, SIZES)
    params, losses = train_torch(SIZES, xs, ys, steps)
    return losses, params


def main(steps=20):
    if not dist.is_initialized():
        if "RANK" not in os.environ:   # plain python: a one-rank group of its own
            os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ.get("MASTER_PORT", "29517"),
                              RANK="0", WORLD_SIZE="1")
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    ref_losses, ref_params = train_single(steps)
    for captured in (False, True):
        losses, params = train_ddp(steps, captured)
        err = max(float(np.abs(a - b).max()) for a, b in zip(params, ref_params))
        seen = [k for k in range(steps) if not np.isnan(losses[k])]
        loss_err = max(abs(losses[k] - ref_losses[k]) for k in seen)
        if rank == 0:
            mode = "captured" if captured else "lazy"
            print(f"{mode:>8}: {world} ranks, loss {losses[seen[0]]:.5f} -> {losses[-1]:.5f} "
                  f"(single process {ref_losses[seen[0]]:.5f} -> {ref_losses[-1]:.5f}); max |loss diff| "
                  f"{loss_err:.2e}, max |param diff| {err:.2e}")
        assert loss_err < 1e-4 and err < 1e-4, f"rank {rank}: data-parallel training differs from one process"
    dist.destroy_process_group()
    return True


if __name__ == "__main__":
    main()
