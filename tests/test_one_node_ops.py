"""Ops that were Python compositions of many nodes and now record one node a call (issue 18's record
cost: a node costs microseconds of recording): ``atan`` (27 nodes before), ``atan2`` (59),
``copysign`` (10), ``sign`` (5), ``nan_to_num`` (6), ``leaky_relu`` (3), ``hardsigmoid`` (4),
``hardswish`` (5), ``elu``/``selu``/``celu`` (6/7/7), ``softplus`` (11), ``logsigmoid`` (7),
``mish`` (13), ``frac`` (2); ``clamp`` with both bounds, ``hardtanh`` and ``relu6``, ``log2``, ``log10``
and ``exp2`` (2 each), ``hypot`` (17), ``logaddexp`` (12), ``logaddexp2`` (14), ``xlogy`` (6), ``lerp`` (6). Each: its node count pinned, its values against torch (bit for bit where torch's
formula is exact; against float64 within the polynomial's bound for atan/atan2), its edge values
(NaN, +-inf, +-0) and the sign bits of its zeros, the dtypes torch takes, its gradient against
torch's, and its fusion with neighbours."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from hypothesis import given, settings
from hypothesis import strategies as st

import lazyfuse as lf
from programs import COMMON, scaled

DEVICES = ["cpu", "interpreter"]
FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
SPECIAL = [math.nan, -math.nan, 0.0, -0.0, math.inf, -math.inf, 1.0, -1.0, 0.5, -2.5, 3.0, -3.0, 2.9999998,
           -3.0000002, 6.0, 2.4142137, 0.41421357, 1e-30, -1e30, 1e-45]
F = lf.nn.functional

# name -> (lazyfuse call, torch call): one-input ops
UNARY = {
    "atan": (lf.atan, torch.atan),
    "sign": (lf.sign, torch.sign),
    "sgn": (lf.sgn, torch.sgn),
    "nan_to_num": (lf.nan_to_num, torch.nan_to_num),
    "nan_to_num(values)": (lambda x: lf.nan_to_num(x, nan=1.5, posinf=7.0, neginf=-1e30),
                           lambda x: torch.nan_to_num(x, nan=1.5, posinf=7.0, neginf=-1e30)),
    "leaky_relu": (F.leaky_relu, TF.leaky_relu),
    "leaky_relu(0.2)": (lambda x: F.leaky_relu(x, 0.2), lambda x: TF.leaky_relu(x, 0.2)),
    "hardsigmoid": (F.hardsigmoid, TF.hardsigmoid),
    "hardswish": (F.hardswish, TF.hardswish),
    "elu": (F.elu, TF.elu),
    "elu(0.5)": (lambda x: F.elu(x, 0.5), lambda x: TF.elu(x, 0.5)),
    "selu": (F.selu, TF.selu),
    "celu(2)": (lambda x: F.celu(x, 2.0), lambda x: TF.celu(x, 2.0)),
    "celu(-2)": (lambda x: F.celu(x, -2.0), lambda x: TF.celu(x, -2.0)),
    "softplus": (F.softplus, TF.softplus),
    "softplus(2, 5)": (lambda x: F.softplus(x, 2.0, 5.0), lambda x: TF.softplus(x, 2.0, 5.0)),
    "logsigmoid": (F.logsigmoid, TF.logsigmoid),
    "mish": (F.mish, TF.mish),
    "frac": (lf.frac, torch.frac),
    "round": (lf.round, torch.round),   # (one node before too; its zero gradient is now the op's rule)
    "expm1": (lf.expm1, torch.expm1),
    "log1p": (lf.log1p, torch.log1p),
    # one Op.CLAMP node, the bounds runtime scalars (two nodes before: maximum, then minimum)
    "clamp(-0.5, 2)": (lambda x: x.clamp(-0.5, 2.0), lambda x: x.clamp(-0.5, 2.0)),
    "clamp(2, -2)": (lambda x: lf.clamp(x, 2.0, -2.0), lambda x: torch.clamp(x, 2.0, -2.0)),   # (crossed: hi)
    "clip(nan, 1)": (lambda x: x.clip(math.nan, 1.0), lambda x: x.clip(math.nan, 1.0)),
    "hardtanh": (F.hardtanh, TF.hardtanh),
    "relu6": (F.relu6, TF.relu6),
    # one node each (log and a product, or a product and exp, before; four with a half type's casts)
    "log2": (lf.log2, torch.log2),
    "log10": (lf.log10, torch.log10),
    "exp2": (lf.exp2, torch.exp2),
    "erfc": (lf.erfc, torch.erfc),   # (1 - erf before: 0 for x >= 4)
}
BINARY = {"atan2": (lf.atan2, torch.atan2), "copysign": (lf.copysign, torch.copysign), "hypot": (lf.hypot, torch.hypot),
          "logaddexp": (lf.logaddexp, torch.logaddexp), "logaddexp2": (lf.logaddexp2, torch.logaddexp2),
          "xlogy": (lf.xlogy, torch.xlogy)}
ELU = {"elu", "elu(0.5)", "selu", "celu(2)", "celu(-2)"}
# a polynomial, not torch's libm: compared with float64 within a bound
SOFTPLUS = {"softplus", "softplus(2, 5)", "logsigmoid", "mish"}
NEAR_ZERO = {"expm1", "log1p"}   # were exp(x) - 1 and log(1 + x): 0 for x = 1e-10
BASES = {"log2", "log10", "exp2"}   # lf_logf/lf_expf and a factor: compared with float64 within a bound
APPROXIMATE = {"atan", "atan2", "erfc"} | ELU | SOFTPLUS | NEAR_ZERO | BASES


def _pairs(values):
    a = torch.tensor([x for x in values for _ in values], dtype=torch.float32)
    b = torch.tensor([y for _ in values for y in values], dtype=torch.float32)
    return a, b


def assert_same_values(got: torch.Tensor, want: torch.Tensor, msg=""):
    """Equal values, NaN where torch's is NaN, and zeros of the same sign."""
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, msg)
    g, w = got.double(), want.double()
    nan = w.isnan()
    assert torch.equal(g.isnan(), nan), (got, want, msg)
    assert torch.equal(g[~nan], w[~nan]), (got[~nan], want[~nan], msg)
    assert torch.equal(g[~nan].signbit(), w[~nan].signbit()), msg


