"""Op templates: a native handler's call made again from the tape segment its first call with the same
key recorded, without running it.

A torch program calls the same aten ops on the same shapes step after step, and each native handler
(``aten_table``) records the same nodes each time: only the values it reads (its tensor arguments'
current nodes) differ. Running the handler pays lazyfuse's op path for every node (a Tensor and a
Storage per result, dtype and shape rules, view arithmetic): a ``native_layer_norm`` is ~80 us of a
GPT step, a ``split`` ~80 us. A template is the tape segment the handler's first call entered -- every
node, in tape order, dead ones included, each source an earlier node of the segment or a tensor
argument's current value -- and its results (new storages of segment nodes, or views of argument
storages). Made again, it enters the very same nodes in the same order (so the same plan key: a fused
plan and a capture see no difference), makes the same result storages in the same order, and counts
the same ops (``lf.stats()``); its origins, explain and drain counts are the handler's.

The key: the handler, ``lazyfuse.ops.INLINE_MATMUL`` (a matmul's lowering depends on it), each tensor
argument's dtype, storage shape, view and device, and every other argument's type and value (``1`` and
``1.0`` differ, so do ``0.0`` and ``-0.0``). A handler's nodes depend on nothing else -- which is what
``record`` checks, refusing for good a handler that made a node a template cannot remake (a buffer of
data, a random draw, a torch call: made again, it would repeat), read another pending value, wrote an
argument in place, or pinned a result; and making one call op by op where a drain came in between (the
pending queue's bound) or the replay would pass that bound. Tensor arguments that share a storage
(``split``'s q, k and v) read that one storage's value; which argument reads which is in the key.
"""
from __future__ import annotations

import torch

from .. import ops as lf_ops
from ..ir.node import Kind, Op
from ..runtime.engine import MAX_PENDING, Storage
from ..tensor import Tensor as LfTensor
from .recording import remake

_SCALAR = Op.SCALAR
# the nodes a template cannot hold: leaves other than a Python number (a buffer's data, a random draw, a
# failed value) and torch function calls (which may draw); an arange is made from its scalars alone
MADE_FRESH = frozenset(op for op in Op if op.kind is Kind.LEAF and op not in (Op.SCALAR, Op.ARANGE)) | {Op.EXTERN}
_PLAIN_VALUES = (bool, int, str, type(None))
_TORCH_VALUES = (torch.dtype, torch.device, torch.layout, torch.memory_format)   # (keyword arguments)
KEPT = 4096            # templates kept (a model's distinct calls, a few settings each)
# the fewest nodes a template must make to be worth its key: a view, a cast or one elementwise op is
# recorded in a few us, about what building the key and looking it up costs
WORTH = 4
_REFUSED = object()    # a key whose handler cannot be templated: run op by op
_templates: dict = {}  # key -> Template or _REFUSED
_direct: set = set()   # handlers whose first template made fewer than WORTH nodes: always run op by op


def _describe(value, sig: list, tensors: list) -> bool:
    """Append ``value``'s part of the key to ``sig`` (its tensors to ``tensors``); False for an
    argument a key cannot hold (a template is then never used for the call)."""
    cls = value.__class__
    if cls is LfTensor:
        if value._ag is not None:   # lazyfuse's own autograd records beside the op: not templated
            return False
        st, v = value._storage, value._view
        sig += (st.dtype, st.shape, v.shape, v.strides, v.offset, value.device)
        tensors.append(value)
        return True
    if cls is float:
        # (a NaN never equals itself, and 0.0 equals -0.0: their reprs tell them apart)
        sig += (cls, value if value == value and value != 0 else repr(value))
        return True
    if cls in _PLAIN_VALUES:
        sig += (cls, value)
        return True
    if cls is list or cls is tuple:
        sig += (cls, len(value))
        for x in value:
            if not _describe(x, sig, tensors):
                return False
        return True
    if cls in _TORCH_VALUES:
        sig += (cls, value)
        return True
    return False   # (a plain torch tensor, say: a key cannot hold its value)


