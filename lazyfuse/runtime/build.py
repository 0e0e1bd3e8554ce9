"""The build path: from a drain's live roots to a compiled-plan skeleton (steps, slots, gathers).

On a plan-cache miss the engine traces the live DAG (``trace``), plans it (ir.planner) and
lowers each group (codegen.lower) into ``Step``s (``new_plan``); runtime/execute.py then
compiles and launches them. A known structure at new sizes (runtime.structure) skips the
planner and the compiler: ``rebind_steps`` lowers a cached plan's groups at the new sizes and
keeps its compiled kernels where the backend finds the same code. ``lf.explain`` reads the same path (``trace``, ``plan_and_lower``)
without running anything, so it imports this module, not the engine.
"""
from __future__ import annotations

import operator
import struct
from dataclasses import dataclass

from ..ir.node import Kind, Node, Op, post_order, sources
from ..ir.planner import DrainGraph, at_sizes, plan as make_plan
from ..ir.shapes import prod
from ..ir.view import contiguous_view
from .backend import LibraryCall, StepKind


@dataclass
class Step:
    """One launch of a compiled plan: a kernel or a library call, and what it binds."""
    name: str
    kind: StepKind
    slots: list               # buffer slot of each argument
    scalars: list             # position of each runtime scalar in the trace's scalar list
    header: list              # metadata words before the scalars (loop extents, the kernel's sizes)
    kernel: object = None     # codegen Kernel (kernels) or LibraryCall (library)
    compiled: object = None   # backend object
    group: object = None      # the planner's Group, for explain
    bind: object = None       # bound -> its buffers, ``bound`` being the tape, then root buffers, then temps
    bind_scalars: object = None  # tape -> its runtime scalar values
    rng_words: tuple = ()     # (seed word, offset word) of each random stream (set from the generator on replay)
    source: str = ""
    config: object = None
    # the metadata word of a kernel's error flag (codegen ``Kernel.error_flag_word``), None where
    # it cannot fail, and what names its index checks (``Kernel.index_check_info``): kept here,
    # so a launch of a stored plan's step never unpickles its kernel
    error_flag: int | None = None
    index_checks: tuple = ()

    @property
    def meta_words(self) -> int:
        """The header, the scalars, and a kernel's error flag where it has one (error_flag_word),
        with a word per index check after it (``Kernel.index_checks``)."""
        return len(self.header) + len(self.scalars) + (self.error_flag is not None) + len(self.index_checks)


@dataclass
class CompiledPlan:
    key: tuple
    steps: list
    temps: list               # (dtype, numel) per temporary slot
    sketch: "GraphSketch"     # what ``graph`` is made from
    metas: list | None = None  # steady-state launch metadata, one per step, made on first use
    label: str = ""
    n_ops: int = 0            # recorded ops this plan executes (for ops_elided)
    root_steps: tuple = ()    # for each live root, the step that writes its final value
    n_extern: int = 0         # extern steps (torch calls with no native lowering)
    untuned: object = None    # what the backend's build left to tune at a later run (autotune.Deferred)
    planned: object = None    # the planner's Plan (node indices only: valid for every size of the structure)
    # where its steps came from: "planned" (the planner, then compile_plan), or compiled
    # already: "rebound" (another size's plan of its structure), "loaded" (runtime.plan_store)
    origin: str = "planned"
    structure: object = None  # its size-free key (runtime.structure)
    stored: str | None = None  # its record name in the plan store (None: not to be stored)
    waits: object = None      # where the launches wait for the plan's collectives (None: it has none)
    # the steady state's test that the last drain's calls still apply (runtime/execute.py, LaunchMemo):
    # every buffer any step binds (bound -> tuple), every runtime scalar (tape -> tuple), and
    # whether the calls depend on nothing else (no random stream, no collective)
    bind_all: object = None
    scalars_all: object = None
    scalar_words: object = None   # scalars_all's values -> their metadata words, as bytes
    n_scalars: int = 0        # runtime scalars its steps bind (none: no scalar words to compare)
    reusable: bool = False
    written: bytes | None = None   # the scalar words last written to ``metas`` (those kept with a LaunchMemo)
    allocations: list | None = None   # (dtype, numel, pool key) of each new root, then each temporary (execute.allocate)
    follower: object = None   # the key of the plan the next drain ran, the last time this one ran (Engine._predicted)
    memoized: bool = False    # a LaunchMemo was kept for it, and its every root is new (execute.launch_memo)
    _graph: DrainGraph | None = None

    @property
    def graph(self) -> DrainGraph:
        """The drain's graph as planned, without its buffers (``lf.explain`` reads it, and a
        rebind at other sizes), made on first use."""
        if self._graph is None:
            self._graph = self.sketch.graph(self.key.parts[0])
        return self._graph