def assert_close_to_float64(got: torch.Tensor, want64: torch.Tensor, ulps: float, msg=""):
    """``got`` within ``ulps`` units in the last place (of ``got``'s dtype) of the float64 value,
    the special values (NaN, infinities, signed zeros) exactly."""
    w = want64.to(got.dtype).double()
    g = got.double()
    special = w.isnan() | w.isinf() | (w == 0)
    assert_same_values(got[special], w[special].to(got.dtype), msg)
    ulp = torch.finfo(got.dtype).eps * want64[~special].abs().clamp_min(torch.finfo(got.dtype).tiny)
    err = ((g[~special] - want64[~special]).abs() / ulp).max().item() if (~special).any() else 0.0
    assert err <= ulps, (err, msg)


@pytest.mark.parametrize("name", sorted(UNARY) + sorted(BINARY))
def test_one_call_records_one_node(name):
    lf_fn = UNARY[name][0] if name in UNARY else BINARY[name][0]
    x = lf.tensor(np.linspace(-4, 4, 16, dtype=np.float32).reshape(4, 4))
    args = (x,) if name in UNARY else (x, x * 0.5 + 1.0)
    lf.sync()
    before = lf.stats().ops_recorded
    out = lf_fn(*args)
    assert lf.stats().ops_recorded - before == 1
    # the half types too: computed in float32 by the kernel, rounded once, no cast nodes
    h = [a.half() for a in args]
    lf.sync()
    before = lf.stats().ops_recorded
    out = lf_fn(*h)
    assert lf.stats().ops_recorded - before == 1
    assert out.dtype is lf.float16


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(set(UNARY) - APPROXIMATE))
def test_exact_unary_ops_match_torch_on_special_values(name, dtype, device):
    lf_fn, torch_fn = UNARY[name]
    xt = torch.tensor(SPECIAL * 2, dtype=torch.float32).to(dtype)
    got = lf_fn(lf.tensor(xt, device=device)).torch()
    assert_same_values(got, torch_fn(xt), name)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_copysign_matches_torch_on_every_pair_of_special_values(dtype, device):
    at, bt = (t.to(dtype) for t in _pairs(SPECIAL))
    got = lf.copysign(lf.tensor(at, device=device), lf.tensor(bt, device=device)).torch()
    want = torch.copysign(at, bt)
    assert_same_values(got, want)
    # a NaN's sign bit counts, as C's copysign (a negated NaN is negative); lazyfuse's bfloat16
    # stores every NaN as 0x7fc0 (tests/test_native_kernels.py), so its NaNs are compared as NaN only
    if dtype is not torch.bfloat16:
        assert torch.equal(got.double().signbit(), want.double().signbit())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_atan2_and_atan_on_special_values_and_random_ones_against_float64(dtype, device):
    at, bt = (t.to(dtype) for t in _pairs(SPECIAL))
    ulps = 3.0 if dtype in (torch.float32, torch.float64) else 1.0   # (half types round once: within 1 of theirs)
    # the polynomial is cephes' float32 atanf: float64 on the Triton path keeps its float32 accuracy
    ulps64 = ulps if device == "cpu" else 3.0 * 2 ** 29
    got = lf.atan2(lf.tensor(at, device=device), lf.tensor(bt, device=device)).torch()
    assert_close_to_float64(got, torch.atan2(at.double(), bt.double()), ulps64 if dtype == torch.float64 else ulps)
    rng = np.random.default_rng(1)
    y = torch.from_numpy(rng.standard_normal(4096) * 10.0 ** rng.integers(-6, 6, 4096)).float().to(dtype)
    x = torch.from_numpy(rng.standard_normal(4096) * 10.0 ** rng.integers(-6, 6, 4096)).float().to(dtype)
    ly, lx = lf.tensor(y, device=device), lf.tensor(x, device=device)
    bound = ulps64 if dtype == torch.float64 else ulps
    assert_close_to_float64(lf.atan2(ly, lx).torch(), torch.atan2(y.double(), x.double()), bound, "atan2")
    assert_close_to_float64(lf.atan(ly).torch(), torch.atan(y.double()), bound, "atan")
    assert_close_to_float64(lf.atan(lf.tensor(at, device=device)).torch(), torch.atan(at.double()), bound, "atan")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(ELU))
