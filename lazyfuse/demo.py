"""The main job (``python -m lazyfuse demo``): greedy decoding with a small transformer and a
pinned KV cache, run three ways — torch eager, lazyfuse lazy/fused, lazyfuse captured and
replayed — with one table of what each did: ops recorded and kernels launched per step, time
per step, speedup over torch eager, and max error of the logits against torch."""
from __future__ import annotations

import time

import numpy as np
import torch

import lazyfuse as lf
from .codegen import autotune

F = lf.nn.functional


def make_weights(vocab, d, layers, seed=0):
    g = torch.Generator().manual_seed(seed)
    w = lambda *s: torch.randn(*s, generator=g) / s[-1] ** 0.5  # noqa: E731
    return {"emb": w(vocab, d), "out": w(vocab, d),
            "layers": [{"wq": w(d, d), "wk": w(d, d), "wv": w(d, d), "wo": w(d, d), "w1": w(4 * d, d),
                        "w2": w(d, 4 * d), "n1": torch.ones(d), "n2": torch.ones(d)} for _ in range(layers)]}


class TorchDecoder:
    """The reference: the same step in torch eager, the KV cache written in place."""

    def __init__(self, p, heads, max_len):
        self.p, self.h = p, heads
        d = p["emb"].shape[1]
        self.k = [torch.zeros(heads, max_len, d // heads) for _ in p["layers"]]
        self.v = [torch.zeros(heads, max_len, d // heads) for _ in p["layers"]]

    def step(self, token: int, pos: int) -> torch.Tensor:
        tf, p, h = torch.nn.functional, self.p, self.h
        x = p["emb"][token]
        d = x.shape[0]
        for i, lw in enumerate(p["layers"]):
            a = tf.rms_norm(x, (d,), lw["n1"], eps=torch.finfo(torch.float32).eps)
            q, k, v = ((a @ lw[n].T).reshape(h, d // h) for n in ("wq", "wk", "wv"))
            self.k[i][:, pos], self.v[i][:, pos] = k, v
            s = (self.k[i][:, : pos + 1] @ q[:, :, None])[..., 0] / (d // h) ** 0.5
            att = (torch.softmax(s, -1)[:, None, :] @ self.v[i][:, : pos + 1])[:, 0]
            x = x + att.reshape(d) @ lw["wo"].T
            m = tf.rms_norm(x, (d,), lw["n2"], eps=torch.finfo(torch.float32).eps)
            x = x + tf.silu(m @ lw["w1"].T) @ lw["w2"].T
        return x @ p["out"].T


class LazyDecoder:
    """The same step in lazyfuse, shaped for capture: every input lives in a pinned buffer
    refreshed with ``copy_`` (token, one-hot position, attention mask), and the KV cache is
    updated in place through a one-hot select, so every step has the same structure."""

    def __init__(self, p, heads, max_len, dev):
        self.h, self.max_len, self.dev = heads, max_len, dev
        t = lambda a: lf.tensor(a, device=dev)  # noqa: E731
        self.p = {"emb": t(p["emb"]), "out": t(p["out"]),
                  "layers": [{k: t(v) for k, v in lw.items()} for lw in p["layers"]]}
        d = p["emb"].shape[1]
        self.k = [lf.zeros(heads, max_len, d // heads, device=dev) for _ in p["layers"]]
        self.v = [lf.zeros(heads, max_len, d // heads, device=dev) for _ in p["layers"]]
        self.token = lf.zeros(1, dtype=lf.int64, device=dev)
        self.onehot = lf.zeros(max_len, device=dev)
        self.mask = lf.zeros(max_len, device=dev)
        lf.sync(dev)

    def set_inputs(self, token: int, pos: int) -> None:
        self.token.copy_(np.array([token]))
        onehot = np.zeros(self.max_len, np.float32)
        onehot[pos] = 1
        self.onehot.copy_(onehot)
        self.mask.copy_(np.where(np.arange(self.max_len) <= pos, 0.0, -np.inf).astype(np.float32))

    def step(self):
        p, h = self.p, self.h
        x = F.embedding(self.token, p["emb"])[0]
        d = x.shape[0]
        sel = self.onehot.reshape(1, self.max_len, 1)
        for i, lw in enumerate(p["layers"]):
            a = F.rms_norm(x, (d,), lw["n1"])
            q, k, v = (F.linear(a, lw[n]).reshape(h, 1, d // h) for n in ("wq", "wk", "wv"))
            self.k[i].copy_(self.k[i] + sel * (k - self.k[i]))
            self.v[i].copy_(self.v[i] + sel * (v - self.v[i]))
            s = (self.k[i] @ q.reshape(h, d // h, 1)).reshape(h, self.max_len) * (1.0 / (d // h) ** 0.5) + self.mask
            att = (F.softmax(s, -1).reshape(h, 1, self.max_len) @ self.v[i]).reshape(d)
            x = x + F.linear(att, lw["wo"])
            m = F.rms_norm(x, (d,), lw["n2"])
            x = x + F.linear(F.silu(F.linear(m, lw["w1"])), lw["w2"])
        return F.linear(x, p["out"])

    def reset_cache(self) -> None:
        for c in self.k + self.v:
            c.zero_()


def _progress(total, desc):
    try:
        from tqdm import tqdm
        return tqdm(total=total, desc=desc, leave=False)
    except ImportError:  # the demo still runs without tqdm
        class _Quiet:
            def update(self, n=1):
                pass

            def close(self):
                pass
        return _Quiet()


NOISY = 1.5   # p90 / p10 of timed calls above this: the machine was too noisy to trust (bench/ too)


def steady(times: list) -> dict:
    """The statistic every variant is timed with: the first (cold) step on its own, the median
    of the steady-state steps after it, and their spread."""
    rest = sorted(times[1:])
    if not rest:
        return {"cold": times[0], "median": float("nan"), "min": float("nan"), "max": float("nan"), "noisy": False}
    p10, p90 = np.percentile(rest, 10), np.percentile(rest, 90)
    return {"cold": times[0], "median": float(np.median(rest)), "min": rest[0], "max": rest[-1],
            "noisy": len(rest) >= 3 and p90 > NOISY * p10}


def run_demo(args) -> int:
    dev = lf.device(args.device)
    vocab, d, layers, heads, steps = args.vocab, args.hidden, args.layers, args.heads, args.steps
    max_len = steps + 1
    p = make_weights(vocab, d, layers)
    print(f"lazyfuse demo: greedy decoding, {layers}-layer transformer (hidden {d}, {heads} heads, vocab {vocab}), "
          f"{steps} steps with a pinned KV cache")
    print(f"device {dev.name} (kind {dev.kind}, backend {dev.backend.name}, graphs: {dev.supports_graphs})")
    budget = getattr(dev, "threads", None)
    if budget is not None:
        # torch runs with as many threads as lazyfuse's kernels get (the cores left free)
        torch.set_num_threads(budget.measure())
        print(f"threads: torch {torch.get_num_threads()}, lazyfuse {budget.threads} "
              f"(of {len(budget.cpus)} cores; LAZYFUSE_THREADS=auto counts the free ones)")

    # torch eager: the reference tokens and logits
    ref = TorchDecoder(p, heads, max_len)
    tokens, ref_logits, tok, eager_times = [], [], 1, []
    for pos in range(steps):
        t0 = time.perf_counter()
        logits = ref.step(tok, pos)
        eager_times.append(time.perf_counter() - t0)
        ref_logits.append(logits)
        tok = int(logits.argmax())
        tokens.append(tok)

    def run(decoder, launch, label):
        decoder.reset_cache()
        lf.sync(dev)
        lf.reset_stats(dev)
        err, tok, times = 0.0, 1, []
        bar = _progress(steps, label)
        for pos in range(steps):
            t = time.perf_counter()
            decoder.set_inputs(tok, pos)
            logits = launch()
            out = logits.numpy()
            times.append(time.perf_counter() - t)
            err = max(err, float(np.abs(out - ref_logits[pos].numpy()).max()))
            tok = tokens[pos]  # teacher-forced on torch's tokens so that errors cannot compound
            bar.update()
        bar.close()
        return lf.stats(dev), times, err

    lazy = LazyDecoder(p, heads, max_len, dev)
    s_lazy, lazy_times, e_lazy = run(lazy, lazy.step, "lazy (build path, then cached)")

    bar = _progress(1, "capture (warmup x3 + record)")
    lazy.set_inputs(1, 0)
    t0 = time.perf_counter()
    graph = lf.capture(dev, lazy.step)
    t_capture = time.perf_counter() - t0
    bar.update()
    bar.close()
    s_cap, cap_times, e_cap = run(lazy, graph.replay, "captured replay")

    eager, lz, cap = steady(eager_times), steady(lazy_times), steady(cap_times)
    kernels = graph.num_launches if graph.is_hardware else s_cap.kernels_launched / steps
    rows = [("torch eager", "-", "-", eager, 0.0),
            ("lazyfuse lazy + fused", s_lazy.ops_recorded / steps, s_lazy.kernels_launched / steps, lz, e_lazy),
            ("lazyfuse captured", s_cap.ops_recorded / steps, kernels, cap, e_cap)]
    print(f"\n{'program':<24}{'ops/step':>10}{'kernels/step':>14}{'time/step':>12}{'speedup':>10}"
          f"{'min-max':>20}{'max err':>11}")
    for name, nops, nk, t, e in rows:
        nops = nops if isinstance(nops, str) else f"{nops:.0f}"
        nk = nk if isinstance(nk, str) else f"{nk:.0f}"
        if steps >= 2:
            median, speedup = f"{t['median'] * 1e3:.3f}ms", f"{eager['median'] / t['median']:.2f}x"
            spread = f"{t['min'] * 1e3:.3f}-{t['max'] * 1e3:.3f}ms"
        else:
            median = speedup = spread = "n/a"
        print(f"{name:<24}{nops:>10}{nk:>14}{median:>12}{speedup:>10}{spread:>20}{e:>11.1e}")
    steady_steps = f"the median of steps 2-{steps}" if steps > 2 else "step 2" if steps == 2 else \
        "n/a: --steps 1 has no steady-state step (run --steps 2 or more for speedups)"
    print(f"\ntime/step: {steady_steps} (steady state), every variant alike; speedup: torch eager's "
          f"time over the row's. The first (cold) step, on its own: torch eager {eager['cold'] * 1e3:.1f} ms, "
          f"lazyfuse lazy {lz['cold'] * 1e3:.1f} ms (plans, compiles{', tunes' if autotune.enabled() else ''}), "
          f"capture {t_capture * 1e3:.1f} ms (3 warmups + recording), first replay {cap['cold'] * 1e3:.2f} ms.")
    noisy = [name for name, _, _, t, _ in rows if t["noisy"]]
    if noisy:
        print(f"the machine was noisy: the steady-state steps of {', '.join(noisy)} spread by more than "
              f"{NOISY}x (p90/p10); treat the speedups as rough, and rerun on a quiet machine")
    how = "one dispatch per step (recorded launch list)" if graph.is_hardware else \
        f"fallback, re-running the closure: {graph.fallback_reason}"
    print(f"captured: {graph.num_launches} launches replayed as {how}")
    ok = max(e_lazy, e_cap) < 1e-3
    print(f"logits {'match' if ok else 'DO NOT match'} torch eager (max abs error {max(e_lazy, e_cap):.1e})")
    return 0 if ok else 1
