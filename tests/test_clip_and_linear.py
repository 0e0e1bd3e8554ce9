"""``lf.nn.utils.clip_grad_norm_`` and ``F.linear`` / ``matmul`` of a 3-D input by one matrix
(issue 15), against torch."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import lazyfuse as lf
from lazyfuse.ir.node import Op
from lazyfuse.runtime.build import trace
from programs_cases import inline_matmul_threshold

CPU = lf.device("cpu")
F = lf.nn.functional


def _grads(lib, scale):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((4, 3)) * scale, rng.standard_normal(3) * scale]
    make = (lambda a: lf.tensor(a.astype(np.float32), requires_grad=True)) if lib is lf else \
        (lambda a: torch.tensor(a.astype(np.float32), requires_grad=True))
    params = [make(a) for a in arrays]
    ((params[0] * params[0]).sum() * 0.5 + (params[1] ** 3).sum() / 3).backward()
    return params


@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf, 3.0])
@pytest.mark.parametrize("max_norm", [0.5, 100.0])   # clips / leaves the gradients as they are
def test_clip_grad_norm_matches_torch(norm_type, max_norm):
    lp, tp = _grads(lf, 2.0), _grads(torch, 2.0)
    got = lf.nn.utils.clip_grad_norm_(lp, max_norm, norm_type=norm_type)
    want = torch.nn.utils.clip_grad_norm_(tp, max_norm, norm_type=norm_type)
    assert got.shape == () and got.dtype is lf.float32
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-6)
    for a, b in zip(lp, tp):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-6, atol=1e-7)


def test_clip_grad_norm_edge_cases():
    w = lf.tensor(np.ones(3, np.float32), requires_grad=True)
    assert lf.nn.utils.clip_grad_norm_(w, 1.0).item() == 0.0          # no gradient yet: norm 0
    w.grad = lf.tensor(np.array([3.0, 4.0, 0.0], np.float32))
    assert lf.nn.utils.clip_grad_norm_(w, 1.0).item() == pytest.approx(5.0)   # one tensor, as in torch
    np.testing.assert_allclose(w.grad.numpy(), np.array([0.6, 0.8, 0.0]), rtol=1e-5)
    w.grad = lf.tensor(np.array([math.inf, 1.0, 0.0], np.float32))
    with pytest.raises(lf.LazyfuseError, match="error_if_nonfinite=False"):
        lf.nn.utils.clip_grad_norm_(w, 1.0, error_if_nonfinite=True)
    with pytest.raises(lf.ShapeError, match="norm_type"):
        lf.nn.utils.clip_grad_norm_(w, 1.0, norm_type=0)


def test_clip_grad_norm_is_capturable_and_clips_at_every_replay():
    rng = np.random.default_rng(1)
    w0, x = rng.standard_normal((3, 5)).astype(np.float32) * 3, rng.standard_normal((4, 5)).astype(np.float32)
    tw = torch.tensor(w0, requires_grad=True)
    topt = torch.optim.SGD([tw], lr=0.1)
    w = lf.tensor(w0, requires_grad=True)
    opt = lf.optim.SGD([w], lr=0.1)
    lx = lf.tensor(x)
    norms = []

    def step():
        opt.zero_grad(set_to_none=False)
        (F.linear(lx, w) ** 2).sum().backward()
        norm = lf.nn.utils.clip_grad_norm_([w], 0.5)
        opt.step()
        return norm
    graph = lf.capture(CPU, step)      # 3 warmups + the capture run: 4 steps
    for k in range(7):
        if k >= 4:
            norms.append(graph.replay().item())
        topt.zero_grad()
        (torch.nn.functional.linear(torch.tensor(x), tw) ** 2).sum().backward()
        want = torch.nn.utils.clip_grad_norm_([tw], 0.5)
        topt.step()
        if k >= 4:
            np.testing.assert_allclose(norms[-1], want.item(), rtol=1e-5)
    np.testing.assert_allclose(w.numpy(), tw.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("path", ["inline", "matmul"])
def test_linear_of_a_3d_input_matches_torch_and_is_one_2d_matmul(path):
    rng = np.random.default_rng(2)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((2, 5, 4), (3, 4), (3,)))
    with inline_matmul_threshold(0 if path == "matmul" else lf.ops.INLINE_MATMUL):
        lx, lw, lb = (lf.tensor(a, requires_grad=True) for a in (x, w, b))
        out = F.gelu(F.linear(lx.transpose(0, 1), lw, lb))   # a non-contiguous input too
        assert out.shape == (5, 2, 3)
        (out * out).sum().backward()
        if path == "matmul":
            nodes = trace([t.grad._storage for t in (lx, lw)])[0]
            shapes = [n.shape for n in nodes if n.op is Op.MATMUL]
            assert shapes and all(len(s) == 2 for s in shapes)   # no batched matmul, no batch sum
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    tout = torch.nn.functional.gelu(torch.nn.functional.linear(tx.transpose(0, 1), tw, tb))
    (tout * tout).sum().backward()
    np.testing.assert_allclose(out.numpy(), tout.detach().numpy(), rtol=1e-5, atol=1e-6)
    for a, t in ((lx, tx), (lw, tw), (lb, tb)):
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-5)