def test_the_elu_family_against_float64(name, dtype, device):
    """torch's elu kernel, ``expm1(x * input_scale) * negcoef``: within 2 ulps of float64 (c_math.h's
    lf_expm1f; no ``exp(x) - 1`` cancellation near 0), the half types rounded once as torch's."""
    lf_fn, torch_fn = UNARY[name]
    rng = np.random.default_rng(0)
    values = np.concatenate([SPECIAL, [-1e-6, -1e-30, -30.0, -100.0, 88.0],
                             rng.standard_normal(2000) * 10.0 ** rng.integers(-8, 2, 2000)])
    xt = torch.from_numpy(values).float().to(dtype)
    got = lf_fn(lf.tensor(xt, device=device)).torch()
    if dtype in (torch.float16, torch.bfloat16):
        assert_same_values(got[~torch_fn(xt).isfinite()], torch_fn(xt)[~torch_fn(xt).isfinite()])
        torch.testing.assert_close(got, torch_fn(xt), equal_nan=True)
    else:
        assert_close_to_float64(got, torch_fn(xt.double()), 2.0, name)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(NEAR_ZERO))
def test_expm1_and_log1p_keep_their_digits_near_zero(name, dtype, device):
    """``exp(x) - 1`` and ``log(1 + x)`` cancel near 0 (``expm1(1e-10)`` was 0, ``expm1(1e-5)`` 1.3e-4
    off relatively): one op each now (c_math.h's lf_expm1f and Goldberg's lf_log1pf), within 3 ulps of
    float64 from 1e-12 to e^88, the half types rounded once; special values as float64 (torch's own
    float32 log1p flushes a denormal input to 0)."""
    lf_fn, torch_fn = UNARY[name]
    rng = np.random.default_rng(0)
    values = np.concatenate([SPECIAL, [1e-10, -1e-8, 1e-5, -3e-4, 88.0, 89.0, -30.0, -100.0, -0.999999, -1.0, -1.5],
                             rng.standard_normal(4000) * 10.0 ** rng.integers(-12, 2, 4000)])
    xt = torch.from_numpy(values).float().to(dtype)
    got = lf_fn(lf.tensor(xt, device=device)).torch()
    assert_close_to_float64(got, torch_fn(xt.double()), 3.0 if dtype in (torch.float32, torch.float64) else 1.0, name)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", sorted(SOFTPLUS))
def test_the_softplus_family_against_float64(name, dtype, device):
    """``max(x, 0) + log(1 + e^-|x|)`` (the compositions' formula, kept: a log1p would cost the
    kernel a division): within 4 ulps of float64 where the result is not far below ``max(x, 0)``'s
    scale, and within 2^-24 of it absolutely everywhere; libm's log1p in float64 C. Mish's Triton
    float64 tanh is float32-accurate near 0."""
    lf_fn, torch_fn = UNARY[name]
    rng = np.random.default_rng(0)
    values = np.concatenate([SPECIAL, [-1e-6, 20.0, 20.000002, -16.0, -90.0, 88.0],
                             rng.standard_normal(2000) * 10.0 ** rng.integers(-6, 2, 2000)])
    xt = torch.from_numpy(values).float().to(dtype)
    got, want = lf_fn(lf.tensor(xt, device=device)).torch().double(), torch_fn(xt.double())
    finite = want.isfinite()
    assert_same_values(got[~finite], want[~finite].to(dtype).double(), name)
    eps = torch.finfo(dtype).eps
    scale = xt.double().abs().clamp_min(1.0)[finite]
    assert ((got[finite] - want[finite]).abs() <= 4 * eps * want[finite].abs() + eps * scale * 2).all(), name
    for dt in (torch.float16, torch.bfloat16):   # (computed in float32, rounded once, as torch)
        x16 = xt.to(dt)
        torch.testing.assert_close(lf_fn(lf.tensor(x16, device=device)).torch(), torch_fn(x16), equal_nan=True)


@pytest.mark.parametrize("device", DEVICES)
def test_integer_and_mixed_inputs_promote_as_torch(device):
    it = torch.tensor([[-3, 0, 2], [7, -1, 0]])
    ft = torch.tensor([[0.5, -0.0, -2.0], [1.0, 3.0, -1.0]], dtype=torch.float16)
    i, f = lf.tensor(it, device=device), lf.tensor(ft, device=device)
    for got, want in ((lf.atan2(i, i.flip(0)), torch.atan2(it, it.flip(0))), (lf.atan(i), torch.atan(it)),
                      (lf.copysign(i, f), torch.copysign(it, ft)), (lf.copysign(f, -1.0), torch.copysign(ft, -1.0)),
                      (lf.copysign(f, i), torch.copysign(ft, it)), (lf.atan2(f, f.float()), torch.atan2(ft, ft.float())),
                      (lf.sign(i), torch.sign(it)), (lf.sign(i.int()), torch.sign(it.int())),
                      (lf.sign(i > 0), torch.sign(it > 0)), (lf.nan_to_num(i), torch.nan_to_num(it))):
        got = got.torch()
        assert got.dtype == want.dtype
        torch.testing.assert_close(got, want, rtol=2e-7, atol=0)


