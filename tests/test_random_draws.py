"""torch's in-place draws (``x.uniform_()``, ``normal_``, ``bernoulli_``, ``exponential_``,
``cauchy_``, ``log_normal_``, ``geometric_``; lazyfuse/random_draws.py): native (one fused kernel,
no torch call), torch's distributions (quantiles against torch's own draws), torch's refusals."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import lazyfuse as lf

CPU = lf.device("cpu")
N = 200_000

DRAWS = {   # method -> arguments (torch's defaults where empty)
    "uniform_": [(), (-2.0, 3.0)], "normal_": [(), (1.0, 0.5)], "bernoulli_": [(), (0.3,)],
    "exponential_": [(), (4.0,)], "cauchy_": [(), (2.0, 0.5)], "log_normal_": [(), (0.0, 0.25)],
    "geometric_": [(0.25,), (0.9,)],
}
DISCRETE = {"bernoulli_", "geometric_"}


def _ks_distance(a: torch.Tensor, b: torch.Tensor) -> float:
    """The two-sample Kolmogorov-Smirnov statistic: the largest gap between the samples' CDFs."""
    a, b = a.double().sort().values, b.double().sort().values
    at = torch.cat([a, b])
    cdf_a = torch.searchsorted(a, at, right=True).double() / a.numel()
    cdf_b = torch.searchsorted(b, at, right=True).double() / b.numel()
    return (cdf_a - cdf_b).abs().max().item()


# two samples of N from one distribution are this far apart (KS) with probability 1e-6 (the
# asymptotic c(alpha) = sqrt(-ln(alpha / 2) / 2), times sqrt(2 / N)); a 3% error of scale or
# shift puts them ~0.01-0.02 apart
KS_BOUND = (-np.log(0.5e-6) / 2) ** 0.5 * (2 / N) ** 0.5


@pytest.mark.parametrize("name", sorted(DRAWS))
@pytest.mark.parametrize("device", ["cpu", "interpreter"])
def test_each_draw_has_torchs_distribution(name, device):
    lf.manual_seed(5)
    torch.manual_seed(5)
    for args in DRAWS[name]:
        got = getattr(lf.zeros(N, device=device), name)(*args).torch()
        want = getattr(torch.zeros(N, dtype=torch.float64), name)(*args)
        if name in DISCRETE:
            # the means (and the values' set) of the two samples: 6 standard errors apart at most
            err = 6 * (2 * want.var().item() / N) ** 0.5
            assert abs(got.double().mean().item() - want.mean().item()) < err, (name, args)
            assert set(got.unique().tolist()) <= set(want.unique().tolist()) | set(range(1, 200)), name
        else:
            assert _ks_distance(got, want) < KS_BOUND, (name, args, _ks_distance(got, want))
        assert got.dtype == torch.float32 and bool(got.isfinite().all()), name


@pytest.mark.parametrize("name", sorted(DRAWS))
def test_a_draw_is_one_native_kernel_with_what_reads_it(name):
    # the draw and its transform are one kernel writing x, the reduction that reads x another
    x = lf.zeros(4096)
    lf.sync(CPU)
    lf.reset_stats(CPU)
    y = (getattr(x, name)(*DRAWS[name][-1]) * 2 + 1).sum().item()
    s = lf.stats(CPU)
    assert (s.kernels_launched, s.extern_launches) == (2, 0), (name, s)
    assert np.isfinite(y) or name == "cauchy_"


def test_draws_follow_the_generator_and_advance_it():
    g = lf.Generator().manual_seed(3)
    a = lf.zeros(64).normal_(generator=g).torch()
    b = lf.zeros(64).normal_(generator=lf.Generator().manual_seed(3)).torch()
    c = lf.zeros(64).normal_(generator=g).torch()
    assert torch.equal(a, b) and not torch.equal(a, c)
    lf.manual_seed(11)
    d = lf.zeros(64).uniform_().torch()
    lf.manual_seed(11)
    assert torch.equal(d, lf.zeros(64).uniform_().torch())


