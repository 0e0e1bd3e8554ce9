"""Torch ops lazyfuse composes from its native primitives (lazyfuse/torch_math.py,
lazyfuse/torch_index.py, the ``*_copy`` views of lazyfuse/surface.py): values against torch
eager, in the dtypes torch gives, and the kernels they fuse into (no extern launch)."""
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

import lazyfuse as lf

CPU = lf.device("cpu")


def _x(*shape, seed=0, dtype=torch.float32, low=-3.0, high=3.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(*shape, generator=g, dtype=torch.float64) * (high - low) + low).to(dtype)


def _native(fn):
    """``fn()``'s value as torch, asserting that no extern ran (every launch a lazyfuse kernel)."""
    lf.sync(CPU)
    lf.reset_stats(CPU)
    out = fn()
    got = [o.torch() for o in out] if isinstance(out, (tuple, list)) else out.torch()
    assert lf.stats(CPU).extern_launches == 0
    return got


UNARY = {  # name: input range (torch's domain)
    "atan": (-30, 30), "asin": (-1, 1), "acos": (-1, 1), "tan": (-1.4, 1.4), "sinh": (-5, 5), "cosh": (-5, 5), "asinh": (-20, 20), "acosh": (1, 20), "atanh": (-0.99, 0.99),
    "expm1": (-3, 3), "log1p": (-0.9, 5), "exp2": (-10, 10), "erfc": (-3, 3), "sinc": (-3, 3), "deg2rad": (-360, 360),
    "rad2deg": (-7, 7), "logit": (0.01, 0.99), "signbit": (-3, 3),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64])
def test_unary_math_matches_torch(name, dtype):
    low, high = UNARY[name]
    xt = _x(4, 33, low=low, high=high)
    xt[0, :3] = torch.tensor([0.0, -0.0, low])
    xt = xt.round() if dtype is torch.int64 else xt
    if dtype is torch.int64 and name in ("atanh", "logit"):
        xt = xt * 0   # (their integer domain is 0)
    xt = xt.to(dtype)
    got = _native(lambda: getattr(lf.tensor(xt), name)())
    want = getattr(torch, name)(xt)
    assert got.dtype == want.dtype
    tol = {torch.float16: 2e-3}.get(want.dtype, 2e-5)
    torch.testing.assert_close(got, want, rtol=tol, atol=tol, equal_nan=True)


BINARY = ["atan2", "xlogy", "hypot", "logaddexp", "logaddexp2", "fmax", "fmin", "heaviside", "float_power", "ldexp", "fmod",
          "copysign", "isclose"]


@pytest.mark.parametrize("name", BINARY)
def test_binary_math_matches_torch_with_nans_zeros_and_infinities(name):
    at, bt = _x(3, 16, seed=1), _x(3, 16, seed=2)
    at[0, :6] = torch.tensor([0.0, math.nan, math.inf, -math.inf, 1.0, -0.0])
    bt[0, :6] = torch.tensor([math.nan, 0.0, math.inf, -math.inf, 1.0, -2.0])
    if name == "ldexp":
        bt = bt.round().clamp(-8, 8).nan_to_num(0.0)
    got = _native(lambda: getattr(lf, name)(lf.tensor(at), lf.tensor(bt)))
    want = getattr(torch, name)(at, bt)
    assert got.dtype == want.dtype
    torch.testing.assert_close(got, want, rtol=2e-5, atol=2e-5, equal_nan=True)
    # a Python scalar operand, and integer operands where torch takes them
    if name in ("xlogy", "copysign", "fmod"):
        torch.testing.assert_close(_native(lambda: getattr(lf, name)(lf.tensor(at), 2.5)), getattr(torch, name)(at, 2.5),
                                   rtol=2e-5, atol=2e-5, equal_nan=True)
    if name in ("fmod", "fmax", "fmin", "isclose"):
        ai, bi = torch.randint(-9, 9, (20,)), torch.randint(1, 9, (20,)) * torch.tensor([1, -1]).repeat(10)
        torch.testing.assert_close(_native(lambda: getattr(lf, name)(lf.tensor(ai), lf.tensor(bi))),
                                   getattr(torch, name)(ai, bi))


