"""More of ``torch.nn.functional``, native: the shrinks and ``prelu`` (elementwise), the pixel
and channel shuffles (reshapes and permutes: views), ``cosine_similarity`` and
``pairwise_distance`` (row reductions), and the margin, Poisson and Gaussian losses. Each
follows torch's formula, arguments and reductions (``reduction='mean' | 'sum' | 'none'``)."""
from __future__ import annotations

import math

from .. import ops
from ..errors import ShapeError
from ..ir import dtypes as dt
from ..ir.dtypes import opmath
from .losses import _reduce


def hardshrink(input, lambd=0.5):
    """0 where ``-lambd <= x <= lambd``, else ``input`` (NaN stays NaN, as in torch)."""
    return ops.where((input >= -lambd) & (input <= lambd), 0.0, input).to(input.dtype)


def softshrink(input, lambd=0.5):
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, else ``x * 0`` (torch's
    formula: NaN stays NaN, and a small negative ``input`` gives -0)."""
    if not lambd >= 0:
        raise ShapeError(f"softshrink: lambd={lambd} must be at least 0 (it is the shrink's half-width)")
    inner = ops.where(input < -lambd, input + lambd, input * 0.0)
    return ops.where(input > lambd, input - lambd, inner).to(input.dtype)


def prelu(input, weight):
    """``input`` where positive, else ``weight * x`` (``weight``: one value, or one per channel, dim 1)."""
    w = weight
    if w.ndim > 1:
        raise ShapeError(f"prelu: weight must be a scalar or 1-d tensor (one value per channel), got shape {w.shape}")
    if w.numel() > 1:
        if input.ndim < 2 or input.shape[1] != w.numel():
            raise ShapeError(f"prelu: {w.numel()} weights for an input of shape {input.shape} (one per channel, dim 1)")
        w = w.reshape((1, w.numel()) + (1,) * (input.ndim - 2))
    elif w.ndim:
        w = w.reshape(())
    return ops.where(input > 0, input, w * input).to(input.dtype)


def pixel_shuffle(input, upscale_factor):
    """(*, C r^2, H, W) -> (*, C, H r, W r)."""
    r = int(upscale_factor)
    *lead, c, h, w = input.shape
    if c % (r * r):
        raise ShapeError(f"pixel_shuffle: {c} channels are not divisible by upscale_factor^2 = {r * r}")
    n = len(lead)
    y = input.reshape(*lead, c // (r * r), r, r, h, w)
    order = list(range(n)) + [n, n + 3, n + 1, n + 4, n + 2]
    return y.permute(*order).reshape(*lead, c // (r * r), h * r, w * r)


def pixel_unshuffle(input, downscale_factor):
    """(*, C, H r, W r) -> (*, C r^2, H, W)."""
    r = int(downscale_factor)
    *lead, c, h, w = input.shape
    if h % r or w % r:
        raise ShapeError(f"pixel_unshuffle: height {h} and width {w} must be divisible by {r}")
    n = len(lead)
    y = input.reshape(*lead, c, h // r, r, w // r, r)
    order = list(range(n)) + [n, n + 2, n + 4, n + 1, n + 3]
    return y.permute(*order).reshape(*lead, c * r * r, h // r, w // r)


def channel_shuffle(input, groups):
    """(N, g k, *) -> (N, k g, *): the channels of the ``groups`` groups interleaved."""
    g = int(groups)
    n, c, *rest = input.shape
    if c % g:
        raise ShapeError(f"channel_shuffle: {c} channels are not divisible by {g} groups")
    return input.reshape(n, g, c // g, *rest).transpose(1, 2).reshape(input.shape)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """``x1 . x2 / max(|x1| |x2|, eps)`` along ``dim`` (broadcast), each norm clamped to ``eps`` as torch."""
    from ..ir.shapes import broadcast_shapes
    out = x1.dtype
    shape = broadcast_shapes(x1.shape, x2.shape)   # (first, as torch: each norm over the broadcast ``dim``)
    a, b = x1.to(opmath(out)).expand(*shape), x2.to(opmath(out)).expand(*shape)
    na = (a * a).sum(dim).sqrt().clamp_min(eps) if eps else (a * a).sum(dim).sqrt()
    nb = (b * b).sum(dim).sqrt().clamp_min(eps) if eps else (b * b).sum(dim).sqrt()
    return ((a / na.unsqueeze(dim)) * (b / nb.unsqueeze(dim))).sum(dim).to(out) if a.ndim else \
        (a * b / (na * nb)).to(out)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """The ``p``-norm of ``x1 - x2 + eps`` along the last dim."""
    d = x1 - x2 + eps   # (integers become float32 here, as in torch)
    out_dtype = d.dtype
    d = d.to(opmath(out_dtype))
    last = -1 if d.ndim else None
    if p == math.inf:
        out = d.abs().amax(last, keepdim=keepdim)
    elif p == 0:
        out = (d != 0).to(d.dtype).sum(last, keepdim=keepdim)
    elif p == 1:
        out = d.abs().sum(last, keepdim=keepdim)
    elif p == 2:
        out = (d * d).sum(last, keepdim=keepdim).sqrt()
    else:
        out = (d.abs() ** p).sum(last, keepdim=keepdim) ** (1.0 / p)
    return out.to(out_dtype)


def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    """``max(0, -target (input1 - input2) + margin)``."""
    return _reduce((-target * (input1 - input2) + margin).clamp_min(0.0), reduction)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):  # noqa: A002
    """``log(1 + exp(-target input))``."""
    return _reduce(((-target * input).exp() + 1.0).log(), reduction)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):  # noqa: A002
    """``input`` where ``target == 1``, ``max(0, margin - input)`` where ``target == -1`` (torch sums both terms)."""
    keep = ops.where(target != 1, (margin - input).clamp_min(0.0), 0.0)   # (not ``input * 0``: NaN at inf)
    return _reduce(ops.where(target != -1, input, 0.0) + keep, reduction)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-08,  # noqa: A002
                     reduce=None, reduction="mean"):
    """``exp(input) - target input`` (log input) or ``input - target log(input + eps)``, plus
    Stirling's term for ``target > 1`` when ``full``."""
    loss = input.exp() - target * input if log_input else input - target * (input + eps).log()
    if full:
        t = target
        stirling = t * t.log() - t + (t * (2 * math.pi)).log() * 0.5
        loss = loss + ops.where(t > 1, stirling, 0.0)
    return _reduce(loss, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-06, reduction="mean"):  # noqa: A002
    """``(log(max(var, eps)) + (input - target)^2 / max(var, eps)) / 2`` (+ log(2 pi) / 2 when ``full``)."""
    if var.ndim < input.ndim and var.shape == input.shape[:-1]:
        var = var.unsqueeze(-1)
    elif var.shape != input.shape and not (var.ndim == input.ndim and var.shape[-1] == 1):
        if var.numel() != 1:
            raise ShapeError(f"gaussian_nll_loss: var of shape {var.shape} does not match the input's {input.shape}")
    v = var.clamp_min(eps)
    loss = (v.log() + (input - target) ** 2 / v) * 0.5
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,  # noqa: A002
                                reduction="mean"):
    """The mean over classes of ``-(target log sigmoid(input) + (1 - target) log sigmoid(-input))``."""
    from .activations import logsigmoid
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    return _reduce(loss.mean(input.ndim - 1), reduction)


