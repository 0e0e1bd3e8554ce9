"""Float ``x ** s`` on the cpu device follows torch's CPU kernel bit for bit: torch computes the
exponents 2, 3, -1, -2, -0.5 as products and quotients (x*x, x*x*x, 1/x, 1/(x*x), 1/sqrt(x)),
1 as a copy and 0.5 as a square root, not as pow — and so does lazyfuse's C (``lf_powf``), which
also lets gcc vectorise the common case of a squared error instead of calling powf per element."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import lazyfuse as lf

SPECIAL = [0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1.0, -1.0, 1 + 2 ** -12, 3e-39, -2.5, 1e20]


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal values, the sign of zero included; any NaN equals any NaN."""
    nan = a.isnan() & b.isnan()
    return bool(((a == b) & (a.signbit() == b.signbit()) | nan).all())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("exponent", [2, 1, 3, -1, -2, -0.5, 0, 2.5, -3])
@settings(max_examples=15, deadline=None)
@given(values=st.lists(st.floats(-1e6, 1e6, width=32), min_size=1, max_size=40))
def test_scalar_exponents_match_torch(dtype, exponent, values):
    x = torch.tensor(SPECIAL + values, dtype=dtype)
    got = (lf.tensor(x, device="cpu") ** exponent).torch()
    want = x ** exponent
    if exponent in (2.5, -3):   # powf / pow on both sides: libm and torch's vectorised pow may differ by an ulp
        torch.testing.assert_close(got, want, equal_nan=True, rtol=2 * torch.finfo(dtype).eps, atol=0)
    else:
        assert _same(got, want), (x[~((got == want) | got.isnan())], got, want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_exponent_half_is_a_correctly_rounded_sqrt(dtype):
    """torch's pow(x, 0.5) (and its sqrt) is an ulp off for some x; lazyfuse's is the correctly
    rounded square root, numpy's IEEE sqrt."""
    x = torch.tensor(SPECIAL + np.random.default_rng(0).uniform(0, 100, 1000).tolist(), dtype=dtype)
    got = (lf.tensor(x, device="cpu") ** 0.5).torch()
    with np.errstate(invalid="ignore"):
        assert _same(got, torch.from_numpy(np.sqrt(x.numpy())))
    torch.testing.assert_close(got, x ** 0.5, equal_nan=True, rtol=2 * torch.finfo(dtype).eps, atol=0)


def test_tensor_exponent_and_squared_error_gradient():
    """A per-element exponent still takes pow; the squared error's backward (2 * x ** 1) matches torch."""
    g = torch.Generator().manual_seed(0)
    x, e = torch.rand(64, generator=g) * 3, torch.tensor([2.0, 0.5, 1.0, 3.7] * 16)
    torch.testing.assert_close((lf.tensor(x) ** lf.tensor(e)).torch(), x ** e, rtol=2e-7, atol=0)
    lx = lf.tensor(x, requires_grad=True)
    tx = x.clone().requires_grad_(True)
    ((lx - 1.0) ** 2).mean().backward()
    ((tx - 1.0) ** 2).mean().backward()
    torch.testing.assert_close(lx.grad.torch(), tx.grad, rtol=1e-6, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("exponent", [2.0, 1.0, 0.5, 3.0, -1.0, -2.0, -0.5])
def test_tensor_exponents_take_pow_not_the_scalar_shortcuts(dtype, exponent):
    """torch's shortcuts are for a Python-scalar exponent only: with a tensor exponent (even a
    0-d one) it calls pow, so -inf ** 0.5 is inf there but sqrt's nan for ``x ** 0.5`` (found by
    the random program test)."""
    x = torch.tensor(SPECIAL, dtype=dtype)
    for e in (torch.full_like(x, exponent), torch.tensor(exponent, dtype=dtype)):
        got = (lf.tensor(x, device="cpu") ** lf.tensor(e, device="cpu")).torch()
        assert _same(got, x ** e), (exponent, got, x ** e)
