"""Values the op_db runs found wrong (or refused where torch computes), held to torch (and float64)."""
import numpy as np
import pytest
import torch

import lazyfuse as lf
import lazyfuse.nn.functional as F


@pytest.mark.parametrize("args", [(3.1,), (0, 10, 2.5), (-3.7, 2.9), (0.5, 3), (5.9, 0.2, -1.5), (2, 7.99, 1)])
@pytest.mark.parametrize("dtype", ["int64", "int32"])
def test_arange_with_float_bounds_and_an_integer_dtype_truncates_first(args, dtype):
    got = lf.arange(*args, dtype=getattr(lf, dtype)).numpy()
    want = torch.arange(*args, dtype=getattr(torch, dtype)).numpy()
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("args", [(False, True, True), (True,), (0, 3, True), (True, 4)])
@pytest.mark.parametrize("dtype", [None, "float32", "int64"])
def test_arange_takes_bools_as_0_and_1_as_torch(args, dtype):
    # (refused before: conformance, every sample of arange)
    got = lf.arange(*args, dtype=dtype and getattr(lf, dtype)).torch()
    want = torch.arange(*args, dtype=dtype and getattr(torch, dtype))
    assert got.dtype == want.dtype and torch.equal(got, want)


def test_arange_integer_dtype_step_truncated_to_zero_is_refused():
    with pytest.raises(lf.ShapeError, match="step"):
        lf.arange(0, 3, 0.5, dtype=lf.int64)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_sdpa_low_precision_computes_in_float32_and_rounds_once(dtype):
    q = [[[-1, -9, 1, -9, 8, 8, -8, 5]]]
    k = [[[9, 6, -2, -1, 4, 5, -7, 2], [-7, -8, -7, -4, 0, -3, -5, -9], [-9, 6, 6, -2, 0, 6, 0, -8]]]
    v = [[[3], [-8], [-1]]]
    tq, tk, tv = (torch.tensor(a, dtype=getattr(torch, dtype)) for a in (q, k, v))
    want = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv)
    got = F.scaled_dot_product_attention(*(lf.tensor(a, dtype=getattr(lf, dtype)) for a in (q, k, v)))
    assert got.dtype is getattr(lf, dtype)
    assert got.torch().float().item() == want.float().item()
    exact = torch.nn.functional.scaled_dot_product_attention(tq.double(), tk.double(), tv.double()).item()
    assert abs(got.torch().float().item() - exact) <= abs(want.float().item() - exact) + 1e-6


def test_sdpa_with_both_a_mask_and_is_causal_is_refused_as_torch_documents():
    # torch's math path (taken for a mask that requires grad) raises RuntimeError; lazyfuse ran it
    q = torch.randn(2, 3, 4, 8, requires_grad=True)
    mask = torch.randn(4, 4, requires_grad=True)
    with pytest.raises(RuntimeError, match="Explicit attn_mask should not be set when is_causal=True"):
        torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=mask, is_causal=True)
    lq = lf.tensor(q.detach().numpy())
    for grad in (False, True):
        with pytest.raises(RuntimeError, match="Explicit attn_mask should not be set when is_causal=True"):
            F.scaled_dot_product_attention(lq.detach().requires_grad_(grad), lq, lq, attn_mask=lf.tensor(mask.detach().numpy()), is_causal=True)


def test_sdpa_random_float16_matches_torch_with_causal_and_mask():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 8, generator=g).half() for _ in range(3))
    mask = torch.randn(5, 5, generator=g) > 0
    mask[:, 0] = True
    for kwargs in ({"is_causal": True}, {"attn_mask": mask}):
        want = torch.nn.functional.scaled_dot_product_attention(q, k, v, **kwargs).float()
        lkw = {k2: (lf.tensor(v2) if isinstance(v2, torch.Tensor) else v2) for k2, v2 in kwargs.items()}
        got = F.scaled_dot_product_attention(lf.tensor(q), lf.tensor(k), lf.tensor(v), **lkw).torch().float()
        torch.testing.assert_close(got, want, atol=1e-3, rtol=1e-3)
