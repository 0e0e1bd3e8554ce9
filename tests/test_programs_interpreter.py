"""Whole programs on the Triton devices (issue #4): the matmul template with its fused epilogue,
differential tests of every op on the ``interpreter`` (few hypothesis examples: it is slow),
and kernel counts pinned as regression tests. The cuda tests run the same checks where torch
sees a GPU.

On a Triton device every float16/bfloat16/float32 matmul is a template kernel, so
linear+bias+gelu is 1 kernel at every size: small ones are fused reductions (below
LAZYFUSE_INLINE_MATMUL), larger ones one tiled ``tl.dot`` kernel with bias and gelu inside.
"""
from __future__ import annotations

import pytest
import torch
import lazyfuse as lf
from lazyfuse.codegen.triton_printer import MatmulConfig, candidate_configs
from programs_cases import inline_matmul_threshold
from test_programs import differential_test, kernels, lf_inputs, linear_bias_gelu

import examples.transformer_block as tb

F = lf.nn.functional
TRITON_DEVICES = ["interpreter", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="the cuda device needs a GPU"))]


test_program_matches_torch_on_the_interpreter = differential_test("interpreter", max_examples=1)


def _explained(y):
    return lf.explain(y).kernels


@pytest.mark.parametrize("device", TRITON_DEVICES)
@pytest.mark.parametrize("size", ["inline", "template_patched", "template_default"])
def test_linear_bias_gelu_is_one_kernel_at_every_size(device, size):
    # inline: 16x32 @ 32x24 (a fused reduction); template_patched: 64x96 @ 96x80 with every matmul
    # on the template; template_default: 128x96 @ 96x96, above the default inline threshold
    m, k, n = {"inline": (16, 32, 24), "template_patched": (64, 96, 80), "template_default": (128, 96, 96)}[size]
    x, w, b = lf_inputs(device, (m, k), (n, k), (n,))
    with inline_matmul_threshold(0 if size == "template_patched" else lf.ops.INLINE_MATMUL):
        assert kernels(device, linear_bias_gelu, x, w, b) == 1
        y = linear_bias_gelu(x, w, b)
        info = _explained(y)
    assert [k.kind for k in info] == (["reduce"] if size == "inline" else ["matmul"])
    if size != "inline":
        assert "tl.dot(" in info[0].source and "lf_gelu(" in info[0].source   # the epilogue is inside
    ref = torch.nn.functional.gelu(torch.nn.functional.linear(x.torch().double(), w.torch().double(),
                                                              b.torch().double()))
    torch.testing.assert_close(y.torch().double(), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("device", TRITON_DEVICES)
def test_batched_broadcast_matmul_with_scale_residual_and_cast_is_one_kernel(device):
    a, b, r = lf_inputs(device, (2, 1, 24, 40), (3, 40, 20), (3, 24, 20))
    program = lambda a, b, r: ((a @ b) * 0.5 + r).tanh().to(lf.bfloat16)   # noqa: E731
    with inline_matmul_threshold(0):
        assert kernels(device, program, a, b, r) == 1
        got = program(a, b, r).torch()
    ref = ((a.torch().double() @ b.torch().double()) * 0.5 + r.torch().double()).tanh()
    assert got.dtype == torch.bfloat16 and got.shape == (2, 3, 24, 20)
    torch.testing.assert_close(got.double(), ref, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("device", TRITON_DEVICES)
def test_float64_matmul_is_a_library_call_plus_its_epilogue(device):
    # the template takes 16- and 32-bit floats; float64 products go to torch, the epilogue is one kernel
    x, w = (t.to(lf.float64) for t in lf_inputs(device, (8, 6), (6, 5)))
    with inline_matmul_threshold(0):
        assert kernels(device, lambda x, w: (x @ w).relu(), x, w) == 2
        got = (x @ w).relu().torch()
    torch.testing.assert_close(got, (x.torch() @ w.torch()).relu())


def test_softmax_and_layer_norm_are_one_kernel_each_on_the_interpreter():
    x, w, b = lf_inputs("interpreter", (16, 48), (48,), (48,))
    assert kernels("interpreter", lambda t: F.softmax(t, -1), x) == 1
    assert kernels("interpreter", lambda t: F.layer_norm(t, (48,), w, b), x) == 1


TRANSFORMER_BLOCK_KERNELS = 12   # batch 1 x 16 tokens x 32 wide, 4 heads: inline matmuls or the template


@pytest.mark.parametrize("threshold", ["inline", "template"])
def test_transformer_block_kernel_count_does_not_grow_on_the_interpreter(threshold):
    # template: layer_norm, q, k, v, scores, the causal mask, softmax, attn @ v, wo + residual,
    # layer_norm, w1 + gelu, w2 + residual
    p = tb.make_weights(32)
    x = lf.tensor(torch.randn(1, 16, 32, generator=torch.Generator().manual_seed(1)), device="interpreter")
    params = {k: lf.tensor(v, device="interpreter") for k, v in p.items()}
    with inline_matmul_threshold(0 if threshold == "template" else lf.ops.INLINE_MATMUL):
        assert kernels("interpreter", tb.block_lf, x, params, 4) <= TRANSFORMER_BLOCK_KERNELS
        got = tb.block_lf(x, params, 4).torch()
    ref = tb.block_torch(x.torch().double(), {k: v.double() for k, v in p.items()}, 4)
    torch.testing.assert_close(got.double(), ref, rtol=1e-4, atol=1e-4)


def test_the_interpreter_tunes_the_template_over_a_small_candidate_list(monkeypatch, tmp_path):
    dev = lf.device("interpreter")
    monkeypatch.setenv("LAZYFUSE_AUTOTUNE", "1")
    monkeypatch.setenv("LAZYFUSE_AUTOTUNE_AFTER", "1")            # tuned at the build
    monkeypatch.setattr(dev.backend, "_tuners", {})               # a fresh tuner...
    monkeypatch.setenv("LAZYFUSE_CACHE_DIR", str(tmp_path))      # ...with no cached choice
    x, w, b = lf_inputs(dev, (40, 72), (48, 72), (48,))
    with inline_matmul_threshold(0), lf.testing.stats_delta(dev) as d:
        y = linear_bias_gelu(x, w, b)
        assert _explained(y)[0].kind == "matmul"
        got = y.torch()
    assert d.autotune_runs == 1 and d.kernels_launched == 1
    assert len(list((tmp_path / "autotune").glob("*.json"))) == 1      # the choice is kept on disk
    ref = torch.nn.functional.gelu(torch.nn.functional.linear(x.torch().double(), w.torch().double(),
                                                              b.torch().double()))
    torch.testing.assert_close(got.double(), ref, rtol=1e-4, atol=1e-4)


def test_template_candidates_are_few_on_the_interpreter_and_clamped_to_the_problem():
    from lazyfuse.codegen.kernel import Kernel, Matmul, Var
    from lazyfuse.codegen.index import Affine
    from lazyfuse.ir.dtypes import float32
    m, n, k = Var("p0", 40), Var("p1", 20), Var("kk", 300)
    mm = Matmul(0, Affine.var(m).scale(300) + Affine.var(k), 1, Affine.var(k).scale(20) + Affine.var(n), m, n, k,
                float32)
    kernel = Kernel("k", (m, n), (), (), (), (), (), (), mm)
    interp = candidate_configs(kernel, interpreter=True)
    assert all(isinstance(c, MatmulConfig) for c in interp) and len(interp) == 2
    assert interp[0] == MatmulConfig(64, 32, 128, 1, 0, True)     # whole m and n in one tile, k in slices
    gpu = candidate_configs(kernel, interpreter=False)
    assert 2 < len(gpu) <= 6 and all(c.block_m <= 64 and c.block_n == 32 and c.block_k >= 16 for c in gpu)
    assert not any(c.upcast for c in gpu)


def _matmul_edge_programs(lib, x, w, z):
    """Matmuls whose results are read in ways an epilogue cannot take: the planner must give
    them their own kernel (or materialize an operand) and still compute torch's values."""
    m = x @ w
    zz = z * 1
    zz[1:7].copy_((x @ w).exp())                      # into a view of a live tensor
    mm = x @ w
    return {"two_consumers": (m.relu(), m.sigmoid()),
            "transposed_epilogue": ((x @ w).T + 1,),
            "self_transpose": ((x @ w) + (x @ w).T,),
            "copy_into_view": (zz,),
            "reduction_after": ((mm + 1).sum(-1), mm.amax(0)),
            "chain": ((x @ w) @ w.T @ w,),
            "vector_operands": ((x @ w[:, 0]).tanh(), w[:, 0] @ x.T)}


@pytest.mark.parametrize("device", ["interpreter", "cpu"])
def test_matmuls_read_other_than_by_an_epilogue_still_match_torch(device):
    g = torch.Generator().manual_seed(0)
    inputs = torch.randn(6, 5, generator=g), torch.randn(5, 6, generator=g), torch.randn(8, 6, generator=g)
    with inline_matmul_threshold(0):
        got = _matmul_edge_programs(lf, *[lf.tensor(t, device=device) for t in inputs])
        ref = _matmul_edge_programs(torch, *[t.double() for t in inputs])
        for name, values in got.items():
            for g_, r in zip(values, ref[name]):
                torch.testing.assert_close(g_.torch().double(), r, rtol=1e-4, atol=1e-4, msg=name)