class Template:
    """A handler call's tape segment and results. ``entries`` are in tape order: ``(None, k)`` for
    tensor argument ``k``'s current node (entered there when not on the tape yet), else ``(op, srcs,
    dtype, shape, arg)`` with each source ``j >= 0`` the segment's entry j and ``~k`` argument k.
    ``storages`` are the segment entries that new result storages hold, in the order they were
    recorded; ``result`` is the handler's return value as a spec (``_spec``). (An argument's entry is
    ``(None, k, None, None, None)``: one shape for all, unpacked in the replay's loop.)"""

    __slots__ = ("entries", "storages", "result", "extra_ops", "writes", "last")

    def __init__(self, entries, storages, result, extra_ops, writes):
        self.entries, self.storages, self.result, self.extra_ops = entries, storages, result, extra_ops
        self.writes = writes   # in-place writes into the one result storage (cat's copies into its zeros)
        self.last = [None, None]   # (``recording.remake``'s memo of the last replay)

    @staticmethod
    def record(fn, args, kwargs, storages, device):
        """``(fn's result, its Template)``, the template None where this call cannot be made again,
        ``_REFUSED`` where no call of this key can (see the module's docstring). ``storages``: the
        distinct storages of the call's tensor arguments, in order."""
        engine = device.engine
        with engine.lock:
            currents = [st.current for st in storages]
            tape, start, counted = engine.tape, len(engine.tape), engine.stats.ops_recorded
            pinned = len(engine.pinned)
            out = fn(*args, **kwargs) if kwargs else fn(*args)
            if out is NotImplemented:
                return out, None
            if engine.tape is not tape or len({id(n) for n in currents}) < len(currents) or \
                    any(st.engine is not engine for st in storages):
                return out, None
            if len(engine.pinned) != pinned or any(st.current is not n for st, n in zip(storages, currents)):
                return out, _REFUSED   # a pinned result, or an argument written in place
            return out, Template._of(engine, tape, start, currents, storages, out,
                                     engine.stats.ops_recorded - counted)

    @staticmethod
    def _of(engine, tape, start, currents, storages, out, counted):
        arg_of_node = {id(n): k for k, n in enumerate(currents)}
        arg_at = {n.tpos: k for k, n in enumerate(currents) if n.tape is tape}   # (after the call: it may enter them)
        descs = engine.descs
        entries = []
        for pos in range(start, len(tape)):
            d = descs[pos]
            op = d[0]
            if pos in arg_at:
                entries.append((None, arg_at[pos], None, None, None))
            elif op is _SCALAR:
                entries.append((op, (), d[1], (), tape[pos]))
            elif op in MADE_FRESH:
                return _REFUSED
            else:
                srcs = []
                for p in d[4]:
                    if p >= start:
                        srcs.append(p - start)
                    elif p in arg_at:
                        srcs.append(~arg_at[p])
                    else:
                        return _REFUSED   # it read a pending value that is not an argument's
                entries.append((op, tuple(srcs), d[1], d[2], d[3]))
        new = {}   # id(result storage) -> (its entry, the storage)
        result = _spec(out, storages, arg_of_node, start, tape, new)
        if result is _REFUSED:
            return _REFUSED
        order = sorted(new.values(), key=lambda e: e[0])
        if len(order) > 1 and any(st.version for _, st in order):
            # (a storage written in place was recorded first at its first version: the order of several
            # such is not their final nodes' order)
            return _REFUSED
        slot = {id(st): i for i, (_, st) in enumerate(order)}
        return Template(entries, [e for e, _ in order], _slotted(result, slot), counted - len(order),
                        order[0][1].version if order else 0)

    def replay(self, storages, device):
        """The handler's result made again over ``storages`` (as ``record``'s), or None where this
        call must run op by op."""
        engine = device.engine
        inputs = [st.current for st in storages]
        if len(inputs) > 1 and (len({id(n) for n in inputs}) < len(inputs)
                                or any(st.engine is not engine for st in storages)):
            return None
        with engine.lock:
            if len(engine.pending) + len(self.storages) >= MAX_PENDING:
                return None   # a drain between two of the result storages would cut the segment
            made = remake(engine, self.entries, inputs, self.last)
            results = [Storage(engine, made[j]) for j in self.storages]
            if self.writes:
                results[0].version = self.writes
            if self.extra_ops:
                engine.count_extra_ops(self.extra_ops)
            return _build(self.result, results, storages, device)