def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    """``1 - cos(input1, input2)`` where ``target == 1``, ``max(0, cos - margin)`` where ``target == -1``."""
    eps = 1e-12   # torch's EPSILON in this loss
    dim = input1.ndim - 1
    out = input1.dtype if input1.dtype.is_float else dt.float32
    a, b = input1.to(opmath(out)), input2.to(opmath(out))
    prod = (a * b).sum(dim)
    mag = ((a * a).sum(dim) + eps) * ((b * b).sum(dim) + eps)
    cos = (prod / mag.sqrt()).to(out)
    zeros = cos * 0.0
    pos = ops.where(target == 1, 1.0 - cos, zeros)
    neg = ops.where(target == -1, (cos - margin).clamp_min(0.0), zeros)
    return _reduce(pos + neg, reduction)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-06, swap=False, size_average=None,
                        reduce=None, reduction="mean"):
    """``max(d(a, p) - d(a, n) + margin, 0)`` with ``pairwise_distance`` (``swap``: the nearer of
    ``d(a, n)`` and ``d(p, n)``)."""
    if not margin > 0:
        raise ShapeError(f"triplet_margin_loss: margin must be greater than 0, got {margin}")
    dp = pairwise_distance(anchor, positive, p, eps)
    dn = pairwise_distance(anchor, negative, p, eps)
    if swap:
        from ..functions import minimum
        dn = minimum(dn, pairwise_distance(positive, negative, p, eps))
    return _reduce((dp - dn + margin).clamp_min(0.0), reduction)


__all__ = ["hardshrink", "softshrink", "prelu", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle",
           "cosine_similarity", "pairwise_distance", "margin_ranking_loss", "soft_margin_loss",
           "hinge_embedding_loss", "poisson_nll_loss", "gaussian_nll_loss", "multilabel_soft_margin_loss",
           "cosine_embedding_loss", "triplet_margin_loss"]