def test_a_chain_of_composed_math_is_one_kernel():
    xt = _x(8, 64, low=0.1, high=0.9)
    x = lf.tensor(xt)
    lf.sync(CPU)
    lf.reset_stats(CPU)
    y = lf.logaddexp(x.tan().expm1(), x.logit()).sinh() * lf.hypot(x, x.asinh())
    got = y.torch()
    assert lf.stats(CPU).kernels_launched == 1
    want = torch.logaddexp(xt.tan().expm1(), xt.logit()).sinh() * torch.hypot(xt, xt.asinh())
    torch.testing.assert_close(got, want, rtol=2e-5, atol=2e-5)


# -- gathers, index fills and writes ------------------------------------------------------------------
@settings(max_examples=25, deadline=None)
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=3), dim=st.integers(0, 2), seed=st.integers(0, 99),
       extra=st.integers(0, 3))
def test_gather_family_matches_torch(shape, dim, seed, extra):
    dim = dim % len(shape)
    g = torch.Generator().manual_seed(seed)
    xt = torch.randn(*shape, generator=g)
    n = shape[dim]
    ishape = list(shape)
    ishape[dim] = 1 + extra
    ishape = [max(1, s - (k % 2)) if k != dim else s for k, s in enumerate(ishape)]   # smaller off dim too
    idx = torch.randint(0, n, tuple(ishape), generator=g)
    x = lf.tensor(xt)
    torch.testing.assert_close(_native(lambda: x.gather(dim, lf.tensor(idx))), xt.gather(dim, idx))
    line = torch.randint(-n, n, (2 + extra,), generator=g)
    torch.testing.assert_close(_native(lambda: x.index_select(dim, lf.tensor(line % n))), xt.index_select(dim, line % n))
    torch.testing.assert_close(_native(lambda: x.take(lf.tensor(idx))), xt.take(idx))
    along = torch.randint(0, n, tuple(1 + extra if k == dim else 1 if k % 2 else s for k, s in enumerate(shape)),
                          generator=g)   # (broadcast against x off dim)
    torch.testing.assert_close(_native(lambda: lf.take_along_dim(x, lf.tensor(along), dim)),
                               torch.take_along_dim(xt, along, dim))
    torch.testing.assert_close(_native(lambda: x.index_fill(dim, lf.tensor(line % n), -7.0)),
                               xt.index_fill(dim, line % n, -7.0))
    src = torch.randn(*idx.shape, generator=g)
    torch.testing.assert_close(_native(lambda: x.scatter_add(dim, lf.tensor(idx), lf.tensor(src))),
                               xt.scatter_add(dim, idx, src), rtol=1e-5, atol=1e-5)
    rows = torch.randn(*(shape[:dim] + [line.shape[0]] + shape[dim + 1:]), generator=g)
    torch.testing.assert_close(_native(lambda: x.index_add(dim, lf.tensor(line % n), lf.tensor(rows), alpha=2)),
                               xt.index_add(dim, line % n, rows, alpha=2), rtol=1e-5, atol=1e-5)
    unique = torch.randperm(n, generator=g)[: min(n, 2)]
    picked = torch.randn(*(shape[:dim] + [unique.shape[0]] + shape[dim + 1:]), generator=g)
    torch.testing.assert_close(_native(lambda: x.index_copy(dim, lf.tensor(unique), lf.tensor(picked))),
                               xt.index_copy(dim, unique, picked))


def test_a_gather_index_out_of_range_is_a_shape_error_and_the_engine_recovers():
    x = lf.tensor(_x(3, 4))
    with pytest.raises(lf.ShapeError, match="out of range"):
        x.gather(1, lf.tensor([[0, 4], [1, 1], [2, 3]])).torch()
    with pytest.raises(lf.DTypeError, match="index must be an integer"):
        x.gather(1, lf.tensor([[0.0]]))
    assert (x * 2).shape == (3, 4) and float((x * 0).sum().item()) == 0.0


