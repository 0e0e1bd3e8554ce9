"""Loss functions of ``torch.nn.functional``, native: compositions of lazyfuse's ops (a class
pick is a comparison against an ``arange``, not a gather), so a loss is a few fused kernels and
autograd differentiates it. Arguments, reductions and edge cases follow torch (``ignore_index``,
``label_smoothing``, class weights, probability targets)."""
from __future__ import annotations

from .. import ops
from ..errors import DTypeError, ShapeError
from ..ir.dtypes import int8, int16, opmath


def _reduce(loss, reduction: str):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ShapeError(f"reduction={reduction!r} is not one of 'mean', 'sum', 'none'")


def _check_same_shape(input, target, name):
    if input.shape != target.shape:
        raise ShapeError(f"{name}: input shape {input.shape} and target shape {target.shape} differ; "
                         "torch would broadcast them with a warning, lazyfuse asks for equal shapes")


def _weighted(loss, weight, reduction, name):
    """``loss`` times ``weight`` (of the input's shape), reduced as torch's weighted ``mse_loss`` and
    ``l1_loss``: ``'mean'`` is the weighted mean (the sum over the weights' sum)."""
    if weight is None:
        return _reduce(loss, reduction)
    if weight.shape != loss.shape:
        raise ShapeError(f"Weights and input must have the same size: {name}'s weight has shape {weight.shape}, "
                         f"the input {loss.shape}; pass one weight per element")
    loss = loss * weight
    return loss.sum() / weight.sum() if reduction == "mean" else _reduce(loss, reduction)


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean squared error (``weight``: torch's weighted mean)."""
    _check_same_shape(input, target, "mse_loss")
    d = input - target
    return _weighted(d * d, weight, reduction, "mse_loss")


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean absolute error (``weight``: torch's weighted mean)."""
    _check_same_shape(input, target, "l1_loss")
    return _weighted((input - target).abs(), weight, reduction, "l1_loss")


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """``0.5 d^2 / beta`` where ``|d| < beta``, else ``|d| - beta/2``."""
    _check_same_shape(input, target, "smooth_l1_loss")
    d = (input - target).abs()
    if beta == 0:
        return _reduce(d, reduction)
    return _reduce(ops.where(d < beta, d * d * (0.5 / beta), d - 0.5 * beta), reduction)


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """``0.5 d^2`` where ``|d| < delta``, else ``delta (|d| - delta/2)``."""
    _check_same_shape(input, target, "huber_loss")
    if not delta > 0:
        raise ShapeError(f"huber_loss: delta={delta} must be positive")
    out = input.dtype
    d = (input.to(opmath(out)) - target.to(opmath(out))).abs()   # half types: in float32, rounded once
    loss = ops.where(d < delta, d * d * 0.5, (d - 0.5 * delta) * delta).to(out)
    return _reduce(loss * weight if weight is not None else loss, reduction)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """``-(t log x + (1 - t) log(1 - x))``, the logs clamped at -100 (as torch)."""
    _check_same_shape(input, target, "binary_cross_entropy")
    loss = -(target * input.log().clamp(min=-100.0) + (1.0 - target) * (1.0 - input).log().clamp(min=-100.0))
    return _reduce(loss * weight if weight is not None else loss, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None, reduction="mean",
                                     pos_weight=None):
    """``binary_cross_entropy(sigmoid(x), t)`` computed stably from the logits ``x``; float16 and
    bfloat16 in float32, rounded once (rounding each step put it 1 ulp further from float64 than torch)."""
    from ..ir.dtypes import result_type
    _check_same_shape(input, target, "binary_cross_entropy_with_logits")
    given = [t for t in (input, target, weight, pos_weight) if t is not None]
    out = result_type([t.dtype for t in given if t.ndim], [t.dtype for t in given if not t.ndim], [])
    input, target, weight, pos_weight = (None if t is None else t.to(opmath(out))
                                         for t in (input, target, weight, pos_weight))
    softplus_neg = ((-input.abs()).exp() + 1.0).log() + ops.elementwise(ops.Op.MAXIMUM, -input, 0.0)   # log(1 + e^-x)
    if pos_weight is not None:
        loss = (1.0 - target) * input + (1.0 + (pos_weight - 1.0) * target) * softplus_neg
    else:
        loss = (1.0 - target) * input + softplus_neg
    return _reduce(loss * weight if weight is not None else loss, reduction).to(out)


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """``target * (log(target) - input)`` (0 where target is 0); ``batchmean`` divides the sum by the batch."""
    if log_target:
        loss = target.exp() * (target - input)
    else:
        # xlogy(target, target) - target * input: 0 where target is 0 (a negative target is NaN, as torch)
        loss = ops.where(target == 0, 0.0, target * target.log()) - target * input
    if reduction == "batchmean":
        return loss.sum() / float(input.shape[0]) if input.ndim else loss.sum()
    return _reduce(loss, reduction)


def _class_mask(target, n_classes, like):
    """bool (N, C, ...): True at each sample's target class (nothing for an out-of-range index)."""
    from ..creation import arange
    shape = (1, n_classes) + (1,) * (target.ndim - 1)
    return target.unsqueeze(1) == arange(n_classes, device=target.device).reshape(shape)


def _counted(target, n_classes, ignore_index):
    """Whether each target counts (is not ``ignore_index``), with each counted class refused at the
    drain unless in [0, C) (torch: an ``IndexError``, "Target 7 is out of bounds."; ours names it as
    class dim 1 of size C). The check is part of this per-sample value, not of the (N, C) class
    mask (where an out-of-range class matches none): read at each sample's own index, it fuses
    into the kernel that sums the counts, where the mask's broadcast read would make it a
    kernel of its own."""
    from ..torch_index import checked_positions
    ignored = target == ignore_index
    checked = checked_positions(ops.where(ignored, 0, target), 1, n_classes, False, "nll_loss target")
    return ~ignored & (checked >= 0)   # (a checked position is never negative: the check's value, kept)


def _as_batch(input, target):
    """A (C,) input with a 0-d target (or, as torch takes it, a (1,) one) is a batch of one."""
    if input.ndim == 1:
        if target.ndim != 0 and target.shape != (1,) and not target.dtype.is_float:
            raise ShapeError(f"a 1-d input of {input.shape[0]} classes needs a 0-d or (1,) target, got {target.shape}")
        return input.unsqueeze(0), target if target.ndim else target.unsqueeze(0), True
    return input, target, False


def _check_classes(input, target, name):
    if target.dtype.is_float or target.dtype.is_bool or target.dtype in (int8, int16):
        raise DTypeError(f"{name}: class-index targets must be integers (int64, int32 or uint8, as torch "
                         f"takes them), got {target.dtype.name}")
    if target.ndim and input.ndim > 1 and target.shape[0] != input.shape[0]:
        raise ShapeError(f"Expected input batch_size ({input.shape[0]}) to match target batch_size "
                         f"({target.shape[0]}): {name}'s target shape {target.shape} does not match input "
                         f"{input.shape}")
    if target.shape != input.shape[:1] + input.shape[2:]:
        raise ShapeError(f"{name}: target shape {target.shape} does not match input {input.shape} "
                         f"(expected {input.shape[:1] + input.shape[2:]})")


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """``-input[n, target[n]] * weight[target[n]]``; ``ignore_index`` targets count nothing, and
    ``mean`` divides by the summed weights of the counted targets."""
    input, target, single = _as_batch(input, target)
    _check_classes(input, target, "nll_loss")
    n_classes = input.shape[1]
    pick = _class_mask(target, n_classes, input)
    picked = ops.where(pick, input, 0.0).sum(1)
    valid = _counted(target, n_classes, ignore_index).to(input.dtype)
    if weight is not None:
        w = ops.where(pick, weight.reshape((1, n_classes) + (1,) * (input.ndim - 2)), 0.0).sum(1) * valid
    else:
        w = valid
    loss = -picked * w
    if reduction == "mean":
        return loss.sum() / w.sum()
    if single and reduction == "none":
        loss = loss.squeeze(0)
    return _reduce(loss, reduction)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                  label_smoothing=0.0):
    """``nll_loss(log_softmax(input, 1), target)`` with torch's ``label_smoothing``; a float
    ``target`` of the input's shape holds class probabilities."""
    from .functional import log_softmax
    if not 0.0 <= label_smoothing <= 1.0:
        raise ShapeError(f"cross_entropy: label_smoothing={label_smoothing} must be in [0, 1]")
    class_dim = 0 if input.ndim == 1 else 1
    logp = log_softmax(input, class_dim)
    n_classes = input.shape[class_dim]
    wshape = (n_classes,) + (1,) * (input.ndim - 1 - class_dim)
    if target.dtype.is_float:
        _check_same_shape(input, target, "cross_entropy (probability targets)")
        if label_smoothing:
            target = target * (1.0 - label_smoothing) + label_smoothing / n_classes
        terms = logp * target
        if weight is not None:
            terms = terms * weight.reshape(wshape)
        loss = -terms.sum(class_dim)
        if reduction == "mean":
            return loss.sum() / float(max(1, input.numel() // n_classes)) if input.ndim > 1 else loss
        return _reduce(loss, reduction)
    nll = nll_loss(logp, target, weight, ignore_index=ignore_index, reduction=reduction)
    if not label_smoothing:
        return nll
    b_logp, b_target, single = _as_batch(logp, target)
    if weight is not None:
        smooth = -(b_logp * weight.reshape(wshape if not single else (n_classes,))).sum(1)
    else:
        smooth = -b_logp.sum(1)
    ignored = b_target == ignore_index
    smooth = ops.where(ignored, 0.0, smooth)
    if reduction == "mean":
        if weight is not None:
            pick = _class_mask(b_target, n_classes, b_logp)
            wsum = ops.where(pick & ~ignored.unsqueeze(1), weight.reshape((1, n_classes) + (1,) * (b_logp.ndim - 2)),
                             0.0).sum()
            smooth = smooth.sum() / wsum
        else:
            smooth = smooth.sum() / (~ignored).sum().to(smooth.dtype)   # over the counted targets
    elif reduction == "sum":
        smooth = smooth.sum()
    elif single:
        smooth = smooth.squeeze(0)
    return nll * (1.0 - label_smoothing) + smooth * (label_smoothing / n_classes)


__all__ = ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
           "binary_cross_entropy_with_logits", "kl_div", "nll_loss", "cross_entropy"]
