"""lf.cat / lf.stack as one CAT node: index arithmetic that picks the piece per output element,
so the pending pieces of a cat are computed in one kernel (lazyfuse.functions.cat)."""
from __future__ import annotations

from unittest import mock

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import lazyfuse as lf
import lazyfuse.functions as lf_functions
from lazyfuse.functions import CAT_SELECTS
from programs import COMMON, scaled

DTYPES = {"float32": torch.float32, "float16": torch.float16, "int64": torch.int64, "bool": torch.bool}


def _x(*shape, seed=0, dtype=torch.float32):
    t = torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * 3
    return t.to(dtype) if dtype is not torch.bool else t > 0


def _kernels(dev, fn):
    lf.reset_stats(dev)
    out = fn()
    host = out.torch()
    return host, lf.stats(dev).kernels_launched


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
def test_a_cat_of_pending_pieces_is_one_kernel_with_their_producers(device):
    dev = lf.device(device)
    a, b = _x(4, 3), _x(5, 4, seed=1)
    la, lb = lf.tensor(a, device=dev), lf.tensor(b, device=dev)
    lf.sync(dev)
    got, n = _kernels(dev, lambda: lf.cat([la.exp(), lb.T[:, 1:] * 2, la[:, :1] + 1], 1))
    assert n == 1
    torch.testing.assert_close(got, torch.cat([a.exp(), b.T[:, 1:] * 2, a[:, :1] + 1], 1))
    # read by a reduction, the cat is its prologue: still one kernel
    got, n = _kernels(dev, lambda: lf.cat([la.exp(), la * 3], 0).sum(0))
    assert n == 1
    torch.testing.assert_close(got, torch.cat([a.exp(), a * 3], 0).sum(0))


def test_a_stack_of_28_scalars_is_one_kernel():
    # the scalars are pending values no one else holds: one launch for all (it was 29: a fill, then
    # one in-place write per scalar)
    xs_t = [torch.tensor(float(i)) for i in range(28)]
    xs = [lf.tensor(t) for t in xs_t]
    lf.sync(lf.device("cpu"))
    got, n = _kernels(lf.device("cpu"), lambda: lf.stack([x * 2 - 1 for x in xs]))
    assert n == 1
    torch.testing.assert_close(got, torch.stack([x * 2 - 1 for x in xs_t]))


def test_a_large_cat_writes_each_piece_in_a_kernel_of_its_own():
    # past CAT_SELECTS (pieces x elements) a select per element would compute every piece at
    # every element: each piece is then one in-place write into the result's uninitialised
    # storage (no fill: the pieces cover it), each element written once
    rows = CAT_SELECTS // 64 + 1
    a, b = _x(rows, 40), _x(rows, 24, seed=1)
    la, lb = lf.tensor(a), lf.tensor(b)
    got, n = _kernels(lf.device("cpu"), lambda: lf.cat([la.exp(), lb * 2], 1))
    assert n == 2
    torch.testing.assert_close(got, torch.cat([a.exp(), b * 2], 1))


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
def test_special_values_are_copied_bit_for_bit(device):
    dev = lf.device(device)
    z = torch.tensor([-0.0, float("nan"), float("inf"), -float("inf"), 1e-45])
    got = lf.cat([lf.tensor(z, device=dev), lf.tensor(z, device=dev)[1:]]).torch()
    want = torch.cat([z, z[1:]])
    assert torch.equal(got.view(torch.int32), want.view(torch.int32))


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
def test_gradients_through_cat_and_stack_match_torch(device):
    dev = lf.device(device)
    a, b = _x(3, 4, dtype=torch.float64), _x(2, 4, seed=1, dtype=torch.float64)
    w = _x(5, 4, seed=2, dtype=torch.float64)
    ta, tb = a.clone().requires_grad_(), b.clone().requires_grad_()
    (torch.cat([ta.exp(), tb * tb], 0) * w).sum().backward()
    la, lb = lf.tensor(a, device=dev).requires_grad_(), lf.tensor(b, device=dev).requires_grad_()
    (lf.cat([la.exp(), lb * lb], 0) * lf.tensor(w, device=dev)).sum().backward()
    torch.testing.assert_close(la.grad.torch(), ta.grad)
    torch.testing.assert_close(lb.grad.torch(), tb.grad)
    ta.grad = tb.grad = None
    (torch.stack([ta[:2].sin(), tb], 1) * w[:4].reshape(2, 2, 4)).sum().backward()
    la.grad = lb.grad = None
    (lf.stack([la[:2].sin(), lb], 1) * lf.tensor(w[:4].reshape(2, 2, 4), device=dev)).sum().backward()
    torch.testing.assert_close(la.grad.torch(), ta.grad)
    torch.testing.assert_close(lb.grad.torch(), tb.grad)