def test_activations_refuse_integer_tensors_as_torch():
    for fn in (F.leaky_relu, F.hardsigmoid, F.hardswish, F.elu, F.selu, F.celu, F.softplus, F.logsigmoid, F.mish):
        with pytest.raises(lf.DTypeError, match="floating"):
            fn(lf.tensor([1, -2]))


def _grads(fn, *inputs):
    xs = [t.clone().requires_grad_(True) for t in inputs]
    fn(*xs).backward(torch.arange(1.0, xs[0].numel() + 1).reshape(xs[0].shape).to(xs[0].dtype))
    return [t.grad for t in xs]


def _lf_grads(fn, *inputs):
    xs = [lf.tensor(t.numpy()).requires_grad_() for t in inputs]
    g = lf.tensor(np.arange(1.0, xs[0].numel() + 1).reshape(xs[0].shape).astype(np.float64))
    fn(*xs).backward(g.to(xs[0].dtype))
    return [x.grad.torch() if x.grad is not None else None for x in xs]


@pytest.mark.parametrize("name", sorted(UNARY) + sorted(BINARY))
def test_gradients_match_torch(name):
    # float64, the activations' boundaries included (torch's: hardswish's slope is 0 at -3 and 1 at 3)
    xt = torch.tensor([-4.0, -3.0, -2.0, -0.5, -0.0, 0.0, 0.25, 2.0, 3.0, 5.0], dtype=torch.float64)
    if name in UNARY:
        lf_fn, torch_fn = UNARY[name]
        inputs = (torch.cat([xt, torch.tensor([math.inf, -math.inf, math.nan], dtype=torch.float64)])
                  if name.startswith("nan_to_num") else xt,)
    else:
        lf_fn, torch_fn = BINARY[name]
        inputs = (xt, xt.flip(0) + 0.5)
    got, want = _lf_grads(lf_fn, *inputs), _grads(torch_fn, *inputs)
    # (torch's hardsigmoid backward multiplies by 1/6 rounded to float32 in every dtype; lazyfuse divides by 6)
    rtol = 1e-7 if name == "hardsigmoid" else 1e-12
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=rtol, atol=1e-12, equal_nan=True)


def test_the_one_node_ops_fuse_with_their_neighbours_into_one_kernel():
    rng = np.random.default_rng(0)
    xt, yt = (torch.from_numpy(rng.standard_normal((8, 16)).astype(np.float32)) for _ in range(2))
    x, y = lf.tensor(xt), lf.tensor(yt)
    lf.sync()
    before = lf.stats().kernels_launched
    out = (lf.copysign(lf.atan2(x * 2, y), y).sign() + F.hardswish(x) - F.leaky_relu(F.hardsigmoid(y), 0.1)
           + lf.nan_to_num(x / y)).sum(-1)
    got = out.torch()
    assert lf.stats().kernels_launched - before == 1
    want = (torch.copysign(torch.atan2(xt * 2, yt), yt).sign() + TF.hardswish(xt)
            - TF.leaky_relu(TF.hardsigmoid(yt), 0.1) + torch.nan_to_num(xt / yt)).sum(-1)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_nan_to_num_values_are_runtime_scalars_one_plan_for_all():
    x = lf.tensor([math.nan, math.inf, -math.inf, 1.0])
    lf.nan_to_num(x, 1.0, 2.0, 3.0).numpy()
    misses = lf.stats().fusion_cache_misses
    assert lf.nan_to_num(x, 4.0, 5.0, -6.0).tolist() == [4.0, 5.0, -6.0, 1.0]
    assert lf.stats().fusion_cache_misses == misses


@pytest.mark.parametrize("device", DEVICES)
def test_clamp_with_tensor_bounds_is_one_node_with_torchs_values_and_gradients(device):
    rng = np.random.default_rng(0)
    xt = torch.from_numpy(rng.standard_normal((6, 5))).round(decimals=1)
    lot = torch.from_numpy(rng.standard_normal(5)).round(decimals=1) - 0.5
    hit = torch.from_numpy(rng.standard_normal((6, 1))).round(decimals=1) + 0.5   # (some rows cross lo)
    lot[0], hit[0] = xt[0, 0], xt[0, 0]   # (ties with x: torch's gradient goes to x)
    x, lo, hi = (lf.tensor(t, device=device) for t in (xt, lot, hit))
    lf.sync()
    before = lf.stats(device).ops_recorded
    got = x.clamp(lo, hi)
    assert lf.stats(device).ops_recorded - before == 1
    assert torch.equal(got.torch(), torch.clamp(xt, lot, hit))
    assert torch.equal(lf.clamp(x.float(), lo.float(), 0.25).torch(), torch.clamp(xt.float(), lot.float(), torch.tensor(0.25)))
    want = _grads(lambda a, b, c: torch.clamp(a, b, c), xt, lot, hit)
    got = _lf_grads(lambda a, b, c: a.clamp(b, c), xt, lot, hit)
    for g, w in zip(got, want):
        assert torch.equal(g, w)


