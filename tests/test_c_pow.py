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
        # float32's pow is float64's rounded once (lf_vpowf): (1 + 2^-12) ** 2 is a tie, which
        # rounds to even there and up in torch's libm powf
        want = x ** e if dtype == torch.float64 else (x.double() ** e.double()).float()
        assert _same(got, want), (exponent, got, want)
        torch.testing.assert_close(got, x ** e, equal_nan=True, rtol=2 * torch.finfo(dtype).eps, atol=0)


# C99's pow special cases and their neighbours, as bases and as exponents
POW_SPECIAL = [0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0,
               1 + 2 ** -23, 1 - 2 ** -24, -1 - 2 ** -23, 1e-45, -1e-45, 1e-40, 3.4e38, -3.4e38, 2.0 ** 24,
               -(2.0 ** 24), 2.0 ** 24 + 2, 2.0 ** 23 + 1, -(2.0 ** 23 + 1), 2.0 ** 23 - 0.5, 1e30, -7.0, 0.1, 10.0,
               1.5, 2.5, -2.5, 1e-3, 127.5, -149.0, 150.0]


def _ulps_from_float64(got: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """|got - x ** y| (float64) in ulps of the float32 result, where that result is finite and nonzero."""
    exact = x.double() ** y.double()
    ref = exact.float()
    fin = ref.isfinite() & got.isfinite() & (ref != 0)
    ulp = torch.from_numpy(np.spacing(ref.abs().numpy())).double()
    return ((got.double() - exact).abs() / ulp)[fin]


def _same_class(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Both NaN, or both inf, or both zero, or both finite nonzero, with the same sign (NaN aside)."""
    kind = lambda t: t.isnan() * 1 + t.isinf() * 2 + (t == 0) * 4   # noqa: E731
    return bool(((kind(a) == kind(b)) & ((a.signbit() == b.signbit()) | a.isnan())).all())


def _check_tensor_pow(x: torch.Tensor, y: torch.Tensor, device: str = "cpu"):
    got = (lf.tensor(x, device=device) ** lf.tensor(y, device=device)).torch()
    want = x ** y
    assert _same_class(got, want), [(a, b, g, w) for a, b, g, w in zip(x.tolist(), y.tolist(), got.tolist(),
                                                                        want.tolist()) if not _same_class(
                                                                            torch.tensor([g]), torch.tensor([w]))]
    assert _same_class(got, (x.double() ** y.double()).float())
    # (a denormal result's ulp is 2^-149: torch's libm powf is up to an ulp off there too)
    torch.testing.assert_close(got, want, equal_nan=True, rtol=2 * torch.finfo(torch.float32).eps, atol=2 ** -149)
    err = _ulps_from_float64(got, x, y)
    assert err.numel() == 0 or err.max() <= 0.51, err.max()


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
def test_float32_tensor_pow_special_cases_match_torch(device):
    """Every pair of special values (C99's cases: x ** 0, 1 ** nan, negative bases to integer and
    non-integer powers, +-0, +-inf, nan, huge and denormal results) gives torch's class and sign,
    and finite results within 0.51 ulp of float64 (lf_vpowf computes in double; the Triton
    printer's lf_pow_f, the same formula, in float64 too)."""
    s = torch.tensor(POW_SPECIAL, dtype=torch.float32)
    _check_tensor_pow(s.repeat_interleave(len(s)), s.repeat(len(s)), device)


@settings(max_examples=25, deadline=None)
@given(bits=st.lists(st.tuples(st.integers(0, 2 ** 32 - 1), st.integers(0, 2 ** 32 - 1)), min_size=1, max_size=64))
def test_float32_tensor_pow_of_bit_patterns_matches_torch(bits):
    x, y = (torch.from_numpy(np.array(b, dtype=np.uint32).view(np.float32)) for b in zip(*bits))
    _check_tensor_pow(x, y)


def test_float32_tensor_pow_over_wide_ranges_matches_float64():
    """Random bases over the whole float range to exponents that keep results finite, results down
    to denormals, and negative bases to integer powers: within 0.51 ulp of float64 rounded."""
    rng = np.random.default_rng(0)
    n = 1 << 14
    x = np.exp(rng.uniform(-100, 88, n)).astype(np.float32)
    y = rng.uniform(-1.2, 1.2, n).astype(np.float32)
    near_one = (1 + rng.uniform(-1e-3, 1e-3, n)).astype(np.float32)
    big_y = rng.uniform(-2e4, 2e4, n).astype(np.float32)
    tiny = rng.uniform(0.4, 0.6, n).astype(np.float32)
    denormal_y = rng.uniform(126, 160, n).astype(np.float32)
    neg = -rng.uniform(0, 4, n).astype(np.float32)
    int_y = np.round(rng.uniform(-60, 60, n)).astype(np.float32)
    for a, b in [(x, y), (near_one, big_y), (tiny, denormal_y), (neg, int_y)]:
        _check_tensor_pow(torch.from_numpy(a), torch.from_numpy(b))


def test_float32_tensor_pow_vectorises(tmp_path):
    """The generated loop of a tensor-exponent pow is vectorised by gcc (it called libm's powf per
    element: 4x slower than lf_vpowf on AVX-512)."""
    from test_c_vectorize import kernel_sources, unvectorised_loops
    x, e = lf.tensor(np.linspace(0.1, 3, 64, dtype=np.float32)), lf.tensor(np.linspace(-2, 2, 64, dtype=np.float32))
    out, sources = kernel_sources(lambda: (x ** e).numpy())
    (src,) = sources
    assert "lf_vpowf" in src
    assert unvectorised_loops(src, tmp_path) == [], src


def test_a_scalar_exponent_that_is_no_shortcut_runs_the_vectorised_pow(tmp_path):
    """x ** 2.5: the kernel tests once whether the exponent is one of torch's shortcuts; it is
    not, so the loop that runs calls lf_vpowf and gcc vectorises it (lf_powf's powf fallback,
    inlined with lf_vpowf, made the loop too big to unswitch: nothing vectorised)."""
    from test_c_vectorize import kernel_sources, unvectorised_loops
    from lazyfuse.codegen.c_printer import PRELUDE
    xs = np.linspace(0, 3, 64, dtype=np.float32)
    x = lf.tensor(xs)
    out, sources = kernel_sources(lambda: (x ** 2.5).numpy())
    (src,) = sources
    assert "if (lf_pow_shortcut(s0)) {" in src and "lf_vpowf(" in src.split("} else {")[1]
    generic_loop = len(PRELUDE.splitlines()) + 1 + src.splitlines().index(
        next(ln for ln in src.splitlines() if "} else {" in ln)) + 3   # the else branch's for line
    assert generic_loop not in unvectorised_loops(src, tmp_path), src
    torch.testing.assert_close(torch.from_numpy(out), torch.from_numpy(xs) ** 2.5, rtol=2e-7, atol=0)
