"""``lf.optim``: SGD, Adam and AdamW whose updates are in-place writes into the parameter buffers.

Each ``step()`` records, under ``no_grad``, one value per state buffer and writes it with
``copy_``. The planner makes the whole step one kernel per parameter group: the update of one
parameter is a multi-output kernel (the moments and the parameter each read the others' new
values at the same index), and the updates of all parameters, independent of each other, are
one foreach kernel. AdamW adds one kernel for its shared step counter and bias corrections.
State is created lazily on the first step, as in torch.

Parameter groups are torch's: ``params`` is a list of tensors or of dicts
(``[{"params": decay, "weight_decay": 0.1}, {"params": rest}]``), each group's missing options
taken from the constructor's, and ``optimizer.param_groups`` is that list of dicts.

Everything a captured step must see change lives on the device: the step counter (a 0-d
float64 tensor incremented in place, the bias corrections computed from it) and every
hyperparameter (a 0-d float64 tensor per group and option, overwritten in place when the
group's entry is set), so ``param_group["lr"] = lr`` before each ``graph.replay()`` is a
learning-rate schedule, as with torch's ``capturable=True`` optimizers. A Python number would
be baked into the graph's launch scalars. Which code a step runs is fixed when it is recorded:
turning momentum or SGD's weight decay on or off (zero to non-zero) takes effect only on steps
recorded after it.
"""
from __future__ import annotations

from ..autograd import no_grad
from ..errors import AutogradError, ShapeError
from ..tensor import Tensor


class ParamGroup(dict):
    """One parameter group: a dict as in torch, whose hyperparameters are mirrored in 0-d device
    tensors (made on the optimizer's first step) that setting an entry overwrites in place."""

    def __init__(self, options: dict):
        super().__init__(options)
        self.scalars: dict = {}    # option name -> 0-d float64 tensor (betas: "betas0", "betas1")

    def __setitem__(self, key, value) -> None:
        if key != "params":
            _check_option(key, value)
        super().__setitem__(key, value)
        for name, v in _scalar_options(key, value):
            if name in self.scalars:
                self.scalars[name].fill_(v)

    def device_scalars(self, device) -> dict:
        if not self.scalars:
            from ..creation import full
            for key, value in self.items():
                for name, v in _scalar_options(key, value):
                    self.scalars[name] = full((), v, dtype="float64", device=device)
        return self.scalars


def _check_option(key, value) -> None:
    if key == "betas":
        if len(value) != 2 or not all(0.0 <= b < 1.0 for b in value):
            raise ShapeError(f"betas={value} must be two numbers in [0, 1)")
    elif isinstance(value, (int, float)) and value < 0:
        raise ShapeError(f"{key}={value} must be >= 0")


def _scalar_options(key, value) -> list:
    """The (name, float) pairs a group option is mirrored as: numbers as themselves, ``betas`` as two."""
    if key == "betas":
        return [("betas0", float(value[0])), ("betas1", float(value[1]))]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return [(key, float(value))]
    return []


# torch options whose non-default values change the update and that lazyfuse's optimizers lack
_NOT_IMPLEMENTED = ("amsgrad", "nesterov", "maximize", "dampening")


