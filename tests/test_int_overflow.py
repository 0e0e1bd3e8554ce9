"""Integer arithmetic wraps as torch's does (two's complement), never as C's undefined signed overflow.

gcc -O3 folds on signed overflow being impossible: without ``-fwrapv`` the C kernel of
``(a + 1) > a`` was ``True`` for int32 ``a = INT_MAX`` (torch: ``False``). Values are drawn at the
limits, where the folding shows."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings, strategies as st

import lazyfuse as lf
from lazyfuse.codegen import c_compile

LIMITS = {torch.int32: (-2**31, 2**31 - 1), torch.int64: (-2**63, 2**63 - 1)}
LF_DTYPE = {torch.int32: lf.int32, torch.int64: lf.int64}

# each program on the same operands in torch and lazyfuse; comparisons after an overflow are
# the cases gcc folds, the rest check the wrapped values themselves
PROGRAMS = {
    "add_gt": lambda a, b: (a + 1) > a,
    "sub_lt": lambda a, b: (a - 1) < a,
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "mul_div_eq": lambda a, b: (a * 2) // 2 == a,
    "neg": lambda a, b: -a,
    "abs_ge0": lambda a, b: a.abs() >= 0,
    "sum_gt": lambda a, b: (a + b) > b,
    "chain": lambda a, b: (a * 3 + b) * 5 - a,
}


def near_limits(dtype):
    low, high = LIMITS[dtype]
    edge = st.sampled_from([low, low + 1, -1, 0, 1, high - 1, high])
    return st.lists(st.one_of(edge, st.integers(low, high)), min_size=1, max_size=24)


def run_both(program, values_a, values_b, dtype, device):
    n = min(len(values_a), len(values_b))
    ta = torch.tensor(values_a[:n], dtype=dtype)
    tb = torch.tensor(values_b[:n], dtype=dtype)
    expected = program(ta, tb)
    got = program(lf.tensor(ta.tolist(), dtype=LF_DTYPE[dtype], device=device),
                  lf.tensor(tb.tolist(), dtype=LF_DTYPE[dtype], device=device))
    assert got.tolist() == expected.tolist(), (values_a[:n], values_b[:n])


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=["int32", "int64"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_cases_gcc_folds_give_torchs_values(name, dtype):
    low, high = LIMITS[dtype]
    values = [low, low + 1, -1, 0, 1, high - 1, high]
    run_both(PROGRAMS[name], values, list(reversed(values)), dtype, "cpu")


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=["int32", "int64"])
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_integer_arithmetic_wraps_as_torchs(device, dtype, data):
    name = data.draw(st.sampled_from(sorted(PROGRAMS)))
    run_both(PROGRAMS[name], data.draw(near_limits(dtype)), data.draw(near_limits(dtype)), dtype, device)


def test_the_compile_line_defines_signed_overflow():
    # the guarantee lives in a flag: a refactor of the flags must not drop it silently
    assert "-fwrapv" in c_compile.flags()
