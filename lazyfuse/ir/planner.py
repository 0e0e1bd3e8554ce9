"""The fusion planner: partition a drain's live pending DAG into kernels.

Rules (each one is asserted by a test in tests/test_fusion.py):

* A node is *materialized* (written to memory) only when it must be: it is a live root, it
  is read by more than one kernel, it is an input of a library call (matmul), it is a
  reduction whose result is read other than elementwise, or it holds a version of a buffer
  that a later in-place write updates. Everything else is inlined into the kernel that
  reads it, so a fused intermediate is never written to memory.
* Views and index-generated values (arange, rand) are index arithmetic: they are copied into
  every kernel that reads them, never materialized on their own.
* A reduction takes its elementwise prologue; an elementwise consumer of the same (reduced)
  shape becomes its epilogue; reductions over the same input and axes share one kernel in
  stages (variance reads the mean it needs from an earlier stage).
* Matmul: on a backend with a matmul template (``matmul_template``: the operand dtypes it
  takes, a capability the runtime passes in; this module knows no device) a matmul is not a
  library call but a kernel whose epilogue is the elementwise chain consuming it (bias,
  activation, residual, scale, cast): it joins its consumer's pointwise kernel when that
  kernel reads it at its own output index (tests/test_programs*.py). Elsewhere it is a
  library call whose operands are materialized and whose elementwise consumers form the next
  kernel. A template reads its operands through views (a copy that only rearranges a buffer
  is index arithmetic too); an operand it cannot load is materialized on the lowering's word.
* In-place writes follow program order: a kernel that reads a buffer's old version runs
  before the kernel that overwrites it (write-after-read edges), and a kernel never reads
  a buffer it writes except at the very index it writes. When a rule would form a cycle
  between kernels, the reading node is materialized first and the partition redone.
* The results of one extern call (``sort``'s values and indices: EXTERN nodes of one family on
  the same sources) are stored by one step, so torch runs once for them (tests/test_extern.py).
* A kernel inlines values at most ``MAX_INLINE_DEPTH`` deep (a chain of 200 in-place ``add_``
  is otherwise one expression): lowering and printing recurse once per level, so a deeper
  value is materialized and the chain becomes several kernels.

The planner runs only on a plan-cache miss (the build path), in time near-linear in the drain
graph: each pass over it is O(nodes + edges), and merging kernels into multi-output and
foreach kernels keeps the dependency graph and a topological order of it up to date
(``_Contraction``), so a merge's cycle check searches only the kernels between the two.
networkx only names the cycle that a repair cuts.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field, replace

import networkx as nx

from .node import Kind, Op
from .shapes import prod
from .view import View

DUPLICABLE = (Kind.VIEW,)
INDEX_LEAVES = (Op.ARANGE, Op.RAND, Op.RANDN)
MAX_INLINE_DEPTH = 64


@dataclass
class DrainGraph:
    """A drain's nodes in topological order and the live roots with their targets.

    ``root_targets[k]`` is the index of the BUFFER leaf that root ``k`` overwrites, -1 when it
    overwrites an existing buffer the graph does not read, None when it needs a new buffer.
    """
    nodes: list
    roots: list
    root_targets: list


@dataclass
class Group:
    id: int
    output: int                         # the node it materializes
    members: set = field(default_factory=set)  # nodes computed inside (inlined)
    reduce: tuple | None = None         # (input shape, axes) of its reductions
    reason: str = ""                    # why this node is a kernel boundary
    matmul: int | None = None           # the matmul node a matmul-template kernel computes
    inputs: list = field(default_factory=list)  # materialized nodes and leaves it reads
    extra: list = field(default_factory=list)   # further nodes it stores (a multi-output kernel)
    parts: list = field(default_factory=list)   # a foreach kernel: the pointwise Groups it launches as one
    # a row-wise kernel whose output is laid out in another order than its reduction's input:
    # output dim k is the input's dim row_order[k] (None: the same order)
    row_order: tuple | None = None

    @property
    def outputs(self) -> tuple:
        """Every node the kernel stores: ``output`` first, then those merged into it."""
        return (self.output, *self.extra)


@dataclass
class Plan:
    groups: list          # Group, in execution order
    slots: dict           # node index -> ("leaf", i) | ("root", k) | ("temp", j)
    n_temps: int

    def producers(self) -> dict:
        """Node index -> id of the group that stores it, for every materialized node."""
        return {o: grp.id for grp in self.groups for o in grp.outputs}


def _consumers(nodes, pos):
    cons = {i: [] for i in range(len(nodes))}
    for i, n in enumerate(nodes):
        for s in n.srcs:
            cons[pos[id(s)]].append(i)
    return cons


def _is_expand_along(view: View, src_shape, axes) -> bool:
    if view != View.contiguous(src_shape).expand(view.shape):
        return False
    grown = tuple(d for d, (a, b) in enumerate(zip(src_shape, view.shape)) if a != b)
    return len(view.shape) == len(src_shape) and set(grown) <= set(axes)


def _templated(n, matmul_template) -> bool:
    return n.op is Op.MATMUL and n.dtype.name in matmul_template


def _forced_materializations(g: DrainGraph, matmul_template=frozenset()) -> dict:
    """Nodes that must be materialized whatever the partition, with the reason."""
    nodes = g.nodes
    must = {r: "live result" for r in g.roots}
    for i, n in enumerate(nodes):
        if n.kind is Kind.WRITE:
            must.setdefault(i, "in-place write")
            old = n.srcs[0]
            j = g_pos(g)[id(old)]
            if old.is_pending:
                must.setdefault(j, "old version of a buffer written in place")
        elif n.kind is Kind.SCAN:
            # a scan kernel runs its rows sequentially along the scanned dim: it takes its
            # elementwise prologue, and its result is stored for every reader
            must.setdefault(i, f"scan ({n.op.label})")
        elif n.kind is Kind.EXTERN and not _templated(n, matmul_template):
            # a template kernel loads its operands through any view, and a copy that only
            # rearranges them (a reshape of a transpose) is index arithmetic there too; anything
            # else it cannot tile is materialized when the lowering says so (``Unfusable``)
            must.setdefault(i, f"no native lowering ({n.arg.name})" if n.op is Op.EXTERN else
                            f"library call ({n.op.label})")
            for s in n.srcs:
                base = s.srcs[0] if s.kind is Kind.VIEW else s
                if base.is_pending:
                    must.setdefault(g_pos(g)[id(base)], "input of a library call")
    return must


def g_pos(g: DrainGraph) -> dict:
    pos = getattr(g, "_pos", None)
    if pos is None:
        pos = {id(n): i for i, n in enumerate(g.nodes)}
        g._pos = pos
    return pos


def _partition(g: DrainGraph, forced: dict, matmul_template=frozenset()):
    nodes = g.nodes
    pos = g_pos(g)
    cons = _consumers(nodes, pos)
    must = dict(_forced_materializations(g, matmul_template))
    for k, v in forced.items():
        must.setdefault(k, v)
    groups: list[Group] = []
    node_groups: dict[int, frozenset] = {}
    depth: dict[int, int] = {}   # how deep in its kernel's expression a node is inlined (0: an output)

    def new_group(i, reason, reduce=None):
        grp = Group(len(groups), i, {i}, reduce, reason, i if _templated(nodes[i], matmul_template) else None)
        groups.append(grp)
        node_groups[i] = frozenset([grp.id])
        depth[i] = 0

    for i in range(len(nodes) - 1, -1, -1):
        n = nodes[i]
        consumer_groups = frozenset().union(*(node_groups.get(c, frozenset()) for c in cons[i]))
        depth[i] = 1 + max([depth[c] for c in cons[i]], default=-1)
        if i in must:
            sig = (n.srcs[0].shape, n.arg) if n.kind in (Kind.REDUCE, Kind.SCAN) else None
            new_group(i, must[i], sig)
            continue
        if not n.is_pending or n.kind in DUPLICABLE or n.op in INDEX_LEAVES:
            node_groups[i] = consumer_groups
            for gid in consumer_groups:
                groups[gid].members.add(i)
            continue
        if len(consumer_groups) != 1 or depth[i] > MAX_INLINE_DEPTH:
            why = "read by several kernels" if len(consumer_groups) > 1 else \
                f"inlined {MAX_INLINE_DEPTH} values deep" if consumer_groups else "unread"
            new_group(i, why, (n.srcs[0].shape, n.arg) if n.kind is Kind.REDUCE else None)
            continue
        grp = groups[next(iter(consumer_groups))]
        if _templated(n, matmul_template):
            if not _can_join_as_epilogue(nodes, cons, i, grp):
                new_group(i, "matmul read other than by an elementwise epilogue at its own index")
                continue
            grp.matmul = i
        elif n.kind is Kind.REDUCE:
            order = _row_order(nodes, cons, i, grp)
            if grp.matmul is not None or not _can_join_reduction(nodes, cons, i, grp, order):
                new_group(i, "reduction read other than elementwise", (n.srcs[0].shape, n.arg))
                continue
            grp.reduce = (n.srcs[0].shape, n.arg)
            if order is not None and order != tuple(range(len(order))):
                grp.row_order = order
        elif nodes[grp.output].kind is Kind.EXTERN and grp.matmul is None:
            new_group(i, "input of a library call")
            continue
        elif not _cheap_cast(n) and _broadcast_read(nodes, cons, i, grp):
            new_group(i, "read broadcast: computed once, not once per broadcast element")
            continue
        elif n.op is Op.CHECK_INDEX and _read_expanded(nodes, cons, i):
            new_group(i, "index check read broadcast: checked once per index")
            continue
        grp.members.add(i)
        node_groups[i] = consumer_groups
    return groups, node_groups, must


def _can_join_as_epilogue(nodes, cons, i, grp: Group) -> bool:
    """Whether matmul ``i`` can be computed inside ``grp``, the kernel that reads it: a
    pointwise kernel (no reduction, no other matmul) over the matmul's own shape that reads it
    only through same-shape elementwise ops, so the product is used at the index the tile
    computes."""
    out = nodes[grp.output]
    if grp.reduce is not None or grp.matmul is not None or out.kind is not Kind.ELEMENTWISE:
        return False
    shape = nodes[i].shape
    return tuple(out.shape) == tuple(shape) and all(
        nodes[c].kind is Kind.ELEMENTWISE and nodes[c].shape == shape for c in cons[i])


def _cheap_cast(n) -> bool:
    """Casts skip the broadcast rule: recomputed per broadcast element they cost a convert, and
    fusing one lets a small matmul read an operand widened (``x.float() @ w``). Not a cast to
    float16/bfloat16 of a pending value: that is where a composite's float32 result is rounded
    (a float16 softmax), and taking it in would pull the whole computation behind it along."""
    if n.op is not Op.CAST:
        return False
    if n.dtype.name not in ("float16", "bfloat16"):
        return True
    src = n.srcs[0]
    while src.kind is Kind.VIEW:
        src = src.srcs[0]
    return not src.is_pending


def _broadcast_read(nodes, cons, i, grp: Group) -> bool:
    """Whether ``grp`` would read node ``i`` through a broadcast other than along its own
    reduced axes. Inlining it there recomputes it for every broadcast element (silu before a
    matmul: once per output column); a row-wise kernel reading its row statistic along the
    reduced axes is the exception, that value is computed once per row anyway."""
    if grp.reduce is None:
        return False  # pointwise kernels fuse through broadcasts (docs/semantics.md, Fusion): recomputing is cheap
    axes = set(grp.reduce[1])
    if grp.row_order is not None:   # (the reduced axes as the kernel's output dims)
        axes = {k for k, d in enumerate(grp.row_order) if d in axes}
    for c in cons[i]:
        v = nodes[c].arg if nodes[c].kind is Kind.VIEW else None
        if v is None:
            continue
        grown = {d for d, (st, n) in enumerate(zip(v.strides, v.shape)) if st == 0 and n > 1}
        # same rank, broadcast along the kernel's reduced dims: a row statistic
        row_stat = len(v.shape) == len(nodes[i].shape) and grown <= axes
        if grown and not row_stat:
            return True
    return False


def _read_expanded(nodes, cons, i) -> bool:
    """Whether node ``i`` is read through views (any chain of them) that show it larger than it is.
    An index check read so would run once per element read, its conditional store in the loop
    (an ``index_add`` of 4096 rows of 64 into 512, the check inlined in its reduction, took 2.1x
    the time of the kernel reading the checked positions from memory, one thread; ``one_hot``
    of 4096 into 512, inlined in the pointwise kernel, 1.07x): so it is a kernel of its own,
    also where ``_broadcast_read`` would inline it (pointwise kernels, row statistics)."""
    size = prod(nodes[i].shape)
    stack, seen = [i], {i}
    while stack:
        for c in cons[stack.pop()]:
            if nodes[c].kind is Kind.VIEW and c not in seen:
                if prod(nodes[c].shape) > size:
                    return True
                seen.add(c)
                stack.append(c)
    return False


def _broadcast_order(view: View, src_shape, in_shape):
    """``order`` with ``view`` = ``src_shape``'s contiguous view expanded to ``in_shape`` and
    permuted by ``order`` (a reduced value broadcast along its rows, in a permuted frame), or None."""
    if len(view.shape) != len(in_shape) or len(src_shape) != len(in_shape):
        return None
    expanded = View.contiguous(src_shape).expand(in_shape)
    free = list(range(len(in_shape)))
    order = []
    for size, stride in zip(view.shape, view.strides):
        # (the dims of one size and stride are interchangeable: any of them is the one)
        d = next((d for d in free if in_shape[d] == size and (expanded.strides[d] == stride or size == 1)), None)
        if d is None:
            return None
        free.remove(d)
        order.append(d)
    order = tuple(order)
    return order if expanded.permute(order) == view else None


def _row_order(nodes, cons, i, grp: Group):
    """How a row-wise kernel ``grp`` would compute reduction ``i``: ``order`` with the kernel's
    output dim k the reduction input's dim ``order[k]`` (the identity for softmax's rows), or
    None when its output is no such permutation of the input (it is not row-wise). A
    permutation comes from the views that broadcast the reduced value, or a value computed
    from it at its shape, along the rows: an elementwise result laid out in its transposed
    operand's memory order (``x.t() - x.t().amax(-1, keepdim=True)``, ``ops.laid_out``) reads
    its row statistic through a transposed broadcast, and one kernel still computes a row's
    statistic and then writes that row (its stores strided)."""
    n, out = nodes[i], nodes[grp.output]
    if out.kind is Kind.WRITE:
        return None
    in_shape, space = tuple(n.srcs[0].shape), tuple(out.shape)
    identity = tuple(range(len(in_shape)))
    if grp.reduce is not None:   # (an earlier stage fixed it)
        order = grp.row_order or identity
        return order if len(space) == len(in_shape) and tuple(in_shape[d] for d in order) == space else None
    orders, stack, seen = set(), [i], {i}
    while stack:
        for c in cons[stack.pop()]:
            cn = nodes[c]
            if c in seen:
                continue
            seen.add(c)
            if cn.kind is Kind.VIEW:
                order = _broadcast_order(cn.arg, n.shape, in_shape)
                if order is not None:
                    orders.add(order)
            elif cn.kind is Kind.ELEMENTWISE and cn.shape == n.shape:
                stack.append(c)
    if len(orders) == 1:
        (order,) = orders
        if tuple(in_shape[d] for d in order) == space:
            return order
    return identity if space == in_shape else None


def _can_join_reduction(nodes, cons, i, grp: Group, row_order) -> bool:
    """Whether reduction ``i`` can be computed inside ``grp``, its readers' kernel; ``row_order``
    (``_row_order``): how a row-wise kernel would lay it out, None for a kernel that is not."""
    n = nodes[i]
    out = nodes[grp.output]
    if out.kind in (Kind.EXTERN, Kind.SCAN):   # (a scan kernel has one stage: the scan)
        return False
    sig = (n.srcs[0].shape, n.arg)
    if grp.reduce is not None and grp.reduce != sig:
        return False
    space = out.arg.shape if out.kind is Kind.WRITE else out.shape
    if row_order is not None:
        # row-wise (softmax, layer_norm): the kernel writes whole rows and reads the reduced
        # value broadcast along them; any other read of it would need another index
        return all(nodes[c].kind is Kind.VIEW and _broadcast_order(nodes[c].arg, n.shape, sig[0]) == row_order
                   or nodes[c].kind is Kind.ELEMENTWISE and nodes[c].shape == n.shape for c in cons[i])
    if prod(space) != prod(n.shape):
        return False
    for c in cons[i]:
        cn = nodes[c]
        if cn.kind is Kind.VIEW:
            squeeze = cn.arg == View.contiguous(cn.arg.shape) and prod(cn.arg.shape) == prod(n.shape)
            stage_read = grp.reduce is not None and _is_expand_along(cn.arg, n.shape, n.arg)
            if not (squeeze or stage_read):
                return False
        elif not (cn.kind is Kind.ELEMENTWISE and cn.shape == n.shape):
            return False
    return True


def _assign_slots(g: DrainGraph, groups, must) -> tuple[dict, int]:
    nodes = g.nodes
    pos = g_pos(g)
    slots = {}
    for i, n in enumerate(nodes):
        if n.op is Op.BUFFER:
            slots[i] = ("leaf", i)
    for k, r in enumerate(g.roots):
        slots[r] = ("root", k)
    # An in-place write only stores its region, so its old version must live in the buffer the
    # write updates. A write that no live tensor holds (its tensor was dropped, but a live
    # result reads it) still needs one: a temporary the old version is computed into, or the
    # dropped storage's own buffer when the old version is already realized — found at the
    # bottom of the chain of writes (as ``_versions`` orders them: ``x[a] = u; x[b] = v;
    # x.copy_(w)`` writes u and v into x's buffer, not into a temporary that holds only them).
    n_temps = 0
    for i in range(len(nodes) - 1, -1, -1):
        n = nodes[i]
        if n.kind is not Kind.WRITE:
            continue
        j = pos[id(n.srcs[0])]
        if i not in slots:
            base = j
            while nodes[base].kind is Kind.WRITE:
                base = pos[id(nodes[base].srcs[0])]
            if nodes[base].op is Op.BUFFER:
                slots[i] = ("leaf", base)
            else:
                slots[i] = ("temp", n_temps)
                n_temps += 1
        if nodes[j].is_pending:
            slots[j] = slots[i]
    for grp in groups:
        if grp.output not in slots:
            slots[grp.output] = ("temp", n_temps)
            n_temps += 1
    return slots, n_temps


def _share_temps(g: DrainGraph, groups, slots, n_temps: int) -> tuple[dict, int]:
    """Temporaries whose lifetimes do not overlap share one buffer of their dtype: a chain of
    library calls (externs, matmuls) binds two intermediate buffers, not one per call, and its
    drain takes two from the pool. A temporary lives from the first kernel (in ``groups``'
    order) that stores it to the last that reads or stores it, so a kernel never reads one
    temporary and writes another in the same buffer. Shared by dtype, whatever the sizes: a
    plan is reused at other sizes of its structure (``at_sizes``), and a shared slot's buffer
    is as large as its largest node (runtime.build.assemble)."""
    if n_temps < 2:
        return slots, n_temps
    first, last = {}, {}
    for p, grp in enumerate(groups):
        for i in (*grp.outputs, *grp.inputs):
            slot = slots.get(i)
            if slot is not None and slot[0] == "temp":
                first.setdefault(slot[1], p)
                last[slot[1]] = p
    dtype = {slot[1]: g.nodes[i].dtype for i, slot in slots.items() if slot[0] == "temp"}
    starts, ends = {}, {}     # position -> the temporaries first / last used there
    for t in sorted(first):
        starts.setdefault(first[t], []).append(t)
        ends.setdefault(last[t], []).append(t)
    buffer_of = {}            # temporary -> the shared slot it takes
    free = {}                 # dtype -> shared slots no live temporary holds
    n_shared = 0
    for p in range(len(groups)):
        for t in ends.get(p - 1, ()):
            free.setdefault(dtype[t], []).append(buffer_of[t])
        for t in starts.get(p, ()):
            kept = free.get(dtype[t])
            if kept:
                buffer_of[t] = kept.pop()
            else:
                buffer_of[t] = n_shared
                n_shared += 1
    if n_shared == n_temps:   # none shared: the planner's own numbering
        return slots, n_temps
    return {i: ("temp", buffer_of[slot[1]]) if slot[0] == "temp" else slot for i, slot in slots.items()}, n_shared


def _versions(g: DrainGraph, slots) -> list:
    """For each physical buffer, its versions in write order (lists of node indices).

    A partial write links to the version it updates (its first source); a covering write
    (``copy_`` of a whole storage) starts a new link chain. So besides the chains of the live
    roots there are chains that no live tensor holds: the writes of a dropped storage that a
    live result still reads, and the partial writes that a later covering write of a live
    storage superseded. The latter live in the live storage's buffer (they start at its
    realized value), so they are prepended to its chain: their readers must run before the
    covering write.
    """
    pos = g_pos(g)
    olds = {pos[id(n.srcs[0])] for n in g.nodes if n.kind is Kind.WRITE}
    roots = set(g.roots)

    def walk(head):
        chain = [head]
        while g.nodes[chain[-1]].kind is Kind.WRITE:
            chain.append(pos[id(g.nodes[chain[-1]].srcs[0])])
        return list(reversed(chain))

    others = [walk(i) for i, n in enumerate(g.nodes) if n.kind is Kind.WRITE and i not in olds and i not in roots]
    on_leaf = {c[0]: c for c in others if g.nodes[c[0]].op is Op.BUFFER}
    chains = [c for c in others if g.nodes[c[0]].op is not Op.BUFFER]
    for k, r in enumerate(g.roots):
        chain = walk(r)
        target = g.root_targets[k]
        if target is not None and target >= 0 and chain[0] != target:
            chain = on_leaf.pop(target, [target]) + chain
        chains.append(chain)
    chains.extend(on_leaf.values())
    return chains


def _aligned_write_hazards(g: DrainGraph, grp: Group, old_versions: set) -> set:
    """Nodes inside ``grp`` that read a buffer it writes at another index than the one written.

    A read is aligned only when it reaches the store through elementwise ops alone: the old
    value at index i feeds the new value at index i (``a.add_(1)``, ``a[0].mul_(2)``). Anything
    else (``a.copy_(a.T)``, a reduction over the written buffer) must read a copy.
    """
    nodes = g.nodes
    pos = g_pos(g)
    out_node = nodes[grp.output]
    store_view = out_node.arg if out_node.kind is Kind.WRITE else View.contiguous(out_node.shape)
    full = out_node.kind is not Kind.WRITE
    # a view over a value computed in this kernel from an old version reads that version at
    # another index; over a value that reads none (a step-dependent scalar broadcast into an
    # optimizer update, an elementwise result laid out as its transposed input: ``p - m.T * 0.1``)
    # it moves no read of one
    tainted = set()
    for m in sorted(grp.members):   # node indices are topological
        if any(pos[id(s)] in old_versions or pos[id(s)] in tainted for s in nodes[m].srcs):
            tainted.add(m)
    fused_views = any(nodes[m].kind is Kind.VIEW and pos[id(nodes[m].srcs[0])] in grp.members
                      and nodes[m].srcs[0].is_pending and pos[id(nodes[m].srcs[0])] in tainted
                      for m in grp.members)
    bad = set()
    for m in grp.members:
        n = nodes[m]
        for s in n.srcs:
            si = pos[id(s)]
            if si not in old_versions or (m in grp.outputs and n.kind is Kind.WRITE and s is n.srcs[0]):
                continue
            if grp.reduce is not None or fused_views:
                bad.add(m)
            elif n.kind is Kind.VIEW:
                if n.arg != store_view:
                    bad.add(m)
            elif not (n.kind is Kind.ELEMENTWISE and full and n.shape == s.shape):
                bad.add(m)
    return bad


def plan(g: DrainGraph, forced: dict | None = None, matmul_template=frozenset()) -> Plan:
    """Partition ``g``; ``forced`` names nodes to materialize whatever the rules say (with why);
    ``matmul_template`` names the matmul dtypes the backend computes in a template kernel with
    a fused epilogue (empty: matmul is a library call)."""
    forced = dict(forced or {})
    for _ in range(len(g.nodes) + 1):
        groups, _, must = _partition(g, forced, matmul_template)
        slots, n_temps = _assign_slots(g, groups, must)
        fix = _repairs(g, groups, slots)
        if not fix:
            groups = _merge_extern_siblings(g, _merge_foreach(g, _merge_pointwise(g, groups, slots), slots))
            ordered = _order(g, groups, slots)
            if not any(g.nodes[grp.output].op is Op.COLLECTIVE for grp in ordered):
                # (a collective runs asynchronously: its buffers stay its own until it is waited for)
                slots, n_temps = _share_temps(g, ordered, slots, n_temps)
            return Plan(ordered, slots, n_temps)
        for i, why in fix.items():
            forced.setdefault(i, why)
    raise AssertionError("fusion planner did not converge")  # each round forces one more node: unreachable


def _pointwise_space(nodes, grp: Group):
    """The shape a kernel iterates over when it is pointwise and stores each of its outputs
    whole and contiguous at its loop index (an elementwise result; a covering ``copy_`` is a
    cast); None for any other kernel."""
    if grp.reduce is not None or grp.matmul is not None:
        return None
    spaces = {tuple(nodes[o].shape) for o in grp.outputs}
    if len(spaces) != 1 or any(nodes[o].kind is not Kind.ELEMENTWISE for o in grp.outputs):
        return None
    return spaces.pop()


def _reads_at_own_index(g: DrainGraph, members, values) -> bool:
    """Whether the nodes ``members`` read ``values`` only at the index they are computed at:
    through elementwise ops and identity views, never a view that moves indices."""
    srcs = _src_index(g)
    tainted = set(values)
    for m in sorted(members):   # node indices are topological
        n = g.nodes[m]
        if m in tainted or not any(s in tainted for s in srcs[m]):
            continue
        if n.kind is Kind.VIEW and not (n.arg == View.contiguous(n.shape) and n.srcs[0].shape == n.shape):
            return False
        if n.kind not in (Kind.ELEMENTWISE, Kind.VIEW):
            return False
        tainted.add(m)
    return True


def _height(g: DrainGraph, members) -> int:
    """The longest chain of values computed inside a kernel (what lowering recurses through)."""
    srcs = _src_index(g)
    h = {}
    for m in sorted(members):
        h[m] = 1 + max((h.get(s, 0) for s in srcs[m]), default=0)
    return max(h.values(), default=0)


class _Contraction:
    """The kernels' dependency graph while kernels merge: successor and predecessor sets, and a
    topological order kept valid across merges, so that whether a merge would close a cycle is
    decided by a search over the kernels *between* the two in that order, not the whole graph.

    Merging two kernels of an acyclic graph closes a cycle exactly when a path of two or more
    edges joins them (an edge between them becomes internal). When it does not, the kernels
    between them that the earlier one reaches move after the merged kernel and the rest before
    (Pearce and Kelly's dynamic topological order, for a contraction).
    """

    def __init__(self, groups: list, edges):
        self.succ = {id(grp): set() for grp in groups}
        self.pred = {id(grp): set() for grp in groups}
        for u, v in edges:
            self.succ[id(groups[u])].add(id(groups[v]))
            self.pred[id(groups[v])].add(id(groups[u]))
        self.order = [id(grp) for grp in _topological(groups, edges, key=lambda k: k)]
        self.rank = {k: r for r, k in enumerate(self.order)}

    def adjacent(self, x, y) -> bool:
        return id(y) in self.succ[id(x)] or id(y) in self.pred[id(x)]

    def _between(self, a: int, b: int):
        """``(cycle, reached)``: with ``a`` before ``b`` in the order, whether a path of 2+ edges
        leads from ``a`` to ``b``, and the kernels before ``b`` that ``a`` reaches."""
        limit = self.rank[b]
        reached, stack = set(), [s for s in self.succ[a] if s != b]
        while stack:
            w = stack.pop()
            if w in reached or self.rank[w] > limit:
                continue
            if b in self.succ[w]:
                return True, reached
            reached.add(w)
            stack.extend(self.succ[w])
        return False, reached

    def would_cycle(self, x, y) -> bool:
        a, b = sorted((id(x), id(y)), key=self.rank.__getitem__)
        return self._between(a, b)[0]

    def merge(self, x, y, merged) -> None:
        """Replace kernels ``x`` and ``y`` by ``merged`` (their merge must not close a cycle)."""
        a, b = sorted((id(x), id(y)), key=self.rank.__getitem__)
        _, reached = self._between(a, b)
        lo, hi = self.rank[a], self.rank[b]
        region = self.order[lo:hi + 1]
        k = id(merged)
        new = [w for w in region if w is not None and w != a and w != b and w not in reached] + [k] + \
              [w for w in region if w in reached]
        new += [None] * (len(region) - len(new))   # the freed places: ranks elsewhere stay valid
        self.order[lo:hi + 1] = new
        for r, w in enumerate(new, lo):
            if w is not None:
                self.rank[w] = r
        succ = (self.succ.pop(a) | self.succ.pop(b)) - {a, b}
        pred = (self.pred.pop(a) | self.pred.pop(b)) - {a, b}
        del self.rank[a], self.rank[b]
        for w in succ:
            self.pred[w] -= {a, b}
            self.pred[w].add(k)
        for w in pred:
            self.succ[w] -= {a, b}
            self.succ[w].add(k)
        self.succ[k], self.pred[k] = succ, pred


def _merge_pointwise(g: DrainGraph, groups: list, slots) -> list:
    """Multi-output kernels: a pointwise kernel that reads another pointwise kernel's output over
    the same iteration space, at its own index, computes that output itself and stores it too
    (an optimizer update: the moments and the parameter in one kernel, not one per buffer).

    A merge is kept only when the merged plan has no hazard and no cycle (the rules of
    ``_repairs``): a kernel between the two, or an in-place write the other one must precede,
    keeps them apart; so does the inline bound (``MAX_INLINE_DEPTH``) on the merged kernel.

    Kernels are visited in plan order and each one's producers in the order of the values it
    reads; the first pair that can merge does, and the visit resumes at the first kernel whose
    pairs that merge changed. A pair that failed once fails for good (a merge only adds paths
    between the other kernels, and leaves their members as they were), so it is never tried
    again; hazards are checked on the merged kernel alone, cycles by ``_Contraction``.
    """
    nodes = g.nodes
    srcs = _src_index(g)
    edges, _ = _edges(g, groups, slots)
    deps = _Contraction(groups, edges)
    versions_at = {}    # node -> the earlier versions of its buffer, when it is a later version
    for chain in _versions(g, slots):
        for k in range(1, len(chain)):
            versions_at.setdefault(chain[k], []).append(chain[:k])
    producer = {o: grp for grp in groups for o in grp.outputs}
    reads = {id(grp): sorted({s for m in grp.members for s in srcs[m]}) for grp in groups}
    readers: dict[int, set] = {}   # node -> ids of the kernels reading it
    for grp in groups:
        for s in reads[id(grp)]:
            readers.setdefault(s, set()).add(id(grp))
    heights = {}
    failed = set()        # (id(y), id(x)) pairs that cannot merge
    retired = []          # the merged-away groups, kept alive: the tables above know groups by id()

    def height(grp):
        if id(grp) not in heights:
            heights[id(grp)] = _height(g, grp.members)
        return heights[id(grp)]

    def mergeable(y, x, space) -> bool:
        if _pointwise_space(nodes, x) != space or not _reads_at_own_index(g, y.members, x.outputs) \
                or height(x) + height(y) > MAX_INLINE_DEPTH:
            return False
        both = Group(y.id, y.output, y.members | x.members, reason=y.reason, extra=[*y.extra, *x.outputs])
        if any(_aligned_write_hazards(g, both, set(older)) for o in both.outputs for older in versions_at.get(o, ())):
            return False
        return not deps.would_cycle(x, y)

    at = 0
    while at < len(groups):
        y = groups[at]
        space = _pointwise_space(nodes, y)
        partner = None
        if space is not None:
            producers = {id(producer[i]): producer[i] for i in reads[id(y)] if i in producer and producer[i] is not y}
            for x in producers.values():   # in the order of the values read
                if (id(y), id(x)) in failed:
                    continue
                if mergeable(y, x, space):
                    partner = x
                    break
                failed.add((id(y), id(x)))
        if partner is None:
            at += 1
            continue
        x = partner
        both = Group(y.id, y.output, y.members | x.members, reason=y.reason, extra=[*y.extra, *x.outputs])
        deps.merge(x, y, both)
        retired += (x, y)
        groups = [both if grp is y else grp for grp in groups if grp is not x]
        for o in both.outputs:
            producer[o] = both
        reads[id(both)] = sorted(set(reads.pop(id(x))) | set(reads.pop(id(y))))
        for s in reads[id(both)]:
            r = readers[s]
            r.discard(id(x))
            r.discard(id(y))
            r.add(id(both))
        # every pair of the kernels before ``both`` failed, but those of a kernel reading it are new
        mine = {k for o in both.outputs for k in readers.get(o, ())}
        at = next(k for k, grp in enumerate(groups) if grp is both or id(grp) in mine)
    for k, grp in enumerate(groups):
        grp.id = k
    return groups


def _foreach(parts: list) -> Group:
    members = set().union(*(p.members for p in parts))
    outputs = [o for p in parts for o in p.outputs]
    return Group(0, outputs[0], members, reason=f"foreach: in-place updates of {len(outputs)} buffers in one launch",
                 extra=outputs[1:], parts=parts)


def _merge_foreach(g: DrainGraph, groups: list, slots) -> list:
    """Foreach kernels: pointwise kernels that only overwrite existing buffers (an optimizer
    step: one kernel per parameter) and do not depend on each other are launched as one
    kernel, each over its own iteration space.

    The parts of one foreach kernel may run concurrently (a GPU's programs), so none may read
    what another writes or overwrite what another reads: no dependency edge between two parts,
    and none through other kernels (the contracted plan stays acyclic; ``_Contraction`` checks
    each addition to a cluster locally).
    """
    nodes = g.nodes
    overwrites = {r for r, t in zip(g.roots, g.root_targets) if t is not None}
    loose = [k for k, grp in enumerate(groups)
             if _pointwise_space(nodes, grp) is not None and all(o in overwrites for o in grp.outputs)]
    if len(loose) < 2:
        return groups
    edges, _ = _edges(g, groups, slots)
    deps = _Contraction(groups, edges)
    clusters: list[list[int]] = []
    stand_in: list = []   # per cluster, the object that stands for it in ``deps``
    tokens = []           # every stand-in made, kept alive: ``deps`` knows objects by id()
    for y in loose:
        for c, cluster in enumerate(clusters):
            if deps.adjacent(stand_in[c], groups[y]) or deps.would_cycle(stand_in[c], groups[y]):
                continue
            token = object()   # the grown cluster's own identity in ``deps``
            tokens.append(token)
            deps.merge(stand_in[c], groups[y], token)
            stand_in[c] = token
            cluster.append(y)
            break
        else:
            clusters.append([y])
            stand_in.append(groups[y])
    inside = {k for c in clusters if len(c) > 1 for k in c}
    out = [grp for k, grp in enumerate(groups) if k not in inside]
    out += [_foreach([groups[k] for k in c]) for c in clusters if len(c) > 1]
    for k, grp in enumerate(out):
        grp.id = k
    return out


def _merge_extern_siblings(g: DrainGraph, groups: list) -> list:
    """The results of one torch call (``sort``'s values and indices: EXTERN nodes of one family
    on the same sources, ``lazyfuse.extern``) are stored by one step, so torch runs once for
    all of them. Siblings read the same materialized inputs and none reads another, so the
    merged step can run where the first would: no cycle, no hazard. Two calls of one family on the
    same sources that take the same element (``x.flip(0)`` recorded twice) are not siblings: the step
    stores each element once, so the second would keep its buffer's garbage; they stay two steps."""
    nodes = g.nodes
    lead = {}   # (family, sources) -> [the group merged into, the elements it takes]
    out = []
    for grp in groups:
        n = nodes[grp.output]
        if n.op is Op.EXTERN and not grp.extra:
            key = (n.arg.family, tuple([id(s) for s in n.srcs]))
            first = lead.get(key)
            if first is not None and n.arg.index not in first[1]:
                first[0].extra.append(grp.output)
                first[0].members |= grp.members
                first[1].add(n.arg.index)
                continue
            if first is None:
                lead[key] = [grp, {n.arg.index}]
        out.append(grp)
    if len(out) == len(groups):
        return groups
    for k, grp in enumerate(out):
        grp.id = k
    return out


def _src_index(g: DrainGraph) -> list:
    """For each node, the indices of the nodes it reads (computed once per drain graph)."""
    srcs = getattr(g, "_srcs", None)
    if srcs is None:
        pos = g_pos(g)
        srcs = g._srcs = [tuple(pos[id(s)] for s in n.srcs) for n in g.nodes]
    return srcs


def _edges(g: DrainGraph, groups, slots):
    """The kernels' dependency edges ``(before, after)`` by group id, in a fixed order (data
    edges kernel by kernel, then write-after-read edges buffer version by version), and the
    write-after-read edges as ``(old version, reader, writer)``. Sets each group's ``inputs``.
    One pass over the members' reads: O(nodes + edges)."""
    nodes = g.nodes
    srcs = _src_index(g)
    producer = {o: grp.id for grp in groups for o in grp.outputs}
    readers: dict[int, list] = {}   # node -> the groups whose members read it, in plan order
    edges = []
    for grp in groups:
        inputs = []
        for m in sorted(grp.members):
            for si in srcs[m]:
                if si in producer and producer[si] != grp.id:
                    edges.append((producer[si], grp.id))
                    inputs.append(si)
                elif nodes[si].op is Op.BUFFER:
                    inputs.append(si)
                seen = readers.setdefault(si, [])
                if not seen or seen[-1] is not grp:
                    seen.append(grp)
        grp.inputs = sorted(set(inputs))
    war = []
    for chain in _versions(g, slots):
        for older, newer in zip(chain, chain[1:]):
            writer = producer.get(newer)
            if writer is None:
                continue
            for reader in {grp.id for grp in readers.get(older, ()) if older not in grp.outputs}:
                if reader != writer:
                    edges.append((reader, writer))
                    war.append((older, reader, writer))
    return edges, war


def _topological(groups, edges, key):
    """The groups in the topological order that is smallest in ``key(group id)`` at each step;
    None when the edges have a cycle."""
    succ = [[] for _ in groups]
    indegree = [0] * len(groups)
    for u, v in set(edges):
        succ[u].append(v)
        indegree[v] += 1
    ready = [(key(k), k) for k in range(len(groups)) if indegree[k] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, k = heapq.heappop(ready)
        order.append(groups[k])
        for v in succ[k]:
            indegree[v] -= 1
            if indegree[v] == 0:
                heapq.heappush(ready, (key(v), v))
    return order if len(order) == len(groups) else None


def _repairs(g: DrainGraph, groups, slots) -> dict:
    srcs = _src_index(g)
    fix = {}
    chains = _versions(g, slots)
    producer = {o: grp for grp in groups for o in grp.outputs}
    for chain in chains:
        for k in range(1, len(chain)):
            writer = producer.get(chain[k])
            if writer is None:
                continue
            for m in _aligned_write_hazards(g, writer, set(chain[:k])):
                fix[m] = "reads a buffer that its kernel overwrites, at another index"
    if fix:
        return fix
    edges, war = _edges(g, groups, slots)
    if _topological(groups, edges, key=lambda k: k) is not None:
        return {}
    # a cycle (rare: once per repair): networkx names one, and its write-after-read edge is cut
    dg = nx.DiGraph()
    dg.add_nodes_from(grp.id for grp in groups)
    dg.add_edges_from(edges)
    cycle = nx.find_cycle(dg)
    in_cycle = {u for u, _ in cycle}
    for older, reader, writer in war:
        if reader in in_cycle and writer in in_cycle:
            grp = groups[reader]
            for m in sorted(grp.members):
                if m not in grp.outputs and older in srcs[m]:
                    fix[m] = "reads an old version of a buffer written in place later"
                    return fix
    raise AssertionError(f"unrepairable cycle between kernels: {cycle}")


def _order(g: DrainGraph, groups, slots) -> list:
    """Program order: the smallest output first among the ready kernels. In a plan with
    collectives, the kernels a collective needs come first, collective by collective: the
    engine launches a collective asynchronously, so started early it overlaps the kernels after
    it (a gradient bucket's all-reduce runs during the rest of backward, as torch DDP's bucket
    hooks fire). Collectives keep their program order among themselves (each reads the previous
    one's ordering token), and the order is a function of the graph alone: every rank of a
    group running the same program plans the same order."""
    edges, _ = _edges(g, groups, slots)
    collectives = sorted((grp.output, grp.id) for grp in groups if g.nodes[grp.output].op is Op.COLLECTIVE)
    if not collectives:
        return _topological(groups, edges, key=lambda gid: groups[gid].output)
    fed = _first_collective_fed(groups, edges, [gid for _, gid in collectives])
    return _topological(groups, edges, key=lambda gid: (fed[gid], groups[gid].output))


def _first_collective_fed(groups, edges, collectives) -> list:
    """For each kernel, the rank in program order of the first of ``collectives`` (group ids)
    that needs it, directly or through other kernels (``len(collectives)``: none does)."""
    fed = [len(collectives)] * len(groups)
    for r, gid in enumerate(collectives):
        fed[gid] = r
    succ = [[] for _ in groups]
    for u, v in set(edges):
        succ[u].append(v)
    for grp in reversed(_topological(groups, edges, key=lambda k: k)):
        for v in succ[grp.id]:
            fed[grp.id] = min(fed[grp.id], fed[v])
    return fed


def at_sizes(plan: Plan, planned_nodes: list, nodes: list) -> Plan:
    """``plan``, made for ``planned_nodes``, for a drain of the same structure whose nodes
    (same order) are ``nodes`` at other sizes (runtime.structure). Groups name nodes by index,
    which holds; only a reduction's signature holds a shape, re-read from the same node."""
    def resized(grp: Group) -> Group:
        reduce = grp.reduce
        if reduce is not None:
            i = next(i for i in sorted(grp.members | set(grp.outputs)) if planned_nodes[i].kind in (Kind.REDUCE, Kind.SCAN)
                     and (planned_nodes[i].srcs[0].shape, planned_nodes[i].arg) == reduce)
            reduce = (nodes[i].srcs[0].shape, nodes[i].arg)
        return replace(grp, reduce=reduce, parts=[resized(p) for p in grp.parts])
    return Plan([resized(g) for g in plan.groups], plan.slots, plan.n_temps)