def test_gather_is_one_launch_after_its_fused_index_arithmetic():
    xt, idx = _x(16, 32), torch.randint(0, 32, (16, 8))
    x, i = lf.tensor(xt), lf.tensor(idx)
    lf.sync(CPU)
    lf.reset_stats(CPU)
    got = (x.exp().gather(1, i * 1) + 1).torch()
    s = lf.stats(CPU)
    # the exp and the flat index (two kernels feeding the gather), the gather, the +1
    assert s.extern_launches == 0 and s.kernels_launched <= 4
    torch.testing.assert_close(got, xt.exp().gather(1, idx) + 1)


# -- short scans ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.bool])
def test_short_scans_match_torch(dtype):
    xt = (_x(3, 5, 7, seed=4) * 3).round() if dtype is not torch.float32 else _x(3, 5, 7, seed=4)
    xt[0, 1, 2] = xt[0, 1, 1]   # a tie: the later index wins, as torch
    xt = xt.to(dtype) if dtype is not torch.bool else xt > 0
    x = lf.tensor(xt)
    for dim in (0, 1, 2, -1):
        torch.testing.assert_close(_native(lambda: x.cumsum(dim)), xt.cumsum(dim), rtol=2e-3, atol=2e-3)
        for name in ("cummax", "cummin"):
            v, i = _native(lambda: getattr(x, name)(dim))
            tv, ti = getattr(xt, name)(dim)
            torch.testing.assert_close(v, tv)
            assert i.tolist() == ti.tolist(), name
        if dtype in (torch.float32, torch.float16):
            torch.testing.assert_close(_native(lambda: x.logcumsumexp(dim)), xt.logcumsumexp(dim), rtol=2e-3, atol=2e-3)


def test_a_scan_takes_its_prologue_and_a_long_cummax_is_torch_s():
    from lazyfuse.torch_index import SHORT_SCAN
    xt = _x(6, 16)
    x = lf.tensor(xt)
    lf.sync(CPU)
    lf.reset_stats(CPU)
    got = ((x * 2).cumsum(1) + 1).torch()
    # the scan kernel with x * 2 inside it, then the epilogue (a scan result is stored)
    assert (lf.stats(CPU).kernels_launched, lf.stats(CPU).extern_launches) == (2, 0)
    torch.testing.assert_close(got, (xt * 2).cumsum(1) + 1)
    long = _x(2, SHORT_SCAN + 1)
    lf.reset_stats(CPU)
    torch.testing.assert_close(lf.tensor(long).cummax(1).values.torch(), long.cummax(1).values)
    assert lf.stats(CPU).extern_launches == 1


def test_scan_with_nan_keeps_nan_as_torch():
    xt = torch.tensor([[1.0, math.nan, 3.0, 0.5], [2.0, 1.0, 4.0, math.inf]])
    v, i = _native(lambda: lf.tensor(xt).cummax(1))
    tv, ti = xt.cummax(1)
    torch.testing.assert_close(v, tv, equal_nan=True)
    assert i.tolist() == ti.tolist()


