"""torch's Adam and AdamW over frontend tensors, with the step count on the device, so that a captured
step replays exactly like eager steps.

torch's default Adam keeps each parameter's step count on the host and computes the bias corrections
``1 - beta**step`` as Python floats (``capturable=False``); a capture would bake the capture run's
floats into the graph, and every replay would apply them again. ``capturable=True``, which keeps the
count on the device, is refused by torch for the ``cpu`` device. torch's ``fused=True`` path takes the
count as a device tensor too, and accepts the ``cpu`` device: so before each step of an Adam/AdamW whose
parameters are frontend tensors (a global ``torch.optim`` step pre-hook, documented torch API), the
frontend sets the group's ``fused`` (``foreach`` off, as torch requires) and gives each parameter's state
a lazy step count (state made here, with torch's keys, before torch would make it on the host). torch's
fused step is then ``_foreach_add_(steps, 1)`` and one ``_fused_adam(w)_`` op, which the frontend
records natively: torch's single-tensor formulas, bias corrections computed from the lazy count in
float64 (as torch computes them in Python) and rounded to the parameter's dtype. A captured step then
advances the count and the corrections on every replay. ``optimizer.state_dict()`` shows the group's
``fused`` and ``foreach`` as the user set them (a plain optimizer loading it steps as torch eager would);
``optimizer.param_groups`` shows the override.

Loading state into an optimizer: torch moves each state tensor to its parameter's device
(``Optimizer._process_value_according_to_param_policy``: ``value.to(device=param.device)``). A frontend
tensor on the ``cpu`` device already reports ``device="cpu"``, so that ``.to`` would keep it lazy, and a
plain optimizer loading a lazy optimizer's ``state_dict()`` would step plain parameters with lazy state.
So the frontend extends that policy (wrapping torch's static method): a frontend state tensor loaded for a
plain parameter is read out first (a drain, counted in the report), and a plain one loaded for a
frontend parameter is moved in (an upload; SGD's momentum buffer would otherwise stay plain and its
in-place update refused), each then placed by torch's own rule.
"""
from __future__ import annotations

import weakref
from collections import OrderedDict

import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

from ..creation import full
from ..ir import dtypes as dt
from . import drains
from .aten_table import NATIVE, raw
from .convert import lazy
from .recording import Recording
from .tensor import LazyTensor, element_run, elements, from_lf


def make_step_capturable(optimizer, args, kwargs) -> None:
    """The global step pre-hook: an Adam/AdamW group of frontend parameters takes torch's fused path,
    each parameter with a gradient getting its state (step count included) as lazy tensors."""
    if not isinstance(optimizer, torch.optim.Adam):      # AdamW is one (torch >= 2.5)
        return
    for group in optimizer.param_groups:
        params = group["params"]
        if not params or group.get("differentiable") or not all(type(p) is LazyTensor for p in params):
            continue
        _keep_user_flags(optimizer, group)
        group["fused"], group["foreach"] = True, False
        # (torch makes state where it has none yet; a loaded state is moved in by load_state_dict:
        # ``_state_follows_its_param``)
        fresh = [p for p in params if p.grad is not None and not optimizer.state[p]]
        for p, step in zip(fresh, _step_counts(fresh)):
            _lazy_state(optimizer.state[p], p, step, group["amsgrad"])


# optimizer -> {id(group): (group, the user's fused, the user's foreach)}, for the optimizer's state_dict
_user_flags = weakref.WeakKeyDictionary()


def _keep_user_flags(optimizer, group) -> None:
    """Remember the ``fused``/``foreach`` the user gave ``group`` before the frontend overrides them, so
    that ``optimizer.state_dict()`` shows the user's (``_user_flags_in_state_dict``): the override is
    this process's way of running the step, not a setting a plain optimizer loading the state should
    inherit (nor a difference from torch eager's state dict)."""
    flags = _user_flags.get(optimizer)
    if flags is None:
        flags = _user_flags[optimizer] = {}
        optimizer.register_state_dict_post_hook(_user_flags_in_state_dict)
    kept = flags.get(id(group))
    if kept is None or kept[0] is not group:
        flags[id(group)] = (group, group.get("fused"), group.get("foreach"))


