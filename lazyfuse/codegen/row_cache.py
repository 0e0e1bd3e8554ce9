"""Which per-element values of a row-wise kernel a printer keeps in a row buffer.

A row-wise kernel walks each row several times: once per reduction stage, then once more for
its stores. Softmax's ``exp(x - max)`` is computed in the sum stage and again in the store
pass; inductor and torch's own softmax compute it once and keep it. This module picks, for
each stage, the values worth keeping so: those that hold a transcendental function of data
varying along the row (an ``exp``, not an ``x - max``: reloading the input is as cheap as
reloading a kept copy), that a later pass reads again. A value reached by a later pass only
through another kept value is not kept itself.

It only chooses; the printer declares the buffers (one value per element of the reduced
extent, while ``ROW_BUFFER_BYTES`` allows) and reads them back.
"""
from __future__ import annotations

from ..ir.node import Op
from .kernel import Apply, Expr, IndexValue, Kernel, Load, Random, children, walk

TRANSCENDENTAL = frozenset({Op.EXP, Op.LOG, Op.SIN, Op.COS, Op.TANH, Op.SIGMOID, Op.GELU, Op.GELU_GRAD, Op.SILU, Op.POW})
# the row buffers live on each thread's stack: 64 KiB is 16k float32 values (a 4096-wide row of
# softmax needs 16 KiB), far below any OpenMP worker's stack, and stays in L2 across the passes
ROW_BUFFER_BYTES = 1 << 16


def kept_values(kernel: Kernel, value_bytes) -> list:
    """``(stage, expr)`` pairs: ``expr`` is computed in stage ``stage``'s loop, stored to a row
    buffer there and read back by every later pass. ``value_bytes(expr)`` is the printer's
    size of one buffered element; values that would pass ``ROW_BUFFER_BYTES`` stay recomputed."""
    inner = set(kernel.inner)
    varying, heavy = {}, {}
    for e in walk([st.value for st in kernel.stages] + [s.value for s in kernel.inner_stores]):
        srcs = children(e)
        varying[id(e)] = any(varying[id(s)] for s in srcs) or (
            isinstance(e, (Load, IndexValue, Random)) and bool(e.index.vars() & inner))
        heavy[id(e)] = any(heavy[id(s)] for s in srcs) or (
            isinstance(e, Apply) and e.op in TRANSCENDENTAL and varying[id(e)])
    kept, kept_ids, budget = [], set(), ROW_BUFFER_BYTES
    for j, st in enumerate(kernel.stages):
        here = {id(e): e for e in walk([st.value]) if heavy[id(e)] and id(e) not in kept_ids}
        later = [s.value for s in kernel.stages[j + 1:]] + [s.value for s in kernel.inner_stores]
        for e in _reached(later, stop=here.keys() | kept_ids):
            if id(e) in here and value_bytes(e) * kernel.inner_numel <= budget:
                budget -= value_bytes(e) * kernel.inner_numel
                kept.append((j, e))
                kept_ids.add(id(e))
    return kept


def _reached(roots, stop) -> list:
    """The nodes of ``stop`` (ids) that ``roots`` reach without passing through another of them."""
    out, seen, todo = [], set(), list(roots)
    while todo:
        e: Expr = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if id(e) in stop:
            out.append(e)
            continue
        todo.extend(children(e))
    return out
