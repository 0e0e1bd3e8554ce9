"""The native kernels' formulas that were rewritten for speed (bench/native_ops.py's kernel
column), bit for bit against torch on cpu and interpreter: a clamp by numbers, negation, the
float remainder (``fmod``/``remainder``), sin and cos, ``flip``."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import lazyfuse as lf

DEVICES = ["cpu", "interpreter"]
SPECIAL = [np.nan, -np.nan, 0.0, -0.0, np.inf, -np.inf, 1.0, -2.5, 1e-45, -1e-40, 3.4e38]
INT_VIEW = {torch.float32: torch.int32, torch.float64: torch.int64, torch.float16: torch.int16,
            torch.bfloat16: torch.int16}


def assert_same_bits(got: torch.Tensor, want: torch.Tensor, msg=""):
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, msg)
    if want.dtype is torch.bfloat16:
        # torch's own bfloat16 NaNs differ between its scalar (0x7fc0) and vector (0xffff) paths;
        # lazyfuse rounds every NaN to 0x7fc0: the NaN-ness is compared, the other bits exactly
        nan = want.isnan()
        assert torch.equal(got.isnan(), nan), msg
        got, want = got[~nan], want[~nan]
    iv = INT_VIEW.get(want.dtype)
    if iv is None:
        assert torch.equal(got, want), msg
    else:
        assert torch.equal(got.view(iv), want.view(iv)), (got, want, msg)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_negation_flips_the_sign_bit_of_nan_and_zero_as_torch(device, dtype):
    # (Triton's printer multiplied by -1.0, which keeps a NaN's sign; torch flips it)
    xt = torch.tensor(SPECIAL * 3, dtype=torch.float32).to(dtype)
    x = lf.tensor(xt, device=device)
    assert_same_bits((-x).torch(), -xt, "-x")
    assert_same_bits((x * 1).neg().torch(), (xt * 1).neg(), "fused neg")
    assert_same_bits(lf.neg(x[:2]).torch(), torch.neg(xt[:2]), "lf.neg")


@pytest.mark.parametrize("device", DEVICES)
def test_a_clamp_by_numbers_keeps_signed_zeros_and_nans_as_torch(device):
    # the bound is compared first (``s > x ? s : x``): a value equal to the bound stays, -0.0
    # included, as torch's clamp keeps it (the other order gave the bound, +0.0)
    xt = torch.tensor(SPECIAL * 3 + [7.0, -7.0, 6.0, 0.5], dtype=torch.float32)
    x = lf.tensor(xt, device=device)
    for lo, hi in ((0.0, 6.0), (-0.0, 0.0), (-1.0, 1.0), (float("nan"), 1.0), (0.0, float("nan")), (2.0, -2.0)):
        assert_same_bits(x.clamp(lo, hi).torch(), xt.clamp(lo, hi), f"clamp({lo}, {hi})")
    assert_same_bits(lf.nn.functional.relu6(x).torch(), torch.nn.functional.relu6(xt), "relu6")
    assert_same_bits(x.clamp_min(-0.0).torch(), xt.clamp_min(-0.0), "clamp_min")
    assert_same_bits(x.clamp(max=0.0).torch(), xt.clamp(max=0.0), "clamp(max=)")


def _bit_patterns(n, seed):
    """``n`` float32 values from uniformly random bit patterns: every exponent equally likely, so
    most quotients of two of them are huge or tiny; NaNs, infinities, zeros and denormals appear."""
    bits = np.random.default_rng(seed).integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)
    special = np.array(SPECIAL, dtype=np.float32).view(np.uint32)
    bits[: len(special) ** 2] = np.repeat(special, len(special))[: len(special) ** 2]
    return torch.from_numpy(bits.view(np.float32).copy())


def _small_quotients(n, seed):
    """Pairs whose quotients stay below 2^29 (the fast form's reach): both signs, ratios from
    1e-3 to 1e8, quotients that land next to an integer (a = k*b, one ulp either side)."""
    rng = np.random.default_rng(seed)
    b = (rng.standard_normal(n) * 10.0 ** rng.uniform(-30, 30, n)).astype(np.float32)
    k = np.trunc(rng.standard_normal(n) * 10.0 ** rng.uniform(-3, 8, n))
    a = (k * b.astype(np.float64)).astype(np.float32)
    nudge = rng.integers(-1, 2, n).astype(np.int32)
    a = (a.view(np.int32) + nudge * (a != 0)).view(np.float32)
    return torch.from_numpy(a), torch.from_numpy(b)


def assert_same_or_both_nan(got, want, msg=""):
    # torch's vectorised fmod (SLEEF) returns NaNs of its own sign and payload: NaN-ness is
    # compared, every other value bit for bit
    nan = want.isnan()
    assert torch.equal(got.isnan(), nan), msg
    assert torch.equal(got[~nan].view(torch.int32), want[~nan].view(torch.int32)), msg


def exact(fn, a, b):
    """torch's float32 ``fn`` as it is defined, from the exact fmod: torch's float64 fmod (exact,
    and a float32 result is exactly representable), and for ``remainder`` torch's own step on it,
    ``m + b`` in float32 where m's sign is not b's. (torch's vectorised float32 fmod, SLEEF's,
    returns NaN for quotients beyond about 2^170: 8135 of these 65536 pairs; its scalar path and
    libm give the exact value.)"""
    m = torch.fmod(a.double(), b.double()).float()
    return m if fn == "fmod" else torch.where((m != 0) & ((m < 0) != (b < 0)), m + b, m)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn", ["fmod", "remainder"])
def test_the_float_remainders_are_exact_on_random_bit_patterns(device, fn):
    # huge and tiny quotients, signs, zeros, infinities and NaNs: the fast form flags the huge
    # ones and the kernel's second pass takes libm's fmod
    a, b = _bit_patterns(1 << 16, 1), _bit_patterns(1 << 16, 2)
    got = getattr(lf, fn)(lf.tensor(a, device=device), lf.tensor(b, device=device)).torch()
    assert_same_or_both_nan(got, exact(fn, a, b), fn)
    small = (a / b).abs() < 2 ** 20   # (where torch's own float32 kernel is exact too)
    assert_same_or_both_nan(got[small], getattr(torch, fn)(a, b)[small], fn)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn", ["fmod", "remainder"])
def test_the_float_remainders_fast_form_is_exact_below_2_to_the_29(device, fn):
    # every quotient within the fast form's reach, many a ulp off an integer: no second pass
    a, b = _small_quotients(1 << 16, 3)
    x, y = lf.tensor(a, device=device), lf.tensor(b, device=device)
    assert_same_or_both_nan(getattr(lf, fn)(x, y).torch(), getattr(torch, fn)(a, b), fn)
    # against a number, fused with what follows, and on a transposed (2-d loops) input
    assert_same_or_both_nan(getattr(lf, fn)(x, 0.37).torch(), getattr(torch, fn)(a, 0.37), f"{fn} by a number")
    assert_same_or_both_nan((getattr(lf, fn)(x * 2, y) + 1).torch(), getattr(torch, fn)(a * 2, b) + 1, f"{fn} fused")
    a2, b2 = a.reshape(256, 256), b.reshape(256, 256)
    got = getattr(lf, fn)(lf.tensor(a2, device=device).T, lf.tensor(b2, device=device)).torch()
    assert_same_or_both_nan(got, getattr(torch, fn)(a2.T, b2), f"{fn} transposed")


@pytest.mark.parametrize("device", DEVICES)
def test_fmod_keeps_a_tiny_dividend_where_remainder_moves_it(device):
    # fmod was ``x % y`` moved back by y: -1e-8 % 1 rounds to 1.0, and 1.0 - 1 is 0, not -1e-8
    a = torch.tensor([-1e-8, -3e-9, 1e-8, -0.0, 0.0, -5.0, 5.0, 2.5], dtype=torch.float32)
    b = torch.tensor([1.0, 1.0, -1.0, 1.0, -1.0, 3.0, -3.0, 1.25], dtype=torch.float32)
    for fn in ("fmod", "remainder"):
        got = getattr(lf, fn)(lf.tensor(a, device=device), lf.tensor(b, device=device)).torch()
        assert_same_bits(got, getattr(torch, fn)(a, b), fn)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32])
def test_the_remainders_of_other_dtypes_match_torch(dtype):
    a, b = _small_quotients(4096, 4)
    if dtype.is_floating_point:
        a, b = a.to(dtype), b.to(dtype)
        b = torch.where(b == 0, torch.ones_like(b), b)
    else:
        rng = np.random.default_rng(5)
        a = torch.from_numpy(rng.integers(-1000, 1000, 4096)).to(dtype)
        b = torch.from_numpy(rng.integers(1, 50, 4096) * rng.choice([-1, 1], 4096)).to(dtype)
    for device in DEVICES:
        for fn in ("fmod", "remainder"):
            got = getattr(lf, fn)(lf.tensor(a, device=device), lf.tensor(b, device=device)).torch()
            want = getattr(torch, fn)(a, b)
            if dtype.is_floating_point:
                nan = want.isnan()
                assert torch.equal(got.isnan(), nan)
                assert torch.equal(got[~nan], want[~nan]), (fn, device)
            else:
                assert torch.equal(got, want), (fn, device)


def test_an_in_place_fmod_takes_libms_fmod_alone():
    # a kernel that writes the buffer it reads cannot run its loop twice: libm's fmod only
    a, b = _bit_patterns(4096, 6), _bit_patterns(4096, 7)
    x = lf.tensor(a)
    x.copy_(lf.fmod(x, lf.tensor(b)))
    assert_same_or_both_nan(x.torch(), exact("fmod", a, b))


# the relative error bound of float32 sin/cos against float64: c_math.h's (0.5 ulp and a hair) on
# cpu; the interpreter's is numpy's float32 sin (1.03e-7 on these inputs, within 1 ulp: 2^-23)
SINCOS_BOUND = {"cpu": 6.0e-8, "interpreter": 2.0 ** -23}


def assert_sincos_accurate(got, x, fn, msg="", bound=SINCOS_BOUND["cpu"]):
    """``got`` within ``bound`` of float64's sin/cos of the float32 ``x``, NaN exactly where
    float64's is."""
    want = getattr(torch, fn)(x.double())
    nan = want.isnan()
    assert torch.equal(got.isnan(), nan), msg
    err = ((got[~nan].double() - want[~nan]).abs() / want[~nan].abs().clamp_min(1.2e-38)).max().item()
    assert err <= bound, (err, msg)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn", ["sin", "cos"])
def test_sin_and_cos_hold_out_to_the_largest_float(device, fn):
    # random bit patterns: most |x| are beyond 2^23, where the cpu kernel's fast pass flags them
    # and its second pass takes the far (Payne-Hanek) reduction; torch's float32 sin is
    # accurate there (each was 0 beyond 2^50 before it)
    x = torch.cat([_bit_patterns(1 << 15, 8), torch.tensor([1e20, -1e20, 4988429.2, 3.4e38, 2.0 ** 23])])
    t, bound = lf.tensor(x, device=device), SINCOS_BOUND[device]
    assert_sincos_accurate(getattr(lf, fn)(t).torch(), x, fn, "pointwise", bound)
    assert_sincos_accurate((getattr(lf, fn)(t * 2) + 0).torch(), x * 2, fn, "fused", bound)
    x2 = x[: 1 << 14].reshape(128, 128)
    assert_sincos_accurate(getattr(lf, fn)(lf.tensor(x2, device=device).T).torch(), x2.T, fn, "transposed", bound)
    finite = x[x.isfinite()][: 1 << 12].reshape(64, 64)
    got = getattr(lf, fn)(lf.tensor(finite, device=device)).sum(dim=1).torch().double()
    torch.testing.assert_close(got, getattr(torch, fn)(finite.double()).sum(dim=1), rtol=0, atol=1e-5)
    y = lf.tensor(x, device=device)
    getattr(y, f"{fn}_")()   # a kernel that writes what it reads: the exact forms alone
    assert_sincos_accurate(y.torch(), x, fn, "in place", bound)


REDUCTIONS_OF = {   # a reduction kernel of each strategy (CPrinter.strategy) over sin/cos values
    "rows": lambda v: v.sum(dim=1), "split": lambda v: v.sum(), "tile": lambda v: v.amax(dim=0),
    "scan": lambda v: v.cumsum(dim=1), "row stores": lambda v: v.softmax(dim=1),
}


@pytest.mark.parametrize("fn", ["sin", "cos"])
@pytest.mark.parametrize("far", [False, True])
def test_sin_and_cos_in_every_reduction_kernel(fn, far):
    # reduction kernels take the fast pass too (it flags a far element for the exact pass):
    # their values with and without far elements, against float64
    rng = np.random.default_rng(10)
    x = torch.from_numpy(rng.uniform(-300, 300, (96, 80)).astype(np.float32))
    if far:
        x[::7, ::5] = torch.from_numpy(rng.choice([-1, 1], x[::7, ::5].shape) * 10.0 ** rng.uniform(7, 38, x[::7, ::5].shape)).float()
    t = lf.tensor(x)
    for name, reduce in REDUCTIONS_OF.items():
        got = reduce(getattr(lf, fn)(t)).torch().double()
        want = reduce(getattr(torch, fn)(x.double()))
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4, msg=f"{fn} {name}")