def _user_flags_in_state_dict(optimizer, state_dict):
    flags = _user_flags.get(optimizer, {})
    for group, saved in zip(optimizer.param_groups, state_dict["param_groups"]):
        kept = flags.get(id(group))
        if kept is not None and kept[0] is group:
            saved["fused"], saved["foreach"] = kept[1], kept[2]
    return state_dict


def _step_counts(params: list) -> list:
    """A new step count (0-d float32, torch's fused dtype) per parameter: on each device, the
    elements of one vector, so that torch's ``_foreach_add_`` of them and their bias corrections are
    each one op on the vector (``element_run``), not one per parameter. Each count is still a tensor of
    its own to torch, as torch's are."""
    counts = {}
    for dev in dict.fromkeys(p._lf.device for p in params):
        same = [i for i, p in enumerate(params) if p._lf.device is dev]
        vector = full((len(same),), 0.0, dtype=dt.float32, device=dev)
        counts.update((i, from_lf(vector[k])) for k, i in enumerate(same))
    return [counts[i] for i in range(len(params))]


def _lazy_state(state: dict, p: LazyTensor, step: LazyTensor, amsgrad: bool) -> None:
    """Adam's state for ``p`` (torch's keys and dtypes) as frontend tensors, its count ``step``."""
    state["step"] = step
    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
    if amsgrad:
        state["max_exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)


_lerp, _maximum, _addcmul = NATIVE["lerp"], NATIVE["maximum"], NATIVE["addcmul"]


# a step count's storage -> per (offset, shape, opmath) of the counts read, their bias corrections' buffers
_corrections = weakref.WeakKeyDictionary()


def _bias_corrections(steps, opmath, lr, beta1, beta2):
    """``-lr / (1 - beta1**step)`` and ``sqrt(1 - beta2**step)`` of the lazyfuse tensor ``steps`` (one
    count, or the run of counts ``element_run`` finds), computed in float64 (as torch computes them in
    Python) and rounded to the update's ``opmath`` dtype (as torch's tensor ops round a Python scalar),
    each written into a buffer of its own, kept per step count: a value computed from the count and
    inlined into the parameter's update would be recomputed for every element (two float64 pows each,
    most of a GPT step's time); a write to a buffer is computed once, in a small kernel."""
    kept = _corrections.setdefault(steps._storage, {})
    key = (steps._view.offset, steps.shape, opmath)
    buffers = kept.get(key)
    if buffers is None:
        buffers = kept[key] = tuple(full(steps.shape, 0.0, dtype=opmath, device=steps.device) for _ in "ab")
    # (the count cast once per buffer: one cast read by both writes would be a buffer of its own)
    buffers[0].copy_(-lr / (1 - beta1 ** steps.to(dt.float64)))
    buffers[1].copy_((1 - beta2 ** steps.to(dt.float64)) ** 0.5)
    return buffers


def _corrections_per_param(steps: list, opmaths: list, lr, beta1, beta2) -> list:
    """Each parameter's ``(-step_size, bias_correction2_sqrt)``: computed once for all where the counts
    are the elements of one vector (``_step_counts`` makes them so) and the parameters share a dtype
    (torch groups a fused step's tensors by dtype), else per count (a loaded state's)."""
    run = element_run(steps)
    if run is None or len(set(opmaths)) > 1:
        return [_bias_corrections(s._lf, opmath, lr, beta1, beta2) for s, opmath in zip(steps, opmaths)]
    minus_step_size, bias_correction2_sqrt = _bias_corrections(run, opmaths[0], lr, beta1, beta2)
    return list(zip(elements(minus_step_size), elements(bias_correction2_sqrt)))


def _adam_update(hyper, param, g, m, v, minus_step_size, bias_correction2_sqrt, max_sq=None) -> None:
    """One parameter's update (lazyfuse tensors, written in place): ``_single_tensor_adam``'s formulas in its
    order, with the aten table's own lerp/addcmul/maximum (so the rounding is eager torch's)."""
    decoupled, lr, beta1, beta2, weight_decay, eps, amsgrad, maximize = hyper
    g = -g if maximize else g
    x = param
    if weight_decay != 0:
        if decoupled:
            x = x * (1 - lr * weight_decay)   # torch's param.mul_(...): the same rounding, written once below
        else:
            g = g + x * weight_decay
    m.copy_(_lerp(m, g, 1 - beta1))
    v.copy_(_addcmul(v * beta2, g, g, value=1 - beta2))
    second = v
    if amsgrad:
        max_sq.copy_(_maximum(max_sq, second))
        second = max_sq
    denom = second.sqrt() / bias_correction2_sqrt + eps
    param.copy_(x + minus_step_size * (m / denom))   # addcdiv_(exp_avg, denom, value=-step_size)


# (hyperparameters, device, and each input's dtype, storage shape and view) -> the Recording of that update
_updates: OrderedDict = OrderedDict()
UPDATES_KEPT = 1024   # (a model's parameters, a few optimizer settings each)


def _record_update(hyper, tensors: list) -> None:
    """``_adam_update`` on ``tensors``, made again from the recording of the last update with the same
    key (``recording``: its nodes depend on nothing else), or recorded op by op and kept."""
    key = (hyper, tensors[0].device, *[(t._storage.dtype, t._storage.shape, t._view) for t in tensors])
    storages = [t._storage for t in tensors]
    recording = _updates.get(key)
    if recording is not None:
        if not recording.replay(storages):
            _adam_update(hyper, *tensors)   # (at the pending queue's bound: op by op)
        return
    recording = Recording.of(lambda: _adam_update(hyper, *tensors), storages)
    if recording is not None:
        _updates[key] = recording
        while len(_updates) > UPDATES_KEPT:
            _updates.popitem(last=False)


@raw("_fused_adam_", "_fused_adamw_")
def _fused_adam(func, args, kwargs):
    """torch's Adam update, recorded per parameter (``_adam_update``), the bias corrections once
    (``_corrections_per_param``)."""
    params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps = args
    lr, beta1, beta2 = kwargs["lr"], kwargs["beta1"], kwargs["beta2"]
    weight_decay, eps, amsgrad, maximize = kwargs["weight_decay"], kwargs["eps"], kwargs["amsgrad"], kwargs["maximize"]
    tensors = [*params, *grads, *exp_avgs, *exp_avg_sqs, *max_exp_avg_sqs, *steps]
    if kwargs.get("grad_scale") is not None or kwargs.get("found_inf") is not None or \
            isinstance(lr, torch.Tensor) or not all(type(t) is LazyTensor for t in tensors):
        from .aten_table import _fallback
        return _fallback(func, args, kwargs)   # amp's grad scaling, a tensor lr, or plain state: torch's own
    hyper = (func.overloadpacket is torch.ops.aten._fused_adamw_, lr, beta1, beta2, weight_decay, eps, amsgrad,
             maximize)
    opmaths = [dt.opmath(p._lf.dtype) for p in params]
    corrections = _corrections_per_param(steps, opmaths, lr, beta1, beta2)
    for i, (p, g, m, v, (minus_step_size, bias_correction2_sqrt)) in enumerate(
            zip(params, grads, exp_avgs, exp_avg_sqs, corrections)):
        _record_update(hyper, [p._lf, g._lf, m._lf, v._lf, minus_step_size, bias_correction2_sqrt,
                               *([max_exp_avg_sqs[i]._lf] if amsgrad else [])])
    drains.counters.native[str(func)] += 1
    return None


register_optimizer_step_pre_hook(make_step_capturable)


def _state_follows_its_param(policy):
    """torch's state-to-parameter policy, with the state value first moved to the parameter's side: a
    frontend value for a plain parameter read out (a drain), a plain value for a frontend parameter
    moved in (an upload)."""
    def process(param, value, *args, **kwargs):
        param_lazy, value_lazy = type(param) is LazyTensor, type(value) is LazyTensor
        if value_lazy and not param_lazy:
            drains.note("load_state_dict into a plain optimizer")
            value = value._lf.torch()
        value = policy(param, value, *args, **kwargs)
        if param_lazy and not value_lazy:
            value = lazy(value, param._lf.device)
        return value
    process.__wrapped__ = policy
    return staticmethod(process)


# (a private torch method: a torch without it loads optimizer state by its own rule alone)
if hasattr(torch.optim.Optimizer, "_process_value_according_to_param_policy"):
    torch.optim.Optimizer._process_value_according_to_param_policy = _state_follows_its_param(
        torch.optim.Optimizer._process_value_according_to_param_policy)