# -- matmul aliases -----------------------------------------------------------------------------------
def test_matmul_aliases_match_torch():
    a, b, v, w = _x(4, 5), _x(5, 3, seed=1), _x(5, seed=2), _x(4, seed=3)
    ba, bb, c = _x(2, 4, 5, seed=4), _x(2, 5, 3, seed=5), _x(4, 3, seed=6)
    L = lf.tensor
    cases = {
        "mm": (lambda: L(a).mm(L(b)), lambda: a.mm(b)),
        "bmm": (lambda: L(ba).bmm(L(bb)), lambda: ba.bmm(bb)),
        "mv": (lambda: L(a).mv(L(v)), lambda: a.mv(v)),
        "dot": (lambda: L(v).dot(L(v * 2)), lambda: v.dot(v * 2)),
        "outer": (lambda: L(w).outer(L(v)), lambda: w.outer(v)),
        "inner": (lambda: lf.inner(L(a), L(b.T)), lambda: torch.inner(a, b.T)),
        "addmm": (lambda: L(c).addmm(L(a), L(b), beta=0.5, alpha=2), lambda: c.addmm(a, b, beta=0.5, alpha=2)),
        "addmv": (lambda: L(w).addmv(L(a), L(v), beta=0), lambda: w.addmv(a, v, beta=0)),
        "baddbmm": (lambda: L(c).baddbmm(L(ba), L(bb)), lambda: c.baddbmm(ba, bb)),
        "addbmm": (lambda: L(c).addbmm(L(ba), L(bb), alpha=3), lambda: c.addbmm(ba, bb, alpha=3)),
        "addr": (lambda: L(c).addr(L(w), L(v[:3])), lambda: c.addr(w, v[:3])),
    }
    for name, (lazy, eager) in cases.items():
        torch.testing.assert_close(_native(lazy), eager(), rtol=1e-5, atol=1e-5, msg=name)
    # integer tensors take int(beta), int(alpha), as torch
    ai, vi, wi = torch.randint(0, 5, (4, 5)), torch.randint(0, 5, (5,)), torch.randint(0, 5, (4,))
    assert _native(lambda: L(wi).addmv(L(ai), L(vi), beta=1.7, alpha=2.6)).tolist() == \
        wi.addmv(ai, vi, beta=1.7, alpha=2.6).tolist()


def test_an_addmm_epilogue_fuses_into_the_matmul_path():
    a, b, c = _x(8, 16), _x(16, 8, seed=1), _x(8, seed=2)
    lf.sync(CPU)
    lf.reset_stats(CPU)
    got = lf.tensor(c).addmm(lf.tensor(a), lf.tensor(b)).relu().torch()
    s = lf.stats(CPU)
    assert s.extern_launches == 0 and s.kernels_launched <= 2   # the matmul, its fused bias + relu
    torch.testing.assert_close(got, c.addmm(a, b).relu(), rtol=1e-5, atol=1e-5)


# -- *_copy views ------------------------------------------------------------------------------------
def test_view_copies_are_copies_made_by_a_native_kernel():
    xt = _x(3, 4, 5)
    x = lf.tensor(xt)
    for name, args in (("t_copy", ()), ("permute_copy", ((2, 0, 1),)), ("unfold_copy", (2, 2, 1)),
                       ("diagonal_copy", (0, 1, 2)), ("unbind_copy", (1,)), ("expand_copy", ((2, 3, 4, 5),))):
        src, tsrc = (x[0], xt[0]) if name == "t_copy" else (x, xt)
        got = _native(lambda: getattr(lf, name)(src, *args))
        want = getattr(torch, name)(tsrc, *args)
        for g, w in zip(got if isinstance(got, list) else [got], want if isinstance(want, tuple) else [want]):
            torch.testing.assert_close(g, w)
    copy = lf.t_copy(x[0])
    x.mul_(0)
    np.testing.assert_allclose(copy.numpy(), xt[0].t().numpy())   # a copy: the write does not show


