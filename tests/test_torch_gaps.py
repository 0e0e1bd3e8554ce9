"""Three places where lazyfuse answered where torch gives another answer (the eighth session's
conformance gaps): reductions over a dim of a tensor of more than 64 dims (torch refuses them),
the 0-d results of the margin losses of a 1-d input, and ``out=`` of another shape or dtype."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as TF

import lazyfuse as lf

F = lf.nn.functional


def _outcome(fn, x):
    """("ok", the result as a flat float64 torch tensor) or ("refused", the exception)."""
    try:
        out = fn(x)
        return "ok", (out.torch() if isinstance(out, lf.Tensor) else out).double().flatten()
    except Exception as e:   # noqa: BLE001 (the outcome compared is the exception itself)
        return "refused", e


# name -> a call both libraries take; over a tensor of 65 dims torch refuses some (a RuntimeError)
DEEP_CALLS = {
    "sum()": lambda t: t.sum(), "sum(())": lambda t: t.sum(()), "mean()": lambda t: t.mean(),
    "amax()": lambda t: t.amax(), "max()": lambda t: t.max(), "min()": lambda t: t.min(),
    "argmax()": lambda t: t.argmax(), "prod()": lambda t: t.prod(), "var()": lambda t: t.var(),
    "cumsum(0)": lambda t: t.cumsum(0), "sum(0)": lambda t: t.sum(0), "sum(-1, keepdim)": lambda t: t.sum(-1, True),
    "amax(0)": lambda t: t.amax(0), "amin(1)": lambda t: t.amin(1), "mean(0)": lambda t: t.mean(0),
    "max(0)": lambda t: t.max(0).values, "min(2)": lambda t: t.min(2).indices, "argmax(0)": lambda t: t.argmax(0),
    "argmin(3)": lambda t: t.argmin(3), "prod(0)": lambda t: t.prod(0), "var(0)": lambda t: t.var(0),
    "logsumexp(-1)": lambda t: t.logsumexp(-1), "any()": lambda t: (t > 0).any(), "all(0)": lambda t: (t > 0).all(0),
    "softmax(-1)": lambda t: t.softmax(-1), "log_softmax(0)": lambda t: t.log_softmax(0),
}
NN_CALLS = {"softmax": (lambda t: TF.softmax(t, 63), lambda t: F.softmax(t, 63)),
            "log_softmax": (lambda t: TF.log_softmax(t, -1), lambda t: F.log_softmax(t, -1)),
            "layer_norm": (lambda t: TF.layer_norm(t, (2, 3)), lambda t: F.layer_norm(t, (2, 3)))}


@pytest.mark.parametrize("name", sorted(DEEP_CALLS) + sorted(NN_CALLS))
def test_a_tensor_of_65_dims_is_reduced_or_refused_as_torch(name):
    xt = torch.randn([1] * 63 + [2, 3], generator=torch.Generator().manual_seed(0))
    torch_fn, lf_fn = NN_CALLS[name] if name in NN_CALLS else (DEEP_CALLS[name], DEEP_CALLS[name])
    want, got = _outcome(torch_fn, xt), _outcome(lf_fn, lf.tensor(xt))
    assert want[0] == got[0], (name, want, got)
    if want[0] == "ok":
        torch.testing.assert_close(got[1], want[1])
        return
    assert isinstance(want[1], RuntimeError) and "only tensors with up to 64 dims" in str(want[1])
    assert isinstance(got[1], lf.ShapeError) and isinstance(got[1], RuntimeError)
    assert "only tensors with up to 64 dims are supported" in str(got[1]) and "reshape" in str(got[1])
    # the refusal leaves the engine working: the same tensor still reduces over every dim
    torch.testing.assert_close(lf.tensor(xt).sum().torch(), xt.sum())


def test_64_dims_still_reduce_over_a_dim():
    xt = torch.randn([1] * 62 + [2, 3])
    torch.testing.assert_close(lf.tensor(xt).amax(-1).torch(), xt.amax(-1))
    torch.testing.assert_close(lf.tensor(xt).sum(63).torch(), xt.sum(63))


# (input shape, target, kwargs): one sample (a 0-d result on torch's CPU) and batches beside them
MARGIN_CASES = {
    "multi_margin_loss": [((5,), torch.tensor(1), {}), ((5,), torch.tensor(3), {"p": 2, "margin": 7.0}),
                          ((5,), torch.tensor([1]), {}), ((3, 5), torch.tensor([1, 0, 4]), {}),
                          ((1, 5), torch.tensor([2]), {})],
    "multilabel_margin_loss": [((5,), torch.tensor([1, 0, -1, 2, 3]), {}), ((), torch.tensor(0), {}),
                               ((2, 4), torch.tensor([[3, 0, -1, 1], [0, 1, 2, 3]]), {}),
                               ((1, 4), torch.tensor([[3, -1, 0, 1]]), {})],
}


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("name", sorted(MARGIN_CASES))
def test_margin_losses_of_one_sample_have_torchs_cpu_shape(name, reduction, device):
    for shape, target, kwargs in MARGIN_CASES[name]:
        xt = torch.randn(shape, generator=torch.Generator().manual_seed(len(shape)))
        want = getattr(TF, name)(xt, target, reduction=reduction, **kwargs)
        got = getattr(F, name)(lf.tensor(xt, device=device), lf.tensor(target, device=device), reduction=reduction,
                               **kwargs)
        assert got.shape == tuple(want.shape), (name, shape, target, reduction)
        torch.testing.assert_close(got.torch(), want)
