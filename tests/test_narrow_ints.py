"""uint8, int8 and int16 as torch has them: its type promotion (a table over every dtype pair,
dimensioned, 0-d and scalar operands), wraparound arithmetic truncated to the dtype at each op
(C computes on them in int, the Triton printer in int32), casts, reductions, creation, interop
and indexing, differential against torch eager on ``cpu`` and ``interpreter``."""
from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import lazyfuse as lf
from lazyfuse.ir import dtypes as dt
from programs import COMMON, scaled

DEVICES = ["cpu", "interpreter", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="the cuda device needs a GPU"))]
NARROW = [torch.uint8, torch.int8, torch.int16]
EVERY = [d.torch for d in dt.ALL]


def same(got: lf.Tensor, want: torch.Tensor) -> None:
    g = got.torch()
    assert g.dtype == want.dtype, (g.dtype, want.dtype)
    assert torch.equal(g, want), (g, want)


def full_range(dtype, n=64, seed=0) -> torch.Tensor:
    """``n`` values over all of ``dtype``'s range, its extremes and 0 and +-1 included."""
    info = torch.iinfo(dtype)
    edges = torch.tensor([info.min, info.max, 0, 1, info.max - 1, info.min + 1] + ([-1] if info.min else []))
    rest = torch.randint(max(info.min, -2 ** 62), min(info.max, 2 ** 62), (n - len(edges),),
                         generator=torch.Generator().manual_seed(seed))
    return torch.cat([edges, rest]).to(dtype)


# -- promotion --------------------------------------------------------------------------------------
@pytest.mark.parametrize("a, b", list(itertools.product(EVERY, EVERY)), ids=str)
def test_promotion_matches_torch_for_every_pair_of_dtypes(a, b):
    assert dt.promote_types(dt.from_torch(a), dt.from_torch(b)).torch == torch.promote_types(a, b)
    for sa, sb in (((2,), (2,)), ((2,), ()), ((), (2,)), ((), ())):
        ta, tb = torch.ones(sa, dtype=a), torch.ones(sb, dtype=b)
        want = ta + tb if torch.bool not in (a, b) else ta * tb
        got = lf.tensor(ta) + lf.tensor(tb) if torch.bool not in (a, b) else lf.tensor(ta) * lf.tensor(tb)
        assert got.dtype.torch == want.dtype == torch.result_type(ta, tb), (sa, sb)


@pytest.mark.parametrize("dtype", NARROW, ids=str)
@pytest.mark.parametrize("scalar", [True, 3, -1, 300, 2.5])
def test_a_python_scalar_keeps_the_tensors_dtype_unless_it_is_a_float(dtype, scalar):
    t = full_range(dtype, 16)
    ops = (lambda x: x + scalar, lambda x: scalar * x) + (() if scalar is True else (lambda x: x - scalar,))
    for op in ops:
        same(op(lf.tensor(t)), op(t))


