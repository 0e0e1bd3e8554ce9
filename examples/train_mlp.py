"""Train an MLP on a synthetic regression task: lazily, step by step, then as a captured graph
(forward + backward + AdamW in one replay), checked against the same training in torch.

The captured step zeroes the gradients in place (``zero_grad(set_to_none=False)``), so backward
accumulates into the same ``.grad`` buffers at every replay; the inputs are refreshed with
``copy_`` before each replay. The warmup steps are real training steps: they all see the
first batch (the capture calls the closure itself), so every run here follows that schedule.
"""
import time

import numpy as np
import torch

import lazyfuse as lf

F = lf.nn.functional
WARMUP = 3   # lf.capture's default: step 1 builds the first-step plan (it creates the AdamW moments),
# step 2 builds the steady plan, step 3 allocates its launch metadata; the capture run is step 4


def make_data(steps, batch, sizes, seed=0):
    """Batches of a teacher task: y = sin(x @ A) with a fixed random A."""
    rng = np.random.default_rng(seed)
    teacher = rng.standard_normal((sizes[0], sizes[-1])) / np.sqrt(sizes[0])
    xs = rng.standard_normal((steps, batch, sizes[0])).astype(np.float32)
    return xs, np.sin(xs @ teacher).astype(np.float32)


def init_params(sizes, seed=1):
    rng = np.random.default_rng(seed)
    return [a.astype(np.float32) for i, o in zip(sizes, sizes[1:])
            for a in (rng.standard_normal((o, i)) / np.sqrt(i), np.zeros(o))]


def forward(params, x, gelu, linear):
    h = x
    for k in range(0, len(params), 2):
        h = linear(h, params[k], params[k + 1])
        if k + 2 < len(params):
            h = gelu(h)
    return h


def lf_trainer(sizes, device, lr=1e-2, set_to_none=False):
    """(params, step, inputs): ``step()`` runs one training step on ``inputs["x"]``, ``inputs["y"]``."""
    params = [lf.tensor(a, device=device, requires_grad=True) for a in init_params(sizes)]
    opt = lf.optim.AdamW(params, lr=lr)
    inputs = {}   # "x", "y": device tensors the caller fills (and refreshes with copy_)

    def step():
        opt.zero_grad(set_to_none=set_to_none)
        loss = ((forward(params, inputs["x"], F.gelu, F.linear) - inputs["y"]) ** 2).mean()
        loss.backward()
        opt.step()
        return loss
    return params, step, inputs


def batch_of(k):
    """The batch training step ``k`` sees (see the module docstring)."""
    return 0 if k <= WARMUP else k


def train_torch(sizes, xs, ys, steps, lr=1e-2):
    params = [torch.tensor(a, requires_grad=True) for a in init_params(sizes)]
    opt = torch.optim.AdamW(params, lr=lr)
    losses = []
    for k in range(steps):
        i = batch_of(k)
        opt.zero_grad()
        loss = ((forward(params, torch.tensor(xs[i]), torch.nn.functional.gelu, torch.nn.functional.linear)
                 - torch.tensor(ys[i])) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return [p.detach().numpy() for p in params], losses


def train_lazy(sizes, xs, ys, steps, device):
    params, step, inputs = lf_trainer(sizes, device)
    inputs["x"] = lf.tensor(xs[0], device=device)
    inputs["y"] = lf.tensor(ys[0], device=device)
    losses, times = [], []
    for k in range(steps):
        t0 = time.perf_counter()
        inputs["x"].copy_(xs[batch_of(k)])
        inputs["y"].copy_(ys[batch_of(k)])
        losses.append(step().item())
        times.append(time.perf_counter() - t0)
    return [p.numpy() for p in params], losses, times


def train_captured(sizes, xs, ys, steps, device, set_to_none=False):
    params, step, inputs = lf_trainer(sizes, device, set_to_none=set_to_none)
    inputs["x"] = lf.tensor(xs[0], device=device)
    inputs["y"] = lf.tensor(ys[0], device=device)
    graph = lf.capture(device, step, warmup_iters=WARMUP)     # steps 0..WARMUP ran while capturing
    losses, times = [], []
    for k in range(WARMUP + 1, steps):
        t0 = time.perf_counter()
        inputs["x"].copy_(xs[k])
        inputs["y"].copy_(ys[k])
        losses.append(graph.replay().item())
        times.append(time.perf_counter() - t0)
    return [p.numpy() for p in params], losses, times, graph


def main(device="cpu", steps=40, batch=32, sizes=(16, 64, 64, 4)):
    dev = lf.device(device)
    xs, ys = make_data(steps, batch, sizes)
    ref, ref_losses = train_torch(sizes, xs, ys, steps)
    lazy, lazy_losses, lazy_times = train_lazy(sizes, xs, ys, steps, dev)
    captured, cap_losses, cap_times, graph = train_captured(sizes, xs, ys, steps, dev)
    print(f"{'step':>4} {'torch':>9} {'lazy':>9} {'captured':>9}")
    for k in range(0, steps, max(1, steps // 8)):
        cap = f"{cap_losses[k - WARMUP - 1]:9.5f}" if k > WARMUP else f"{'(warmup)':>9}"
        print(f"{k:>4} {ref_losses[k]:9.5f} {lazy_losses[k]:9.5f} {cap}")
    lazy_ms = 1e3 * float(np.median(lazy_times[WARMUP + 1:]))
    cap_ms = 1e3 * float(np.median(cap_times))
    print(f"time per step: lazy {lazy_ms:.3f} ms, captured {cap_ms:.3f} ms ({graph.num_launches} launches, "
          f"{'hardware graph' if graph.is_hardware else graph.fallback_reason})")
    assert lazy_losses[-1] < 0.5 * lazy_losses[0], "the loss did not fall"
    for name, got in (("lazy", lazy), ("captured", captured)):
        err = max(float(np.abs(a - b).max()) for a, b in zip(got, ref))
        assert err < 1e-4, f"{name} parameters differ from torch by {err}"
    return True


if __name__ == "__main__":
    main()
