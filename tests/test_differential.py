"""Randomised differential tests: hypothesis draws programs (tests/programs.py) that run on
lazyfuse and on torch eager side by side; every live value must match at the end."""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import lazyfuse as lf
from programs import ALL_DTYPES, COMMON, NARROW_INTS, WEIGHTS, run_program, scaled

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@settings(COMMON, max_examples=scaled(80))
@given(st.data())
def test_float32_programs(data):
    run_program(data, (torch.float32,))


@settings(COMMON, max_examples=scaled(60))
@given(st.data())
def test_low_precision_float_programs(data):
    run_program(data, (torch.float16, torch.bfloat16, torch.float32))


@settings(COMMON, max_examples=scaled(50))
@given(st.data())
def test_float64_programs(data):
    run_program(data, (torch.float64, torch.float32))


@settings(COMMON, max_examples=scaled(60))
@given(st.data())
def test_integer_and_bool_programs(data):
    run_program(data, (torch.int32, torch.int64, torch.bool))


@settings(COMMON, max_examples=scaled(40))
@given(st.data())
def test_narrow_integer_programs(data):
    run_program(data, NARROW_INTS + (torch.int32, torch.bool, torch.float32))


@settings(COMMON, max_examples=scaled(100))
@given(st.data())
def test_mixed_dtype_programs(data):
    run_program(data, ALL_DTYPES)


@settings(COMMON, max_examples=scaled(60))
@given(st.data())
def test_inplace_and_view_heavy_programs(data):
    weights = dict(WEIGHTS, inplace=8, view=8, drop=4, unary=2, binary=3, reduce=2)
    run_program(data, ALL_DTYPES, weights=weights)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_every_dtype_roundtrips_with_special_values(dtype):
    """Every dtype, with NaN/inf/-0.0 mixed in, survives upload, a fused op and a read."""
    vals = torch.tensor([0.0, -0.0, 1.5, -2.0, math.nan, math.inf, -math.inf, 3.0], dtype=torch.float64)
    t = vals.to(dtype) if dtype.is_floating_point else torch.tensor([0, -1, 2, 3, -4, 5, 6, 7]).to(dtype)
    x = lf.from_torch(t)
    y = (x + x) if dtype is not torch.bool else (x | ~x)
    want = (t + t) if dtype is not torch.bool else (t | ~t)
    got = y.torch()
    assert got.dtype == want.dtype
    assert torch.equal(got.isnan(), want.isnan()) if dtype.is_floating_point else True
    assert torch.equal(torch.nan_to_num(got.double(), nan=7.0), torch.nan_to_num(want.double(), nan=7.0))
    if dtype.is_floating_point:
        assert torch.equal(torch.signbit(x.torch()), torch.signbit(t))  # -0.0 kept


def test_the_check_holds_lazyfuse_to_float64_where_torch_float32_is_not_finite():
    """A program the candidate sweep drew: ``x / gelu(x).sum()`` with an inf in ``x``. On AVX-512
    CPUs torch float32's ``gelu(inf)`` is nan, so torch's whole result is nan where the float64
    reference is finite; lazyfuse's exact answer must pass and a wrong one must not."""
    import types
    from programs import Meta, Program, Val

    t = torch.tensor([[-0.0, -4.0, -0.0], [7.0, -1.0, math.inf]])
    s = t.double() / torch.nn.functional.gelu(t.double()).sum()
    torch_f32 = torch.full_like(t, math.nan)   # what torch float32 gives on such a machine
    program = types.SimpleNamespace(log=[])
    Program.check(program, Val(lf.from_torch(s.float()), torch_f32, s, Meta(scale=7.0, rtol=1e-6), "v"))
    wrong = s.float().clone()
    wrong[0, 1] = 1.0
    with pytest.raises(AssertionError, match="mismatch"):
        Program.check(program, Val(lf.from_torch(wrong), torch_f32, s, Meta(scale=7.0, rtol=1e-6), "v"))
