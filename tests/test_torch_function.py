"""``lf.Tensor.__torch_function__``: torch's own functions called on lazyfuse tensors (``torch.sin(x)``,
``F.softmax(x, -1)``, ``torch.cat([x, y])``, ``torch.linalg.vector_norm``) are lazyfuse's of that
name: recorded lazily, equal to torch's on torch tensors, differentiable; a plain torch tensor
beside lazyfuse ones is uploaded to their device."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import lazyfuse as lf

CPU = lf.device("cpu")
TARGET = torch.tensor([0, 1, 2])

CALLS = {   # name -> a torch call on (a, b), both (3, 4)
    "sin": lambda a, b: torch.sin(a), "add(alpha=)": lambda a, b: torch.add(a, b, alpha=2),
    "relu": lambda a, b: F.relu(a), "softmax": lambda a, b: F.softmax(a, dim=-1),
    "vector_norm": lambda a, b: torch.linalg.vector_norm(a, 3, dim=1),
    "expit": lambda a, b: torch.special.expit(a), "cat": lambda a, b: torch.cat([a, b], 1),
    "stack": lambda a, b: torch.stack([a, b]), "where": lambda a, b: torch.where(a > 0, a, b),
    "matmul": lambda a, b: torch.matmul(a, b.T), "sum": lambda a, b: torch.sum(a, dim=0),
    "einsum": lambda a, b: torch.einsum("ij,kj->ik", a, b), "linear": lambda a, b: F.linear(a, b),
    "max": lambda a, b: torch.max(a, dim=1).values, "layer_norm": lambda a, b: F.layer_norm(a, (4,)),
    "cross_entropy": lambda a, b: F.cross_entropy(a, TARGET), "cummax": lambda a, b: torch.cummax(a, 1)[0],
    "topk": lambda a, b: torch.topk(a, 2).indices,
    "sdpa": lambda a, b: F.scaled_dot_product_attention(a[None], b[None], b[None]),
    "a torch operand": lambda a, b: torch.mul(a, torch.arange(4.0)),
}


@pytest.mark.parametrize("name", sorted(CALLS))
@pytest.mark.parametrize("device", ["cpu", "interpreter"])
def test_torch_functions_on_lazyfuse_tensors_are_lazyfuses(name, device):
    at, bt = torch.randn(3, 4), torch.randn(3, 4)
    a, b = lf.tensor(at, device=device), lf.tensor(bt, device=device)
    got = CALLS[name](a, b)
    assert isinstance(got, lf.Tensor) and got.device == lf.device(device), type(got)
    want = CALLS[name](at, bt)
    assert got.dtype.torch == want.dtype and got.shape == tuple(want.shape)
    torch.testing.assert_close(got.torch(), want, rtol=1.3e-6, atol=1e-5)


def test_a_torch_function_records_and_fuses_as_lazyfuses_own():
    x = lf.randn(64, 64)
    lf.sync(CPU)
    lf.reset_stats(CPU)
    y = torch.exp(torch.sin(x) * 2) + F.relu(x)
    assert lf.stats(CPU).kernels_launched == 0   # recorded, not run
    y.torch()
    s = lf.stats(CPU)
    assert (s.kernels_launched, s.extern_launches) == (1, 0)


def test_gradients_flow_through_torch_functions():
    wt = torch.randn(5, requires_grad=True)
    w = lf.tensor(wt.detach(), requires_grad=True)
    for v in (w, wt):
        torch.sum(torch.tanh(v) * F.softplus(v)).backward()
    torch.testing.assert_close(w.grad.torch(), wt.grad)