@pytest.mark.parametrize("fn", ["sin", "cos"])
def test_a_far_element_leaves_the_near_ones_bit_for_bit(fn):
    # the exact pass (run because one element is beyond 2^23) gives the near elements the
    # values the fast pass alone gives them: no result depends on its neighbours
    near = torch.from_numpy(np.random.default_rng(9).uniform(-1e4, 1e4, 4096).astype(np.float32))
    alone = getattr(lf, fn)(lf.tensor(near)).torch()
    with_far = getattr(lf, fn)(lf.tensor(torch.cat([near, torch.tensor([1e20])]))).torch()
    assert torch.equal(alone.view(torch.int32), with_far[:-1].view(torch.int32))
    assert_sincos_accurate(alone, near, fn)


def test_fmod_gradients_match_torch():
    a, b = _small_quotients(64, 8)
    b = torch.where(b == 0, torch.ones_like(b), b)
    at, bt = a.double().requires_grad_(), b.double().requires_grad_()
    torch.fmod(at, bt).sum().backward()
    x, y = lf.tensor(a.double(), requires_grad=True), lf.tensor(b.double(), requires_grad=True)
    lf.fmod(x, y).sum().backward()
    torch.testing.assert_close(x.grad.torch(), at.grad)
    torch.testing.assert_close(y.grad.torch(), bt.grad)