@pytest.mark.parametrize("dtype", NARROW, ids=str)
def test_division_gives_float32_and_sums_int64_unless_dtype_is_given(dtype):
    t = full_range(dtype, 32)
    x = lf.tensor(t)
    torch.testing.assert_close((x / 3).torch(), t / 3, rtol=0, atol=0)
    torch.testing.assert_close((x / x.clamp(min=1)).torch(), t / t.clamp(min=1), rtol=0, atol=0)
    same(x.sum(), t.sum())
    same(x.prod(), t.prod())
    same(x.cumsum(0), t.cumsum(0))
    same(x.cumprod(0), t.cumprod(0))
    same(x.sum(dtype=dtype), t.sum(dtype=dtype))   # (wrapped, in the dtype asked for)
    same(x.sum(dtype=torch.int16) // 3, t.sum(dtype=torch.int16) // 3)   # truncated before the next op


# -- arithmetic (differential) ----------------------------------------------------------------------
UNARY = {
    "neg": lambda x: -x, "abs": lambda x: x.abs(), "~": lambda x: ~x, "+1": lambda x: x + 1, "-1": lambda x: x - 1,
    "*x": lambda x: x * x, "*3": lambda x: x * 3, "<<1": lambda x: x << 1, ">>2": lambda x: x >> 2,
    "clamp": lambda x: x.clamp(-3, 100), "**2": lambda x: x ** 2, "//7": lambda x: x // 7, "%-5": lambda x: x % -5,
    "//-1": lambda x: x // -1, "fmod": lambda x: x.fmod(3), "sign": lambda x: x.sign(),
}
BINARY = {
    "+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y, "&": lambda x, y: x & y,
    "|": lambda x, y: x | y, "^": lambda x, y: x ^ y, "max": lambda x, y: x.maximum(y),
    "min": lambda x, y: x.minimum(y), "where": lambda x, y: x.where(x > y, y),
    # (divisors made non-zero: a zero divisor raises, test_integer_division_by_zero_raises)
    "//": lambda x, y: x // (y | 1), "%": lambda x, y: x % (y | 1),
}


@pytest.mark.parametrize("device", DEVICES)
@settings(COMMON, max_examples=scaled(25))
@given(data=st.data())
def test_chains_of_ops_wrap_as_torch(device, data):
    """A fused chain of ops on one narrow dtype (or two, promoted) over its whole range."""
    a = data.draw(st.sampled_from(NARROW), "dtype")
    b = data.draw(st.sampled_from(NARROW), "other dtype")
    seed = data.draw(st.integers(0, 1000), "seed")
    tx, ty = full_range(a, 48, seed), full_range(b, 48, seed + 1)
    steps = data.draw(st.lists(st.sampled_from(sorted(UNARY) + sorted(BINARY)), min_size=1, max_size=4), "ops")

    def run(x, y):
        for s in steps:
            x = UNARY[s](x) if s in UNARY else BINARY[s](x, y)
        return x
    same(run(lf.tensor(tx, device=device), lf.tensor(ty, device=device)), run(tx, ty))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", NARROW, ids=str)
def test_reductions_comparisons_and_extremes(device, dtype):
    t = full_range(dtype, 60).reshape(6, 10)
    x = lf.tensor(t, device=device)
    for op in (lambda v: v.max(), lambda v: v.amin(1), lambda v: v.argmax(), lambda v: v.argmin(0),
               lambda v: v.max(1)[0], lambda v: v.sum(1), lambda v: v < 5, lambda v: v == v.flip(0),
               lambda v: (v + v).amax(0), lambda v: (v * 3).sum(0)):
        same(op(x), op(t))


def test_wraparound_examples_from_the_readme():
    same(lf.tensor([0], dtype=lf.uint8) - 1, torch.tensor([255], dtype=torch.uint8))
    same(lf.tensor([127], dtype=lf.int8) + 1, torch.tensor([-128], dtype=torch.int8))
    same(lf.tensor([-128], dtype=lf.int8).abs(), torch.tensor([-128], dtype=torch.int8))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", NARROW, ids=str)
def test_integer_division_by_zero_raises(device, dtype):
    """As int32's and int64's: refused at the drain, as torch's CPU refuses it."""
    for op in (lambda x, y: x // y, lambda x, y: x % y, lambda x, y: x.fmod(y)):
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            op(torch.tensor([5, 6], dtype=dtype), torch.tensor([1, 0], dtype=dtype))
        with pytest.raises(lf.DivisionByZeroError, match="non-zero"):
            op(lf.tensor([5, 6], dtype=dtype, device=device), lf.tensor([1, 0], dtype=dtype, device=device)).numpy()


# -- casts ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("src", [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32,
                                 torch.int64, torch.bool] + NARROW, ids=str)
def test_casts_to_narrow_integers_as_torch(device, src):
    # float values in range, out of range (torch's x86 CPU kernels convert through int32, then
    # truncate; C leaves it undefined) and NaN/inf (through int32's minimum)
    if src.is_floating_point:
        values = [0.0, -0.7, 1.5, 200.7, -1.5, 300.0, -129.0, 70000.5, 1e10, -1e10, float("nan"), float("inf")]
    else:
        values = full_range(src if src != torch.bool else torch.uint8, 32).tolist() if src != torch.bool else [0, 1]
    t = torch.tensor(values).to(src)
    x = lf.tensor(t, device=device)
    for d in NARROW:
        same(x.to(d), t.to(d))
        same((x.to(d) + 1).to(src), (t.to(d) + 1).to(src))
    same(x.byte(), t.byte())
    same(x.char(), t.char())
    same(x.short(), t.short())


