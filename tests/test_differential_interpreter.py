"""The randomised differential suite on the ``interpreter`` device, plus the minimal programs it found.

``tests/test_differential.py`` runs on the default device; here it runs in a subprocess with
``LAZYFUSE_DEVICE=interpreter`` (the same kernels printed as Triton and run by Triton's
interpreter) at a small scale, so the Triton printer is held to the same random programs.

The regressions below are the bugs that suite found, reduced by hand. Triton's interpreter
types the numpy result of a comparison with its *operands'* dtype, and splatting a 0-d value
to a block converts its data to that type: a comparison between 0-d values (a 0-d tensor, a
runtime scalar, a constant index), once it met a block, became float 0./1. and ``|``/``&``/``^``
raised ``TypeError: ufunc 'bitwise_or' not supported``. The printer now broadcasts every leaf
to the block's shape, so no kernel value is 0-d.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import lazyfuse as lf

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def dev():
    return lf.device("interpreter")


def lft(t, dev):
    return lf.tensor(t, device=dev)


def same(got, expected: torch.Tensor):
    got = got.torch()
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    assert tuple(got.shape) == tuple(expected.shape)
    if expected.dtype.is_floating_point:
        torch.testing.assert_close(got, expected, rtol=0, atol=0, equal_nan=True)
    else:
        assert torch.equal(got, expected), (got, expected)


VALS = [1.0, 3.0, float("nan"), -2.0, 2.0, float("-inf")]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16])
@pytest.mark.parametrize("fn", ["maximum", "minimum"])
def test_maximum_of_a_0d_tensor_and_a_block(dev, fn, dtype):
    # lf_max2(x0d, y): its ``a != a`` compared two 0-d floats, then met ``a > b`` (a block)
    x, y = torch.tensor(2.0, dtype=dtype), torch.tensor(VALS, dtype=dtype)
    ours, theirs = getattr(lf, fn), getattr(torch, fn)
    same(ours(lft(x, dev), lft(y, dev)), theirs(x, y))
    same(ours(lft(y, dev), lft(x, dev)), theirs(y, x))


@pytest.mark.parametrize("op", ["and", "or", "xor"])
def test_comparison_of_0d_tensors_with_a_bool_block(dev, op):
    x, y = torch.tensor(1.5, dtype=torch.float64), torch.tensor(2.5, dtype=torch.float64)
    b = torch.tensor([True, False, True, False])
    f = {"and": lambda p, q: p & q, "or": lambda p, q: p | q, "xor": lambda p, q: p ^ q}[op]
    same(f(lft(x, dev) < lft(y, dev), lft(b, dev)), f(x < y, b))
    same(f(lft(b, dev), lft(x, dev) != lft(x, dev)), f(b, x != x))


def test_comparison_of_a_0d_tensor_with_a_runtime_scalar(dev):
    # a 0-d load against a runtime scalar (both 0-d), then ORed with a block
    x, a = torch.tensor(0.5, dtype=torch.float32), torch.tensor([-1.0, 0.0, 1.0], dtype=torch.float32)
    same((lft(x, dev) > 0.25) | (lft(a, dev) > 0), (x > 0.25) | (a > 0))
    same(~(lft(x, dev) > 0.25) ^ (lft(a, dev) > 0), ~(x > 0.25) ^ (a > 0))


def test_where_on_a_0d_condition_of_floats(dev):
    x, y = torch.tensor(float("nan"), dtype=torch.float64), torch.tensor([1.0, -1.0, 4.0], dtype=torch.float64)
    c = (lft(x, dev) != lft(x, dev)) | (lft(y, dev) > 0)
    same(lf.where(c, lft(y, dev), 0.0), torch.where((x != x) | (y > 0), y, 0.0))


def test_reduction_mixing_0d_comparisons_with_rows(dev):
    # the outer ([BLOCK, 1]) and inner ([BLOCK, BLOCK_R]) blocks of a reduction kernel
    x = torch.tensor(-0.5, dtype=torch.float64)
    a = torch.tensor([[1.0, -2.0, 3.0], [-4.0, 5.0, float("nan")]], dtype=torch.float64)
    X, A = lft(x, dev), lft(a, dev)
    same(lf.maximum(A, X).sum(1), torch.maximum(a, x).sum(1))
    same((A.sum(1) > 0) | (X < 0), (a.sum(1) > 0) | (x < 0))
    same(lf.where((X != X) | (A > 0), A, 0.0).amax(1), torch.where((x != x) | (a > 0), a, 0.0).amax(1))


def test_bool_runtime_scalar_with_a_block(dev):
    b = torch.tensor([True, False, False])
    x = torch.tensor(3, dtype=torch.int32)
    same((lft(x, dev) == 3) & lft(b, dev) | False, ((x == 3) & b) | False)
    same(lf.where(lft(x, dev) > 2, lft(b, dev), True), torch.where(x > 2, b, True))


def test_differential_suite_on_the_interpreter():
    env = dict(os.environ, LAZYFUSE_DEVICE="interpreter", LF_DIFF_SCALE="0.15", LF_DIFF_NO_SHRINK="1",
               PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", "tests/test_differential.py"]
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    took = time.monotonic() - start
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"exit {proc.returncode} after {took:.0f}s; the tail of the output:\n{out[-6000:]}"
