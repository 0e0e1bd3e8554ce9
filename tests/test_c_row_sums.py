"""Small matmuls on the C backend: they are fused mul+sum reductions whose ``rows`` strategy
reduces ``CConfig.unroll`` neighbouring outputs per pass over the reduced extent, the rest one
at a time. Output counts around multiples of the unroll (and of the block of ``tile`` outputs),
every matmul dtype, strided operands and fused epilogues are compared with torch."""
import ctypes

import numpy as np
import pytest
import torch

import lazyfuse as lf
from lazyfuse.codegen import c_printer
from lazyfuse.runtime import cpu

ROWS = [1, 3, 7, 8, 9, 15, 16, 17, 33]
INNER = [1, 5, 64, 130]


def _data(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g, dtype=torch.float64).to(dtype)
    return torch.randint(-9, 10, shape, generator=g, dtype=dtype)


def _check(got, want, dtype):
    got, want = torch.from_numpy(np.asarray(got)).to(torch.float64), want.to(torch.float64)
    if dtype.is_floating_point:
        tol = {torch.float64: 1e-12, torch.float32: 1e-5}.get(dtype, 2e-2)
        torch.testing.assert_close(got, want, rtol=tol, atol=tol * 10)
    else:
        assert torch.equal(got, want)


@pytest.mark.parametrize("rows", ROWS)
@pytest.mark.parametrize("inner", INNER)
def test_matrix_vector_float32(rows, inner):
    w, x = _data((rows, inner), torch.float32, rows), _data((inner,), torch.float32, inner + 100)
    got = lf.matmul(lf.tensor(w), lf.tensor(x)).numpy()
    _check(got, w.double() @ x.double(), torch.float32)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64],
                         ids=str)
def test_matrix_vector_dtypes(dtype):
    for rows in (7, 17):
        w, x = _data((rows, 40), dtype, rows), _data((40,), dtype, 1)
        got = lf.matmul(lf.tensor(w), lf.tensor(x))
        assert got.dtype.name == str(dtype).removeprefix("torch.")
        want = w.double() @ x.double() if dtype.is_floating_point else w @ x
        _check(got.to(lf.float64).numpy() if dtype.is_floating_point else got.numpy(), want, dtype)


def test_strided_operands_and_epilogue():
    """A transposed weight (reduced dim strided) and a sliced vector, with bias and silu fused."""
    w = _data((48, 19), torch.float32, 3)           # used as w.T: (19, 48)
    x = _data((100,), torch.float32, 4)
    b = _data((19,), torch.float32, 5)
    lw, lx, lb = lf.tensor(w), lf.tensor(x), lf.tensor(b)
    got = lf.nn.functional.silu(lf.matmul(lw.T, lx[2:98:2]) + lb).numpy()
    want = torch.nn.functional.silu(w.double().T @ x.double()[2:98:2] + b.double())
    _check(got, want, torch.float32)


def test_nan_and_inf_propagate():
    w = _data((11, 9), torch.float32, 6)
    w[2, 4] = float("nan")
    w[5, 0] = float("inf")
    w[9, 8] = float("-inf")
    x = _data((9,), torch.float32, 7).abs() + 0.5
    got = lf.matmul(lf.tensor(w), lf.tensor(x)).numpy()
    want = (w.double() @ x.double()).numpy()
    assert np.array_equal(np.isnan(got), np.isnan(want)) and np.isnan(got[2])
    assert got[5] == np.inf and got[9] == -np.inf
    _check(got[~np.isnan(want) & np.isfinite(want)], torch.from_numpy(want[np.isfinite(want)]), torch.float32)


@pytest.mark.parametrize("unroll", [1, 4, 8])
def test_every_unroll_matches(monkeypatch, unroll):
    """The heuristic default is U = 8 and autotuning may pick U = 4: both (and no unroll at all)
    print kernels that agree with torch on ragged output counts."""
    monkeypatch.setattr(cpu, "CConfig", lambda **kw: c_printer.CConfig(**{"unroll": unroll, **kw}))
    lf.manual_seed(unroll)
    rows = 37 + unroll        # a shape of its own per config: no plan cached by another case
    w, x = _data((rows, 23), torch.float32, unroll), _data((23,), torch.float32, 8)
    out = lf.matmul(lf.tensor(w), lf.tensor(x))
    source = str(lf.explain(out))
    assert (f"acc0u{unroll - 1} " in source) == (unroll > 1) and f"acc0u{unroll} " not in source
    _check(out.numpy(), w.double() @ x.double(), torch.float32)


