"""torch.nn.functional's batch, instance and group norms, and torch's ``native_*_norm`` forms
that also return the saved statistics, as compositions of lazyfuse's reductions (a mean and a
variance over the same input and axes share one kernel) and elementwise ops.

float16/bfloat16 compute in float32 and round once (the statistics a ``native_*`` form
returns keep the input's dtype, as torch's CPU kernels do). In training mode the running
statistics are updated in place (``running.mul_(1 - momentum).add_(momentum * batch)``, the
variance Bessel-corrected), as torch does.
"""
from __future__ import annotations

from ..errors import ShapeError
from ..ir.dtypes import opmath
from ..ir.shapes import prod


def _per_channel(p, ndim):
    """A (C,) parameter shaped to broadcast over dim 1 of an ``ndim``-d input."""
    return p.reshape((1, p.shape[0]) + (1,) * (ndim - 2)) if p.ndim == 1 and ndim > 1 else p


def _stats(x, dims):
    """(mean, biased variance) over ``dims``, keepdim: one reduction kernel."""
    mean = x.mean(dims, keepdim=True)
    d = x - mean
    return mean, (d * d).mean(dims, keepdim=True)


def _normalized(x, mean, inv, weight, bias):
    """``(x - mean) * inv * weight + bias`` in torch's CPU form, ``x * a + (bias - mean * a)`` with
    ``a = inv * weight`` (the same rounding as torch's kernels; every operand broadcast to ``x``)."""
    a = inv * weight if weight is not None else inv
    b = bias - mean * a if bias is not None else -(mean * a)
    return x * a + b


def _channel_params(weight, bias, dtype, ndim):
    return [None if p is None else _per_channel(p.to(dtype), ndim) for p in (weight, bias)]


def _update(running, batch, momentum):
    """``running <- (1 - momentum) running + momentum batch``, in place, in ``running``'s dtype."""
    if running is not None:
        running.copy_((running.to(batch.dtype) * (1.0 - momentum) + batch.detach() * momentum).to(running.dtype))


def _check(x, name, least=2):
    if x.ndim < least:
        raise ShapeError(f"{name}: expected an input with at least {least} dims (N, C, ...), got shape {x.shape}")


def _batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps):
    """(output, batch mean (C,), batch inverse std (C,)), the statistics None in evaluation mode
    (and for an empty input, which torch returns as it is, times ``weight[0]`` plus ``bias[0]`` to
    keep their gradient, whatever its shape and the statistics' sizes: none is read or updated)."""
    if x.numel() == 0:
        out = x.clone()
        if weight is not None:
            out = out * weight[0]
        if bias is not None:
            out = out + bias[0]
        return out, None, None
    _check(x, "batch_norm")
    out_dtype, w = x.dtype, x.to(opmath(x.dtype))
    dims = (0,) + tuple(range(2, x.ndim))
    if training or running_mean is None or running_var is None:   # (no running statistics: the batch's, as torch)
        mean, var = _stats(w, dims)
        n = x.numel() // x.shape[1]
        if n <= 1:
            raise ShapeError(f"Expected more than 1 value per channel when training, got input size {x.shape}: "
                             "batch_norm's batch statistics need two values per channel; pass a larger batch, or "
                             "training=False with running statistics")
        _update(running_mean, mean.reshape(-1), momentum)
        _update(running_var, var.reshape(-1) * (n / (n - 1)), momentum)
    else:
        mean = _per_channel(running_mean.to(w.dtype), x.ndim)
        var = _per_channel(running_var.to(w.dtype), x.ndim)
    inv = (var + eps).rsqrt()
    out = _normalized(w, mean, inv, *_channel_params(weight, bias, w.dtype, x.ndim)).to(out_dtype)
    if not (training or running_mean is None or running_var is None):
        return out, None, None
    return out, mean.reshape(-1), inv.reshape(-1)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1,  # noqa: A002
               eps=1e-05):
    """torch's ``F.batch_norm``: statistics over every dim but 1 (training) or the running ones."""
    return _batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)[0]


