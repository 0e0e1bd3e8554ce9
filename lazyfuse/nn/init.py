"""``lf.nn.init``: torch.nn.init's initialisers, writing lazyfuse parameters in place.

Each draws from lazyfuse's generator (``lf.manual_seed``, or ``generator=``) with native ops
(``lf.rand``/``lf.randn`` scaled, one fused kernel per tensor), under ``no_grad``, and returns the
tensor, as torch's do; the bounds and standard deviations are torch's formulas (fans from the
tensor's shape, ``calculate_gain``). ``orthogonal_`` and ``dirac_`` run torch's own on the host
(a QR; a structured fill) from a torch generator seeded by lazyfuse's, then write the result.
"""
from __future__ import annotations

import math

import torch

from ..autograd import no_grad
from ..creation import arange, generator_for, rand, randn
from ..errors import ShapeError
from ..extern import _mix
from ..tensor import Tensor

_LINEAR = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
           "sigmoid")


def calculate_gain(nonlinearity: str, param=None) -> float:
    """torch's recommended gain for ``nonlinearity`` (``'relu'``: sqrt 2, ``'leaky_relu'`` with slope ``param``...)."""
    if nonlinearity in _LINEAR:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        if isinstance(slope, bool) or not isinstance(slope, (int, float)):
            raise ShapeError(f"negative_slope {slope} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ShapeError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple:
    if tensor.ndim < 2:
        raise ShapeError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _fan(tensor: Tensor, mode: str) -> int:
    if mode not in ("fan_in", "fan_out"):
        raise ShapeError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _write(tensor: Tensor, value) -> Tensor:
    with no_grad():
        return tensor.copy_(value)


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator=None) -> Tensor:
    """Uniform values in [a, b)."""
    u = rand(tensor.shape, generator=generator, dtype=_float(tensor), device=tensor.device)
    return _write(tensor, u * (b - a) + a)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator=None) -> Tensor:
    """Normal values of ``mean`` and ``std``."""
    z = randn(tensor.shape, generator=generator, dtype=_float(tensor), device=tensor.device)
    return _write(tensor, z * std + mean)


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0, b: float = 2.0,
                  generator=None) -> Tensor:
    """Normal values of ``mean`` and ``std`` truncated to [a, b] (torch's inverse-CDF method)."""
    def cdf(x):
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0
    lo, hi = 2 * cdf((a - mean) / std) - 1, 2 * cdf((b - mean) / std) - 1
    u = rand(tensor.shape, generator=generator, dtype=_float(tensor), device=tensor.device) * (hi - lo) + lo
    return _write(tensor, (u.erfinv() * (std * math.sqrt(2.0)) + mean).clamp(a, b))


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Every element ``val``."""
    with no_grad():
        return tensor.fill_(val)


def ones_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 1.0)


def zeros_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 0.0)


def eye_(tensor: Tensor) -> Tensor:
    """The identity matrix (2-d tensors)."""
    if tensor.ndim != 2:
        raise ShapeError("Only tensors with 2 dimensions are supported")
    rows, cols = (arange(n, device=tensor.device) for n in tensor.shape)
    return _write(tensor, (rows[:, None] == cols[None, :]).to(tensor.dtype))


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = gain * math.sqrt(6.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def kaiming_uniform_(tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                     generator=None) -> Tensor:
    if 0 in tensor.shape:
        return tensor   # torch warns and leaves an empty tensor alone
    bound = math.sqrt(3.0) * calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor: Tensor, a: float = 0, mode: str = "fan_in", nonlinearity: str = "leaky_relu",
                    generator=None) -> Tensor:
    if 0 in tensor.shape:
        return tensor
    return normal_(tensor, 0.0, calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode)), generator)


def orthogonal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """A (semi-)orthogonal matrix from the QR of a normal one (torch's, on the host, from a torch
    generator seeded by lazyfuse's stream as an extern's draw is)."""
    seed, offset = generator_for(tensor.device, generator, "orthogonal_").take(1)
    host_generator = torch.Generator().manual_seed(_mix(seed, offset))
    return _on_host(tensor, lambda host: torch.nn.init.orthogonal_(host, gain, generator=host_generator))


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    """The Dirac delta of a 3-, 4- or 5-d convolution weight (torch's)."""
    return _on_host(tensor, lambda host: torch.nn.init.dirac_(host, groups))


def _on_host(tensor: Tensor, init) -> Tensor:
    from ..creation import tensor as upload
    host = torch.empty(tensor.shape, dtype=tensor.dtype.torch)
    init(host)
    return _write(tensor, upload(host, device=tensor.device))


def _float(tensor: Tensor):
    if not tensor.dtype.is_float:
        raise ShapeError(f"nn.init: a random initialiser needs a floating tensor, this one is {tensor.dtype.name}")
    return tensor.dtype


__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_", "eye_",
           "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "orthogonal_", "dirac_"]