@pytest.mark.parametrize("device", DEVICES)
def test_clamp_of_integers_promotes_as_torch(device):
    it = torch.tensor([[-5, 0, 3], [9, 7, -1]])
    for lo, hi in ((0, 6), (1.5, 2.5), (7, 2), (-1, 10 ** 12)):
        want = torch.clamp(it, lo, hi)
        got = lf.tensor(it, device=device).clamp(lo, hi).torch()
        assert got.dtype == want.dtype and torch.equal(got, want), (lo, hi)
    assert torch.equal(F.relu6(lf.tensor(it.int(), device=device)).torch(), TF.relu6(it.int()))


def test_clamp_bounds_are_runtime_scalars_one_plan_for_all():
    x = lf.tensor(np.linspace(-8, 8, 33, dtype=np.float32))
    x.clamp(-1.0, 1.0).numpy()
    misses = lf.stats().fusion_cache_misses
    for lo, hi in ((-2.0, 3.0), (0.0, 6.0)):
        assert torch.equal(x.clamp(lo, hi).torch(), x.torch().clamp(lo, hi))
    assert torch.equal(F.hardtanh(x, -0.5, 0.5).torch(), TF.hardtanh(x.torch(), -0.5, 0.5))
    assert lf.stats().fusion_cache_misses == misses


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(BASES))
def test_log2_log10_exp2_against_float64(name, dtype, device):
    """Within 3 ulps of float64 (float32 C: lf_logf and the factor rounded to float, lf_exp2f;
    float64 C: libm's log2/log10/exp2; Triton: tl.log2, tl.exp2), the half types rounded once;
    special values and integer inputs as torch's (exp2 was e^(x ln 2): 18 ulps at x = 100)."""
    lf_fn, torch_fn = UNARY[name]
    rng = np.random.default_rng(0)
    if name == "exp2":
        values = np.concatenate([SPECIAL, [127.5, 128.0, -126.0, -140.0, 15.9, -24.0], rng.uniform(-60, 60, 2000)])
    else:
        values = np.concatenate([SPECIAL, [2.0 ** -126, 1024.0, 1e-3], np.abs(rng.standard_normal(2000))
                                 * 10.0 ** rng.integers(-30, 30, 2000)])
    xt = torch.from_numpy(values).to(dtype)
    got = lf_fn(lf.tensor(xt, device=device)).torch()
    ulps = 3.0 if dtype in (torch.float32, torch.float64) else 1.0
    want = torch_fn(xt.double())
    if dtype == torch.float32 and name == "exp2":   # (float32 denormal results: within 1 of the smallest)
        denormal = want.abs() < torch.finfo(torch.float32).tiny
        assert (got[denormal].double() - want[denormal]).abs().max() <= 2 * 2.0 ** -149
        got, want = got[~denormal], want[~denormal]
    assert_close_to_float64(got, want, ulps, name)
    it = torch.tensor([0, 1, 2, 8, 100])
    torch.testing.assert_close(lf_fn(lf.tensor(it, device=device)).torch(), torch_fn(it))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_hypot_against_float64_without_overflow(dtype, device):
    """One node: float32 (and the half types) sum the exact float64 squares and round once, so
    within 1 ulp of float64 and no overflow (``hypot(1e20, 1e20)``, ref7's find); libm's in float64
    C, ``m sqrt(1 + (n/m)^2)`` on Triton's float64 (3 ulps); inf beside a NaN, as C's hypot."""
    at, bt = (t.to(dtype) for t in _pairs(SPECIAL + [1e20, -1e20, 3e38, 65504.0, 4.0]))
    rng = np.random.default_rng(2)
    x, y = (torch.from_numpy(rng.standard_normal(4000) * 10.0 ** rng.integers(-20, 20, 4000)).to(dtype)
            for _ in range(2))
    ulps = 3.0 if dtype == torch.float64 and device != "cpu" else 1.0
    for a, b in ((at, bt), (x, y)):
        got = lf.hypot(lf.tensor(a, device=device), lf.tensor(b, device=device)).torch()
        assert_close_to_float64(got, torch.hypot(a.double(), b.double()), ulps)
    assert torch.equal(lf.hypot(lf.tensor([1e20]), lf.tensor([1e20])).torch(), torch.hypot(torch.tensor([1e20]),
                                                                                         torch.tensor([1e20])))
    # integer and mixed operands promote as torch's (an integer pair is refused, as torch)
    it, ft = torch.tensor([3, 0, -5]), torch.tensor([4.0, -0.0, 12.0]).to(dtype)
    torch.testing.assert_close(lf.hypot(lf.tensor(it, device=device), lf.tensor(ft, device=device)).torch(),
                               torch.hypot(it, ft))
    with pytest.raises(lf.DTypeError):
        lf.hypot(lf.tensor(it), lf.tensor(it))


