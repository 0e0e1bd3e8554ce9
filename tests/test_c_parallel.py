"""Which C kernels get an OpenMP parallel region (lazyfuse/codegen/c_parallel.py): a cost estimate
of the loops, in units (~0.05-0.1 ns of one core), against LAZYFUSE_PARALLEL_THRESHOLD. Small
kernels must print no region at all; expensive ones (a gelu per element, several passes along a
row) get one at fewer elements than cheap ones; every kind computes the same values either way."""
from __future__ import annotations

import pytest
import torch

import lazyfuse as lf
from lazyfuse.codegen import c_parallel
from lazyfuse.errors import CompileError

F = lf.nn.functional


def regions(fn, *inputs) -> int:
    """``omp parallel`` pragmas in the C the cpu device prints for ``fn(*inputs)`` (not executed)."""
    return str(lf.explain(fn(*[lf.tensor(t, device="cpu") for t in inputs]))).count("omp parallel")


def rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


CASES = [  # (name, lazyfuse fn, torch fn, input shapes, parallel by default?)
    ("small add", lambda a, b: a + b, lambda a, b: a + b, [(4096,), (4096,)], False),
    ("large add", lambda a, b: a + b, lambda a, b: a + b, [(1 << 16,), (1 << 16,)], True),
    ("gelu, few elements", lambda a: F.gelu(a), torch.nn.functional.gelu, [(2048,)], True),
    ("tiny matmul", lambda a, b: a @ b, lambda a, b: a @ b, [(64, 32), (32, 1)], False),
    ("matmul + gelu epilogue", lambda a, b: F.gelu(a @ b), lambda a, b: torch.nn.functional.gelu(a @ b),
     [(32, 64), (64, 64)], True),
    ("softmax rows", lambda a: a.softmax(-1), lambda a: a.softmax(-1), [(16, 512)], True),
    ("short sum", lambda a: a.sum(-1), lambda a: a.sum(-1), [(4, 2048)], False),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_default_threshold_places_regions_and_values_match_torch(case, monkeypatch):
    _, fl, ft, shapes, par = case
    monkeypatch.delenv("LAZYFUSE_PARALLEL_THRESHOLD", raising=False)
    inputs = [rand(*s, seed=i) for i, s in enumerate(shapes)]
    assert (regions(fl, *inputs) > 0) == par
    got = fl(*[lf.tensor(t, device="cpu") for t in inputs]).torch()
    torch.testing.assert_close(got, ft(*inputs), rtol=2e-5, atol=2e-5)


def test_the_line_falls_where_the_estimate_says():
    """gelu costs ~80 units an element, an addition ~3; a multiply-add 4 (it runs faster than that)."""
    assert regions(lambda a: F.gelu(a), rand(2048)) == 1
    assert regions(lambda a, b: a + b, rand(2048), rand(2048)) == 0
    assert regions(lambda a, b: a @ b, rand(256, 64), rand(64)) == 0    # a decode step's 16k-MAC GEMV: ~2 us


def test_split_reduction_stages_get_a_region_only_when_each_is_worth_one():
    """A ``split`` sum (few outputs, long rows) opens one region per output: each must be big."""
    assert regions(lambda a: a.sum(-1), rand(32, 8192)) == 0            # 32 regions of 16K units: none
    assert regions(lambda a: a.sum(-1), rand(2, 1 << 17)) == 1          # 2 regions of 256K units


@pytest.mark.parametrize("value, expect", [("0", True), ("1000000000000", False)])
def test_env_var_moves_the_line_and_values_stay_right(value, expect, monkeypatch):
    monkeypatch.setenv("LAZYFUSE_PARALLEL_THRESHOLD", value)
    a, b = rand(300), rand(300, seed=1)
    assert (regions(lambda x, y: (x * y).exp(), a, b) > 0) == expect
    big = rand(64, 256)
    assert (regions(lambda x: x.softmax(-1), big) > 0) == expect
    got = (lf.tensor(big, device="cpu") * 3.0).softmax(-1).torch()
    torch.testing.assert_close(got, (big * 3.0).softmax(-1), rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("bad", ["lots", "-1", "1.5"])
def test_a_bad_threshold_is_a_clear_compile_error_and_the_engine_recovers(bad, monkeypatch):
    monkeypatch.setenv("LAZYFUSE_PARALLEL_THRESHOLD", bad)
    with pytest.raises(CompileError, match="LAZYFUSE_PARALLEL_THRESHOLD"):
        c_parallel.threshold()
    t = rand(5, 7)
    x = lf.tensor(t, device="cpu")
    with pytest.raises(CompileError, match="LAZYFUSE_PARALLEL_THRESHOLD"):   # a plan no other test builds
        ((x * 7.25 - 1.5).cos() * x).abs().tolist()
    monkeypatch.delenv("LAZYFUSE_PARALLEL_THRESHOLD")
    torch.testing.assert_close(((x * 7.25 - 1.5).cos() * x).abs().torch(), ((t * 7.25 - 1.5).cos() * t).abs())
    torch.testing.assert_close(x.torch(), t)