FLIP_CASES = [((7,), (0,)), ((3, 4, 5), (2,)), ((3, 4, 5), (0,)), ((2, 3, 4), (-1, 0)), ((1, 6, 1), (0, 1, 2))]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape,dims", FLIP_CASES)
def test_flip_is_index_arithmetic_fused_with_its_neighbours(device, shape, dims):
    # one kernel for a flip between elementwise ops (it was a gather, a library call, behind an
    # arange); then through views, reshapes that need div/mod of its negative-coefficient
    # index, and reductions, each against torch
    t = torch.randn(*shape)
    x = lf.tensor(t, device=device)
    lf.sync(x.device)
    before = lf.stats(x.device).kernels_launched
    got = (lf.flip(x * 2, dims) + 1).torch()
    assert lf.stats(x.device).kernels_launched - before == 1
    assert torch.equal(got, torch.flip(t * 2, dims) + 1)
    assert torch.equal(lf.flip(x, dims).reshape(-1).torch(), torch.flip(t, dims).reshape(-1))
    assert torch.equal(x.flip(dims).torch(), t.flip(dims))
    n = t.numel()
    for rows in [d for d in (3, 4) if n % d == 0][:1]:
        assert torch.equal(lf.flip(x, dims).reshape(rows, -1).T.contiguous().torch(),
                           torch.flip(t, dims).reshape(rows, -1).T.contiguous()), rows
        torch.testing.assert_close(lf.flip(x, dims).reshape(rows, -1).sum(1).torch(),
                                   torch.flip(t, dims).reshape(rows, -1).sum(1))
    if t.ndim >= 2:
        p = list(range(t.ndim))[::-1]
        assert torch.equal(lf.flip(x.permute(*p), dims).torch(), torch.flip(t.permute(*p), dims))
        assert torch.equal(lf.flip(x[..., 1:], dims).torch(), torch.flip(t[..., 1:], dims))


