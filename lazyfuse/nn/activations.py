"""Activation functions of ``torch.nn.functional``, native: compositions of lazyfuse's
elementwise ops, so each fuses into its neighbours' kernel and autograd differentiates it."""
from __future__ import annotations

import math

from .. import ops
from ..errors import DTypeError
from ..ir.dtypes import opmath


def _float(x, name):
    if not x.dtype.is_float:
        raise DTypeError(f"{name} needs a floating tensor, got {x.dtype.name} (as in torch); call .float() first")


def _inplace(x, out, inplace):
    return x.copy_(out) if inplace else out


def leaky_relu(x, negative_slope=0.01, inplace=False):
    """``x`` where positive, else ``negative_slope * x``."""
    return _inplace(x, ops.where(x > 0, x, x * negative_slope).to(x.dtype), inplace)


def elu(x, alpha=1.0, inplace=False):
    """``x`` where positive, else ``alpha * (exp(x) - 1)``."""
    _float(x, "elu")
    # exp of min(x, 0): the branch not taken stays finite, so its zero gradient is not 0 * inf = NaN
    return _inplace(x, ops.where(x > 0, x, (ops.elementwise(ops.Op.MINIMUM, x, 0.0).exp() - 1.0) * alpha), inplace)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(x, inplace=False):
    """``scale * elu(x, alpha)`` with SELU's constants."""
    return _inplace(x, elu(x, _SELU_ALPHA) * _SELU_SCALE, inplace)


def celu(x, alpha=1.0, inplace=False):
    """``x`` where positive, else ``alpha * (exp(x / alpha) - 1)``."""
    _float(x, "celu")
    return _inplace(x, ops.where(x > 0, x, ((ops.elementwise(ops.Op.MINIMUM, x, 0.0) * (1.0 / alpha)).exp() - 1.0)
                                 * alpha), inplace)   # (min: see elu)


def softplus(x, beta=1.0, threshold=20.0):
    """``log(1 + exp(beta * x)) / beta``, linear where ``beta * x > threshold`` (as torch)."""
    _float(x, "softplus")
    bx = x * beta
    # max(bx, 0) + log(1 + exp(-|bx|)): no overflow for large bx
    soft = (ops.elementwise(ops.Op.MAXIMUM, bx, 0.0) + ((-bx.abs()).exp() + 1.0).log()) * (1.0 / beta)
    return ops.where(bx > threshold, x, soft)


def logsigmoid(x):
    """``log(sigmoid(x))`` = ``min(x, 0) - log(1 + exp(-|x|))``."""
    _float(x, "logsigmoid")
    return ops.elementwise(ops.Op.MINIMUM, x, 0.0) - ((-x.abs()).exp() + 1.0).log()


def hardtanh(x, min_val=-1.0, max_val=1.0, inplace=False):
    """``clamp(x, min_val, max_val)``, keeping ``x``'s dtype (an integer tensor clamps to whole bounds)."""
    if not x.dtype.is_float:
        min_val, max_val = int(min_val), int(max_val)
    return _inplace(x, x.clamp(min_val, max_val), inplace)


def relu6(x, inplace=False):
    """``clamp(x, 0, 6)``."""
    return hardtanh(x, 0.0, 6.0, inplace)


def hardsigmoid(x, inplace=False):
    """``clamp(x / 6 + 1/2, 0, 1)``."""
    _float(x, "hardsigmoid")
    return _inplace(x, ((x + 3.0).clamp(0.0, 6.0) / 6.0).to(x.dtype), inplace)


def hardswish(x, inplace=False):
    """``x * hardsigmoid(x)``."""
    _float(x, "hardswish")
    return _inplace(x, (x * (x + 3.0).clamp(0.0, 6.0) / 6.0).to(x.dtype), inplace)


def mish(x, inplace=False):
    """``x * tanh(softplus(x))`` (float16/bfloat16 in float32, rounded once, as torch)."""
    _float(x, "mish")
    wide = x.to(opmath(x.dtype))
    return _inplace(x, (wide * softplus(wide).tanh()).to(x.dtype), inplace)


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