@dataclass
class GraphSketch:
    """What a plan's graph is made from with its key's descriptors: each traced node's tape
    position, the scalars' values and the aten ops that recorded nodes (the torch frontend's,
    for ``lf.explain``), the roots and their targets. Its nodes are new ones, without buffers:
    holding the build drain's own nodes would keep every buffer they read alive until the plan
    is evicted — a dropped input, say — though no later drain binds them. And made only when
    read: copying the ~2,000 nodes of a GPT step at each build cost its second process (which
    only loads plans) more than the loading, and few plans are ever explained or rebound."""
    tpos: list
    scalars: dict             # node index -> the value it had at the build
    origins: dict             # node index -> the aten op that recorded it, where one did
    roots: list
    root_targets: list

    @classmethod
    def of(cls, nodes, targets) -> "GraphSketch":
        return cls([n.tpos for n in nodes], {i: n.arg for i, n in enumerate(nodes) if n.op is Op.SCALAR},
                   {i: o for i, n in enumerate(nodes) if (o := getattr(n, "origin", None)) is not None},
                   [r for r, _ in targets], [t for _, t in targets])

    def graph(self, descs) -> DrainGraph:
        """The graph of nodes rebuilt from ``descs`` (runtime.engine's descriptors, by tape
        position): each node's op, dtype, shape, attribute (None for a buffer) and sources."""
        index = {p: i for i, p in enumerate(self.tpos)}
        nodes = []
        for i, p in enumerate(self.tpos):
            d = descs[p]
            op = d[0]
            if op is Op.SCALAR:
                node = Node(op, (), d[1], (), self.scalars[i])
            elif len(d) == 5:
                node = Node(op, tuple([nodes[index[s]] for s in d[4]]), d[1], d[2], d[3])
            else:   # a buffer leaf
                node = Node(op, (), d[1], d[2])
            origin = self.origins.get(i)
            if origin is not None:
                node.origin = origin
            nodes.append(node)
        return DrainGraph(nodes, self.roots, self.root_targets)


def trace(roots):
    """Topological order, bound leaves and scalars, and root targets of a drain's live DAG.

    The build path's (and ``lf.explain``'s) view of the work: one iterative post-order walk
    from the live roots. ``leaves`` maps a BUFFER node's index to its buffer; ``targets`` gives
    each root's node index and the index of the leaf whose buffer it overwrites (-1: a buffer
    the DAG does not read; None: a new buffer).
    """
    nodes = post_order([s.current for s in roots], sources)
    pos = {}
    leaves, leaf_by_buffer, scalars = {}, {}, []
    for i, node in enumerate(nodes):
        pos[id(node)] = i
        op = node.op
        if op is Op.BUFFER:
            leaf_by_buffer.setdefault(id(node.arg), i)
            leaves[i] = node.arg
        elif op is Op.SCALAR:
            scalars.append(node.arg)
    targets = []
    for s in roots:
        t = None if s.buffer is None else leaf_by_buffer.get(id(s.buffer), -1)
        targets.append((pos[id(s.current)], t))
    return nodes, leaves, scalars, targets


def new_plan(key, nodes, targets, n_tape: int, template: frozenset) -> CompiledPlan:
    """The plan of a traced drain (``trace``'s nodes and targets), planned and lowered, its steps'
    gathers pointing into a tape of ``n_tape`` entries; not yet compiled."""
    graph = DrainGraph(nodes, [r for r, _ in targets], [t for _, t in targets])
    return assemble(key, nodes, targets, n_tape, *plan_and_lower(graph, template, lambda p: lower_steps(nodes, p)))


