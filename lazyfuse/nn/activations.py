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


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """``input`` where positive, else ``negative_slope * x``: one node (``Op.LEAKY_RELU``, the slope a
    runtime scalar)."""
    _float(input, "leaky_relu")
    value = ops.elementwise(ops.Op.LEAKY_RELU, input, float(negative_slope), compute_dtype=input.dtype)
    return _inplace(input, value, inplace)


def _elu(x, negcoef, poscoef, input_scale):
    """torch's elu kernel, one node (``Op.ELU``, the coefficients runtime scalars): ``x * poscoef``
    where positive, else ``expm1(x * input_scale) * negcoef``."""
    return ops.elementwise(ops.Op.ELU, x, float(negcoef), float(poscoef), float(input_scale), compute_dtype=x.dtype)


def elu(input, alpha=1.0, inplace=False):
    """``input`` where positive, else ``alpha * (exp(x) - 1)``."""
    _float(input, "elu")
    return _inplace(input, _elu(input, alpha, 1.0, 1.0), inplace)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def selu(input, inplace=False):
    """``scale * elu(x, alpha)`` with SELU's constants."""
    _float(input, "selu")
    return _inplace(input, _elu(input, _SELU_ALPHA * _SELU_SCALE, _SELU_SCALE, 1.0), inplace)


def celu(input, alpha=1.0, inplace=False):
    """``input`` where positive, else ``alpha * (exp(x / alpha) - 1)``."""
    _float(input, "celu")
    return _inplace(input, _elu(input, alpha, 1.0, 1.0 / alpha), inplace)


def softplus(input, beta=1.0, threshold=20.0):
    """``log(1 + exp(beta * x)) / beta``, linear where ``beta * x > threshold`` (as torch): one node
    (``Op.SOFTPLUS``, beta and threshold runtime scalars)."""
    _float(input, "softplus")
    return ops.elementwise(ops.Op.SOFTPLUS, input, float(beta), float(threshold), compute_dtype=input.dtype)


def logsigmoid(input):
    """``log(sigmoid(x))`` = ``min(x, 0) - log1p(exp(-|x|))``: one node (``Op.LOGSIGMOID``)."""
    _float(input, "logsigmoid")
    return ops.elementwise(ops.Op.LOGSIGMOID, input)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """``clamp(x, min_val, max_val)``, keeping ``input``'s dtype (an integer tensor clamps to whole bounds)."""
    if min_val > max_val:
        raise ShapeError(f"hardtanh: min_val={min_val} cannot be greater than max_val={max_val}")
    if not input.dtype.is_float:
        min_val, max_val = int(min_val), int(max_val)
    with no_grad():
        out = input.clamp(min_val, max_val)   # one node (Op.CLAMP)
    if recording(input):
        # torch's hardtanh_backward: the gradient where min_val < x < max_val, bounds excluded (a
        # clamp's includes them)
        attach(out, "hardtanh", [(input, lambda g: ops.where((input > min_val) & (input < max_val), g, 0.0))])
    return _inplace(input, out, inplace)


def relu6(input, inplace=False):
    """``clamp(x, 0, 6)``."""
    return hardtanh(input, 0.0, 6.0, inplace)


def hardsigmoid(input, inplace=False):
    """``clamp(x + 3, 0, 6) / 6``: one node (``Op.HARDSIGMOID``)."""
    _float(input, "hardsigmoid")
    return _inplace(input, ops.elementwise(ops.Op.HARDSIGMOID, input, 0.0, 6.0, compute_dtype=input.dtype), inplace)


def hardswish(input, inplace=False):
    """``x * clamp(x + 3, 0, 6) / 6``: one node (``Op.HARDSWISH``)."""
    _float(input, "hardswish")
    return _inplace(input, ops.elementwise(ops.Op.HARDSWISH, input, 0.0, 6.0, compute_dtype=input.dtype), inplace)


def mish(input, inplace=False):
    """``x * tanh(log1p(exp(x)))``: one node (``Op.MISH``; float16/bfloat16 in float32, rounded once,
    as torch)."""
    _float(input, "mish")
    return _inplace(input, ops.elementwise(ops.Op.MISH, input), inplace)


def softsign(input):
    """``x / (1 + |x|)``."""
    return input / (input.abs() + 1.0)


def tanhshrink(input):
    """``x - tanh(x)``."""
    return input - input.tanh()


def threshold(input, threshold, value, inplace=False):  # noqa: A002 (torch's names)
    """``value`` where ``x <= threshold``, else ``input`` (so NaN stays NaN, as torch)."""
    return _inplace(input, ops.where(input <= threshold, value, input).to(input.dtype), inplace)


def glu(input, dim=-1):
    """``a * sigmoid(b)`` of the two halves of ``input`` along ``dim``."""
    from ..torch_ops import chunk
    if input.shape[dim] % 2:
        from ..errors import ShapeError
        raise ShapeError(f"glu: dim {dim} of size {input.shape[dim]} must be even (as in torch)")
    a, b = chunk(input, 2, dim)
    return a * b.sigmoid()


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """``softmax(-x, dim)`` (``dim=None``: torch's implicit dim, with its warning)."""
    from .functional import implicit_dim, softmax
    return softmax(-input, implicit_dim("softmin", input.ndim) if dim is None else dim, dtype=dtype)


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """``x / max(||x||_p, eps)`` along ``dim`` (``out``: written there, as torch's)."""
    if out is not None:
        from ..extern import write_out
        return write_out("normalize", normalize(input, p, dim, eps), out)
    _float(input, "normalize")
    if p == 2:
        norm = (input * input).sum(dim, keepdim=True).sqrt()
    elif p == 1:
        norm = input.abs().sum(dim, keepdim=True)
    elif p == math.inf:
        norm = input.abs().amax(dim, keepdim=True)
    elif p == -math.inf:
        norm = input.abs().amin(dim, keepdim=True)
    elif p == 0:   # torch's 0-"norm": the count of nonzeros (the power formula would divide by 0)
        norm = (input != 0).sum(dim, keepdim=True).to(input.dtype)
    else:
        norm = (input.abs() ** p).sum(dim, keepdim=True) ** (1.0 / p)
    return input / norm.clamp(min=eps)


__all__ = ["leaky_relu", "elu", "selu", "celu", "softplus", "logsigmoid", "hardtanh", "relu6", "hardsigmoid",
           "hardswish", "mish", "softsign", "tanhshrink", "threshold", "glu", "softmin", "normalize"]