@pytest.mark.parametrize("dtype", [lf.float16, lf.bfloat16, lf.float64])
def test_draws_in_the_tensors_float_dtype(dtype):
    x = lf.zeros(N, dtype=dtype)
    u = x.uniform_(-1.0, 1.0).torch()
    assert u.dtype == dtype.torch and u.min().item() >= -1.0 and u.max().item() <= 1.0
    assert abs(u.double().mean().item()) < 0.01
    z = lf.zeros(N, dtype=dtype).normal_().torch().double()
    assert abs(z.mean().item()) < 0.01 and abs(z.std().item() - 1.0) < 0.01


@pytest.mark.parametrize("dtype", [lf.int64, lf.int32, lf.uint8, lf.bool])
def test_bernoulli_and_geometric_fill_integer_tensors(dtype):
    b = lf.zeros(N, dtype=dtype).bernoulli_(0.25).torch()
    assert b.dtype == dtype.torch and set(b.unique().tolist()) <= {0, 1}
    assert abs(b.double().mean().item() - 0.25) < 0.01
    if dtype is not lf.bool:
        g = lf.zeros(N, dtype=dtype).geometric_(0.5).torch()
        assert g.dtype == dtype.torch and g.min().item() >= 1
        assert abs(g.double().mean().item() - 2.0) < 0.03   # the mean of geometric(p) is 1/p


def test_a_draw_writes_through_a_view_only():
    x = lf.zeros(6, 4)
    x[:, 1].uniform_(5.0, 6.0)
    t = x.torch()
    assert bool(((t[:, 1] >= 5) & (t[:, 1] < 6)).all()) and bool((t[:, [0, 2, 3]] == 0).all())


@pytest.mark.parametrize("name, args", [
    ("uniform_", (1.0, 0.0)), ("normal_", (0.0, -1.0)), ("bernoulli_", (1.5,)), ("exponential_", (0.0,)),
    ("cauchy_", (0.0, -1.0)), ("log_normal_", (0.0, 0.0)), ("geometric_", (1.0,)), ("geometric_", (0.0,)),
])
def test_draws_refuse_what_torch_refuses(name, args):
    with pytest.raises(RuntimeError) as theirs:
        getattr(torch.zeros(3), name)(*args)
    with pytest.raises(lf.LazyfuseError) as ours:
        getattr(lf.zeros(3), name)(*args)
    assert isinstance(ours.value, RuntimeError) and str(theirs.value) in str(ours.value)
    assert f"Tensor.{name}" in str(ours.value)
    assert lf.zeros(2).add(1).tolist() == [1.0, 1.0]   # the engine still works


def test_continuous_draws_refuse_an_integer_tensor_as_torch():
    with pytest.raises(NotImplementedError):
        torch.zeros(3, dtype=torch.int64).uniform_()
    with pytest.raises(lf.UnsupportedOpError, match="not implemented for 'Long'"):
        lf.zeros(3, dtype=lf.int64).uniform_()


def test_uniform_takes_torchs_from_keyword():
    u = lf.zeros(1000).uniform_(**{"from": 2.0, "to": 3.0}).torch()
    assert u.min().item() >= 2.0 and u.max().item() < 3.0
    with pytest.raises(TypeError, match="lo"):
        lf.zeros(3).uniform_(lo=1.0)


def test_bernoulli_of_a_probability_tensor_is_torchs_draw():
    # a tensor p (checked per element by torch as it draws) runs as torch's, on a copy
    p = lf.tensor([0.0, 1.0, 0.0, 1.0])
    assert lf.zeros(4).bernoulli_(p).tolist() == [0.0, 1.0, 0.0, 1.0]
    with pytest.raises(RuntimeError):
        torch.zeros(2).bernoulli_(torch.tensor([0.5, 2.0]))
    with pytest.raises(lf.LazyfuseError):
        lf.zeros(2).bernoulli_(lf.tensor([0.5, 2.0])).tolist()
