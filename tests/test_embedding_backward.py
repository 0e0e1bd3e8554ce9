"""The embedding's (a gather's) backward is one native scatter-add (issue 15): an ``index_add``
library step on the ``cpu`` (C) and ``interpreter`` (Triton) devices — no one-hot matmul, whose
cost is the gradient's size times the vocabulary, and no extern. Against torch in float64."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import lazyfuse as lf
from lazyfuse.ir.node import Op

F = lf.nn.functional
VOCAB, WIDTH = 50, 8


def _tokens(seed):
    """(2, 6) token ids with repeats (their rows' gradients must add up) and vocabulary ends."""
    ids = np.random.default_rng(seed).integers(0, VOCAB, (2, 6))
    ids[0, :3] = 7
    ids[1, -1] = VOCAB - 1
    return ids


def _weights():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((VOCAB, WIDTH)).astype(np.float32),
            rng.standard_normal((2, 6, WIDTH)).astype(np.float32))


def _torch_grad(ids):
    w, scale = _weights()
    tw = torch.tensor(w, dtype=torch.float64, requires_grad=True)
    out = torch.nn.functional.embedding(torch.tensor(ids), tw)
    (torch.tanh(out) * torch.tensor(scale, dtype=torch.float64)).sum().backward()
    return tw.grad.numpy()


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
def test_embedding_backward_is_one_native_scatter_add(device):
    dev = lf.device(device)
    w, scale = _weights()
    weight = lf.tensor(w, device=dev, requires_grad=True)
    ids = _tokens(1)
    out = F.embedding(lf.tensor(ids, device=dev), weight)
    (out.tanh() * lf.tensor(scale, device=dev)).sum().backward()

    plan = lf.explain(weight.grad)
    kinds = [k.kind for k in plan.kernels]
    assert kinds.count("index_add") == 1, kinds
    assert "matmul" not in kinds and "extern" not in kinds, kinds
    assert not any(n.op in (Op.MATMUL, Op.EXTERN) for n in plan.nodes)
    before = lf.stats(dev)
    grad = weight.grad.numpy()
    assert (lf.stats(dev) - before).extern_launches == 0
    np.testing.assert_allclose(grad, _torch_grad(ids), rtol=1e-5, atol=1e-6)


def test_captured_embedding_backward_adds_into_zeros_on_every_replay():
    """The scatter-add writes its whole output each launch: replays with new tokens give each
    step's own gradient, never one accumulated over the replays."""
    dev = lf.device("cpu")
    w, scale = _weights()
    weight = lf.tensor(w, device=dev)
    ids = lf.tensor(_tokens(1), device=dev)
    scale = lf.tensor(scale, device=dev)

    def step():
        leaf = weight.detach().requires_grad_(True)
        (F.embedding(ids, leaf).tanh() * scale).sum().backward()
        return leaf.grad

    graph = lf.capture(dev, step)
    for seed in (2, 3, 2):
        tokens = _tokens(seed)
        ids.copy_(tokens)
        graph.replay()
        np.testing.assert_allclose(graph.output.numpy(), _torch_grad(tokens), rtol=1e-5, atol=1e-6)