def test_hypot_gradient_at_the_origin_and_infinity_is_torchs():
    """torch's hypot backward, ``g * a / out``: NaN at (0, 0) and beside an infinity, as torch's."""
    at = torch.tensor([0.0, -0.0, 3.0, math.inf, 1e200], dtype=torch.float64)
    bt = torch.tensor([0.0, 0.0, -4.0, 1.0, 1e200], dtype=torch.float64)
    got, want = _lf_grads(lf.hypot, at, bt), _grads(torch.hypot, at, bt)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-15, atol=0, equal_nan=True)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", ["logaddexp", "logaddexp2"])
def test_logaddexp_against_float64(name, dtype, device):
    """One node, the composition's formula: ``a`` plus the log of 2 where equal (``logaddexp(-inf, -inf)``
    is -inf, ``(inf, inf)`` inf), NaN propagating; elsewhere within 4 ulps of float64 plus 2 eps of the
    larger magnitude (the log1p term's rounding near a zero result), the half types rounded once."""
    lf_fn, torch_fn = BINARY[name]
    at, bt = (t.to(dtype) for t in _pairs(SPECIAL + [88.0, -104.0, 20.0]))
    rng = np.random.default_rng(3)
    x, y = (torch.from_numpy(rng.standard_normal(4000) * 10.0 ** rng.integers(-3, 3, 4000)).to(dtype)
            for _ in range(2))
    eps = torch.finfo(dtype).eps
    for a, b in ((at, bt), (x, y)):
        got = lf_fn(lf.tensor(a, device=device), lf.tensor(b, device=device)).torch().double()
        want = torch_fn(a.double(), b.double())
        finite = want.isfinite()
        assert_same_values(got[~finite], want[~finite].to(dtype).double())
        scale = torch.maximum(a.double().abs(), b.double().abs()).clamp_min(1.0)[finite]
        assert ((got[finite] - want[finite]).abs() <= 4 * eps * want[finite].abs() + 2 * eps * scale).all()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_xlogy_special_cases_and_values_against_float64(dtype, device):
    """torch's special cases exactly (``xlogy(0, nan)`` NaN, ``xlogy(0, y)`` 0 for any other y, 0 and
    inf included, ``x log 0`` an infinity of x's sign); elsewhere within 3 ulps of float64 (lf_logf's
    ulp and the product's rounding), the half types computed in float32 and rounded once."""
    at, bt = (t.to(dtype) for t in _pairs(SPECIAL))
    rng = np.random.default_rng(4)
    x = torch.from_numpy(rng.standard_normal(4000) * 10.0 ** rng.integers(-3, 3, 4000)).to(dtype)
    y = torch.from_numpy(rng.random(4000) * 10.0 ** rng.integers(-3, 3, 4000)).to(dtype)
    for a, b in ((at, bt), (x, y)):
        got = lf.xlogy(lf.tensor(a, device=device), lf.tensor(b, device=device)).torch()
        assert_close_to_float64(got, torch.xlogy(a.double(), b.double()), 3.0)
    zeros = torch.zeros(4, dtype=dtype)
    ys = torch.tensor([math.nan, 0.0, math.inf, -1.0], dtype=dtype)
    got = lf.xlogy(lf.tensor(zeros, device=device), lf.tensor(ys, device=device)).torch()
    assert_same_values(got, torch.xlogy(zeros, ys))
    assert got.isnan().tolist() == [True, False, False, False]


@pytest.mark.parametrize("device", DEVICES)
def test_xlogy_promotes_and_takes_numbers_as_torch(device):
    it, ft = torch.tensor([0, 2, -3]), torch.tensor([0.5, 3.0, math.nan])
    i, f = lf.tensor(it, device=device), lf.tensor(ft, device=device)
    for got, want in ((lf.xlogy(i, i), torch.xlogy(it, it)), (lf.xlogy(i, 2.5), torch.xlogy(it, 2.5)),
                      (lf.xlogy(2, f), torch.xlogy(2, ft)), (lf.xlogy(i, f.double()), torch.xlogy(it, ft.double())),
                      (lf.xlogy(f.half(), f), torch.xlogy(ft.half(), ft))):
        got = got.torch()
        assert got.dtype == want.dtype
        torch.testing.assert_close(got, want, equal_nan=True)


def test_xlogy_gradient_is_torchs_at_zero_and_nan():
    """torch's ``xlogy(g, y)`` for x (log y at x = 0 too, NaN where y is NaN), but 0 where x is 0 and
    y <= 0; ``g x / y`` for y (NaN at 0 / 0)."""
    xt = torch.tensor([0.0, 0.0, 2.0, -1.5, 0.0, 3.0, 0.0, 0.0, -0.0, 2.0], dtype=torch.float64)
    yt = torch.tensor([math.nan, 0.0, 0.5, 4.0, 2.0, math.inf, -1.0, math.inf, 3.0, -1.0], dtype=torch.float64)
    for g, w in zip(_lf_grads(lf.xlogy, xt, yt), _grads(torch.xlogy, xt, yt)):
        torch.testing.assert_close(g, w, rtol=1e-15, atol=0, equal_nan=True)


