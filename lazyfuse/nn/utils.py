"""``lf.nn.utils``: training utilities with torch's signatures (``clip_grad_norm_``)."""
from __future__ import annotations

import math

from ..autograd import no_grad
from ..errors import LazyfuseError, ShapeError
from ..tensor import Tensor


@no_grad()
def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                    foreach=None) -> Tensor:
    """torch.nn.utils.clip_grad_norm_: scale the gradients of ``parameters`` in place so that
    their total ``norm_type``-norm (the norm of the per-gradient norms) is at most ``max_norm``;
    return that total norm (before clipping) as a 0-d tensor.

    Capturable: the norm and the scale stay on the device (the scale is
    ``min(1, max_norm / (norm + 1e-6))``, applied unconditionally, as torch does), so a
    captured training step clips at every replay. ``error_if_nonfinite=True`` reads the norm on
    the host to check it, which a capture refuses. ``foreach`` is accepted and ignored: the
    planner fuses the scaling of all gradients into one kernel anyway.
    """
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    grads = [p.grad for p in params if p.grad is not None]
    norm_type = float(norm_type)
    if math.isnan(norm_type) or norm_type <= 0:
        raise ShapeError(f"clip_grad_norm_: norm_type={norm_type} must be a positive number or inf")
    if not grads:
        from ..creation import zeros
        return zeros(())
    norms = [_norm(g, norm_type) for g in grads]
    from ..functions import stack
    total = norms[0] if len(norms) == 1 else _norm(stack([n.to(norms[0].dtype) for n in norms]), norm_type)
    if error_if_nonfinite and not math.isfinite(total.item()):
        raise LazyfuseError(f"clip_grad_norm_: the total norm of order {norm_type} of the gradients is "
                            f"non-finite ({total.item()}), so it cannot clip them; set error_if_nonfinite=False "
                            "to scale them anyway")
    scale = (max_norm / (total + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(scale.to(g.dtype))
    return total


def _norm(t: Tensor, p: float) -> Tensor:
    if p == math.inf:
        return t.abs().amax()
    if p == 2.0:
        return (t * t).sum().sqrt()
    if p == 1.0:
        return t.abs().sum()
    return t.abs().pow(p).sum().pow(1.0 / p)


__all__ = ["clip_grad_norm_"]