# -- creation, interop, indexing, refusals ----------------------------------------------------------
@pytest.mark.parametrize("dtype", NARROW, ids=str)
def test_creation_with_a_narrow_dtype(dtype):
    d = dt.from_torch(dtype)
    assert lf.tensor([1, -1, 7], dtype=d).torch().equal(torch.tensor([1, -1, 7], dtype=dtype))
    for name in ("zeros", "ones"):
        same(getattr(lf, name)(2, 3, dtype=d), getattr(torch, name)(2, 3, dtype=dtype))
    same(lf.full((4,), -1, dtype=dtype), torch.full((4,), -1, dtype=dtype))
    same(lf.arange(-3 if dtype != torch.uint8 else 0, 60, 7, dtype=d), torch.arange(-3 if dtype != torch.uint8 else 0,
                                                                                     60, 7, dtype=dtype))
    r = lf.randint(-5 if dtype != torch.uint8 else 0, 100, (50,), dtype=d).torch()
    assert r.dtype == dtype and int(r.min()) >= (-5 if dtype != torch.uint8 else 0) and int(r.max()) < 100
    too_big = torch.iinfo(dtype).max + 1
    for call in (lambda ns: ns.full((2,), too_big, dtype=dtype), lambda ns: ns.tensor([1, too_big], dtype=dtype)):
        with pytest.raises(RuntimeError, match="without overflow"):
            call(torch)
        with pytest.raises(lf.DTypeError, match="without overflow"):
            call(lf)


@pytest.mark.parametrize("dtype", NARROW, ids=str)
def test_numpy_dlpack_and_torch_interop(dtype):
    t = full_range(dtype, 16)
    a = t.numpy()
    x = lf.tensor(a)
    assert x.dtype is dt.from_torch(dtype) and lf.from_numpy(a).dtype is x.dtype
    np.testing.assert_array_equal(x.numpy(), a)
    assert x.numpy().dtype == a.dtype and np.asarray(x).dtype == a.dtype
    assert torch.from_dlpack(x).equal(t) and torch.as_tensor(x).equal(t)
    same(lf.from_dlpack(t), t)
    same(lf.tensor([1.5, 2.5]).to(dtype), torch.tensor([1.5, 2.5]).to(dtype))
    legacy = {torch.uint8: torch.ByteTensor, torch.int8: torch.CharTensor, torch.int16: torch.ShortTensor}[dtype]
    same(lf.tensor([1.5, 300.0]).type(legacy), torch.tensor([1.5, 300.0]).type(legacy))
    assert lf.tensor(t).type() == t.type()
    assert lf.short is lf.int16 and lf.uint8.torch is torch.uint8 and lf.int8.numpy == np.dtype(np.int8)


def test_a_uint8_index_is_a_mask_with_torchs_deprecation_warning():
    t = torch.arange(12).reshape(3, 4)
    for key in (torch.tensor([1, 0, 2], dtype=torch.uint8), (slice(None), torch.tensor([0, 1, 1, 0], dtype=torch.uint8))):
        lazy_key = tuple(lf.tensor(k) if isinstance(k, torch.Tensor) else k for k in key) \
            if isinstance(key, tuple) else lf.tensor(key)
        with pytest.warns(UserWarning, match="uint8 is now deprecated"):
            want = t[key]
        with pytest.warns(UserWarning, match="uint8 is now deprecated") as caught:
            got = lf.tensor(t)[lazy_key]
        assert caught[0].filename == __file__   # (the warning names the indexing line)
        same(got, want)
    x, tx, rows = lf.tensor(t), t.clone(), torch.tensor([1, 0, 1], dtype=torch.uint8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x[lf.tensor(rows)] = lf.tensor([[-1] * 4, [-2] * 4])
        tx[rows] = torch.tensor([[-1] * 4, [-2] * 4])
        same(x, tx)
        with pytest.raises(RuntimeError, match="only supports boolean masks"):
            tx[rows] = -1   # (a scalar through a uint8 mask: torch refuses it)
        with pytest.raises(lf.DTypeError, match="only supports boolean masks.*bool"):
            x[lf.tensor(rows)] = -1


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16], ids=str)
def test_an_int8_or_int16_index_is_refused_as_torch_refuses_it(dtype):
    t, i = torch.arange(6), torch.tensor([1, 0], dtype=dtype)
    with pytest.raises(IndexError, match="long, int, byte or bool"):
        t[i]
    with pytest.raises(lf.IndexDTypeError, match="long, int, byte or bool.*int"):
        lf.tensor(t)[lf.tensor(i)]
    for name in ("index_select", "gather"):
        with pytest.raises(RuntimeError, match="Expected dtype int32"):
            getattr(torch, name)(t, 0, i)
        with pytest.raises(lf.DTypeError, match=f"{name}: index must be an integer tensor.*long"):
            getattr(lf, name)(lf.tensor(t), 0, lf.tensor(i))


