"""Scan kernels (cumsum, cumprod, logcumsumexp: a running value per row, any length) and the
product reduction (prod), on the C backend and the Triton interpreter: values against torch
(float64 where float32 would hide the error), dtypes, kernel counts, and gradients (zeros
included) against torch's autograd."""
import math

import pytest
import torch

import lazyfuse as lf

SCANS = ("cumsum", "cumprod", "logcumsumexp")


def _x(*shape, seed=0, dtype=torch.float64):
    # values near 1 in magnitude keep long running products finite
    g = torch.Generator().manual_seed(seed)
    return ((torch.rand(*shape, generator=g, dtype=torch.float64) * 0.4 + 0.8) *
            torch.randn(*shape, generator=g, dtype=torch.float64).sign()).to(dtype)


def _counted(dev, fn):
    """``fn()`` as torch, and the (kernels, externs) its drain launched."""
    lf.sync(dev)
    lf.reset_stats(dev)
    out = fn().torch()
    return out, (lf.stats(dev).kernels_launched, lf.stats(dev).extern_launches)


@pytest.mark.parametrize("n", [1, 7, 64, 65, 1000])
@pytest.mark.parametrize("name", SCANS)
def test_a_scan_of_any_length_is_one_native_kernel_with_its_prologue(name, n):
    # rows along the innermost dim (dim 1) and across rows (dim 0: the SIMD block of rows)
    xt = _x(5, n, seed=n)
    x = lf.tensor(xt)
    for dim in (0, 1, -1):
        got, counts = _counted(lf.device("cpu"), lambda: getattr(x * 2, name)(dim))
        assert counts == (1, 0), (name, dim, counts)
        torch.testing.assert_close(got, getattr(xt * 2, name)(dim), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", SCANS)
def test_scans_on_the_interpreter(name):
    dev = lf.device("interpreter")
    xt = _x(3, 37, seed=2)
    x = lf.tensor(xt, device=dev)
    for dim in (0, 1):
        got, counts = _counted(dev, lambda: getattr(x, name)(dim))
        assert counts == (1, 0)
        torch.testing.assert_close(got, getattr(xt, name)(dim), rtol=1e-12, atol=1e-12)
    got32 = getattr(lf.tensor(xt.float(), device=dev), name)(1).torch()
    torch.testing.assert_close(got32.double(), getattr(xt, name)(1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.bool])
def test_scan_dtypes_follow_torch(dtype):
    xt = (_x(4, 9, seed=3) * 2).round().to(dtype) if dtype is not torch.bool else _x(4, 9, seed=3) > 0
    x = lf.tensor(xt)
    for name in ("cumsum", "cumprod"):
        got, want = getattr(x, name)(1).torch(), getattr(xt, name)(1)
        assert got.dtype == want.dtype, name
        torch.testing.assert_close(got, want, rtol=1e-2, atol=1e-2)
    assert x.cumsum(0, dtype=lf.float64).torch().dtype == torch.float64
    if dtype.is_floating_point:
        want = xt.double().logcumsumexp(1)
        torch.testing.assert_close(x.logcumsumexp(1).torch().double(), want, rtol=1e-2, atol=1e-2)
    # a 0-d tensor scans as one element
    assert lf.tensor(xt[0, 0]).cumsum(0).torch().tolist() == xt[0, 0].cumsum(0).tolist()


def test_scan_special_values_as_torch():
    xt = torch.tensor([[1.0, math.nan, 3.0, 0.5], [-math.inf, -math.inf, 2.0, math.inf],
                       [math.inf, 1.0, math.inf, -math.inf], [0.0, -2.0, 0.0, 4.0]], dtype=torch.float64)
    x = lf.tensor(xt)
    for dev in (lf.device("cpu"), lf.device("interpreter")):
        x = lf.tensor(xt, device=dev)
        for name in SCANS:
            torch.testing.assert_close(getattr(x, name)(1).torch(), getattr(xt, name)(1), equal_nan=True)


def test_a_scan_of_a_strided_view_and_a_long_float32_row():
    xt = _x(300, 12, seed=5)
    got = lf.tensor(xt).T[::2].cumsum(1).torch()
    torch.testing.assert_close(got, xt.T[::2].cumsum(1))
    # float32 accumulates in double in the kernel, as torch's CPU scan: a long row keeps its digits
    long = torch.rand(1, 100_000, generator=torch.Generator().manual_seed(6))
    torch.testing.assert_close(lf.tensor(long).cumsum(1).torch(), long.cumsum(1), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
def test_prod_is_a_native_reduction(device):
    dev = lf.device(device)
    xt = _x(6, 9, seed=7)
    xt[2, 4] = 0.0
    x = lf.tensor(xt, device=dev)
    for dim, keepdim in ((None, False), (0, False), (1, True), (-1, False)):
        got, counts = _counted(dev, lambda: (x * 2).prod(dim, keepdim=keepdim) if dim is not None else (x * 2).prod())
        assert counts == (1, 0)
        want = (xt * 2).prod(dim, keepdim=keepdim) if dim is not None else (xt * 2).prod()
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    xi = torch.randint(-3, 4, (4, 5), generator=torch.Generator().manual_seed(8))
    for t in (xi, xi.int(), xi > 0):
        got, want = lf.tensor(t, device=dev).prod(1).torch(), t.prod(1)
        assert got.dtype == want.dtype and got.tolist() == want.tolist()
    assert lf.tensor(xt.float(), device=dev).prod(0, dtype=lf.float64).dtype is lf.float64
    assert lf.prod(x, 1).shape == (6,)


def _with_zeros(seed):
    xt = _x(4, 6, seed=seed)
    xt[1, 2] = 0.0                  # one zero in a row
    xt[2, 1] = xt[2, 4] = 0.0       # two zeros in a row
    xt[3, 5] = 0.0                  # a zero at the end of a row
    return xt


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
@pytest.mark.parametrize("name", ["prod", *SCANS])
def test_gradients_match_torch_with_zeros(name, device):
    dev = lf.device(device)
    xt = _with_zeros(9)
    g = torch.Generator().manual_seed(10)
    for dim in (1, 0):
        out_t = getattr(xt.clone().requires_grad_(), name)(dim)
        weight = torch.randn(out_t.shape, generator=g, dtype=torch.float64)
        leaf_t = xt.clone().requires_grad_()
        (getattr(leaf_t, name)(dim) * weight).sum().backward()
        leaf = lf.tensor(xt, device=dev).requires_grad_()
        (getattr(leaf, name)(dim) * lf.tensor(weight, device=dev)).sum().backward()
        torch.testing.assert_close(leaf.grad.torch(), leaf_t.grad, rtol=1e-10, atol=1e-10)


def test_a_full_prod_gradient_with_one_and_two_zeros():
    for zeros in ([3], [1, 4]):
        xt = _x(6, seed=11)
        xt[zeros] = 0.0
        leaf_t = xt.clone().requires_grad_()
        leaf_t.prod().backward()
        leaf = lf.tensor(xt).requires_grad_()
        leaf.prod().backward()
        torch.testing.assert_close(leaf.grad.torch(), leaf_t.grad)