def _lerp_inputs(dtype):
    rng = np.random.default_rng(5)
    x, end = (torch.from_numpy(rng.standard_normal(2000) * 10.0 ** rng.integers(-3, 3, 2000)).to(dtype)
              for _ in range(2))
    weight = torch.from_numpy(rng.uniform(-1.5, 2.5, 2000)).to(dtype)
    weight[:8] = torch.tensor([0.0, 1.0, 0.5, -0.5, 0.4999, 0.5001, math.nan, math.inf])
    return x, end, weight


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_lerp_is_one_node_with_torchs_two_formulas(dtype, device):
    """One node for a tensor weight and a scalar one (a runtime scalar: one plan for every weight);
    torch's formula on each side of |w| = 0.5, each exact at its end (lerp(x, end, 0) is x and
    lerp(x, end, 1) is end, bit for bit), within 2 ulps of float64 (of the larger of |x| and |end|:
    the rounding of end - x) elsewhere; the half types computed in float32 and rounded once."""
    xt, et, wt = _lerp_inputs(dtype)
    x, end, weight = (lf.tensor(t, device=device) for t in (xt, et, wt))
    lf.sync(device)
    before = lf.stats(device).ops_recorded
    results = [lf.lerp(x, end, weight)] + [x.lerp(end, w) for w in (0.0, 1.0, 0.3, -0.7, 0.5, 1.8)]
    assert lf.stats(device).ops_recorded - before == 7
    lf.sync(device)
    lf.lerp(x, end, 0.25).torch()
    misses = lf.stats(device).fusion_cache_misses
    lf.lerp(x, end, -2.0).torch()
    assert lf.stats(device).fusion_cache_misses == misses   # (one plan for all the scalar weights)
    assert torch.equal(results[1].torch(), xt) and torch.equal(results[2].torch(), et)
    scale = torch.maximum(xt.double().abs(), et.double().abs()) * torch.finfo(dtype).eps
    for got, w in zip(results, [wt, 0.0, 1.0, 0.3, -0.7, 0.5, 1.8]):
        got = got.torch()
        want = torch.lerp(xt.double(), et.double(), w.double() if isinstance(w, torch.Tensor) else w)
        assert got.dtype == dtype
        nan = want.isnan() | want.isinf()
        assert_same_values(got[nan], want[nan].to(dtype))
        bound = 2 * scale * (1.0 + (w.double().abs() if isinstance(w, torch.Tensor) else abs(w)))
        assert ((got.double() - want)[~nan].abs() <= bound[~nan]).all(), w


def test_lerp_gradients_match_torch_for_tensor_and_scalar_weights():
    xt, et, wt = (t.double() for t in _lerp_inputs(torch.float64))
    wt[6:8] = 0.75   # (no NaN or inf weight: their gradients are NaN in both, tested no further)
    got, want = _lf_grads(lf.lerp, xt, et, wt), _grads(torch.lerp, xt, et, wt)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=1e-15, atol=0)
    for scalar in (0.3, 1.7):
        got = _lf_grads(lambda a, b: lf.lerp(a, b, scalar), xt, et)
        want = _grads(lambda a, b: torch.lerp(a, b, scalar), xt, et)
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, rtol=1e-15, atol=0)


def test_lerp_refuses_what_torch_refuses():
    f32 = lf.tensor([1.0, 2.0])
    for args in ((f32, f32.double(), 0.5), (f32, f32, f32.double()), (lf.tensor([1, 2]), lf.tensor([3, 4]), 0.5)):
        with pytest.raises(RuntimeError):
            torch.lerp(*(a.torch() if isinstance(a, lf.Tensor) else a for a in args))
        with pytest.raises(lf.DTypeError, match="lerp"):
            lf.lerp(*args)
    # what torch takes: a 0-d weight of another float dtype, the result x's dtype
    got = lf.lerp(f32.half(), f32.half(), lf.tensor(0.25)).torch()
    assert torch.equal(got, torch.lerp(f32.torch().half(), f32.torch().half(), torch.tensor(0.25)))


@pytest.mark.parametrize("device", DEVICES)
def test_lerp_xlogy_logaddexp2_fuse_into_one_kernel(device):
    rng = np.random.default_rng(6)
    xt, yt = (torch.from_numpy(rng.standard_normal((8, 16)).astype(np.float32)) for _ in range(2))
    x, y = lf.tensor(xt, device=device), lf.tensor(yt, device=device)
    lf.sync(device)
    before = lf.stats(device).kernels_launched
    got = (lf.logaddexp2(lf.lerp(x, y, 0.3), lf.xlogy(x, y.abs())) + lf.lerp(y, x, x.sigmoid())).sum(-1).torch()
    assert lf.stats(device).kernels_launched - before == 1
    want = (torch.logaddexp2(torch.lerp(xt, yt, 0.3), torch.xlogy(xt, yt.abs()))
            + torch.lerp(yt, xt, xt.sigmoid())).sum(-1)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


_FLOAT32S = st.floats(width=32, allow_nan=True, allow_infinity=True, allow_subnormal=True)