def native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):  # noqa: A002
    """torch's ``native_batch_norm``: (output, saved mean, saved inverse std); the saved statistics
    are empty in evaluation mode, as torch's; an empty CPU input in training mode is refused, as torch."""
    # (torch's CPU kernel refuses it; its CUDA one is not checked here, so a GPU input keeps the
    # empty statistics)
    if training and input.numel() == 0 and input.device.type == "cpu":
        raise ShapeError(f"native_batch_norm: input must have at least one element in training mode, got shape "
                         f"{tuple(input.shape)} (torch refuses it too); F.batch_norm takes it and returns it empty")
    out, mean, inv = _batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)
    if mean is None:
        from ..creation import empty
        nothing = empty(0, dtype=input.dtype, device=input.device)
        return out, nothing, nothing
    return out, mean.to(input.dtype), inv.to(input.dtype)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,  # noqa: A002
                  use_input_stats=True, momentum=0.1, eps=1e-05):
    """torch's ``F.instance_norm``: statistics per sample and channel over the spatial dims — a
    batch norm of the input seen as one sample of N * C channels, as torch computes it (the
    running statistics are the mean over the samples of theirs). float16/bfloat16: torch's own (its
    rounding steps there are not the batch norm's)."""
    x = input
    _check(x, "instance_norm")
    if (running_mean is None) != (running_var is None):
        raise ShapeError("instance_norm: running_mean and running_var must both be None or both be given (as torch)")
    if opmath(x.dtype) is not x.dtype:
        import torch.nn.functional as TF
        from ..extern import extern
        return extern(TF.instance_norm, x, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)
    n, c = x.shape[0], x.shape[1]
    tiled = [None if p is None else p.repeat(n) for p in (weight, bias, running_mean, running_var)]
    out = _batch_norm(x.reshape((1, n * c) + x.shape[2:]), tiled[2], tiled[3], tiled[0], tiled[1],
                      use_input_stats, momentum, eps)[0]
    if use_input_stats:
        for running, updated in zip((running_mean, running_var), tiled[2:]):
            if running is not None:
                running.copy_(updated.reshape(n, c).to(opmath(running.dtype)).mean(0).to(running.dtype))
    return out.reshape(x.shape)


def _group_norm(x, num_groups, weight, bias, eps):
    _check(x, "group_norm")
    n, c = x.shape[0], x.shape[1]
    if c % num_groups:
        raise ShapeError(f"group_norm: {c} channels do not split into {num_groups} groups")
    out_dtype, w = x.dtype, x.to(opmath(x.dtype))
    g = w.reshape(n, num_groups, c // num_groups, prod(x.shape[2:]))   # (not -1: ambiguous for an empty batch)
    mean, var = _stats(g, (2, 3))
    inv = (var + eps).rsqrt()
    params = [None if p is None else p.to(w.dtype).reshape(1, num_groups, c // num_groups, 1) for p in (weight, bias)]
    out = _normalized(g, mean, inv, *params).reshape(x.shape).to(out_dtype)
    return out, mean.reshape(n, num_groups), inv.reshape(n, num_groups)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-05):  # noqa: A002
    """torch's ``F.group_norm``: statistics per sample over each group of channels and the spatial dims."""
    return _group_norm(input, num_groups, weight, bias, eps)[0]


def native_group_norm(input, weight, bias, N, C, HxW, group, eps):  # noqa: A002,N803 (torch's names)
    """torch's ``native_group_norm``: (output, mean (N, group), inverse std (N, group))."""
    out, mean, inv = _group_norm(input.reshape(N, C, HxW) if input.ndim == 2 else input, group, weight, bias, eps)
    return out.reshape(input.shape), mean.to(input.dtype), inv.to(input.dtype)


def native_layer_norm(input, normalized_shape, weight, bias, eps):  # noqa: A002
    """torch's ``native_layer_norm``: (output, mean, inverse std), the statistics keepdim over the
    normalized dims."""
    from .functional import layer_norm
    x = input
    k = len(tuple(normalized_shape))
    dims = tuple(range(x.ndim - k, x.ndim))
    w = x.to(opmath(x.dtype))
    mean, var = _stats(w, dims)
    out = layer_norm(x, normalized_shape, weight, bias, eps)
    return out, mean.to(x.dtype), (var + eps).rsqrt().to(x.dtype)


__all__ = ["batch_norm", "instance_norm", "group_norm"]
NATIVE_FORMS = {"native_batch_norm": native_batch_norm, "native_group_norm": native_group_norm,
                "native_layer_norm": native_layer_norm}
