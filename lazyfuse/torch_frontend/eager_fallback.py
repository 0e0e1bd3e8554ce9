"""The one place where an aten op with no lazyfuse mapping runs: eagerly, on plain torch tensors.

Correct for every op, but a drain: the inputs are realized (their pending work runs), the op
runs in torch, and its results come back as new lazy tensors (in-place and ``out=`` arguments
are written back into their lazy tensors). Each call is counted per op and per forcing line
(``lf.torch_frontend.report()``). Results are copies, so an unmapped *view* op gives a tensor
that no longer aliases its base (the view ops torch code uses are all mapped).

To route these ops to a lazy extern node instead of a drain, replace the body of
``run_eagerly`` with a call that records ``func`` on the realized-later buffers.
"""
from __future__ import annotations

import torch
from torch.utils._pytree import tree_map

from . import drains


def run_eagerly(func, args, kwargs, device):
    """Run the aten op ``func`` on plain copies of its arguments; wrap what it returns."""
    from .convert import wrap
    from .tensor import LazyTensor
    name = str(func)
    drains.counters.fallback[name] += 1
    drains.note(f"fallback {name}")
    plain = {}

    def realize(a):
        if type(a) is LazyTensor:
            if id(a) not in plain:
                plain[id(a)] = (a, a._lf.torch())
            return plain[id(a)][1]
        return a

    out = func(*tree_map(realize, args), **tree_map(realize, kwargs))
    written = {}
    for i, arg in enumerate(func._schema.arguments):
        if arg.alias_info is not None and arg.alias_info.is_write:
            target = kwargs.get(arg.name) if arg.kwarg_only or i >= len(args) else args[i]
            for t in (target if isinstance(target, (list, tuple)) else [target]):
                if type(t) is LazyTensor:
                    t._lf.copy_(plain[id(t)][1])
                    written[id(plain[id(t)][1])] = t

    def back(o):
        if isinstance(o, torch.Tensor):
            return written.get(id(o)) or wrap(o, device=device)
        return o
    return tree_map(back, out)