# -- norms --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_batch_group_and_layer_norms_match_torch_and_update_running_statistics(dtype):
    xt = _x(4, 6, 5, seed=7).to(dtype)
    wt, bt = _x(6, seed=8).to(dtype), _x(6, seed=9).to(dtype)
    L = lf.tensor
    tol = dict(rtol=2e-3, atol=2e-3) if dtype is torch.float16 else dict(rtol=1e-5, atol=1e-5)
    for training in (True, False):
        rm, rv = _x(6, seed=10, low=-1, high=1).to(dtype), _x(6, seed=11, low=0.5, high=2).to(dtype)
        lrm, lrv = L(rm), L(rv)
        got = _native(lambda: lf.nn.functional.batch_norm(L(xt), lrm, lrv, L(wt), L(bt), training, 0.3, 1e-4))
        want = torch.nn.functional.batch_norm(xt, rm, rv, wt, bt, training, 0.3, 1e-4)
        torch.testing.assert_close(got, want, **tol)
        torch.testing.assert_close(lrm.torch(), rm, **tol)   # updated in place when training, as torch
        torch.testing.assert_close(lrv.torch(), rv, **tol)
    got = _native(lambda: lf.nn.functional.group_norm(L(xt), 3, L(wt), L(bt), 1e-4))
    torch.testing.assert_close(got, torch.nn.functional.group_norm(xt, 3, wt, bt, 1e-4), **tol)
    for name, args, targs in (
            ("native_layer_norm", ((5,), L(_x(5).to(dtype)), None, 1e-5), ((5,), _x(5).to(dtype), None, 1e-5)),
            ("native_batch_norm", (L(wt), L(bt), None, None, True, 0.1, 1e-5), (wt, bt, None, None, True, 0.1, 1e-5)),
            ("native_group_norm", (L(wt), L(bt), 4, 6, 5, 2, 1e-5), (wt, bt, 4, 6, 5, 2, 1e-5))):
        got = _native(lambda: getattr(lf, name)(L(xt), *args))
        for g, w in zip(got, getattr(torch, name)(xt, *targs)):
            assert g.dtype == w.dtype and g.shape == w.shape
            torch.testing.assert_close(g, w, **tol)
    if dtype is torch.float32:
        rm, rv = torch.zeros(6), torch.ones(6)
        lrm, lrv = L(rm), L(rv)
        got = _native(lambda: lf.nn.functional.instance_norm(L(xt), lrm, lrv, L(wt), L(bt), momentum=0.5))
        torch.testing.assert_close(got, torch.nn.functional.instance_norm(xt, rm, rv, wt, bt, momentum=0.5), **tol)
        torch.testing.assert_close(lrm.torch(), rm, **tol)
        torch.testing.assert_close(lrv.torch(), rv, **tol)


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_batch_norm_of_an_empty_1d_input_is_empty_as_torch(dtype, training):
    # (op_db's batch_norm sample of shape (0,): torch reads a 1-d input as 0 channels)
    xt, rm, rv = torch.empty(0, dtype=dtype), torch.zeros(0, dtype=dtype), torch.ones(0, dtype=dtype)
    got = lf.nn.functional.batch_norm(lf.tensor(xt), lf.tensor(rm), lf.tensor(rv), training=training).torch()
    want = torch.nn.functional.batch_norm(xt, rm, rv, training=training)
    assert got.dtype == want.dtype and got.shape == want.shape
    with pytest.raises(lf.ShapeError, match="at least 2 dims"):   # a non-empty 1-d input: torch refuses it too
        lf.nn.functional.batch_norm(lf.tensor(torch.ones(3, dtype=dtype)), None, None, training=True)


@pytest.mark.parametrize("training", [True, False])
def test_native_batch_norm_of_an_empty_input_matches_torch(training):
    xt, rm, rv = torch.empty(0, 3, 4), torch.zeros(3), torch.ones(3)
    try:
        want = torch.native_batch_norm(xt, None, None, rm, rv, training, 0.1, 1e-5)
    except RuntimeError as e:   # (torch 2.13's CPU kernel: training needs an element)
        assert "at least one element" in str(e)
        with pytest.raises(lf.ShapeError, match="at least one element"):
            lf.native_batch_norm(lf.tensor(xt), None, None, lf.tensor(rm), lf.tensor(rv), training, 0.1, 1e-5)
        return
    got = lf.native_batch_norm(lf.tensor(xt), None, None, lf.tensor(rm), lf.tensor(rv), training, 0.1, 1e-5)
    for g, w in zip(got, want):
        assert g.torch().dtype == w.dtype and g.shape == w.shape