@pytest.mark.parametrize("dtype", NARROW, ids=str)
def test_autograd_and_float_only_ops_refuse_narrow_integers(dtype):
    with pytest.raises(lf.DTypeError, match="floating point"):
        lf.ones(2, dtype=dtype).requires_grad_()
    with pytest.raises(lf.DTypeError, match="mean"):
        lf.ones(2, dtype=dtype).mean()


@pytest.mark.parametrize("dtype", NARROW, ids=str)
def test_class_targets_take_uint8_as_torch_and_refuse_int8_and_int16(dtype):
    logits, target = torch.randn(3, 4, generator=torch.Generator().manual_seed(0)), torch.tensor([1, 0, 3], dtype=dtype)
    F = torch.nn.functional
    for name in ("cross_entropy", "nll_loss"):
        if dtype == torch.uint8:
            want = getattr(F, name)(logits, target)
            torch.testing.assert_close(getattr(lf.nn.functional, name)(lf.tensor(logits), lf.tensor(target)).torch(),
                                       want)
            continue
        with pytest.raises(RuntimeError, match="expected target dtype to be Long or Byte"):
            getattr(F, name)(logits, target)
        with pytest.raises(lf.DTypeError, match="uint8"):
            getattr(lf.nn.functional, name)(lf.tensor(logits), lf.tensor(target))
    with pytest.raises(RuntimeError, match="LongTensor"):
        F.one_hot(target, 4)
    with pytest.raises(lf.DTypeError, match="int64.*long"):
        lf.nn.functional.one_hot(lf.tensor(target), 4)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", NARROW, ids=str)
def test_running_extremes_any_and_all(device, dtype):
    """cummax/cummin's masked lanes hold the dtype's own extremes (int32's wrapped to 0 in int8),
    and any/all of uint8 are uint8, torch's legacy rule (found by the conformance run)."""
    t = full_range(dtype, 60, seed=3).reshape(3, 4, 5)
    x = lf.tensor(t, device=device)
    for dim in (0, 2):
        for name in ("cummax", "cummin"):
            got, want = getattr(x, name)(dim), getattr(t, name)(dim)
            same(got[0], want[0])
            same(got[1], want[1])
        same(x.any(dim), t.any(dim))
        same(x.all(dim, keepdim=True), t.all(dim, keepdim=True))
    same(x.any(), t.any())
    same((x % 3).all(), (t % 3).all())


@pytest.mark.parametrize("dtype", NARROW, ids=str)
@pytest.mark.parametrize("value", [-1, -1.0, -0.5, 127.5, -128.0, -128.5, 255, -255, -256, 255.5, 2.5])
def test_creation_refuses_exactly_the_values_torch_refuses(dtype, value):
    """An unsigned dtype takes integers down to -max but no negative float (hypothesis found
    ``full((), -1.5, uint8)``, which torch refuses); in a list each number by its own type, so
    ``[-1, 2.0]`` is uint8 ``[255, 2]``."""
    for make in (lambda ns: ns.full((2,), value, dtype=dtype), lambda ns: ns.tensor([value], dtype=dtype),
                 lambda ns: ns.tensor([value, 2.0], dtype=dtype), lambda ns: ns.tensor([[1.5], [value]], dtype=dtype)):
        try:
            want = make(torch)
        except RuntimeError as e:
            assert "without overflow" in str(e)
            with pytest.raises(lf.DTypeError, match="without overflow"):
                make(lf)
        else:
            same(make(lf), want)


@pytest.mark.parametrize("value", [-1.5, -1, -255, -256, 255, 256, 300, 2.5, True])
def test_fill_takes_and_refuses_the_values_torchs_fill_does(value):
    expected = torch.zeros(2, dtype=torch.uint8)
    try:
        expected.fill_(value)
    except RuntimeError:
        with pytest.raises(lf.DTypeError, match="fill_"):
            lf.zeros(2, dtype=lf.uint8).fill_(value)
        return
    assert lf.zeros(2, dtype=lf.uint8).fill_(value).tolist() == expected.tolist()
