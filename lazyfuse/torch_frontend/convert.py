"""``lf.lazy`` and ``lf.eager``: plain torch <-> frontend tensors (and modules, in place)."""
from __future__ import annotations

import torch

from ..errors import DTypeError
from ..ir.dtypes import NAMES
from ..ir.layout import preserved_layout
from ..ir.view import View
from ..runtime.device import device as get_device
from ..tensor import Tensor as LfTensor
from .tensor import LazyTensor


def wrap(t, requires_grad: bool = False, device=None):
    """A LazyTensor of a lazyfuse Tensor (sharing it), or of a plain torch tensor (copied to
    ``device``)."""
    if isinstance(t, LfTensor):
        return LazyTensor(t, requires_grad)
    from ..creation import tensor
    return LazyTensor(tensor(t.detach(), device=device), requires_grad)


def wrap_result(t: torch.Tensor, device=None) -> LazyTensor:
    """A LazyTensor of a copy of ``t``, a plain torch op's result, in ``t``'s own layout (a copy in
    ``preserve_format``: ``rand_like(x, memory_format=torch.channels_last)`` run eagerly keeps its
    strides), where ``wrap`` copies row-major (as ``torch.tensor``)."""
    layout = preserved_layout(View(tuple(t.shape), t.stride()))
    if layout is None:
        return wrap(t, device=device)
    from ..creation import tensor
    stored = tensor(t.detach().permute(layout.order), device=device)   # (row-major: the result's memory order)
    return LazyTensor(LfTensor(stored._storage, layout.view, stored.device))


def _lazy_tensor(t: torch.Tensor, dev) -> LazyTensor:
    if type(t) is LazyTensor:
        return t
    if t.is_complex() or t.is_quantized or t.layout is not torch.strided:
        raise DTypeError(f"lf.lazy: a {t.dtype} {t.layout} tensor is not supported; lazyfuse holds strided "
                         f"tensors of dtype {NAMES}")
    return wrap(t, t.requires_grad, dev)


def lazy(obj, device=None):
    """A torch tensor -> a new torch tensor backed by lazyfuse on ``device`` (a leaf that requires
    grad stays one); an ``nn.Module`` -> the same module, its parameters and buffers so backed
    (in place: parameters shared between modules, tied weights, stay shared); lists, tuples and
    dicts of them -> the same structure converted."""
    dev = get_device(device)
    if isinstance(obj, torch.nn.Module):
        memo = {}
        for m in obj.modules():
            for name, p in m._parameters.items():
                if p is not None:
                    if id(p) not in memo:
                        memo[id(p)] = torch.nn.Parameter(_lazy_tensor(p.detach(), dev), p.requires_grad)
                    m._parameters[name] = memo[id(p)]
            for name, b in m._buffers.items():
                if b is not None:
                    if id(b) not in memo:
                        memo[id(b)] = _lazy_tensor(b, dev)
                    m._buffers[name] = memo[id(b)]
        return obj
    if isinstance(obj, torch.Tensor):
        return _lazy_tensor(obj, dev)
    return _map(obj, lambda o: lazy(o, dev))


def eager(obj):
    """Back to plain torch: a frontend tensor -> a plain CPU tensor holding its value (a drain;
    no autograd history, ``requires_grad`` kept on a leaf); an ``nn.Module`` -> the same module
    with plain parameters and buffers (in place); lists, tuples and dicts converted; anything
    else returned as is."""
    if isinstance(obj, torch.nn.Module):
        memo = {}
        for m in obj.modules():
            for name, p in m._parameters.items():
                if type(p) is LazyTensor:
                    if id(p) not in memo:
                        memo[id(p)] = torch.nn.Parameter(p.cpu(), p.requires_grad)
                    m._parameters[name] = memo[id(p)]
            for name, b in m._buffers.items():
                if type(b) is LazyTensor:
                    if id(b) not in memo:
                        memo[id(b)] = b.cpu()
                    m._buffers[name] = memo[id(b)]
        return obj
    if type(obj) is LazyTensor:
        out = obj.cpu()
        return out.requires_grad_() if obj.requires_grad and obj.is_leaf else out
    if isinstance(obj, (list, tuple, dict)):
        return _map(obj, eager)
    return obj


def _map(obj, fn):
    if isinstance(obj, dict):
        return type(obj)((k, fn(v)) for k, v in obj.items())
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(fn(v) for v in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(fn(v) for v in obj)
    return obj
