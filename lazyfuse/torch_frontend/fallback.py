"""Where an aten op with no lazyfuse lowering runs: as an extern node (``lf.extern``), lazily.

The op is recorded as one extern node per result (its shape from torch's meta device): a fusion
boundary, never a drain, captured and replayed like a kernel. An in-place or ``out=`` op is recorded as
its functional form (``_AtenCall``: the written arguments cloned, the op run on the clones, the clones
returned), then copied into its targets in program order, as the native in-place ops are. Counted per op
in ``counters.extern``.

It runs *eagerly* -- its inputs drained, the op run in torch on plain tensors, its results wrapped and
its written arguments updated -- only where it must, counted in ``counters.fallback`` with the line that
forced it:
- its result size, or its being a tensor at all, depends on the data (``nonzero``, ``aten.equal``; torch's
  meta device cannot say). ``lf.extern`` decides that, and refuses it inside a capture;
- a random op outside a capture: it draws from torch's own generator in program order, so
  ``torch.manual_seed`` gives torch eager's samples (``generate``'s ``multinomial``). Inside ``lf.capture``
  (warmup included) it is an extern node drawing from lazyfuse's generator instead, which a replay
  advances (a host draw would be baked into the graph);
- a move to another device (``_to_copy(device=...)``): its result is a plain tensor there, out of lazyfuse.

Results are values: an unmapped *view* op gives a copy that does not alias its base (the view ops torch
code uses are mapped natively or reach here decomposed into mapped ones).
"""
from __future__ import annotations

import torch
from torch.utils._pytree import tree_map

from .. import extern as lf_extern
from . import drains
from .tensor import LazyTensor


def run(func, args, kwargs, device):
    """Run the aten op ``func``, which has no native lowering, on frontend tensors."""
    from .aten_table import _draws_on_host, _wrap, _write_into
    random = torch.Tag.nondeterministic_seeded in func.tags
    if _moves_device(args, kwargs, device):
        return run_eagerly(func, args, kwargs, device, leaves=True)
    if random and _draws_on_host(device):
        return run_eagerly(func, args, kwargs, device)
    written = _written_arguments(func._schema)
    call = _AtenCall.of(func, written) if written or random else func
    lf_args = [_lf_arg(a, device, func) for a in args]
    lf_kwargs = {k: _lf_arg(v, device, func) for k, v in kwargs.items()}
    eager_before = lf_extern.eager_runs
    out = lf_extern.extern(call, *lf_args, **lf_kwargs)
    name = str(func)
    if lf_extern.eager_runs != eager_before:          # lf.extern ran it at once: its result size needs the data
        drains.counters.fallback[name] += 1
        drains.note(f"data-dependent {name}")
    else:
        drains.counters.extern[name] += 1
    if not written:
        return _wrap(out)
    targets = _targets(written, args, kwargs)
    values = out if isinstance(out, (tuple, list)) else (out,)
    outs = {id(t) for t in _targets([w for w in written if w[3]], args, kwargs)}
    for target, value in zip(targets, values):
        _write_into(target, value, func, out=id(target) in outs)   # (out= tensors: resized as torch's)
    return _aliased_return(func._schema, targets)


# -- what the op writes ------------------------------------------------------------------------------
def _written_arguments(schema) -> tuple:
    """(position, name, is_list, is_out) of each argument the op writes (``self`` of ``add_``, ``out=``)."""
    return tuple((i, a.name, isinstance(a.type, torch.ListType), a.is_out) for i, a in enumerate(schema.arguments)
                 if a.alias_info is not None and a.alias_info.is_write)


def _targets(written, args, kwargs) -> list:
    """The frontend tensors the op writes, flattened, in the order ``_AtenCall`` returns them."""
    out = []
    for i, name, is_list, _ in written:
        value = args[i] if i < len(args) else kwargs[name]
        out.extend(value if is_list else [value])
    return out