@pytest.mark.parametrize("device", DEVICES)
def test_flip_of_every_dtype_and_its_gradient(device):
    t = torch.randn(5, 6)
    for dt_ in (torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.int32, torch.bool):
        src = (t > 0) if dt_ is torch.bool else t.to(dt_) if dt_.is_floating_point else (t * 10).to(dt_)
        assert torch.equal(lf.flip(lf.tensor(src, device=device), (0, 1)).torch(), torch.flip(src, (0, 1)))
    assert torch.equal(lf.flip(lf.tensor(torch.tensor(3.0), device=device), ()).torch(), torch.tensor(3.0))
    w = torch.randn(5, 6)
    x = lf.tensor(t, device=device, requires_grad=True)
    (lf.flip(x.exp(), (1,)) * lf.tensor(w, device=device)).sum().backward()
    at = t.clone().requires_grad_()
    (torch.flip(at.exp(), (1,)) * w).sum().backward()
    torch.testing.assert_close(x.grad.torch(), at.grad)
    # fliplr, flipud and rot90 are flips too
    assert torch.equal(lf.fliplr(lf.tensor(t, device=device)).torch(), torch.fliplr(t))
    assert torch.equal(lf.rot90(lf.tensor(t, device=device), 3).torch(), torch.rot90(t, 3))