@st.composite
def cat_case(draw):
    ndim = draw(st.integers(1, 3))
    dim = draw(st.integers(-ndim, ndim - 1))
    shape = draw(st.lists(st.integers(1, 4), min_size=ndim, max_size=ndim))
    sizes = draw(st.lists(st.integers(0, 4), min_size=1, max_size=5))
    dtypes = draw(st.lists(st.sampled_from(sorted(DTYPES)), min_size=len(sizes), max_size=len(sizes)))
    # each piece: a realized buffer, a pending value, or a strided view (transposed, or a slice)
    forms = draw(st.lists(st.sampled_from(["buffer", "pending", "transposed", "sliced"]),
                          min_size=len(sizes), max_size=len(sizes)))
    # large: past CAT_SELECTS (set to 0 here, so small pieces take that path too), each piece is
    # written into an uninitialised storage that the pieces must cover exactly
    return dim, shape, sizes, dtypes, forms, draw(st.booleans()), draw(st.booleans())


def _piece(lib_t, form):
    """``lib_t`` (a torch or a lazyfuse tensor holding the piece's values) in ``form``."""
    if form == "pending":
        return lib_t + lib_t if lib_t.dtype not in (torch.bool, lf.bool) else ~lib_t
    return lib_t


def _check_cat(device, case):
    dim, shape, sizes, dtypes, forms, stacked, large = case
    with mock.patch.object(lf_functions, "CAT_SELECTS", 0 if large else CAT_SELECTS):
        _check_cat_of(device, dim, shape, sizes, dtypes, forms, stacked)


def _check_cat_of(device, dim, shape, sizes, dtypes, forms, stacked):
    dev = lf.device(device)
    want_pieces, got_pieces = [], []
    for k, (n, name, form) in enumerate(zip(sizes, dtypes, forms)):
        d = dim % len(shape)
        piece_shape = list(shape)
        if not stacked:
            piece_shape[d] = n
        t = _x(*piece_shape, seed=k, dtype=DTYPES[name])
        lt = lf.tensor(t, device=dev)
        if form == "transposed" and t.ndim >= 2:   # the same values, read through a transposed storage
            lt = lf.tensor(t.transpose(0, 1).contiguous(), device=dev).transpose(0, 1)
        elif form == "sliced":   # the same values, a slice of a larger storage
            lt = lf.tensor(torch.cat([t, t], -1), device=dev)[..., :t.shape[-1]]
        want_pieces.append(_piece(t, form))
        got_pieces.append(_piece(lt, form))
    if stacked:
        got, want = lf.stack(got_pieces, dim), torch.stack(want_pieces, dim)
    else:
        got, want = lf.cat(got_pieces, dim), torch.cat(want_pieces, dim)
    assert got.dtype.torch == want.dtype and got.shape == tuple(want.shape)
    assert torch.equal(got.torch(), want)


@settings(COMMON, max_examples=scaled(60))
@given(cat_case())
def test_cat_and_stack_match_torch_on_cpu(case):
    _check_cat("cpu", case)


@settings(COMMON, max_examples=scaled(15))
@given(cat_case())
def test_cat_and_stack_match_torch_on_the_interpreter(case):
    _check_cat("interpreter", case)


# -- constant pad (torch_ops.pad): a small one is a CAT node, a large one writes each element once --
def test_a_large_pad_writes_the_interior_and_each_border_slab_once():
    # (rows + 2, 42) > CAT_SELECTS / 3: the interior (x * 2, its producer fused) and the four
    # border slabs (the first and last rows, then the first and last column of the rows between)
    # are five in-place writes into an uninitialised storage: no fill of the whole output first
    rows = CAT_SELECTS // 100
    a = _x(rows, 40)
    la = lf.tensor(a)
    got, n = _kernels(lf.device("cpu"), lambda: lf.nn.functional.pad(la * 2, (1, 1, 1, 1), value=0.5))
    assert n == 5
    assert torch.equal(got, torch.nn.functional.pad(a * 2, (1, 1, 1, 1), value=0.5))


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
def test_gradient_of_a_large_pad_matches_torch(device):
    # (a pad that records autograd stays the cat of filled pieces, which has its gradient rule)
    dev = lf.device(device)
    a, w = _x(CAT_SELECTS // 100, 40, dtype=torch.float64), _x(CAT_SELECTS // 100 + 1, 43, seed=1, dtype=torch.float64)
    ta = a.clone().requires_grad_()
    (torch.nn.functional.pad(ta.exp(), (2, 1, 0, 1), value=-1.0) * w).sum().backward()
    la = lf.tensor(a, device=dev).requires_grad_()
    (lf.nn.functional.pad(la.exp(), (2, 1, 0, 1), value=-1.0) * lf.tensor(w, device=dev)).sum().backward()
    torch.testing.assert_close(la.grad.torch(), ta.grad)



def test_a_captured_large_cat_and_pad_replay_fresh_inputs():
    # the uninitialised output storage is the graph's: each replay writes every element of it again
    dev = lf.device("cpu")
    rows = CAT_SELECTS // 100
    x = lf.tensor(_x(rows, 40), device=dev)

    def step(lib, x):
        return lib.cat([x * 2, x[:, :3]], 1), lib.nn.functional.pad(-x, (1, 2, 3, 0), value=-0.5)
    g = lf.capture(dev, lambda: step(lf, x))
    for seed in range(3):
        fresh = _x(rows, 40, seed=10 + seed)
        x.copy_(fresh)
        got = g.replay()
        for a, b in zip(got, step(torch, fresh)):
            assert torch.equal(a.torch(), b)