def test_batch_norm_statistics_and_normalization_are_few_kernels():
    xt = _x(8, 4, 16, seed=3)
    x = lf.tensor(xt)
    lf.sync(CPU)
    lf.reset_stats(CPU)
    got = (lf.nn.functional.batch_norm(x, None, None, training=True) * 2).relu().torch()
    s = lf.stats(CPU)
    assert s.extern_launches == 0 and s.kernels_launched <= 2   # the statistics, then the normalization + epilogue
    torch.testing.assert_close(got, (torch.nn.functional.batch_norm(xt, None, None, training=True) * 2).relu(),
                               rtol=1e-5, atol=1e-5)


# -- reversals, diagonals, scatters into views; more of torch.nn.functional ---------------------------
def test_flips_diagonals_differences_and_view_scatters_match_torch():
    xt, v = _x(3, 4, 5), _x(4, seed=1)
    x = lf.tensor(xt)
    cases = {
        "flip": (lambda: x.flip([0, 2]), lambda: xt.flip([0, 2])),
        "fliplr": (lambda: lf.fliplr(x), lambda: torch.fliplr(xt)),
        "rot90": (lambda: lf.rot90(x, 3, (1, 2)), lambda: torch.rot90(xt, 3, (1, 2))),
        "diag": (lambda: lf.diag(lf.tensor(v), -1), lambda: torch.diag(v, -1)),
        "diag of a matrix": (lambda: lf.diag(x[0], 1), lambda: torch.diag(xt[0], 1)),
        "diag_embed": (lambda: lf.diag_embed(x, 1, 0, 2), lambda: torch.diag_embed(xt, 1, 0, 2)),
        "diff": (lambda: lf.diff(x, 2, 1, prepend=x[:, :1]), lambda: torch.diff(xt, 2, 1, prepend=xt[:, :1])),
        "select_scatter": (lambda: lf.select_scatter(x, lf.tensor(xt[:, 0] * 0 + 7), 1, 0),
                           lambda: torch.select_scatter(xt, xt[:, 0] * 0 + 7, 1, 0)),
        "slice_scatter": (lambda: lf.slice_scatter(x, lf.tensor(xt[:, :, ::2] + 1), 2, 0, None, 2),
                          lambda: torch.slice_scatter(xt, xt[:, :, ::2] + 1, 2, 0, None, 2)),
        "diagonal_scatter": (lambda: lf.diagonal_scatter(x, lf.tensor(torch.ones(3, 4)), 0, 1, 2),
                             lambda: torch.diagonal_scatter(xt, torch.ones(3, 4), 0, 1, 2)),
    }
    for name, (lazy, eager) in cases.items():
        torch.testing.assert_close(_native(lazy), eager(), msg=name)


