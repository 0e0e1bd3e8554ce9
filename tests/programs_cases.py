"""The whole-program ops of issue #4 as differential cases, shared by tests/test_programs.py
(``cpu``) and tests/test_programs_interpreter.py (``interpreter``).

A case is one program written once against a library namespace (``lazyfuse`` or ``torch``):
it runs on lazyfuse tensors on the device under test, and on float64 copies of the *same*
inputs in torch eager (for bfloat16 the inputs are rounded to bfloat16 first, so the reference
sees exactly the values lazyfuse sees). Results are compared in float64.

Tolerances, per dtype (``TOL``):

* float32: rtol = atol = 1e-4. Products and sums in float32 over at most ~100 terms of O(1)
  values stay within a few 1e-6 relative; 1e-4 leaves room for exp/log/erf rounding.
* bfloat16: rtol = atol = 2e-2 -- about two bfloat16 ulps (2^-7 = 7.8e-3 each): the result is
  rounded once to bfloat16, and a value that one kernel writes and the next reads (a matmul
  result on the CPU, an attention score) is rounded once more. Programs that chain two
  matmuls through a softmax (attention) get ``BF16_DEEP``: the rounding of the scores is
  amplified by exp.
"""
from __future__ import annotations

import contextlib

import torch

import lazyfuse as lf
import lazyfuse.ops as lf_ops

TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.bfloat16: dict(rtol=2e-2, atol=2e-2)}
BF16_DEEP = dict(rtol=5e-2, atol=5e-2)


@contextlib.contextmanager
def inline_matmul_threshold(macs: int):
    """Matmuls above ``macs`` multiply-adds take the matmul path (template on Triton devices,
    BLAS + epilogue on the CPU); at 0 every matmul does, so small test sizes reach it."""
    old = lf_ops.INLINE_MATMUL
    lf_ops.INLINE_MATMUL = macs
    try:
        yield
    finally:
        lf_ops.INLINE_MATMUL = old


def drained_plans(program):
    """``program()``'s result, and the plans of the drains it and one last ``lf.sync`` ran (the
    engine's ``drain_hook`` sees each)."""
    from lazyfuse.runtime import engine
    plans, old = [], engine.drain_hook
    engine.drain_hook = lambda device, plan, build: plans.append(plan)
    try:
        out = program()
        lf.sync()
    finally:
        engine.drain_hook = old
    return out, plans


def _nn(lib):
    return lib.nn.functional


def _copy_into_view(lib, x, y):
    z = x + 0                    # a live tensor of its own (torch: a copy; lazyfuse: a new storage)
    z[1:3, ::2].copy_(y)         # the write lands in z's buffer
    return z * 2                 # ...and is seen by what reads z afterwards


def _sdpa(lib, q, k, v):
    return _nn(lib).scaled_dot_product_attention(q, k, v, is_causal=True)


def _randn(gen, *shape):
    return torch.randn(*shape, generator=gen)


def _index(gen, high, *shape):
    return torch.randint(0, high, shape, generator=gen)


