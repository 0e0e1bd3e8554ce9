"""Activation functions of ``torch.nn.functional``, native: compositions of lazyfuse's
elementwise ops (``leaky_relu``, ``hardsigmoid``, ``hardswish``, ``elu``/``selu``/``celu``, ``softplus``,
``logsigmoid``, ``mish`` and ``hardtanh``/``relu6`` (a clamp) one op each), so each fuses into
its neighbours' kernel and autograd differentiates it."""
from __future__ import annotations

import math

from .. import ops
from ..autograd.graph import attach, recording
from ..autograd.mode import no_grad
from ..errors import DTypeError, ShapeError


def _float(x, name):
    if not x.dtype.is_float:
        raise DTypeError(f"{name} needs a floating tensor, got {x.dtype.name} (as in torch); call .float() first")


def _inplace(x, out, inplace):
    return x.copy_(out) if inplace else out


def leaky_relu(x, negative_slope=0.01, inplace=False):
    """``x`` where positive, else ``negative_slope * x``: one node (``Op.LEAKY_RELU``, the slope a
    runtime scalar)."""
    _float(x, "leaky_relu")
    return _inplace(x, ops.elementwise(ops.Op.LEAKY_RELU, x, float(negative_slope), compute_dtype=x.dtype), inplace)


def _elu(x, negcoef, poscoef, input_scale):
    """torch's elu kernel, one node (``Op.ELU``, the coefficients runtime scalars): ``x * poscoef``
    where positive, else ``expm1(x * input_scale) * negcoef``."""
    return ops.elementwise(ops.Op.ELU, x, float(negcoef), float(poscoef), float(input_scale), compute_dtype=x.dtype)


def elu(x, alpha=1.0, inplace=False):
    """``x`` where positive, else ``alpha * (exp(x) - 1)``."""
    _float(x, "elu")
    return _inplace(x, _elu(x, alpha, 1.0, 1.0), inplace)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(x, inplace=False):
    """``scale * elu(x, alpha)`` with SELU's constants."""
    _float(x, "selu")
    return _inplace(x, _elu(x, _SELU_ALPHA * _SELU_SCALE, _SELU_SCALE, 1.0), inplace)


def celu(x, alpha=1.0, inplace=False):
    """``x`` where positive, else ``alpha * (exp(x / alpha) - 1)``."""
    _float(x, "celu")
    return _inplace(x, _elu(x, alpha, 1.0, 1.0 / alpha), inplace)


def softplus(x, beta=1.0, threshold=20.0):
    """``log(1 + exp(beta * x)) / beta``, linear where ``beta * x > threshold`` (as torch): one node
    (``Op.SOFTPLUS``, beta and threshold runtime scalars)."""
    _float(x, "softplus")
    return ops.elementwise(ops.Op.SOFTPLUS, x, float(beta), float(threshold), compute_dtype=x.dtype)


def logsigmoid(x):
    """``log(sigmoid(x))`` = ``min(x, 0) - log1p(exp(-|x|))``: one node (``Op.LOGSIGMOID``)."""
    _float(x, "logsigmoid")
    return ops.elementwise(ops.Op.LOGSIGMOID, x)


def hardtanh(x, min_val=-1.0, max_val=1.0, inplace=False):
    """``clamp(x, min_val, max_val)``, keeping ``x``'s dtype (an integer tensor clamps to whole bounds)."""
    if min_val > max_val:
        raise ShapeError(f"hardtanh: min_val={min_val} cannot be greater than max_val={max_val}")
    if not x.dtype.is_float:
        min_val, max_val = int(min_val), int(max_val)
    with no_grad():
        out = x.clamp(min_val, max_val)   # one node (Op.CLAMP)
    if recording(x):
        # torch's hardtanh_backward: the gradient where min_val < x < max_val, bounds excluded (a
        # clamp's includes them)
        attach(out, "hardtanh", [(x, lambda g: ops.where((x > min_val) & (x < max_val), g, 0.0))])
    return _inplace(x, out, inplace)


def relu6(x, inplace=False):
    """``clamp(x, 0, 6)``."""
    return hardtanh(x, 0.0, 6.0, inplace)


def hardsigmoid(x, inplace=False):
    """``clamp(x + 3, 0, 6) / 6``: one node (``Op.HARDSIGMOID``)."""
    _float(x, "hardsigmoid")
    return _inplace(x, ops.elementwise(ops.Op.HARDSIGMOID, x, 0.0, 6.0, compute_dtype=x.dtype), inplace)


def hardswish(x, inplace=False):
    """``x * clamp(x + 3, 0, 6) / 6``: one node (``Op.HARDSWISH``)."""
    _float(x, "hardswish")
    return _inplace(x, ops.elementwise(ops.Op.HARDSWISH, x, 0.0, 6.0, compute_dtype=x.dtype), inplace)


def mish(x, inplace=False):
    """``x * tanh(log1p(exp(x)))``: one node (``Op.MISH``; float16/bfloat16 in float32, rounded once,
    as torch)."""
    _float(x, "mish")
    return _inplace(x, ops.elementwise(ops.Op.MISH, x), inplace)


def softsign(x):
    """``x / (1 + |x|)``."""
    return x / (x.abs() + 1.0)


def tanhshrink(x):
    """``x - tanh(x)``."""
    return x - x.tanh()


def threshold(x, threshold, value, inplace=False):  # noqa: A002 (torch's names)
    """``value`` where ``x <= threshold``, else ``x`` (so NaN stays NaN, as torch)."""
    return _inplace(x, ops.where(x <= threshold, value, x).to(x.dtype), inplace)


def glu(x, dim=-1):
    """``a * sigmoid(b)`` of the two halves of ``x`` along ``dim``."""
    from ..torch_ops import chunk
    if x.shape[dim] % 2:
        from ..errors import ShapeError
        raise ShapeError(f"glu: dim {dim} of size {x.shape[dim]} must be even (as in torch)")
    a, b = chunk(x, 2, dim)
    return a * b.sigmoid()


def softmin(x, dim, dtype=None):
    """``softmax(-x, dim)``."""
    from .functional import softmax
    return softmax(-x, dim, dtype=dtype)


def normalize(x, p=2.0, dim=1, eps=1e-12):
    """``x / max(||x||_p, eps)`` along ``dim``."""
    _float(x, "normalize")
    if p == 2:
        norm = (x * x).sum(dim, keepdim=True).sqrt()
    elif p == 1:
        norm = x.abs().sum(dim, keepdim=True)
    elif p == math.inf:
        norm = x.abs().amax(dim, keepdim=True)
    elif p == -math.inf:
        norm = x.abs().amin(dim, keepdim=True)
    elif p == 0:   # torch's 0-"norm": the count of nonzeros (the power formula would divide by 0)
        norm = (x != 0).sum(dim, keepdim=True).to(x.dtype)
    else:
        norm = (x.abs() ** p).sum(dim, keepdim=True) ** (1.0 / p)
    return x / norm.clamp(min=eps)


__all__ = ["leaky_relu", "elu", "selu", "celu", "softplus", "logsigmoid", "hardtanh", "relu6", "hardsigmoid",
           "hardswish", "mish", "softsign", "tanhshrink", "threshold", "glu", "softmin", "normalize"]
