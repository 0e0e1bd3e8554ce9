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
* A kernel inlines values at most ``MAX_INLINE_DEPTH`` deep (a chain of 200 in-place ``add_``
  is otherwise one expression): lowering and printing recurse once per level, so a deeper
  value is materialized and the chain becomes several kernels.

networkx does the graph work; it runs only on a plan-cache miss (the build path).
"""
from __future__ import annotations

from dataclasses import dataclass, field

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
            sig = (n.srcs[0].shape, n.arg) if n.kind is Kind.REDUCE else None
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
            if grp.matmul is not None or not _can_join_reduction(nodes, cons, i, grp):
                new_group(i, "reduction read other than elementwise", (n.srcs[0].shape, n.arg))
                continue
            grp.reduce = (n.srcs[0].shape, n.arg)
        elif nodes[grp.output].kind is Kind.EXTERN and grp.matmul is None:
            new_group(i, "input of a library call")
            continue
        elif not _cheap_cast(n) and _broadcast_read(nodes, cons, i, grp):
            new_group(i, "read broadcast: computed once, not once per broadcast element")
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
        return False  # pointwise kernels fuse through broadcasts (SPEC 3); recomputing is cheap there
    axes = set(grp.reduce[1])
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


def _can_join_reduction(nodes, cons, i, grp: Group) -> bool:
    n = nodes[i]
    out = nodes[grp.output]
    if out.kind is Kind.EXTERN:
        return False
    sig = (n.srcs[0].shape, n.arg)
    if grp.reduce is not None and grp.reduce != sig:
        return False
    space = out.arg.shape if out.kind is Kind.WRITE else out.shape
    if tuple(space) == tuple(n.srcs[0].shape) and out.kind is not Kind.WRITE:
        # row-wise (softmax, layer_norm): the kernel writes whole rows and reads the reduced
        # value broadcast along them; any other read of it would need another index
        return all(nodes[c].kind is Kind.VIEW and _is_expand_along(nodes[c].arg, n.shape, n.arg)
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


def _readers(g: DrainGraph, groups, node_groups, i) -> set:
    """Groups that read node ``i`` (from memory or inline)."""
    out = set()
    pos = g_pos(g)
    for grp in groups:
        if i in grp.outputs:
            continue
        for m in grp.members:
            if any(pos[id(s)] == i for s in g.nodes[m].srcs):
                out.add(grp.id)
    return out


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
    # a view over a value computed in this kernel moves indices; a 0-d value that reads no old
    # version (a step-dependent scalar broadcast into an optimizer update) moves none
    tainted = set()
    for m in sorted(grp.members):   # node indices are topological
        if any(pos[id(s)] in old_versions or pos[id(s)] in tainted for s in nodes[m].srcs):
            tainted.add(m)
    fused_views = any(nodes[m].kind is Kind.VIEW and pos[id(nodes[m].srcs[0])] in grp.members
                      and nodes[m].srcs[0].is_pending
                      and (nodes[m].srcs[0].shape != () or pos[id(nodes[m].srcs[0])] in tainted)
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
        groups, node_groups, must = _partition(g, forced, matmul_template)
        slots, n_temps = _assign_slots(g, groups, must)
        fix = _repairs(g, groups, node_groups, slots)
        if not fix:
            groups = _merge_foreach(g, _merge_pointwise(g, groups, slots), slots)
            return Plan(_order(g, groups, node_groups, slots), slots, n_temps)
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
    pos = g_pos(g)
    tainted = set(values)
    for m in sorted(members):   # node indices are topological
        n = g.nodes[m]
        if m in tainted or not any(pos[id(s)] in tainted for s in n.srcs):
            continue
        if n.kind is Kind.VIEW and not (n.arg == View.contiguous(n.shape) and n.srcs[0].shape == n.shape):
            return False
        if n.kind not in (Kind.ELEMENTWISE, Kind.VIEW):
            return False
        tainted.add(m)
    return True


def _height(g: DrainGraph, members) -> int:
    """The longest chain of values computed inside a kernel (what lowering recurses through)."""
    pos = g_pos(g)
    h = {}
    for m in sorted(members):
        h[m] = 1 + max((h.get(pos[id(s)], 0) for s in g.nodes[m].srcs), default=0)
    return max(h.values(), default=0)


def _merge_pointwise(g: DrainGraph, groups: list, slots) -> list:
    """Multi-output kernels: a pointwise kernel that reads another pointwise kernel's output over
    the same iteration space, at its own index, computes that output itself and stores it too
    (an optimizer update: the moments and the parameter in one kernel, not one per buffer).

    A merge is kept only when the merged plan has no hazard and no cycle (the rules of
    ``_repairs``): a kernel between the two, or an in-place write the other one must precede,
    keeps them apart; so does the inline bound (``MAX_INLINE_DEPTH``) on the merged kernel.
    """
    nodes = g.nodes
    pos = g_pos(g)
    merged = True
    while merged:
        merged = False
        producer = {o: grp for grp in groups for o in grp.outputs}
        for y in groups:
            space = _pointwise_space(nodes, y)
            if space is None:
                continue
            read = {pos[id(s)] for m in y.members for s in nodes[m].srcs}
            for gid in dict.fromkeys(producer[i].id for i in sorted(read) if i in producer and producer[i] is not y):
                x = groups[gid]
                if _pointwise_space(nodes, x) != space or not _reads_at_own_index(g, y.members, x.outputs) \
                        or _height(g, x.members) + _height(g, y.members) > MAX_INLINE_DEPTH:
                    continue
                both = Group(y.id, y.output, y.members | x.members, reason=y.reason,
                             extra=[*y.extra, *x.outputs])
                trial = [both if grp is y else grp for grp in groups if grp is not x]
                for k, grp in enumerate(trial):
                    grp.id = k
                try:
                    ok = not _repairs(g, trial, None, slots)
                except AssertionError:   # an unrepairable cycle: the two must stay apart
                    ok = False
                if ok:
                    groups, merged = trial, True
                    break
                for k, grp in enumerate(groups):
                    grp.id = k
            if merged:
                break
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
    and none through other kernels (the contracted plan stays acyclic).
    """
    nodes = g.nodes
    overwrites = {r for r, t in zip(g.roots, g.root_targets) if t is not None}
    loose = [k for k, grp in enumerate(groups)
             if _pointwise_space(nodes, grp) is not None and all(o in overwrites for o in grp.outputs)]
    if len(loose) < 2:
        return groups
    dg, _ = _dependency_graph(g, groups, None, slots)
    original = list(groups)
    clusters: list[list[int]] = []

    def contracted(cs) -> list:
        inside = {k for c in cs if len(c) > 1 for k in c}
        out = [grp for k, grp in enumerate(original) if k not in inside]
        out += [_foreach([original[k] for k in c]) for c in cs if len(c) > 1]
        for k, grp in enumerate(out):
            grp.id = k
        return out

    for y in loose:
        for c in clusters:
            if any(dg.has_edge(x, y) or dg.has_edge(y, x) for x in c):
                continue
            trial = [c + [y] if other is c else other for other in clusters]
            if nx.is_directed_acyclic_graph(_dependency_graph(g, contracted(trial), None, slots)[0]):
                clusters = trial
                break
        else:
            clusters.append([y])
    return contracted(clusters)


