"""Issue 7, item 1: dtype misuse across the Tensor methods and ``lf.nn.functional``, against torch.

For every op below and every input dtype: where torch refuses the input, lazyfuse raises a
``DTypeError``; where torch accepts it, lazyfuse gives torch's result dtype and value. The
documented differences (README, Reliability) are not in the table: integer ``//`` and ``%`` by
zero (the data has no zeros where they divide) and bool-mask indexing (its shape depends on
the data). Each call runs on ``cpu``; the table is exhaustive over the API's dtype rules, so
the interpreter would only repeat it (tests/test_differential_interpreter.py covers its
kernels).
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import lazyfuse as lf

F = lf.nn.functional


def fn(ns):
    """The functional namespace of ``ns`` (lazyfuse or torch)."""
    return F if ns is lf else TF


# name -> op(x, ns), ``x`` a 2x4 tensor and ``ns`` the module (lf or torch)
OPS = {
    **{m: (lambda m: lambda x, ns: getattr(x, m)())(m)
       for m in ("exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid", "relu", "neg", "abs",
                 "reciprocal", "isnan", "logical_not", "float", "int", "long", "bool", "half")},
    "gelu": lambda x, ns: fn(ns).gelu(x),
    "gelu tanh": lambda x, ns: fn(ns).gelu(x, approximate="tanh"),
    "silu": lambda x, ns: fn(ns).silu(x),
    "Tensor.gelu": lambda x, ns: x.gelu() if ns is lf else TF.gelu(x),
    "Tensor.silu": lambda x, ns: x.silu() if ns is lf else TF.silu(x),
    "-x": lambda x, ns: -x,
    "~x": lambda x, ns: ~x,
    "x ** -1": lambda x, ns: x ** -1,
    "x.pow(-2)": lambda x, ns: x.pow(-2),
    "x ** np.int64(-1)": lambda x, ns: x ** np.int64(-1),
    "x ** 2": lambda x, ns: x ** 2,
    "x ** 0.5": lambda x, ns: x ** 0.5,
    "x ** True": lambda x, ns: x ** True,
    "x ** x": lambda x, ns: x ** x,
    "2 ** x": lambda x, ns: 2 ** x,
    "x ** -x (tensor)": lambda x, ns: x ** (x * 0 - 2) if x.dtype not in (lf.bool, torch.bool) else x ** x,
    "clamp(0, 2)": lambda x, ns: x.clamp(0, 2),
    "clamp(0.5)": lambda x, ns: x.clamp(0.5),
    "x / x": lambda x, ns: x / x,
    "x // x": lambda x, ns: x // x,
    "x % x": lambda x, ns: x % x,
    "x % 2.5": lambda x, ns: x % 2.5,
    "x + x": lambda x, ns: x + x,
    "x - x": lambda x, ns: x - x,
    "x * 2.5": lambda x, ns: x * 2.5,
    "x & x": lambda x, ns: x & x,
    "x | x": lambda x, ns: x | x,
    "x ^ x": lambda x, ns: x ^ x,
    "x < 1": lambda x, ns: x < 1,
    "maximum": lambda x, ns: ns.maximum(x, x),
    "where": lambda x, ns: ns.where(x > 0, x, x),
    "cat": lambda x, ns: ns.cat([x, x]),
    "sum": lambda x, ns: x.sum(),
    "sum(1)": lambda x, ns: x.sum(1),
    "sum(dtype=float32)": lambda x, ns: x.sum(dtype=ns.float32),
    "mean": lambda x, ns: x.mean(),
    "mean(1)": lambda x, ns: x.mean(1),
    "var": lambda x, ns: x.var(),
    "std(1)": lambda x, ns: x.std(1),
    "amax": lambda x, ns: x.amax(),
    "amin(1)": lambda x, ns: x.amin(1),
    "max(1)": lambda x, ns: x.max(1)[0],
    "argmax": lambda x, ns: x.argmax(),
    "argmin(1)": lambda x, ns: x.argmin(1),
    "softmax": lambda x, ns: x.softmax(1),
    "log_softmax": lambda x, ns: x.log_softmax(1),
    "F.softmax": lambda x, ns: fn(ns).softmax(x, 1),
    "F.softmax(dtype=float32)": lambda x, ns: fn(ns).softmax(x, 1, dtype=ns.float32),
    "F.log_softmax": lambda x, ns: fn(ns).log_softmax(x, 1),
    "F.layer_norm": lambda x, ns: fn(ns).layer_norm(x, (4,)),
    "F.rms_norm": lambda x, ns: fn(ns).rms_norm(x, (4,)),
    "F.linear": lambda x, ns: fn(ns).linear(x, x),
    "matmul": lambda x, ns: ns.matmul(x, x.T),
    "F.dropout(training)": lambda x, ns: fn(ns).dropout(x, 0.5, training=True),
    "F.dropout(p=1)": lambda x, ns: fn(ns).dropout(x, 1.0, training=True),
    "F.dropout(eval)": lambda x, ns: fn(ns).dropout(x, 0.5, training=False),
    "sdpa": lambda x, ns: fn(ns).scaled_dot_product_attention(x[None], x[None], x[None]),
    "F.embedding(weight)": lambda x, ns: fn(ns).embedding(ns.tensor([1, 0]), x),
    "F.embedding(index)": lambda x, ns: fn(ns).embedding(x.abs() if x.dtype not in (lf.bool, torch.bool) else x,
                                                         ns.ones(8, 3)),
    "add_(1.5)": lambda x, ns: x.clone().add_(1.5),
    "add_(x, alpha=2)": lambda x, ns: x.clone().add_(x, alpha=2),
    "add_(x, alpha=1.0)": lambda x, ns: x.clone().add_(x, alpha=1.0),
    "sub_(1, alpha=1.5)": lambda x, ns: x.clone().sub_(1, alpha=1.5),
    "add_(x, alpha=True)": lambda x, ns: x.clone().add_(x, alpha=True),
    "mul_(True)": lambda x, ns: x.clone().mul_(True),
    "div_(2)": lambda x, ns: x.clone().div_(2),
}
DTYPES = ["uint8", "int8", "int16", "int32", "int64", "bool", "float16", "float32"]
DATA = [[1, 2, 3, 4], [-1, -3, 2, 5]]


def outcome(call):
    try:
        return call(), None
    except Exception as e:  # noqa: BLE001 (compared below)
        return None, e


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(OPS))
def test_dtype_rules_match_torch(name, dtype):
    op = OPS[name]
    t = torch.tensor(DATA).to(getattr(torch, dtype))
    want, refused = outcome(lambda: op(t, torch))
    if refused is not None:
        with pytest.raises(lf.DTypeError, match=r"\w"):
            op(lf.tensor(t), lf).numpy()
        return
    got = op(lf.tensor(t), lf).torch()
    assert got.dtype == want.dtype, f"{name} on {dtype}: torch gives {want.dtype}, lazyfuse {got.dtype}"
    assert tuple(got.shape) == tuple(want.shape)
    if name == "F.dropout(training)":   # (random masks differ: each kept element is x / (1 - p))
        want = torch.where(got == 0, 0, t * 2).to(want.dtype)
    if want.dtype.is_floating_point:
        tol = 2e-3 if want.dtype is torch.float16 else 1e-5
        torch.testing.assert_close(got, want, rtol=tol, atol=tol, equal_nan=True)
    else:
        assert torch.equal(got, want), (got, want)


@pytest.mark.parametrize("name, call", [
    ("matmul float32 @ int64", lambda ns: ns.matmul(ns.ones(2, 3), ns.ones(3, 2, dtype=ns.int64))),
    ("matmul int32 @ int64", lambda ns: ns.ones(2, 3, dtype=ns.int32) @ ns.ones(3, 2, dtype=ns.int64)),
    ("matmul float32 @ float64", lambda ns: ns.ones(2, 3) @ ns.ones(3, dtype=ns.float64)),
    ("linear with a float64 weight", lambda ns: fn(ns).linear(ns.ones(2, 3), ns.ones(4, 3, dtype=ns.float64))),
    ("linear with a float64 bias", lambda ns: fn(ns).linear(ns.ones(2, 3), ns.ones(4, 3),
                                                           ns.ones(4, dtype=ns.float64))),
    ("layer_norm with an int64 weight", lambda ns: fn(ns).layer_norm(ns.ones(2, 4), (4,), ns.ones(4, dtype=ns.int64))),
    ("layer_norm with a float64 bias", lambda ns: fn(ns).layer_norm(ns.ones(2, 4), (4,), None,
                                                                   ns.ones(4, dtype=ns.float64))),
    ("layer_norm bfloat16 with mixed params", lambda ns: fn(ns).layer_norm(
        ns.ones(2, 4, dtype=ns.bfloat16), (4,), ns.ones(4), ns.ones(4, dtype=ns.bfloat16))),
    ("sdpa with a float64 key", lambda ns: fn(ns).scaled_dot_product_attention(
        ns.ones(1, 2, 4), ns.ones(1, 2, 4, dtype=ns.float64), ns.ones(1, 2, 4))),
    ("sdpa with an int64 mask", lambda ns: fn(ns).scaled_dot_product_attention(
        ns.ones(1, 2, 4), ns.ones(1, 2, 4), ns.ones(1, 2, 4), attn_mask=ns.ones(2, 2, dtype=ns.int64))),
    ("sdpa with a float16 mask on float32", lambda ns: fn(ns).scaled_dot_product_attention(
        ns.ones(1, 2, 4), ns.ones(1, 2, 4), ns.ones(1, 2, 4), attn_mask=ns.ones(2, 2, dtype=ns.float16))),
    ("add_ of a float with alpha=True", lambda ns: ns.ones(2).add_(ns.ones(2), alpha=True)),
])
def test_mixed_dtypes_torch_refuses_raise_dtype_error(name, call):
    with pytest.raises(Exception):
        call(torch)
    with pytest.raises(lf.DTypeError, match="dtype|alpha"):
        call(lf)
    assert (lf.ones(2) + 1).tolist() == [2.0, 2.0]   # and the engine goes on


@pytest.mark.parametrize("name, call", [
    ("layer_norm float16 with float32 params", lambda ns: fn(ns).layer_norm(
        ns.full((2, 4), 0.5, dtype=ns.float16) * ns.arange(4, dtype=ns.float16), (4,), ns.ones(4) * 2, ns.ones(4))),
    ("sdpa float16 with a float32 mask", lambda ns: fn(ns).scaled_dot_product_attention(
        ns.ones(1, 2, 4, dtype=ns.float16), ns.ones(1, 2, 4, dtype=ns.float16), ns.ones(1, 2, 4, dtype=ns.float16),
        attn_mask=ns.ones(2, 2))),
])
def test_mixed_dtypes_torch_accepts_give_its_result(name, call):
    want = call(torch)
    got = call(lf).torch()
    assert got.dtype == want.dtype
    torch.testing.assert_close(got, want, rtol=2e-3, atol=2e-3)