def test_more_functional_ops_match_torch():
    F, TF = lf.nn.functional, torch.nn.functional
    a, b, c = _x(4, 6), _x(4, 6, seed=1), _x(4, 6, seed=2)
    sign = torch.tensor([1.0, -1.0, 1.0, -1.0])
    img = _x(2, 8, 3, 3, seed=3)
    L = lf.tensor
    cases = {
        "hardshrink": (lambda: F.hardshrink(L(a), 0.7), lambda: TF.hardshrink(a, 0.7)),
        "softshrink": (lambda: F.softshrink(L(a), 0.7), lambda: TF.softshrink(a, 0.7)),
        "prelu": (lambda: F.prelu(L(img), L(_x(8, seed=4))), lambda: TF.prelu(img, _x(8, seed=4))),
        "pixel_shuffle": (lambda: F.pixel_shuffle(L(img), 2), lambda: TF.pixel_shuffle(img, 2)),
        "pixel_unshuffle": (lambda: F.pixel_unshuffle(L(_x(1, 2, 4, 6)), 2), lambda: TF.pixel_unshuffle(_x(1, 2, 4, 6), 2)),
        "channel_shuffle": (lambda: F.channel_shuffle(L(img), 4), lambda: TF.channel_shuffle(img, 4)),
        "cosine_similarity": (lambda: F.cosine_similarity(L(a), L(b)), lambda: TF.cosine_similarity(a, b)),
        "pairwise_distance": (lambda: F.pairwise_distance(L(a), L(b), 3.0), lambda: TF.pairwise_distance(a, b, 3.0)),
        "margin_ranking_loss": (lambda: F.margin_ranking_loss(L(a[:, 0]), L(b[:, 0]), L(sign), 0.2),
                                lambda: TF.margin_ranking_loss(a[:, 0], b[:, 0], sign, 0.2)),
        "soft_margin_loss": (lambda: F.soft_margin_loss(L(a[:, 0]), L(sign)), lambda: TF.soft_margin_loss(a[:, 0], sign)),
        "hinge_embedding_loss": (lambda: F.hinge_embedding_loss(L(a[:, 0]), L(sign), reduction="sum"),
                                 lambda: TF.hinge_embedding_loss(a[:, 0], sign, reduction="sum")),
        "poisson_nll_loss": (lambda: F.poisson_nll_loss(L(a), L(b.abs()), full=True),
                             lambda: TF.poisson_nll_loss(a, b.abs(), full=True)),
        "gaussian_nll_loss": (lambda: F.gaussian_nll_loss(L(a), L(b), L(c.abs())),
                              lambda: TF.gaussian_nll_loss(a, b, c.abs())),
        "multilabel_soft_margin_loss": (lambda: F.multilabel_soft_margin_loss(L(a), L((b > 0).float())),
                                        lambda: TF.multilabel_soft_margin_loss(a, (b > 0).float())),
        "cosine_embedding_loss": (lambda: F.cosine_embedding_loss(L(a), L(b), L(sign), 0.1),
                                  lambda: TF.cosine_embedding_loss(a, b, sign, 0.1)),
        "triplet_margin_loss": (lambda: F.triplet_margin_loss(L(a), L(b), L(c), swap=True),
                                lambda: TF.triplet_margin_loss(a, b, c, swap=True)),
    }
    for name, (lazy, eager) in cases.items():
        torch.testing.assert_close(_native(lazy), eager(), rtol=1e-5, atol=1e-5, msg=name)


def test_stacks_products_searches_and_comparisons_match_torch():
    a, b, v = _x(3, 4), _x(3, 4, seed=1), _x(4, seed=2)
    L = lf.tensor
    bounds = torch.tensor([-1.0, 0.0, 0.5, 2.0])
    cases = {
        "hstack": (lambda: lf.hstack([L(a), L(b)]), lambda: torch.hstack([a, b])),
        "vstack": (lambda: lf.vstack([L(v), L(a)]), lambda: torch.vstack([v, a])),
        "dstack": (lambda: lf.dstack([L(a), L(b)]), lambda: torch.dstack([a, b])),
        "column_stack": (lambda: lf.column_stack([L(v), L(a.T)]), lambda: torch.column_stack([v, a.T])),
        "kron": (lambda: lf.kron(L(a[:2, :2]), L(b)), lambda: torch.kron(a[:2, :2], b)),
        "cross": (lambda: lf.cross(L(a[:, :3]), L(b[:, :3]), dim=1), lambda: torch.cross(a[:, :3], b[:, :3], dim=1)),
        "trace": (lambda: L(a).trace(), lambda: a.trace()),
        "isin": (lambda: lf.isin(L(a.round()), L(b.round())), lambda: torch.isin(a.round(), b.round())),
        "bucketize": (lambda: lf.bucketize(L(a), L(bounds), right=True), lambda: torch.bucketize(a, bounds, right=True)),
        "searchsorted": (lambda: lf.searchsorted(L(bounds.expand(3, 4).contiguous()), L(a)),
                         lambda: torch.searchsorted(bounds.expand(3, 4).contiguous(), a)),
        "var_mean": (lambda: lf.var_mean(L(a), True), lambda: torch.var_mean(a, True)),
    }
    for name, (lazy, eager) in cases.items():
        got, want = _native(lazy), eager()
        for g, w in zip(got if isinstance(got, list) else [got], want if isinstance(want, tuple) else [want]):
            torch.testing.assert_close(g, w, msg=name)
    assert lf.equal(L(a), L(a.clone())) and not lf.equal(L(a), L(b)) and lf.allclose(L(a), L(a + 1e-9))


