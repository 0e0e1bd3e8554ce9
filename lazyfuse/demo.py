"""The main job: an MLP forward pass, torch eager vs lazyfuse (lazy/fused), with the counts
a user wants to see: ops recorded, kernels launched, time per step, max error vs torch."""
from __future__ import annotations

import time

import numpy as np
import torch

import lazyfuse as lf


def _mlp_torch(x, params):
    h = x
    for i, (w, b) in enumerate(params):
        h = torch.nn.functional.linear(h, w, b)
        if i < len(params) - 1:
            h = torch.nn.functional.gelu(h)
    return torch.softmax(h, -1)


def _mlp_lf(x, params):
    F = lf.nn.functional
    h = x
    for i, (w, b) in enumerate(params):
        h = F.linear(h, w, b)
        if i < len(params) - 1:
            h = F.gelu(h)
    return F.softmax(h, -1)


def _time(fn, steps):
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def run_demo(args) -> int:
    dev = lf.device(args.device)
    torch.manual_seed(0)
    sizes = [args.hidden, args.hidden * 2, args.hidden * 2, 16]
    tparams = [(torch.randn(o, i) / i ** 0.5, torch.randn(o) * 0.1) for i, o in zip(sizes, sizes[1:])]
    tx = torch.randn(args.batch, args.hidden)
    params = [(lf.tensor(w, device=dev), lf.tensor(b, device=dev)) for w, b in tparams]
    x = lf.tensor(tx, device=dev)
    print(f"lazyfuse demo: a {len(tparams)}-layer MLP (linear+gelu, softmax head), batch {args.batch}, "
          f"hidden {args.hidden}, on device {dev.name} (backend: {dev.backend.name})")

    ref = _mlp_torch(tx.double(), [(w.double(), b.double()) for w, b in tparams]).numpy()
    lf.reset_stats(dev)
    out = _mlp_lf(x, params)
    first = out.numpy()
    s = lf.stats(dev)
    print(f"  first run (build path): recorded {s.ops_recorded} ops, fused into {s.kernels_launched} kernel "
          f"launches, {s.fusion_cache_misses} plan built")
    lf.reset_stats(dev)
    step_lf = _time(lambda: _mlp_lf(x, params).numpy(), args.steps)
    s = lf.stats(dev)
    step_torch = _time(lambda: _mlp_torch(tx, tparams).numpy(), args.steps)
    err = float(np.abs(first - ref).max())
    rows = [("torch eager", "-", "-", step_torch, 1.0, float(np.abs(_mlp_torch(tx, tparams).numpy() - ref).max())),
            ("lazyfuse (lazy, fused)", s.ops_recorded // args.steps, s.kernels_launched // args.steps, step_lf,
             step_torch / step_lf, err)]
    print(f"  {'program':<24}{'ops/step':>10}{'kernels/step':>14}{'time/step':>12}{'speedup':>9}{'max err':>11}")
    for name, nops, nk, t, sp, e in rows:
        print(f"  {name:<24}{nops!s:>10}{nk!s:>14}{t * 1e3:>10.3f}ms{sp:>8.2f}x{e:>11.2e}")
    ok = err < 1e-4
    print(f"  result {'matches' if ok else 'DOES NOT match'} torch (float64 reference), "
          f"plan cache: {s.fusion_cache_hits} hits / {s.fusion_cache_misses} misses in steady state")
    return 0 if ok else 1