def assemble(key, nodes, targets, n_tape: int, planned, steps, origin: str = "planned") -> CompiledPlan:
    """The plan of a traced drain from its planner ``Plan`` and lowered ``steps`` (``origin``:
    where they came from, see ``CompiledPlan``), its steps' gathers pointing into a tape of
    ``n_tape`` entries."""
    sketch = GraphSketch.of(nodes, targets)
    temps = [None] * planned.n_temps
    for i, slot in planned.slots.items():
        if slot[0] == "temp":   # (temporaries of one dtype may share a slot: its largest sizes it)
            held = temps[slot[1]]
            numel = prod(nodes[i].shape)
            if held is None or held[1] < numel:
                temps[slot[1]] = (nodes[i].dtype, numel)
    n_ops = sum(1 for n in nodes if n.is_pending and n.kind is not Kind.VIEW)
    step_of = {o: j for j, st in enumerate(steps) for o in st.group.outputs}
    # where the steady state finds what this drain binds: every node of the trace is on the
    # tape, whose length, like each node's position, is the same for every drain of this key
    base = {"root": n_tape, "temp": n_tape + len(targets)}
    scalar_tape = [n.tpos for n in nodes if n.op is Op.SCALAR]   # trace's scalar order
    for st in steps:
        st.bind = gather([nodes[i].tpos if kind == "leaf" else base[kind] + i for kind, i in st.slots])
        st.bind_scalars = gather([scalar_tape[i] for i in st.scalars])
    plan = CompiledPlan(key, steps, temps, sketch, n_ops=n_ops, root_steps=tuple(step_of[r] for r in sketch.roots),
                        planned=planned, origin=origin)
    plan.label = " + ".join(s.name for s in steps)
    plan.n_extern = sum(1 for s in steps if s.kind is StepKind.EXTERN)
    plan.waits = any(s.kind is StepKind.COLLECTIVE for s in steps) or None   # a Schedule at its first launch
    slots = sorted({nodes[i].tpos if kind == "leaf" else base[kind] + i for st in steps for kind, i in st.slots})
    plan.bind_all = gather(slots)
    order = [i for st in steps for i in st.scalars]
    plan.n_scalars = len(order)
    plan.scalars_all = gather([scalar_tape[i] for i in order])
    # their metadata words: a float scalar's a float64, any other's an int64 (as HostMeta writes them)
    kinds = [n.dtype.is_float for n in nodes if n.op is Op.SCALAR]
    plan.scalar_words = struct.Struct("=" + "".join("d" if kinds[i] else "q" for i in order)).pack
    # a random stream's seed and offset change every drain (and a replay edits them in place);
    # a collective's launch waits on what is in flight
    plan.reusable = plan.waits is None and not any(st.rng_words for st in steps)
    return plan


def plan_and_lower(graph: DrainGraph, template: frozenset, lower):
    """``(plan, lower(plan))``, re-planned with a node materialized each time the lowering
    finds one it cannot inline (``Unfusable``)."""
    from ..codegen.lower import Unfusable
    forced = {}
    while True:
        planned = make_plan(graph, forced, template)
        try:
            return planned, lower(planned)
        except Unfusable as u:
            if u.node in forced:
                raise
            forced[u.node] = u.reason


def matmul_template(device) -> frozenset:
    """The matmul dtypes ``device``'s backend computes in a template kernel with the fused
    epilogue inside (the planner's capability flag; empty: matmul is a library call)."""
    return device.backend.matmul_template


def rebind_steps(template: CompiledPlan, nodes, backend) -> tuple | None:
    """``(plan, steps)``: ``template``'s plan and steps lowered at the sizes of ``nodes`` (a drain
    of its structure), each step with the template's compiled kernel and tuned choice — or None
    where a kernel's code or tuning class differs at these sizes (then the drain plans)."""
    from ..codegen.lower import Unfusable
    planned = at_sizes(template.planned, template.graph.nodes, nodes)
    try:
        steps = lower_steps(nodes, planned)
    except Unfusable:
        return None
    if all(backend.rebind(old, new) for old, new in zip(template.steps, steps)):
        return planned, steps
    return None


