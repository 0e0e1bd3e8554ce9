"""Which aten op recorded each IR node, so that ``lf.explain`` can say which aten ops went into which
fused kernel (and which ran extern).

Off unless asked (``trace_origins()``; ``python -m lazyfuse explain`` and ``lf.explain(fn, ...)`` turn
it on around the code they run): while on, every aten op goes through torch's dispatcher (the
dispatcher-skipping operators step aside) and its runner is wrapped to tag the nodes the op entered on
the engine's tape (``Node.origin``) -- found by walking back from the tensors the op returned or wrote, through nodes
entered since the op began. A nested op (a decomposition's pieces, a ``_foreach_`` element) tags its
own nodes first: a node is named by the innermost aten op that recorded it. While off it costs nothing.
"""
from __future__ import annotations

import contextlib

from ..ir.node import post_order
from . import operators
from .tensor import LazyTensor, lf_device_of

_depth = 0   # nesting of trace_origins()


def origin_of(node):
    """The aten op that recorded ``node`` (``"aten.mm.default"``), or None."""
    return getattr(node, "origin", None)


@contextlib.contextmanager
def trace_origins():
    """Within the block, tag each IR node that torch code records with its aten op (nests)."""
    global _depth
    _depth += 1
    if _depth == 1:
        _switch(True)
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0:
            _switch(False)


def _switch(on: bool) -> None:
    from .aten_table import _resolve
    LazyTensor._runners.clear()            # resolved again: each wrapped (or not)
    operators.install(not on)
    LazyTensor._resolve = staticmethod((lambda func: _traced(_resolve(func), str(func))) if on else _resolve)


def _traced(run, label):
    def run_traced(func, args, kwargs):
        device = lf_device_of(args) or lf_device_of(list(kwargs.values()))
        if device is None:
            return run(func, args, kwargs)
        tape = device.engine.tape
        start = len(tape)
        out = run(func, args, kwargs)
        _tag(label, tape, start, [args, kwargs, out])
        return out
    return run_traced


def _tag(label, tape, start, values) -> None:
    roots = [t._lf._storage.current for t in _lazy_tensors(values)]
    fresh = [n for n in roots if n.tape is tape and n.tpos >= start and origin_of(n) is None]

    def new_sources(n):
        return [s for s in n.srcs if s.tape is tape and s.tpos >= start and origin_of(s) is None]
    for node in post_order(fresh, new_sources):
        node.origin = label


def _lazy_tensors(value):
    if type(value) is LazyTensor:
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _lazy_tensors(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _lazy_tensors(v)