# name -> (program(lib, *inputs), make_inputs(gen, m, n, k) -> list of float32/int64 tensors)
CASES = {
    "matmul_2d": (lambda lib, a, b: lib.matmul(a, b),
                  lambda g, m, n, k: [_randn(g, m, k), _randn(g, k, n)]),
    "matmul_batched": (lambda lib, a, b: a @ b,
                       lambda g, m, n, k: [_randn(g, 3, m, k), _randn(g, 3, k, n)]),
    "matmul_broadcast": (lambda lib, a, b: a @ b,
                         lambda g, m, n, k: [_randn(g, 2, 1, m, k), _randn(g, 3, k, n)]),
    "matmul_transposed": (lambda lib, a, b: a @ b.transpose(-2, -1),
                          lambda g, m, n, k: [_randn(g, m, k), _randn(g, n, k)]),
    "matmul_strided": (lambda lib, a, b: a[:, ::2] @ b,
                       lambda g, m, n, k: [_randn(g, m, 2 * k), _randn(g, k, n)]),
    "linear_bias_gelu": (lambda lib, x, w, b: _nn(lib).gelu(_nn(lib).linear(x, w, b)),
                         lambda g, m, n, k: [_randn(g, m, k), _randn(g, n, k), _randn(g, n)]),
    "linear_silu_residual": (lambda lib, x, w, r: _nn(lib).silu(_nn(lib).linear(x, w)) * 0.5 + r,
                             lambda g, m, n, k: [_randn(g, m, k), _randn(g, n, k), _randn(g, m, n)]),
    "linear_relu_cast": (lambda lib, x, w: _nn(lib).relu(_nn(lib).linear(x, w)).to(lib.float64),
                         lambda g, m, n, k: [_randn(g, m, k), _randn(g, n, k)]),
    "gelu": (lambda lib, x: _nn(lib).gelu(x), lambda g, m, n, k: [_randn(g, m, n) * 3]),
    "silu": (lambda lib, x: _nn(lib).silu(x), lambda g, m, n, k: [_randn(g, m, n) * 3]),
    "relu": (lambda lib, x: _nn(lib).relu(x), lambda g, m, n, k: [_randn(g, m, n)]),
    "softmax": (lambda lib, x: _nn(lib).softmax(x, -1), lambda g, m, n, k: [_randn(g, m, n) * 4]),
    "softmax_dim0": (lambda lib, x: _nn(lib).softmax(x, 0), lambda g, m, n, k: [_randn(g, m, n) * 4]),
    "log_softmax": (lambda lib, x: _nn(lib).log_softmax(x, -1), lambda g, m, n, k: [_randn(g, m, n) * 4]),
    "layer_norm": (lambda lib, x, w, b: _nn(lib).layer_norm(x, (x.shape[-1],), w, b, 1e-5),
                   lambda g, m, n, k: [_randn(g, m, n) * 2 + 1, _randn(g, n), _randn(g, n)]),
    "rms_norm": (lambda lib, x, w: _nn(lib).rms_norm(x, (x.shape[-1],), w, 1e-6),
                 lambda g, m, n, k: [_randn(g, m, n), _randn(g, n)]),
    "embedding": (lambda lib, i, w: _nn(lib).embedding(i, w),
                  lambda g, m, n, k: [_index(g, k, 2, m), _randn(g, k, n)]),
    "gather_dim1": (lambda lib, x, i: x[:, i] * 2,
                    lambda g, m, n, k: [_randn(g, m, n), _index(g, n, k)]),
    "cat": (lambda lib, a, b: lib.cat([a, b.exp()], 1),
            lambda g, m, n, k: [_randn(g, m, n), _randn(g, m, k)]),
    "stack": (lambda lib, a, b: lib.stack([a, b], 1) + 1,
              lambda g, m, n, k: [_randn(g, m, n), _randn(g, m, n)]),
    "where": (lambda lib, a, b: lib.where(a > 0, a, b),
              lambda g, m, n, k: [_randn(g, m, n), _randn(g, 1, n)]),
    # scan kernels along the row and across rows (a SIMD block of rows), with a product reduction
    "scans": (lambda lib, x: (x * 0.5).cumsum(1) + x.cumprod(0) * x.prod(1, keepdim=True),
              lambda g, m, n, k: [_randn(g, m, n).clamp(-1.2, 1.2)]),
    "dropout_eval": (lambda lib, x: _nn(lib).dropout(x, 0.4, training=False) + 1,
                     lambda g, m, n, k: [_randn(g, m, n)]),
    # the key length is at least the query length (a query row with no visible key is NaN in both)
    "sdpa_causal": (_sdpa, lambda g, m, n, k: [_randn(g, 2, m, k), _randn(g, 2, m + n - 1, k), _randn(g, 2, m + n - 1, n)]),
    "copy_into_view": (_copy_into_view, lambda g, m, n, k: [_randn(g, max(m, 3), n),
                                                             _randn(g, 2, (n + 1) // 2)]),
}
MATMUL_CASES = ("matmul_2d", "matmul_batched", "matmul_broadcast", "matmul_transposed", "matmul_strided",
                "linear_bias_gelu",
                "linear_silu_residual", "linear_relu_cast", "sdpa_causal")


def run_case(device, name: str, dtype, m: int, n: int, k: int, seed: int):
    """Run case ``name`` on ``device`` and in float64 torch from the same inputs; compare."""
    program, make = CASES[name]
    gen = torch.Generator().manual_seed(seed)
    inputs = [t.to(dtype) if t.is_floating_point() else t for t in make(gen, m, n, k)]
    got = program(lf, *[lf.tensor(t, device=device) for t in inputs])
    ref = program(torch, *[t.double() if t.is_floating_point() else t for t in inputs])
    got = got.torch()
    assert tuple(got.shape) == tuple(ref.shape), (got.shape, ref.shape)
    if name == "linear_relu_cast":
        assert got.dtype == torch.float64
    else:
        assert got.dtype == dtype, (got.dtype, dtype)
    tol = BF16_DEEP if dtype is torch.bfloat16 and name == "sdpa_causal" else TOL[dtype]
    torch.testing.assert_close(got.double(), ref, **tol)