def _dependency_graph(g: DrainGraph, groups, node_groups, slots):
    pos = g_pos(g)
    dg = nx.DiGraph()
    dg.add_nodes_from(grp.id for grp in groups)
    producer = {o: grp.id for grp in groups for o in grp.outputs}
    for grp in groups:
        inputs = []
        for m in sorted(grp.members):
            for s in g.nodes[m].srcs:
                si = pos[id(s)]
                if si in producer and producer[si] != grp.id:
                    dg.add_edge(producer[si], grp.id, kind="data")
                    inputs.append(si)
                elif g.nodes[si].op is Op.BUFFER:
                    inputs.append(si)
        grp.inputs = sorted(set(inputs))
    war = []
    for chain in _versions(g, slots):
        for older, newer in zip(chain, chain[1:]):
            writer = producer.get(newer)
            if writer is None:
                continue
            for reader in _readers(g, groups, node_groups, older):
                if reader != writer:
                    dg.add_edge(reader, writer, kind="war")
                    war.append((older, reader, writer))
    return dg, war


def _repairs(g: DrainGraph, groups, node_groups, slots) -> dict:
    pos = g_pos(g)
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
    dg, war = _dependency_graph(g, groups, node_groups, slots)
    try:
        cycle = nx.find_cycle(dg)
    except nx.NetworkXNoCycle:
        return {}
    in_cycle = {u for u, _ in cycle}
    for older, reader, writer in war:
        if reader in in_cycle and writer in in_cycle:
            grp = groups[reader]
            for m in sorted(grp.members):
                if m not in grp.outputs and any(pos[id(s)] == older for s in g.nodes[m].srcs):
                    fix[m] = "reads an old version of a buffer written in place later"
                    return fix
    raise AssertionError(f"unrepairable cycle between kernels: {cycle}")


def _order(g: DrainGraph, groups, node_groups, slots) -> list:
    dg, _ = _dependency_graph(g, groups, node_groups, slots)
    order = list(nx.lexicographical_topological_sort(dg, key=lambda gid: groups[gid].output))
    return [groups[i] for i in order]