def test_trunc_division_matches_torch_for_floats_and_integers():
    at = torch.tensor([7, -7, 7, -7, 6, -6, 0, 5])
    bt = torch.tensor([2, 2, -2, -2, 3, 4, 3, -5])
    got = _native(lambda: lf.tensor(at).div(lf.tensor(bt), rounding_mode="trunc"))
    assert got.dtype == torch.int64 and got.tolist() == at.div(bt, rounding_mode="trunc").tolist()
    af, bf = _x(3, 8), _x(3, 8, seed=1)
    torch.testing.assert_close(_native(lambda: lf.div(lf.tensor(af), lf.tensor(bf), rounding_mode="trunc")),
                               torch.div(af, bf, rounding_mode="trunc"))
    with pytest.raises(lf.DTypeError, match="rounding_mode"):
        lf.tensor(af).div(2, rounding_mode="ceil")


ZERO_D_AND_EMPTY_INDEX_WRITES = {
    "index_fill_empty": lambda m: m.arange(6.0).reshape(2, 3).index_fill(1, m.tensor([], dtype=m.int64), -1.0),
    "index_fill_0d_empty": lambda m: m.tensor(5.0).index_fill(0, m.tensor([], dtype=m.int64), -1.0),
    "index_copy_empty": lambda m: m.arange(3.0).index_copy(0, m.tensor([], dtype=m.int64), m.ones(0)),
    "index_copy_0d_source": lambda m: m.arange(3.0).index_copy(0, m.tensor([2]), m.tensor(9.0)),
    "index_copy_0d": lambda m: m.tensor(5.0).index_copy(0, m.tensor(0), m.tensor(9.0)),
    "index_add_0d": lambda m: m.tensor(5.0).index_add(0, m.tensor([0]), m.tensor(2.0), alpha=3),
    "scatter_add_0d_longer_src": lambda m: m.tensor(5.0).scatter_add(0, m.tensor([0, 0]), m.tensor([2.0, 3.0, 4.0])),
    "scatter_add_0d_empty": lambda m: m.tensor(5.0).scatter_add(0, m.tensor([], dtype=m.int64), m.tensor([2.0, 3.0])),
    "scatter_add_empty": lambda m: m.ones(2, 2).scatter_add(0, m.zeros(0, dtype=m.int64), m.ones(3, 3)),
}


@pytest.mark.parametrize("name", sorted(ZERO_D_AND_EMPTY_INDEX_WRITES))
def test_index_writes_of_0d_tensors_and_empty_indices_match_torch(name):
    case = ZERO_D_AND_EMPTY_INDEX_WRITES[name]
    torch.testing.assert_close(torch.from_numpy(case(lf).numpy()), case(torch))


def test_half_cross_rounds_once_as_in_float64():
    # (each float16 product rounded first, the difference of two near-equal ones was 7e-3 off on
    # conformance's cross sample, past torch's 1e-3 tolerance; now float32 within, rounded once)
    a, b = _x(5, 3, 5, low=-9, high=9).half(), _x(5, 3, 5, seed=1, low=-9, high=9).half()
    want = torch.cross(a.double(), b.double(), dim=1).half()
    for lazy_a in (lf.tensor(a), lf.tensor(a.transpose(0, 1).contiguous()).transpose(0, 1)):
        got = _native(lambda: lf.cross(lazy_a, lf.tensor(b), dim=1))
        torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-3)
