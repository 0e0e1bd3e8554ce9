"""The native kernels' formulas that were rewritten for speed (bench/native_ops.py's kernel
column), bit for bit against torch on cpu and interpreter: a clamp by numbers, negation, the
float remainder (``fmod``/``remainder``), ``flip``."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import lazyfuse as lf

DEVICES = ["cpu", "interpreter"]
SPECIAL = [np.nan, -np.nan, 0.0, -0.0, np.inf, -np.inf, 1.0, -2.5, 1e-45, -1e-40, 3.4e38]
INT_VIEW = {torch.float32: torch.int32, torch.float64: torch.int64, torch.float16: torch.int16,
            torch.bfloat16: torch.int16}


def assert_same_bits(got: torch.Tensor, want: torch.Tensor, msg=""):
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, msg)
    if want.dtype is torch.bfloat16:
        # torch's own bfloat16 NaNs differ between its scalar (0x7fc0) and vector (0xffff) paths;
        # lazyfuse rounds every NaN to 0x7fc0: the NaN-ness is compared, the other bits exactly
        nan = want.isnan()
        assert torch.equal(got.isnan(), nan), msg
        got, want = got[~nan], want[~nan]
    iv = INT_VIEW.get(want.dtype)
    if iv is None:
        assert torch.equal(got, want), msg
    else:
        assert torch.equal(got.view(iv), want.view(iv)), (got, want, msg)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_negation_flips_the_sign_bit_of_nan_and_zero_as_torch(device, dtype):
    # (Triton's printer multiplied by -1.0, which keeps a NaN's sign; torch flips it)
    xt = torch.tensor(SPECIAL * 3, dtype=torch.float32).to(dtype)
    x = lf.tensor(xt, device=device)
    assert_same_bits((-x).torch(), -xt, "-x")
    assert_same_bits((x * 1).neg().torch(), (xt * 1).neg(), "fused neg")
    assert_same_bits(lf.neg(x[:2]).torch(), torch.neg(xt[:2]), "lf.neg")


@pytest.mark.parametrize("device", DEVICES)
def test_a_clamp_by_numbers_keeps_signed_zeros_and_nans_as_torch(device):
    # the bound is compared first (``s > x ? s : x``): a value equal to the bound stays, -0.0
    # included, as torch's clamp keeps it (the other order gave the bound, +0.0)
    xt = torch.tensor(SPECIAL * 3 + [7.0, -7.0, 6.0, 0.5], dtype=torch.float32)
    x = lf.tensor(xt, device=device)
    for lo, hi in ((0.0, 6.0), (-0.0, 0.0), (-1.0, 1.0), (float("nan"), 1.0), (0.0, float("nan")), (2.0, -2.0)):
        assert_same_bits(x.clamp(lo, hi).torch(), xt.clamp(lo, hi), f"clamp({lo}, {hi})")
    assert_same_bits(lf.nn.functional.relu6(x).torch(), torch.nn.functional.relu6(xt), "relu6")
    assert_same_bits(x.clamp_min(-0.0).torch(), xt.clamp_min(-0.0), "clamp_min")
    assert_same_bits(x.clamp(max=0.0).torch(), xt.clamp(max=0.0), "clamp(max=)")