@pytest.mark.parametrize("tree", [True, False], ids=["tree", "unrolled"])
def test_tree_sum_and_unrolled_sum_agree(monkeypatch, tree):
    """The default sums a full block of 16 outputs as 16-lane partials (``lf_sum16x16``), the
    candidate ``tree=False`` with the unrolled sum: both agree with torch where the block is
    full, ragged, and the reduced extent is no multiple of 16."""
    monkeypatch.setattr(cpu, "CConfig", lambda **kw: c_printer.CConfig(**{"tree": tree, **kw}))
    rows, inner = 40 + tree, 70 + tree     # shapes of their own: no plan cached by another case
    w, x = _data((rows, inner), torch.float32, 11), _data((inner,), torch.float32, 12)
    out = lf.nn.functional.silu(lf.matmul(lf.tensor(w), lf.tensor(x)))
    assert ("lf_sum16x16(acc0p, acc0v)" in str(lf.explain(out))) == tree
    _check(out.numpy(), torch.nn.functional.silu(w.double() @ x.double()), torch.float32)


@pytest.mark.parametrize("vector_fold", [True, False], ids=["vector", "scalar"])
def test_sum16x16_both_builds(vector_fold):
    """``lf_sum16x16`` with the compiler's vector folds, and its scalar fallback for compilers
    without ``__builtin_shufflevector`` (gcc before 12): each row's 16 lanes summed."""
    from lazyfuse.codegen import c_compile
    src = ("" if vector_fold else "#define LF_NO_VECTOR_FOLD\n") + c_printer.PRELUDE + """
void sum_rows(const float *p, float *out) { lf_sum16x16((const float (*)[16])p, out); }
"""
    fn = c_compile.build(src, what="lf_sum16x16 check").sum_rows
    p = np.random.default_rng(3).standard_normal((16, 16)).astype(np.float32)
    out = np.zeros(16, np.float32)
    fn(p.ctypes.data_as(ctypes.c_void_p), out.ctypes.data_as(ctypes.c_void_p))
    np.testing.assert_allclose(out, p.astype(np.float64).sum(1), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("unroll", [1, 4, 8])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64], ids=str)
def test_unrolled_row_max_and_min_match_torch(monkeypatch, unroll, dtype):
    """A single max/min over rows reduces ``unroll`` outputs per pass, as a sum does, each with
    its own NaN flag: NaN propagates from any position of any row of the pass, -0.0 and +0.0
    and +-inf are torch's, on ragged row counts (a pass of 8, then the rest one at a time)."""
    monkeypatch.setattr(cpu, "CConfig", lambda **kw: c_printer.CConfig(**{"unroll": unroll, **kw}))
    rows, inner = 45 + unroll, 67 + unroll    # shapes of their own: no plan cached by another case
    x = _data((rows, inner), dtype, unroll)
    if dtype.is_floating_point:
        x[1, 0] = x[9, inner - 1] = x[12, 30] = x[rows - 1, 5] = float("nan")    # in passes and in the rest
        x[3] = -0.0
        x[4] = 0.0
        x[4, 7] = -0.0
        x[5], x[6] = float("-inf"), float("inf")
        x[7, 3] = float("inf")
    for name in ("amax", "amin"):
        out = getattr(lf.tensor(x), name)(-1)
        source = str(lf.explain(out))
        assert (f"acc0u{unroll - 1} " in source) == (unroll > 1) and f"acc0u{unroll} " not in source
        assert (f"nan0u{unroll - 1} " in source) == (unroll > 1 and dtype.is_floating_point)
        got, want = out.torch(), getattr(x, name)(-1)
        assert torch.equal(got.isnan(), want.isnan())
        assert torch.equal(got.nan_to_num(0.5), want.nan_to_num(0.5)) and torch.equal(got.signbit(), want.signbit())