def lower_steps(nodes, planned, kernel_steps=None) -> list:
    """One ``Step`` per planned group: a lowered kernel, or a library call for an extern.
    ``kernel_steps`` (step index -> a new Step) gives kernel steps lowered before (a stored
    plan's, runtime.plan_store), which take their group: only the library steps are made from
    ``nodes``."""
    pos = {id(n): i for i, n in enumerate(nodes)}
    scalar_pos = {}
    for i, n in enumerate(nodes):
        if n.op is Op.SCALAR:
            scalar_pos[i] = len(scalar_pos)
    if kernel_steps is None:   # (a second process that only loads plans never imports the lowering)
        from ..codegen.lower import lower_group
        producers = planned.producers()
        rng_streams = [(pos[id(n.srcs[0])], pos[id(n.srcs[1])]) for n in nodes if n.op in (Op.RAND, Op.RANDN)]
    steps = []
    for grp in planned.groups:
        out = nodes[grp.output]
        if out.kind is Kind.EXTERN and grp.matmul is None:
            steps.append(extern_step(nodes, pos, grp, planned.slots, scalar_pos))
            continue
        if kernel_steps is not None:
            step = kernel_steps[len(steps)]
            step.group = grp
            steps.append(step)
            continue
        kernel, low = lower_group(nodes, pos, grp, planned.slots, producers, f"k{len(steps)}")
        header = _header(kernel)
        word = {i: len(header) + k for k, i in enumerate(low.scalar_nodes)}
        rng = tuple((word[sd], word[off]) for sd, off in rng_streams if off in word)
        steps.append(Step(kernel.name, StepKind.KERNEL, low.arg_slots, [scalar_pos[i] for i in low.scalar_nodes],
                          header, kernel, group=grp, rng_words=rng, error_flag=kernel.error_flag_word,
                          index_checks=kernel.index_check_info()))
    return steps


def extern_step(nodes, pos, grp, slots, scalar_pos) -> Step:
    """The library call of an extern group: its operands' views and base shapes, its slots."""
    out = nodes[grp.output]
    views = []
    arg_slots = []
    scalars = [scalar_pos[pos[id(s)]] for s in out.srcs if s.op is Op.SCALAR]   # a random extern's seed, offset
    for s in out.srcs:
        if s.op is Op.SCALAR:
            continue
        if s.kind is Kind.VIEW:
            base = s.srcs[0]
            views.append(s.arg)
        else:
            base = s
            views.append(None)
        arg_slots.append(slots[pos[id(base)]])
    arg_slots += [slots[o] for o in grp.outputs]
    base_shapes = tuple((s.srcs[0] if s.kind is Kind.VIEW else s).shape for s in out.srcs if s.op is not Op.SCALAR)
    arg = out.arg
    if out.op is Op.EXTERN:   # one torch call for every output of the step (its siblings)
        outs = [nodes[o] for o in grp.outputs]
        arg = out.arg.launch(None if out.arg.index is None else tuple(n.arg.index for n in outs),
                             tuple(v if v is not None else contiguous_view(b) for v, b in zip(views, base_shapes)),
                             tuple(n.shape for n in outs))
    name = f"extern {out.arg.name}" if out.op is Op.EXTERN else out.op.label
    return Step(name, StepKind(out.op.label), arg_slots, scalars, [],
                LibraryCall(tuple(views), out.shape, base_shapes, arg), group=grp,
                rng_words=((0, 1),) if scalars else ())   # a random extern: (seed, offset) in words 0, 1


def gather(positions: list):
    """A callable taking a sequence to the tuple of its items at ``positions`` (one C call for 2+)."""
    if len(positions) > 1:
        return operator.itemgetter(*positions)
    if positions:
        p = positions[0]
        return lambda seq: (seq[p],)
    return lambda seq: ()


def _header(kernel) -> list:
    return [len(kernel.outer), *(v.extent for v in kernel.outer), len(kernel.inner),
            *(v.extent for v in kernel.inner), *kernel.sizes]
