"""The size-free structure of a plan key: what a new size of a known program plans from.

A plan key (``runtime.engine``) holds every node's shape, so each new batch size or sequence
length misses the plan cache. Its *structure* is the same key with the sizes taken out: each
size, stride and offset of 2 or more becomes a symbol numbered by first appearance, equal
values the same symbol, while 0 and 1 stay literal (a size-1 dim drops its loop, a stride of
1 is contiguity, 0 a broadcast). Two drains share a structure exactly when one's sizes map to
the other's by a one-to-one renaming: the same ops, dtypes and sources, the same dims that
broadcast or have size 1, the same sizes equal to each other, the same strides equal to a
size.

That is what the planner's fusion decisions read (shape equalities, broadcasts, contiguity),
but not everything the generated code depends on: a loop merge, a stride that is a product
of sizes, a split reduction's chunk count or a tuned config's size class may still differ. So
a structure hit is only a candidate: the engine lowers the cached plan's groups at the new
sizes and keeps its compiled kernels only where each backend finds the same code and the
same tuning class (``Backend.rebind``); anything else plans from scratch.
"""
from __future__ import annotations

from ..ir.node import Op
from ..ir.view import View


def structure_key(parts: tuple) -> tuple:
    """The size-free structure of a plan key's ``parts`` (descriptors, live roots)."""
    descs, live = parts
    symbols: dict = {}
    renamed: dict = {}   # a shape met before -> its symbols (a GPT step's key has ~2,000 shapes, ~100 distinct)

    def size(d: int) -> int:
        # symbols are negative, so they never meet the literal 0 and 1
        if d == 0 or d == 1:
            return d
        s = symbols.get(d)
        if s is None:
            s = symbols[d] = -1 - len(symbols)
        return s

    def sizes(ds) -> tuple:
        # a size's symbol never changes once given, so a shape renamed once is renamed for good
        out = renamed.get(ds)
        if out is None:
            out = renamed[ds] = tuple([size(d) for d in ds])
        return out

    out = []
    for desc in descs:
        op = desc[0]
        if op is Op.SCALAR:
            out.append(desc)
        elif op is Op.BUFFER or len(desc) == 3:   # a buffer leaf (its first tape position), an ERROR leaf
            out.append((op, desc[1], sizes(desc[2]), *desc[3:]))
        else:
            out.append((op, desc[1], sizes(desc[2]), _arg(op, desc[3], size, sizes), desc[4]))
    return tuple(out), live


def live_parts(parts: tuple, nodes) -> tuple:
    """A plan key's ``parts`` without the descriptors of the nodes no live root reads, their
    positions renumbered (``nodes``: the drain's trace, each on the tape). Those nodes are
    values a run left unread or results dropped before the drain: elided, yet in the key,
    which fixes what was recorded. Without them the key is the one the live program has when
    recorded alone, so its structure finds the plan that program built (runtime.engine) and
    leftovers cost a rebinding, not a planning. A buffer leaf's first position (of a leaf on
    the same buffer) and a root's target are renumbered among the live leaves."""
    descs, live = parts
    if len(nodes) == len(descs):   # (the tape holds every traced node: nothing dead)
        return parts
    order = sorted([n.tpos for n in nodes])
    new = {p: i for i, p in enumerate(order)}
    first = {}   # a buffer's first leaf position on the whole tape -> among the live leaves
    out = []
    for p in order:
        desc = descs[p]
        op = desc[0]
        if op is Op.BUFFER:
            out.append((op, desc[1], desc[2], first.setdefault(desc[3], new[p])))
        elif op is Op.SCALAR or len(desc) == 3:   # a scalar, an ERROR leaf: no positions
            out.append(desc)
        else:
            out.append((*desc[:4], tuple([new[s] for s in desc[4]])))
    return tuple(out), tuple([(new[t], b if b is None else first.get(b, -1)) for t, b in live])


def _arg(op, arg, size, sizes):
    """An op's attribute with its sizes as symbols: a view (or a write's region) and a gather's
    dim size hold sizes; every other attribute (reduced axes, an extern call, a collective)
    is structure and stays as it is."""
    if isinstance(arg, View):
        return sizes(arg.shape), sizes(arg.strides), size(arg.offset)
    if op in (Op.GATHER, Op.INDEX_ADD):   # (dim, size, and a gather's range and op name)
        return arg[0], size(arg[1]), *arg[2:]
    return arg