def _aliased_return(schema, targets):
    """What torch returns for a mutating op: its written arguments (``self``, the ``out=`` tensors)."""
    if not schema.returns:
        return None
    return targets[0] if len(schema.returns) == 1 else tuple(targets[:len(schema.returns)])


class _AtenCall:
    """An aten op as ``lf.extern`` records it, where the op itself will not do. A mutating op (extern's
    functions never write their inputs): its written arguments are cloned, the op runs on the clones, and
    the clones are returned. A random op: named as torch names it (``multinomial``, ``bernoulli_``), which
    is how extern knows to seed it from lazyfuse's generator. One object per op (``of``), so the extern's
    meta signature and the plan key stay cached across calls."""
    _made: dict = {}

    def __init__(self, func, written):
        self.func, self.written = func, written
        self.__name__ = func._opname

    @classmethod
    def of(cls, func, written):
        made = cls._made.get(func)
        if made is None:
            made = cls._made[func] = cls(func, written)
        return made

    def __call__(self, *args, **kwargs):
        if not self.written:
            return self.func(*args, **kwargs)
        args = list(args)
        results = []
        for i, name, is_list, is_out in self.written:
            value = args[i] if i < len(args) else kwargs[name]
            # (an out= tensor's values are all overwritten: an empty one, which the kernel resizes
            # without torch's warning for one of another shape, given once, by _write_into)
            fresh = (lambda t: t.new_empty(0)) if is_out else (lambda t: t.clone())
            clone = [fresh(t) for t in value] if is_list else fresh(value)
            if i < len(args):
                args[i] = clone
            else:
                kwargs[name] = clone
            results.extend(clone if is_list else [clone])
        self.func(*args, **kwargs)
        return tuple(results)


# -- arguments -------------------------------------------------------------------------------------------
def _lf_arg(a, device, func):
    """A frontend tensor -> its lazyfuse Tensor; a plain torch tensor -> uploaded (a 0-d one too: an aten
    op's tensor argument must stay a tensor); lists converted; anything else as is."""
    if type(a) is LazyTensor:
        return a._lf
    if isinstance(a, torch.Tensor):
        from ..creation import tensor
        from .aten_table import _upload
        return tensor(a.detach(), device=device) if a.dim() == 0 and not a.requires_grad else \
            _upload(a, device, func)
    if type(a) in (list, tuple):
        return type(a)(_lf_arg(x, device, func) for x in a)
    return a


def _moves_device(args, kwargs, device) -> bool:
    """Whether the op names another device (``_to_copy(device=...)``, ``to.device``): its result leaves
    lazyfuse, which an extern node (whose result is on the lazyfuse device) cannot say."""
    named = [a for a in args if isinstance(a, torch.device)]
    if kwargs.get("device") is not None:
        named.append(torch.device(kwargs["device"]))
    return any(d != device.torch_device for d in named)


# -- the eager path ----------------------------------------------------------------------------------------
def run_eagerly(func, args, kwargs, device, leaves: bool = False):
    """Run ``func`` on plain copies of its arguments (a drain), wrap what it returns (``leaves``: a move
    to another device, whose results are handed back plain, out of lazyfuse), write its written
    arguments back into their frontend tensors."""
    from .convert import wrap_result
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
    for t in _targets(_written_arguments(func._schema), args, kwargs):
        if type(t) is LazyTensor:
            value = plain[id(t)][1]
            if value.shape != t.shape:   # (an out= tensor torch resized: it warned)
                from ..creation import tensor
                from .aten_table import rebind
                rebind(t, tensor(value, device=device))
            else:
                t._lf.copy_(value)
            written[id(value)] = t

    def back(o):
        if isinstance(o, torch.Tensor) and not leaves:
            target = written.get(id(o))   # (not ``or``: that would ask the tensor's truth value, a drain or an error)
            return target if target is not None else wrap_result(o, device=device)
        return o
    return tree_map(back, out)