class Optimizer:
    def __init__(self, params, defaults: dict):
        self.defaults = dict(defaults)
        groups = list(params)
        if not groups:
            raise ShapeError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        self.param_groups: list = []
        for group in groups:
            self.add_param_group(group)
        self.state: dict = {}

    @property
    def params(self) -> list:
        return [p for group in self.param_groups for p in group["params"]]

    def add_param_group(self, group: dict) -> None:
        """Add a group (torch's signature): its options not given are the constructor's."""
        if not isinstance(group, dict) or "params" not in group:
            raise ShapeError(f"a parameter group must be a dict with a 'params' entry, got {type(group).__name__}")
        params = group["params"]
        params = [params] if isinstance(params, Tensor) else list(params)
        if not params:
            raise ShapeError("optimizer got a parameter group with an empty 'params' list")
        unknown = set(group) - set(self.defaults) - {"params"}
        if unknown:
            raise ShapeError(f"parameter group options {sorted(unknown)} are not options of {type(self).__name__} "
                             f"(those are {sorted(self.defaults)})")
        seen = {id(p) for p in self.params}
        for i, p in enumerate(params):
            if not isinstance(p, Tensor) or not p.requires_grad or not p.is_leaf:
                raise AutogradError(f"params[{i}] is not a leaf tensor that requires grad; create it with "
                                    "requires_grad=True (or call .requires_grad_())")
            if id(p) in seen:
                raise ShapeError(f"params[{i}] appears in more than one parameter group (or twice in one)")
            seen.add(id(p))
        options = {**self.defaults, **{k: v for k, v in group.items() if k != "params"}}
        for key, value in options.items():
            _check_option(key, value)
        # (no reference back to the optimizer: a cycle would keep its state buffers until a collection)
        self.param_groups.append(ParamGroup({"params": params, **options}))

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

    # -- checkpoints: torch's state_dict format ------------------------------------------------------
    def state_dict(self) -> dict:
        """torch's layout: ``{"state": {index: {name: tensor}}, "param_groups": [options + "params":
        indices]}``, the parameters numbered in group order; the tensors are this optimizer's own
        (``lf.save`` writes them)."""
        groups, first = [], 0
        for group in self.param_groups:
            saved = {k: v for k, v in group.items() if k != "params"}
            saved["params"] = list(range(first, first + len(group["params"])))
            first += len(group["params"])
            groups.append(saved)
        return {"state": {i: self._saved_state(i) for i in sorted(self.state)}, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Take the options and state of ``state_dict`` (this optimizer's, or torch's optimizer of the
        same kind: torch tensors are converted). State buffers that exist already are overwritten in
        place, so a captured step replays with the loaded values."""
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups):
            raise ShapeError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(ours["params"]) for g, ours in zip(groups, self.param_groups)):
            raise ShapeError("loaded state dict contains a parameter group that doesn't match the size of "
                             "optimizer's group")
        position = {saved: i for i, saved in enumerate(p for g in groups for p in g["params"])}
        for ours, saved in zip(self.param_groups, groups):
            for key in _NOT_IMPLEMENTED:
                if saved.get(key):
                    raise ShapeError(f"load_state_dict: the saved group has {key}={saved[key]!r}, which lazyfuse's "
                                     f"{type(self).__name__} does not implement; save it with {key} off")
            for key, value in saved.items():
                if key in self.defaults or key == "initial_lr":   # (torch's other flags: foreach, fused...)
                    ours[key] = tuple(value) if key == "betas" else value
        params = self.params
        for saved_index, state in state_dict["state"].items():
            i = position[saved_index]
            self._load_state(i, params[i], state)

    def _saved_state(self, i: int) -> dict:
        raise NotImplementedError

    def _load_state(self, i: int, p: Tensor, state: dict) -> None:
        raise NotImplementedError

    @staticmethod
    def _into(existing, value, like: Tensor) -> Tensor:
        """``value`` (a lazyfuse or torch tensor, or a number) as a buffer like ``like``: written into
        ``existing`` when there is one (its storage may be bound in a captured graph)."""
        from ..creation import tensor
        with no_grad():
            value = tensor(value, dtype=like.dtype, device=like.device)
            if existing is not None:
                return existing.copy_(value)
            return value

    def _with_grads(self):
        """Per group with a gradient anywhere: (group, its device scalars, [(state key, p, grad)])."""
        out, i = [], 0
        for group in self.param_groups:
            items = []
            for p in group["params"]:
                if p.grad is not None:
                    items.append((i, p, p.grad))
                i += 1
            if items:
                out.append((group, group.device_scalars(items[0][1].device), items))
        return out


class SGD(Optimizer):
    """torch.optim.SGD (no dampening, no nesterov): d = g + wd * p; buf = momentum * buf + d; p -= lr * buf."""

    def __init__(self, params, lr: float, momentum: float = 0.0, weight_decay: float = 0.0):
        super().__init__(params, {"lr": lr, "momentum": momentum, "weight_decay": weight_decay})

    @no_grad()
    def step(self) -> None:
        for group, s, items in self._with_grads():
            for i, p, g in items:
                d = g + p * s["weight_decay"] if group["weight_decay"] else g
                if group["momentum"]:
                    buf = self.state.get(i)
                    if buf is None:
                        self.state[i] = buf = d.clone()
                    else:
                        buf.copy_(buf * s["momentum"] + d)
                    d = buf
                p.copy_(p - d * s["lr"])

    def _saved_state(self, i: int) -> dict:
        return {"momentum_buffer": self.state[i]}

    def _load_state(self, i: int, p: Tensor, state: dict) -> None:
        buf = state.get("momentum_buffer")
        if buf is not None:
            self.state[i] = self._into(self.state.get(i), buf, p)


class AdamW(Optimizer):
    """torch.optim.AdamW (amsgrad=False): the weight decay shrinks the parameter itself."""

    decoupled = True   # AdamW's decay: p *= 1 - lr * wd; Adam's: wd * p added to the gradient

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 1e-2):
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay})
        self.steps = None   # the device-side step count, made on the first step

    @no_grad()
    def step(self) -> None:
        from ..creation import zeros, zeros_like
        groups = self._with_grads()
        if not groups:
            return
        if self.steps is None:
            self.steps = zeros((), dtype="float64", device=groups[0][2][0][1].device)
        self.steps.add_(1)
        for group, s, items in groups:
            b1, b2 = s["betas0"], s["betas1"]
            correction1 = 1.0 - b1 ** self.steps                 # 0-d tensors: scalars of the update kernels
            root_correction2 = (1.0 - b2 ** self.steps).sqrt()
            step_size = s["lr"] / correction1
            for i, p, g in items:
                moments = self.state.get(i)
                if moments is None:
                    self.state[i] = moments = (zeros_like(p), zeros_like(p))
                m, v = moments
                if not self.decoupled and group["weight_decay"]:
                    g = g + p * s["weight_decay"]
                m.copy_(m * b1 + g * (1.0 - b1))
                v.copy_(v * b2 + g * g * (1.0 - b2))
                # p * (1 - lr * wd) decays p; written per element, as 1 - lr * wd would be a 0-d value
                # read by every update, so a kernel of its own
                decayed = p - p * s["lr"] * s["weight_decay"] if self.decoupled else p
                p.copy_(decayed - step_size * m / (v.sqrt() / root_correction2 + s["eps"]))

    def _saved_state(self, i: int) -> dict:
        m, v = self.state[i]
        return {"step": self.steps.clone(), "exp_avg": m, "exp_avg_sq": v}

    def _load_state(self, i: int, p: Tensor, state: dict) -> None:
        # one step count serves every parameter here (torch keeps one per parameter, all equal)
        from ..creation import zeros
        if self.steps is None:
            self.steps = zeros((), dtype="float64", device=p.device)
        self._into(self.steps, state["step"], self.steps)
        m, v = self.state.get(i, (None, None))
        self.state[i] = (self._into(m, state["exp_avg"], p), self._into(v, state["exp_avg_sq"], p))


class Adam(AdamW):
    """torch.optim.Adam (amsgrad=False): the weight decay (L2, off by default) joins the gradient.
    Which form a step runs is fixed when it is recorded, as SGD's weight decay (zero to non-zero)."""

    decoupled = False

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0):
        super().__init__(params, lr, betas, eps, weight_decay)


from . import lr_scheduler  # noqa: E402 (torch's lf.optim.lr_scheduler; it reads Optimizer)

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "ParamGroup", "lr_scheduler"]
