"""torch names that are lazyfuse compositions since the fourteenth session (each ran as an extern):
``bitwise_and/or/xor/not`` (the operators), ``unsafe_chunk``/``unsafe_split``, ``narrow_copy``,
``sum_to_size``, ``angle``, ``dist``, ``constant_pad_nd``. Each equals torch's on random inputs,
refuses what torch refuses, and launches no extern."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import lazyfuse as lf

CPU = lf.device("cpu")


def _same(got, want):
    if isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
        return
    assert got.dtype.torch == want.dtype and tuple(got.shape) == tuple(want.shape)
    torch.testing.assert_close(got.torch(), want, equal_nan=True, rtol=1.3e-6, atol=1e-5)


def _native(fn):
    """``fn()``'s results, checked to have run with no extern."""
    lf.sync(CPU)
    lf.reset_stats(CPU)
    out = fn()
    for o in out if isinstance(out, (tuple, list)) else (out,):
        o.torch()
    assert lf.stats(CPU).extern_launches == 0
    return out


INTS = st.sampled_from([torch.int64, torch.int32, torch.uint8, torch.int8, torch.bool])


@settings(max_examples=40, deadline=None)
@given(dtype=INTS, n=st.integers(1, 40), seed=st.integers(0, 2 ** 16), number=st.integers(0, 100))
def test_bitwise_functions_are_the_operators(dtype, n, seed, number):
    g = torch.Generator().manual_seed(seed)
    a, b = (torch.randint(0, 128, (n,), generator=g).to(dtype) for _ in range(2))
    x, y = lf.tensor(a), lf.tensor(b)
    for name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
        _same(_native(lambda: getattr(lf, name)(x, y)), getattr(torch, name)(a, b))
        _same(_native(lambda: getattr(x, name)(y)), getattr(a, name)(b))
        if dtype is not torch.bool:
            _same(_native(lambda: getattr(lf, name)(x, number)), getattr(torch, name)(a, number))
    _same(_native(lambda: lf.bitwise_not(x)), torch.bitwise_not(a))
    _same(_native(lambda: x.bitwise_not()), a.bitwise_not())


def test_bitwise_functions_refuse_floats_as_torch():
    for call in (lambda m: m.bitwise_and(m.ones(2), m.ones(2)), lambda m: m.bitwise_not(m.ones(2))):
        with pytest.raises(RuntimeError):   # (torch: NotImplementedError / TypeError, both caught so)
            call(torch)
        with pytest.raises(lf.DTypeError):
            call(lf)


@settings(max_examples=30, deadline=None)
@given(shape=st.lists(st.integers(1, 6), min_size=1, max_size=4), data=st.data())
def test_chunks_splits_and_narrow_copy(shape, data):
    t = torch.randn(shape)
    x = lf.tensor(t)
    dim = data.draw(st.integers(0, len(shape) - 1))
    chunks, size = data.draw(st.integers(1, 5)), data.draw(st.integers(1, 5))
    _same(_native(lambda: lf.unsafe_chunk(x, chunks, dim)), torch.unsafe_chunk(t, chunks, dim))
    _same(_native(lambda: x.unsafe_split(size, dim)), t.unsafe_split(size, dim))
    start = data.draw(st.integers(0, shape[dim] - 1))
    length = data.draw(st.integers(0, shape[dim] - start))
    got = _native(lambda: x.narrow_copy(dim, start, length))
    _same(got, t.narrow_copy(dim, start, length))
    assert got._storage is not x._storage   # a copy, not a view


@settings(max_examples=40, deadline=None)
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=4), data=st.data())
def test_sum_to_size_as_torch(shape, data):
    t = torch.randn(shape)
    keep = data.draw(st.integers(0, len(shape)))
    size = [data.draw(st.sampled_from([1, s])) for s in shape[len(shape) - keep:]]
    got = _native(lambda: lf.tensor(t).sum_to_size(size))
    _same(got, t.sum_to_size(size))
    if size:   # (torch takes the sizes as arguments too, but not none of them)
        _same(lf.tensor(t).sum_to_size(*size), t.sum_to_size(*size))


def test_sum_to_size_refuses_what_torch_refuses():
    with pytest.raises(RuntimeError, match="is not expandable"):
        torch.ones(3, 4).sum_to_size(2, 4)
    with pytest.raises(lf.ShapeError, match="is not expandable"):
        lf.ones(3, 4).sum_to_size(2, 4)
    with pytest.raises(RuntimeError):
        torch.ones(3, 4).sum_to_size(1, 3, 4)
    with pytest.raises(lf.ShapeError):
        lf.ones(3, 4).sum_to_size(1, 3, 4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.int64, torch.bool])
@pytest.mark.parametrize("device", ["cpu", "interpreter"])
def test_angle_of_real_numbers(dtype, device):
    t = torch.tensor([-2.5, -0.0, 0.0, 3.0, float("nan"), float("-inf"), float("inf"), -1e-30])
    t = t.nan_to_num(0.0).to(dtype) if not dtype.is_floating_point else t.to(dtype)
    _same(lf.tensor(t, device=device).angle(), t.angle())
    _same(lf.angle(lf.tensor(t, device=device)), torch.angle(t))


@settings(max_examples=30, deadline=None)
@given(p=st.sampled_from([0, 1, 2, 3, 0.5, float("inf"), float("-inf")]), n=st.integers(1, 30),
       broadcast=st.booleans())
def test_dist_as_torch(p, n, broadcast):
    a, b = torch.randn(3, n), torch.randn(1 if broadcast else 3, n)
    _same(_native(lambda: lf.dist(lf.tensor(a), lf.tensor(b), p)), torch.dist(a, b, p))
    _same(lf.tensor(a).dist(lf.tensor(b), p), a.dist(b, p))


@settings(max_examples=30, deadline=None)
@given(data=st.data(), value=st.sampled_from([0, 1.5, -2]))
def test_constant_pad_nd_as_torch(data, value):
    t = torch.randn(3, 4, 5)
    pad = [data.draw(st.integers(-2, 3)) for _ in range(2 * data.draw(st.integers(1, 3)))]
    try:
        want = torch.constant_pad_nd(t, pad, value)
    except RuntimeError:
        with pytest.raises(lf.LazyfuseError):
            lf.constant_pad_nd(lf.tensor(t), pad, value).torch()
        return
    _same(_native(lambda: lf.constant_pad_nd(lf.tensor(t), pad, value)), want)