@settings(COMMON, max_examples=scaled(60))
@given(xs=st.lists(st.tuples(_FLOAT32S, _FLOAT32S, st.floats(-3.0, 3.0, width=32)), min_size=1, max_size=24))
def test_xlogy_and_lerp_against_float64_on_any_float32s(xs):
    """Randomised: any float32 operands (NaN, infinities, subnormals, signed zeros), ``xlogy`` within 3
    ulps of float64 and its special cases exact, ``lerp`` within ``test_lerp_is_one_node...``'s bound
    of float64 (its overflows to inf/NaN where float64's result does not fit float32 aside)."""
    at, bt, wt = (torch.tensor(col, dtype=torch.float32) for col in zip(*xs))
    a, b, w = lf.tensor(at), lf.tensor(bt), lf.tensor(wt)
    assert_close_to_float64(lf.xlogy(a, b).torch(), torch.xlogy(at.double(), bt.double()), 3.0)
    got = lf.lerp(a, b, w).torch().double()
    want = torch.lerp(at.double(), bt.double(), wt.double())
    fits = want.abs() <= torch.finfo(torch.float32).max / 4   # (float32's end - x itself may overflow beyond)
    assert_same_values(got[want.isnan()], want[want.isnan()])
    scale = torch.maximum(at.double().abs(), bt.double().abs()) * torch.finfo(torch.float32).eps
    # end - x is up to 2 max(|x|, |end|), rounded to half an ulp of that, then scaled by |1 - w| <= 1 + |w|;
    # the product's and the sum's own roundings add as much again (torch's float32 lerp meets it too)
    bound = 4 * scale * (1.0 + wt.double().abs()) + torch.finfo(torch.float32).tiny * 4   # (+ subnormal steps)
    assert ((got - want).abs() <= bound)[fits & want.isfinite()].all()


# lf_erfcf (c_math.h) and the Triton prelude's lf_erfc32 against float64, relative wherever erfc is
# a normal float32 (measured: 3.0e-7 cpu, 5.9e-7 interpreter; torch's own float32: 8.9e-8)
ERFC_REL = {"cpu": 4e-7, "interpreter": 8e-7}
# float64 erfc in ulps of torch's (libm's erfc on cpu; the prelude's lf_erfc64 on the interpreter,
# measured 2.19 on [-6, 26])
ERFC64_ULPS = {"cpu": 2.0, "interpreter": 2.5}


@pytest.mark.parametrize("device", DEVICES)
def test_erfc_keeps_its_positive_tail_against_float64(device):
    """erfc is computed as erfc, not 1 - erf (which is 0 from x = 4 on, where erfc is 1.5e-8): a
    dense scan of [-6, 10.1] in float32 within ``ERFC_REL`` of float64, torch's special values
    exactly, float16 within one rounding of float64, and float64 within ``ERFC64_ULPS`` of torch's out
    to x = 26 (erfc 5.7e-296), its special values exactly."""
    x = torch.linspace(-6.0, 10.1, 400001, dtype=torch.float32)
    ref = torch.erfc(x.double())
    got = lf.erfc(lf.tensor(x, device=device)).torch().double()
    normal = ref >= torch.finfo(torch.float32).tiny
    assert ((got - ref).abs() / ref)[normal].max().item() <= ERFC_REL[device]
    assert (got - ref).abs().max().item() <= ERFC_REL[device]
    specials = torch.tensor([math.nan, math.inf, -math.inf, 0.0, -0.0, 10.25, 30.0, -30.0, 1e-30])
    assert_same_values(lf.erfc(lf.tensor(specials, device=device)).torch(), torch.erfc(specials))
    h = torch.linspace(-4.0, 4.0, 2001, dtype=torch.float16)
    assert_close_to_float64(lf.erfc(lf.tensor(h, device=device)).torch(), torch.erfc(h.double()), 1.0)
    d = torch.linspace(-6.0, 26.0, 20001, dtype=torch.float64)
    assert_close_to_float64(lf.erfc(lf.tensor(d, device=device)).torch(), torch.erfc(d), ERFC64_ULPS[device])
    d = torch.cat([specials.double(), torch.tensor([27.0, 27.5, 28.0, 0.5, -0.5, 1.0, 2.0, 4.0, 8.0, 16.0],
                                                   dtype=torch.float64)])
    assert_close_to_float64(lf.erfc(lf.tensor(d, device=device)).torch(), torch.erfc(d), ERFC64_ULPS[device])


@pytest.mark.parametrize("device", DEVICES)
def test_erfc_gradient_is_torchs(device):
    xt = torch.linspace(-3.0, 3.0, 37, dtype=torch.float64, requires_grad=True)
    x = lf.tensor(xt.detach(), device=device, requires_grad=True)
    (lf.erfc(x) * lf.tensor(torch.arange(37.0, dtype=torch.float64), device=device)).sum().backward()
    (torch.erfc(xt) * torch.arange(37.0, dtype=torch.float64)).sum().backward()
    torch.testing.assert_close(x.grad.torch(), xt.grad, rtol=1e-12, atol=1e-12)
