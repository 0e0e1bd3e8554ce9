"""Optimizers against torch.optim, and a captured training step (forward + backward + optimizer)
against lazy training and torch, with the warmup lesson and the kernel counts of one step."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import lazyfuse as lf
from lazyfuse.nn import functional as F
from lazyfuse.testing import count_launches

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import train_mlp  # noqa: E402

SIZES = (16, 32, 32, 4)   # 3 layers: every matmul of the step is a fused reduction (inline path)


def _problem(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((5, 3)), rng.standard_normal(3)], rng.standard_normal((6, 5)), rng.standard_normal((6, 3))


def _train(make_opt_lf, make_opt_torch, steps=6):
    params, x, y = _problem()
    lp = [lf.tensor(p, requires_grad=True) for p in params]
    tp = [torch.tensor(p, requires_grad=True) for p in params]
    lopt, topt = make_opt_lf(lp), make_opt_torch(tp)
    lx, ly, tx, ty = lf.tensor(x), lf.tensor(y), torch.tensor(x), torch.tensor(y)
    for _ in range(steps):
        lopt.zero_grad()
        ((lx @ lp[0] + lp[1] - ly).tanh() ** 2).sum().backward()
        lopt.step()
        topt.zero_grad()
        ((tx @ tp[0] + tp[1] - ty).tanh() ** 2).sum().backward()
        topt.step()
    for a, b in zip(lp, tp):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("momentum, weight_decay", [(0.0, 0.0), (0.9, 0.0), (0.9, 0.1)])
def test_sgd_matches_torch(momentum, weight_decay):
    _train(lambda p: lf.optim.SGD(p, lr=0.1, momentum=momentum, weight_decay=weight_decay),
           lambda p: torch.optim.SGD(p, lr=0.1, momentum=momentum, weight_decay=weight_decay))


@pytest.mark.parametrize("betas, weight_decay", [((0.9, 0.999), 1e-2), ((0.8, 0.9), 0.0)])
def test_adamw_matches_torch(betas, weight_decay):
    _train(lambda p: lf.optim.AdamW(p, lr=0.05, betas=betas, eps=1e-8, weight_decay=weight_decay),
           lambda p: torch.optim.AdamW(p, lr=0.05, betas=betas, eps=1e-8, weight_decay=weight_decay))


def test_zero_grad_in_place_keeps_the_buffer_and_set_to_none_drops_it():
    w = lf.tensor([1.0, 2.0], requires_grad=True)
    opt = lf.optim.SGD([w], lr=0.1)
    (w * w).sum().backward()
    g = w.grad
    opt.zero_grad(set_to_none=False)
    assert w.grad is g
    np.testing.assert_array_equal(g.numpy(), [0.0, 0.0])
    (w * 3).sum().backward()
    assert w.grad is g
    np.testing.assert_array_equal(g.numpy(), [3.0, 3.0])
    opt.zero_grad()
    assert w.grad is None
    with pytest.raises(lf.AutogradError, match="requires grad"):
        lf.optim.AdamW([lf.tensor([1.0])], lr=0.1)


def test_adamw_state_is_created_on_the_first_step_so_capture_needs_the_default_warmup():
    dev = lf.device("cpu")
    xs, ys = train_mlp.make_data(2, 8, SIZES)
    _, step, inputs = train_mlp.lf_trainer(SIZES, dev)
    inputs["x"], inputs["y"] = lf.tensor(xs[0]), lf.tensor(ys[0])
    with pytest.raises(lf.CaptureAllocationError, match="created lazily"):
        lf.capture(dev, step, warmup_iters=1)
    _, step, inputs = train_mlp.lf_trainer(SIZES, dev)
    inputs["x"], inputs["y"] = lf.tensor(xs[0]), lf.tensor(ys[0])
    graph = lf.capture(dev, step)
    assert graph.is_hardware


def test_twenty_steps_captured_lazy_and_torch_reach_the_same_parameters():
    dev = lf.device("cpu")
    steps = 20
    xs, ys = train_mlp.make_data(steps, 8, SIZES)
    ref, ref_losses = train_mlp.train_torch(SIZES, xs, ys, steps)
    lazy, lazy_losses, _ = train_mlp.train_lazy(SIZES, xs, ys, steps, dev)
    captured, cap_losses, _, graph = train_mlp.train_captured(SIZES, xs, ys, steps, dev)
    assert graph.is_hardware and lf.stats(dev).graph_replays >= steps - train_mlp.WARMUP - 1
    np.testing.assert_allclose(lazy_losses, ref_losses, rtol=1e-4)
    np.testing.assert_allclose(cap_losses, ref_losses[train_mlp.WARMUP + 1:], rtol=1e-4)
    for a, b, c in zip(lazy, captured, ref):
        np.testing.assert_allclose(a, c, atol=2e-5)
        np.testing.assert_array_equal(a, b)          # the same kernels on the same data: bit-identical


def test_a_captured_step_may_also_drop_its_gradients_each_step():
    """zero_grad(set_to_none=True) inside the capture: backward's fresh .grad buffers come from the
    blocks the persistent pool kept, and after the capture .grad holds the captured buffers."""
    dev = lf.device("cpu")
    steps = 8
    xs, ys = train_mlp.make_data(steps, 8, SIZES)
    lazy, _, _ = train_mlp.train_lazy(SIZES, xs, ys, steps, dev)
    captured, _, _, graph = train_mlp.train_captured(SIZES, xs, ys, steps, dev, set_to_none=True)
    assert graph.is_hardware
    for a, b in zip(lazy, captured):
        np.testing.assert_array_equal(a, b)


def _steady_step_kernels(optimizer):
    dev = lf.device("cpu")
    params = [lf.tensor(a, requires_grad=True) for a in train_mlp.init_params(SIZES)]
    opt = {"sgd": lambda: lf.optim.SGD(params, lr=0.1, momentum=0.9),
           "adamw": lambda: lf.optim.AdamW(params, lr=0.1), "none": lambda: lf.optim.SGD(params, lr=0.1)}[optimizer]()
    x, y = lf.randn(8, SIZES[0]), lf.randn(8, SIZES[-1])

    def step():
        opt.zero_grad(set_to_none=False)
        loss = ((train_mlp.forward(params, x, F.gelu, F.linear) - y) ** 2).mean()
        loss.backward()
        if optimizer != "none":
            opt.step()
        return loss
    for _ in range(3):
        step().item()
    with count_launches(dev) as d:
        step().item()
    return d.kernels_launched


def test_kernel_counts_of_one_mlp_training_step():
    """3 linear layers (6 parameters), batch 8, steady state, one drain per step:

    * forward + backward: 15 kernels — per hidden layer the pre-activation and its gelu (both
      read again by backward), the output residual, the loss; the input gradient of each layer
      (gelu' fused into it), and one kernel per parameter gradient written straight into its
      ``.grad`` (weight gradients come out in the weight's layout, bias gradients are reductions);
    * SGD with momentum: +1 — one foreach kernel updates every parameter, each segment a
      multi-output update storing the momentum buffer and the parameter = 16;
    * AdamW: +2 — one foreach kernel (each segment stores the first moment, the second moment
      and the parameter) and one for the device-side step count and its two bias corrections
      (all 0-d: one multi-output kernel, which the foreach kernel reads) = 17.
    """
    assert _steady_step_kernels("none") == 15
    assert _steady_step_kernels("sgd") == 16
    assert _steady_step_kernels("adamw") == 17


def test_captured_transformer_block_trains_like_torch():
    dev = lf.device("cpu")
    rng = np.random.default_rng(0)
    d, length, steps = 8, 4, 8
    names = ["ln1_w", "ln1_b", "wq", "wk", "wv", "wo", "ln2_w", "ln2_b", "w1", "w2"]
    shapes = {"ln1_w": (d,), "ln1_b": (d,), "ln2_w": (d,), "ln2_b": (d,), "w1": (2 * d, d), "w2": (d, 2 * d)}
    init = {n: (np.ones(shapes[n]) if n.endswith("_w") else
                rng.standard_normal(shapes.get(n, (d, d))) / np.sqrt(d)).astype(np.float32) for n in names}
    xs = rng.standard_normal((steps, 2, length, d)).astype(np.float32)

    def block(p, x, fn):
        h = fn.layer_norm(x, (d,), p["ln1_w"], p["ln1_b"])
        att = fn.scaled_dot_product_attention(fn.linear(h, p["wq"]), fn.linear(h, p["wk"]), fn.linear(h, p["wv"]),
                                              is_causal=True)
        x = x + fn.linear(att, p["wo"])
        h = fn.layer_norm(x, (d,), p["ln2_w"], p["ln2_b"])
        return x + fn.linear(fn.gelu(fn.linear(h, p["w1"])), p["w2"])

    tp = {n: torch.tensor(a, requires_grad=True) for n, a in init.items()}
    topt = torch.optim.AdamW(list(tp.values()), lr=1e-2)
    for k in range(steps):
        topt.zero_grad()
        x = torch.tensor(xs[train_mlp.batch_of(k)])
        (block(tp, x, torch.nn.functional) - x.flip(-1)).pow(2).mean().backward()
        topt.step()

    lp = {n: lf.tensor(a, requires_grad=True) for n, a in init.items()}
    opt = lf.optim.AdamW(list(lp.values()), lr=1e-2)
    x, target = lf.tensor(xs[0]), lf.tensor(xs[0][..., ::-1].copy())

    def step():
        opt.zero_grad(set_to_none=False)
        loss = ((block(lp, x, F) - target) ** 2).mean()
        loss.backward()
        opt.step()
        return loss
    graph = lf.capture(dev, step, warmup_iters=train_mlp.WARMUP)
    assert graph.is_hardware
    for k in range(train_mlp.WARMUP + 1, steps):
        x.copy_(xs[k])
        target.copy_(xs[k][..., ::-1].copy())
        graph.replay()
    for n in names:
        np.testing.assert_allclose(lp[n].numpy(), tp[n].detach().numpy(), atol=5e-5, err_msg=n)
