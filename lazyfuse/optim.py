"""``lf.optim``: SGD and AdamW whose updates are in-place writes into the parameter buffers.

Each ``step()`` records, under ``no_grad``, one value per state buffer and writes it with
``copy_``. The planner makes the whole step one kernel per parameter group: the update of one
parameter is a multi-output kernel (the moments and the parameter each read the others' new
values at the same index), and the updates of all parameters, independent of each other, are
one foreach kernel. AdamW adds one kernel for its shared step counter and bias corrections.
State is created lazily on the first step, as in torch.

The step counter lives on the device (a 0-d float64 tensor incremented in place) and the
bias corrections are computed from it, so a captured training step replays with the right
correction at every step: a Python step count would be baked into the graph's launch scalars
(torch's ``capturable=True`` does the same).
"""
from __future__ import annotations

from .autograd import no_grad
from .errors import AutogradError, ShapeError
from .tensor import Tensor


class Optimizer:
    def __init__(self, params, lr: float):
        self.params = list(params)
        if not self.params:
            raise ShapeError("optimizer got an empty parameter list")
        for i, p in enumerate(self.params):
            if not isinstance(p, Tensor) or not p.requires_grad or not p.is_leaf:
                raise AutogradError(f"params[{i}] is not a leaf tensor that requires grad; create it with "
                                    "requires_grad=True (or call .requires_grad_())")
        if lr < 0:
            raise ShapeError(f"lr={lr} must be >= 0")
        self.lr = lr
        self.state: dict = {}

    def zero_grad(self, set_to_none: bool = True) -> None:
        """``set_to_none=False`` zeroes each ``.grad`` in place: the buffers stay the same, which is
        what a captured training step needs (backward then accumulates into them)."""
        with no_grad():
            for p in self.params:
                if p.grad is not None:
                    if set_to_none:
                        p.grad = None
                    else:
                        p.grad.zero_()

    def _with_grads(self):
        return [(i, p, p.grad) for i, p in enumerate(self.params) if p.grad is not None]


class SGD(Optimizer):
    """torch.optim.SGD (no dampening, no nesterov): d = g + wd * p; buf = momentum * buf + d; p -= lr * buf."""

    def __init__(self, params, lr: float, momentum: float = 0.0, weight_decay: float = 0.0):
        super().__init__(params, lr)
        self.momentum = momentum
        self.weight_decay = weight_decay

    @no_grad()
    def step(self) -> None:
        for i, p, g in self._with_grads():
            d = g + p * self.weight_decay if self.weight_decay else g
            if self.momentum:
                buf = self.state.get(i)
                if buf is None:
                    self.state[i] = buf = d.clone()
                else:
                    buf.copy_(buf * self.momentum + d)
                d = buf
            p.copy_(p - d * self.lr)


class AdamW(Optimizer):
    """torch.optim.AdamW (amsgrad=False)."""

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 1e-2):
        super().__init__(params, lr)
        self.betas = tuple(betas)
        self.eps = eps
        self.weight_decay = weight_decay
        self.steps = None   # the device-side step count, made on the first step

    @no_grad()
    def step(self) -> None:
        from .creation import zeros, zeros_like
        grads = self._with_grads()
        if not grads:
            return
        b1, b2 = self.betas
        if self.steps is None:
            self.steps = zeros((), dtype="float64", device=self.params[0].device)
        self.steps.add_(1)
        correction1 = 1.0 - b1 ** self.steps                 # 0-d tensors: scalars of the update kernels
        root_correction2 = (1.0 - b2 ** self.steps).sqrt()
        step_size = self.lr / correction1
        for i, p, g in grads:
            moments = self.state.get(i)
            if moments is None:
                self.state[i] = moments = (zeros_like(p), zeros_like(p))
            m, v = moments
            m.copy_(m * b1 + g * (1.0 - b1))
            v.copy_(v * b2 + g * g * (1.0 - b2))
            decayed = p * (1.0 - self.lr * self.weight_decay)
            p.copy_(decayed - step_size * m / (v.sqrt() / root_correction2 + self.eps))


__all__ = ["Optimizer", "SGD", "AdamW"]