def _spec(out, storages, arg_of_node, start, tape, new):
    """The handler's return value as a spec: ``("t", storage, view)`` for a Tensor (its storage a new
    one, by identity until ``_slotted`` numbers them, or ``~k``: argument k's; ``view`` None for the
    storage read whole), ``("c", type, [specs])`` for a list or tuple, ``("v", value)`` for a plain
    value; ``_REFUSED`` for anything else."""
    cls = out.__class__
    if cls is LfTensor:
        if out._ag is not None:
            return _REFUSED
        st = out._storage
        view = None if out._view is st.view else out._view
        for k, s in enumerate(storages):
            if s is st:
                return ("t", ~k, out._view)
        node = st.current
        if node.tape is not tape or node.tpos < start or st.buffer is not None or id(node) in arg_of_node:
            return _REFUSED
        new[id(st)] = (node.tpos - start, st)
        return ("t", st, view)
    if cls is list or cls is tuple:
        parts = [_spec(o, storages, arg_of_node, start, tape, new) for o in out]
        return _REFUSED if any(p is _REFUSED for p in parts) else ("c", cls, parts)
    if cls in _PLAIN_VALUES or cls is float:
        return ("v", out)
    return _REFUSED


def _slotted(spec, slot):
    if spec[0] == "t" and isinstance(spec[1], Storage):
        return ("t", slot[id(spec[1])], spec[2])
    if spec[0] == "c":
        return ("c", spec[1], [_slotted(p, slot) for p in spec[2]])
    return spec


def _build(spec, results, storages, device):
    kind = spec[0]
    if kind == "t":
        src, view = spec[1], spec[2]
        if src >= 0:
            st = results[src]
            return LfTensor(st, st.view if view is None else view, device)
        return LfTensor(storages[~src], view, device)
    if kind == "c":
        return spec[1]([_build(p, results, storages, device) for p in spec[2]])
    return spec[1]


def call(fn, args, kwargs=None):
    """``fn(*args, **kwargs)`` (a native handler on lazyfuse Tensors and plain values), made again from
    a template where one applies, else run and, where it can be, kept as one."""
    if fn in _direct:
        return fn(*args, **kwargs) if kwargs else fn(*args)
    sig = [fn, lf_ops.INLINE_MATMUL]
    tensors = []
    ok = True
    for a in args:
        if not _describe(a, sig, tensors):
            ok = False
            break
    if ok and kwargs:
        for k, v in kwargs.items():
            sig.append(k)
            if not _describe(v, sig, tensors):
                ok = False
                break
    if not ok or not tensors:
        return fn(*args, **kwargs) if kwargs else fn(*args)
    storages = _distinct_storages(tensors, sig)
    key = tuple(sig)
    template = _templates.get(key)
    if template is _REFUSED:
        return fn(*args, **kwargs) if kwargs else fn(*args)
    if template is not None:
        out = template.replay(storages, tensors[0].device)
        if out is not None:
            return out
        return fn(*args, **kwargs) if kwargs else fn(*args)
    out, template = Template.record(fn, args, kwargs, storages, tensors[0].device)
    if template is not None and template is not _REFUSED and \
            sum(1 for e in template.entries if e[0] is not None) < WORTH:
        _direct.add(fn)
    elif template is not None:
        if len(_templates) >= KEPT:
            del _templates[next(iter(_templates))]
        _templates[key] = template
    return out


def _distinct_storages(tensors, sig) -> list:
    """The distinct storages of ``tensors``, in order; where some share one (``split``'s views, say),
    which tensor reads which storage is part of the key (``sig``)."""
    if len(tensors) == 1:
        return [tensors[0]._storage]
    storages = []
    for t in tensors:
        st = t._storage
        if not any(s is st for s in storages):
            storages.append(st)
    if len(storages) < len(tensors):
        sig += ("shared", tuple([next(i for i, s in enumerate(storages) if s is t._storage) for t in tensors]))
    return storages


def clear() -> None:
    """Forget every template and what ``WORTH`` decided (tests: a handler's behaviour patched)."""
    _templates.clear()
    _direct.clear()
