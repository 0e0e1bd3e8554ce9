"""Row-wise C kernels keep a row's transcendental values (softmax's ``exp(x - max)``) in a row
buffer between passes instead of computing them again (``codegen/row_cache.py``). Checked
against torch in float64: softmax in every float dtype, rows past the buffer budget (values
recomputed), a kept value read by a later reduction stage as well as by the stores, a reduced
extent of two dims; and the printed C computes each kept exp once."""
import pytest
import torch

import lazyfuse as lf
from lazyfuse.codegen import row_cache

F = lf.nn.functional
TOL = {torch.float64: 1e-12, torch.float32: 2e-6, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def _data(shape, dtype, seed, scale=3.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g, dtype=torch.float64) * scale).to(dtype)


def _check(got, want, dtype):
    torch.testing.assert_close(got.torch().double(), want.to(dtype).double(), rtol=TOL[dtype], atol=TOL[dtype],
                               equal_nan=True)


def _kernel_source(fn) -> str:
    """The C of the one kernel ``fn`` drains to (its launch count is checked too)."""
    with lf.testing.count_launches("cpu") as d:
        out = fn()
        out.numpy()
    assert d.kernels_launched == 1
    plan = next(reversed(lf.device("cpu").engine.plans.values()))
    (step,) = [s for s in plan.steps if s.kind == "kernel"]
    return step.source


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16], ids=str)
def test_softmax_keeps_exp_and_matches_torch(dtype):
    x = _data((37, 300), dtype, 1)
    lx = lf.tensor(x)
    source = _kernel_source(lambda: F.softmax(lx, -1))
    exp = "lf_expf(" if dtype != torch.float64 else "exp("
    assert source.count(exp) == 1 and "row0[r0] = " in source
    _check(F.softmax(lx, -1), torch.softmax(x.double(), -1), dtype)


def test_rows_past_the_buffer_budget_recompute_and_stay_right():
    cols = row_cache.ROW_BUFFER_BYTES // 4 + 3
    x = _data((3, cols), torch.float32, 2)
    lx = lf.tensor(x)
    source = _kernel_source(lambda: F.softmax(lx, -1))
    assert source.count("lf_expf(") == 2 and "row0" not in source
    _check(F.softmax(lx, -1), torch.softmax(x.double(), -1), torch.float32)


def test_a_kept_value_feeds_a_later_stage_and_the_stores():
    """layer_norm of exp(x): exp is kept by the mean's stage and read by the variance's and the stores."""
    x = _data((19, 65), torch.float32, 3, scale=1.0)
    lx = lf.tensor(x)

    def normed_exp(t, lib):
        e = t.exp()
        mean = e.mean(-1, keepdim=True)
        var = ((e - mean) * (e - mean)).mean(-1, keepdim=True)
        return (e - mean) / (var + 1e-5).sqrt()

    source = _kernel_source(lambda: normed_exp(lx, lf))
    assert source.count("lf_expf(") == 1
    _check(normed_exp(lx, lf), normed_exp(x.double(), torch), torch.float32)


def test_a_reduced_extent_of_two_dims_with_nan_and_inf_rows():
    x = _data((6, 5, 7), torch.float32, 4)
    x[1, 2, 3] = float("nan")
    x[2] = float("-inf")
    x[3, 0, 0] = float("inf")
    lx = lf.tensor(x)

    def over_two_dims(t):
        e = (t - t.amax((1, 2), keepdim=True)).exp()
        return e / e.sum((1, 2), keepdim=True)

    source = _kernel_source(lambda: over_two_dims(lx))
    assert source.count("lf_expf(") == 1
    _check(over_two_dims(lx), over_two_dims(x.double()), torch.float32)


def test_log_softmax_keeps_nothing():
    """Its stores read ``x - max``, not the exp: there is nothing worth keeping."""
    x = _data((9, 40), torch.float32, 5)
    lx = lf.tensor(x)
    source = _kernel_source(lambda: F.log_softmax(lx, -1))
    assert "row0" not in source
    _check(F.log_softmax(lx, -1), torch.log_softmax(x.double(), -1), torch.float32)


def test_division_by_a_row_reduction_multiplies_by_its_reciprocal():
    """Along a row, ``x / (a reduction of the row)`` prints as a multiply by the row's
    reciprocal (as torch's softmax computes it): no division per element, the same values
    within float32 rounding; a division by another row's values stays a division."""
    x = _data((19, 70), torch.float32, 5, scale=1.0).abs() + 0.1
    lx = lf.tensor(x)
    src = _kernel_source(lambda: lx / lx.sum(-1, keepdim=True) + lx / (lx + 1))
    assert "* (1.0f / ((float)acc0))" in src and src.count(" / ") == 2   # the reciprocal, and x / (x + 1)
    got = lx / lx.sum(-1, keepdim=True) + lx / (lx + 1)
    xd = x.double()
    _check(got, xd / xd.sum(-1, keepdim=True) + xd / (xd + 1), torch.float32)
