"""Whole programs on the ``cpu`` device (issue #4): differential tests of every op against torch
in float32 and bfloat16 (tolerances in tests/programs_cases.py), kernel counts pinned as
regression tests, bad input, and the planner's matmul-epilogue rule (device-free).

CPU kernel counts: a small matmul (<= LAZYFUSE_INLINE_MATMUL multiply-adds) is a fused
reduction, so linear+bias+gelu is 1 kernel; a larger one is a BLAS call into a pooled buffer
plus one fused epilogue kernel: 2.
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings, strategies as st

import lazyfuse as lf
from lazyfuse.ir.node import Node, Op
from lazyfuse.ir.dtypes import float32
from lazyfuse.ir.planner import DrainGraph, plan
from lazyfuse.ir.view import View
from lazyfuse.runtime.triton_devices import DeviceIndexCheck
from programs_cases import CASES, MATMUL_CASES, inline_matmul_threshold, run_case

import examples.transformer_block as tb

F = lf.nn.functional
DTYPES = [torch.float32, torch.bfloat16]
PATHS = [(name, path) for name in CASES for path in (("inline", "matmul") if name in MATMUL_CASES else ("-",))]


def differential_test(device: str, max_examples: int):
    """The randomised differential test of every case on ``device`` (path "matmul": every
    matmul above the inline threshold, so the template / BLAS path is taken at test sizes)."""
    @pytest.mark.parametrize("dtype", DTYPES, ids=str)
    @pytest.mark.parametrize("name,path", PATHS)
    @settings(max_examples=max_examples, deadline=None)
    @given(m=st.integers(1, 9), n=st.integers(1, 9), k=st.integers(1, 12), seed=st.integers(0, 2 ** 16))
    def test(name, path, dtype, m, n, k, seed):
        with inline_matmul_threshold(0 if path == "matmul" else lf.ops.INLINE_MATMUL):
            run_case(device, name, dtype, m, n, k, seed)
    return test


test_program_matches_torch_on_cpu = differential_test("cpu", max_examples=2)


# -- kernel counts (regression tests: each fails if the count grows) -------------------------------
def kernels(device, fn, *args) -> int:
    out = fn(*args)
    lf.sync(device)            # build path
    with lf.testing.count_launches(device) as d:
        out = fn(*args)
        out.numpy()
    return d.kernels_launched


def lf_inputs(device, *shapes):
    g = torch.Generator().manual_seed(0)
    return [lf.tensor(torch.randn(*s, generator=g), device=device) for s in shapes]


def linear_bias_gelu(x, w, b):
    return F.gelu(F.linear(x, w, b))


@pytest.mark.parametrize("size,expected", [("small", 1), ("large", 2)])
def test_linear_bias_gelu_kernel_count_on_cpu(size, expected):
    # small: 16x32 @ 32x24 (12K MACs, a fused reduction); large: 96x160 @ 160x128 (2M MACs, BLAS + epilogue)
    m, k, n = (16, 32, 24) if size == "small" else (96, 160, 128)
    assert kernels("cpu", linear_bias_gelu, *lf_inputs("cpu", (m, k), (n, k), (n,))) == expected


def test_softmax_and_layer_norm_are_one_kernel_each():
    x, w, b = lf_inputs("cpu", (64, 48), (48,), (48,))
    assert kernels("cpu", lambda t: F.softmax(t, -1), x) == 1
    assert kernels("cpu", lambda t: F.log_softmax(t * 2, -1), x) == 1
    assert kernels("cpu", lambda t: F.layer_norm(t, (48,), w, b), x) == 1
    assert kernels("cpu", lambda t: F.rms_norm(t + 1, (48,), w), x) == 1


TRANSFORMER_BLOCK_KERNELS_CPU = 13   # batch 1 x 16 tokens x 32 wide, 4 heads (every matmul inline)


def test_transformer_block_kernel_count_does_not_grow_on_cpu():
    p = tb.make_weights(32)
    x = lf.tensor(torch.randn(1, 16, 32), device="cpu")
    params = {k: lf.tensor(v, device="cpu") for k, v in p.items()}
    assert kernels("cpu", tb.block_lf, x, params, 4) <= TRANSFORMER_BLOCK_KERNELS_CPU


# -- bad input -------------------------------------------------------------------------------------
def test_matmul_inner_dim_mismatch_names_both_shapes():
    a, b = lf_inputs("cpu", (3, 4), (5, 6))
    with pytest.raises(lf.ShapeError, match=r"\(3, 4\) @ \(5, 6\)"):
        a @ b
    assert ((a @ lf.tensor(torch.ones(4, 2))).numpy().shape == (3, 2))   # the engine still works


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
@pytest.mark.parametrize("kind", ["embedding", "gather", "negative"])
def test_index_out_of_range_is_a_clear_error_and_nothing_breaks(device, kind):
    (w,) = lf_inputs(device, (5, 3))
    bad = {"embedding": [1, 5], "gather": [0, 7], "negative": [-6, 0]}[kind]
    idx = lf.tensor(bad, device=device)
    out = F.embedding(idx, w) if kind == "embedding" else w[idx]
    with pytest.raises(lf.ShapeError, match="out of range"):
        out.numpy()
    # (x[i] counts a negative index from the end; embedding refuses it, as torch's)
    good = w[lf.tensor([4, -5], device=device)].torch()
    torch.testing.assert_close(good, torch.stack([w.torch()[4], w.torch()[0]]))
    torch.testing.assert_close(F.embedding(lf.tensor([4, 0], device=device), w).torch(), good)


def test_a_failing_cached_plan_poisons_its_result_and_later_drains_work():
    # the second bad gather takes the steady-state path (a cached plan): its failure must poison
    # this drain's result, not leave it pending to fail every later drain
    w = lf.tensor(torch.randn(5, 3))
    for _ in range(2):
        out = w[lf.tensor([0, 7])]
        with pytest.raises(lf.ShapeError, match="out of range"):
            out.numpy()
        with pytest.raises(lf.ShapeError, match="could not be computed"):
            out.numpy()
        torch.testing.assert_close((w * 2).torch(), w.torch() * 2)


def test_the_device_side_index_check_clamps_flags_and_clears():
    # the cuda path's check, run here on CPU torch tensors: no host sync in gather(), the error
    # surfaces at raise_if_set (the next user drain) and the flag is cleared after it
    check = DeviceIndexCheck(torch.device("cpu"))
    x = torch.arange(12.0).reshape(4, 3)
    out = torch.empty(3, 3)
    check.gather(x, torch.tensor([1, 9, -2]), out, 0, 4, True, None)
    torch.testing.assert_close(out, x[[1, 3, 2]])       # clamped: every read stays inside x
    with pytest.raises(lf.ShapeError, match=r"1 gather/embedding index value\(s\) on cuda:0 .*e\.g\. 9"):
        check.raise_if_set("cuda:0")
    check.raise_if_set("cuda:0")                        # cleared: the device stays usable
    check.gather(x, torch.tensor([-4, 3]), out[:2], 0, 4, True, None)
    check.raise_if_set("cuda:0")                        # in-range indices raise nothing
    torch.testing.assert_close(out[:2], x[[0, 3]])
    check.gather(x, torch.tensor([-4, 3]), out[:2], 0, 4, False, "index_select")
    with pytest.raises(lf.ShapeError, match=r"e\.g\. -4\).*\[0, size\) for index_select"):   # (no wrap: torch's range)
        check.raise_if_set("cuda:0")


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
def test_cat_and_stack_refuse_mismatched_inputs(device):
    a, b, c = lf_inputs(device, (2, 3), (2, 4), (3, 3))
    with pytest.raises(lf.ShapeError, match="differ outside dim 0"):
        lf.cat([a, b], 0)
    assert lf.cat([a, b], 1).shape == (2, 7)
    with pytest.raises(lf.ShapeError, match="same shape"):
        lf.stack([a, c])
    with pytest.raises(lf.ShapeError, match="different numbers of dims"):
        lf.cat([a, a.reshape(6)])
    other = "interpreter" if device == "cpu" else "cpu"
    with pytest.raises(lf.DeviceError):
        lf.cat([a, lf.tensor(torch.ones(2, 3), device=other)])
    mixed = lf.cat([a, lf.tensor(torch.ones(2, 1, dtype=torch.int64), device=device)], 1)
    assert mixed.dtype is lf.float32 and mixed.shape == (2, 4)     # dtypes promote, like torch.cat


# -- the planner's matmul-epilogue rule ------------------------------------------------------------
def _linear_gelu_graph():
    x = Node(Op.BUFFER, (), float32, (8, 16), object())
    w = Node(Op.BUFFER, (), float32, (16, 4), object())
    b = Node(Op.BUFFER, (), float32, (4,), object())
    mm = Node(Op.MATMUL, (x, w), float32, (8, 4))
    bias = Node(Op.VIEW, (b,), float32, (8, 4), View.contiguous((1, 4)).expand((8, 4)))
    add = Node(Op.ADD, (mm, bias), float32, (8, 4))
    gelu = Node(Op.GELU, (add,), float32, (8, 4))
    nodes = [x, w, b, mm, bias, add, gelu]
    return DrainGraph(nodes, [6], [None])


def test_planner_fuses_the_epilogue_into_the_matmul_only_with_a_template():
    g = _linear_gelu_graph()
    with_template = plan(g, matmul_template=frozenset({"float32"}))
    assert [grp.output for grp in with_template.groups] == [6]
    assert with_template.groups[0].matmul == 3
    without = plan(_linear_gelu_graph())
    assert [grp.output for grp in without.groups] == [3, 6]          # library call, then the epilogue
    assert plan(_linear_gelu_graph(), matmul_template=frozenset({"float16"})).groups[0].matmul is None
