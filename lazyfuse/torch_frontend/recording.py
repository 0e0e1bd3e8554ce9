"""``Recording``: the IR nodes a function recorded over some storages, to be made again over their
later values without running the function.

A torch optimizer's update records the same few dozen nodes for a parameter on every step; only its
inputs (the current values of the parameter, its gradient and its state) differ. Recording them op by
op pays lazyfuse's op path for each (a Tensor and a Storage per result, dtype and shape rules: most of
an optimizer step's recording time), where making the same nodes again from a recording of the first
step is one ``Node`` each. The nodes, their sources and the writes are exactly those the function
recorded (so the same plan key from one step to the next: a fused plan and a capture see no
difference), and ``lf.stats()`` counts the ops it counted.

What may be remade: a function that reads lazy values only through the given storages' current values
(views of them included) and writes some of them in place, whose nodes depend only on the storages'
dtypes, shapes and views and on Python values fixed by the caller's key (``Recording.of`` returns None
for one that read another lazy value, or made a leaf other than a Python number: data or a random
draw, which a remade recording would repeat).
"""
from __future__ import annotations

from ..ir.node import Kind, Node, Op
from ..runtime.engine import MAX_PENDING

# the nodes a recording cannot hold: leaves other than a Python number (a buffer's data, a random
# draw: its seed and offset are numbers fixed at recording), and torch function calls (which may draw)
MADE_FRESH = frozenset(op for op in Op if op.kind is Kind.LEAF and op is not Op.SCALAR) | {Op.EXTERN}
_SCALAR = Op.SCALAR


def remake(engine, entries: list, inputs: list, last: list) -> list:
    """Make ``entries`` again over ``inputs`` (nodes) and enter each on the engine's tape as it is made;
    the made nodes, per entry (an input's entry: the input). ``entries`` are in tape order: ``(op, srcs,
    dtype, shape, arg)``, each source ``j >= 0`` entry j and ``~k`` input k; ``(None, k, None, None,
    None)``: input k entered here if it is not on the tape yet (else before the first entry reading
    it). This is the tape the function that recorded them made (``Recording``, ``templates``).

    ``last`` (a 2-list, updated) holds where the previous call started and where its inputs were on
    the tape, and the structural descriptors it entered: a call at the same places enters the same
    descriptors, so it takes those very objects, unbuilt -- which the drain's plan-key comparison then
    finds equal by identity (a steady training step makes the same calls at the same places)."""
    tape = engine.tape
    at = (len(tape), tuple([n.tpos if n.tape is tape else -1 for n in inputs]))
    append, enter = engine._append, engine._enter
    same = at == last[0]
    if same:
        descs, kept = engine.descs, iter(last[1])
    made = []
    for op, srcs, dtype, shape, arg in entries:
        if op is None:
            node = inputs[srcs]
            if node.tape is not tape:
                enter(node)
            made.append(node)
            continue
        src_nodes = []
        for j in srcs:
            if j >= 0:
                src_nodes.append(made[j])
            else:
                node = inputs[~j]
                if node.tape is not tape:
                    enter(node)
                src_nodes.append(node)
        node = Node(op, tuple(src_nodes), dtype, shape, arg)
        if same:   # (``Engine._append``'s entry, with the descriptor it made last time)
            node.tape = tape
            node.tpos = len(tape)
            tape.append(arg if op is _SCALAR else None)
            descs.append(next(kept))
        else:
            append(node)
        made.append(node)
    if not same:
        descs = engine.descs
        last[:] = [at, [descs[n.tpos] for n, (op, *_) in zip(made, entries) if op is not None]]
    return made


class Recording:
    """The nodes ``fn`` entered on the tape (in tape order, each source an earlier node or the current
    value of one of the storages, with where ``fn`` entered such a value), which of them each written
    storage took as its new value, and how many ops the engine counted beyond those writes."""

    __slots__ = ("nodes", "writes", "extra_ops", "last")

    def __init__(self, nodes: list, writes: list, extra_ops: int):
        self.nodes, self.writes, self.extra_ops = nodes, writes, extra_ops
        self.last = [None, None]   # (``remake``'s memo of the last replay)

    @staticmethod
    def of(fn, storages: list) -> "Recording | None":
        """Run ``fn`` (it records on the storages' engine) and return what it recorded over ``storages``
        (distinct), or None where that cannot be remade: it read another pending value, or a drain
        came in between (the pending queue's bound)."""
        engine = storages[0].engine
        with engine.lock:
            tape, start, counted = engine.tape, len(engine.tape), engine.stats.ops_recorded
            before = [s.current for s in storages]   # (held: their ids name them below)
            inputs = {id(n): k for k, n in enumerate(before)}
            fn()
            written = [k for k, s in enumerate(storages) if s.current is not before[k]]
            if engine.tape is not tape or len(inputs) < len(storages):
                return None
            new, stack = {}, [storages[k].current for k in written]
            while stack:
                n = stack.pop()
                if id(n) in inputs or id(n) in new:
                    continue
                if n.tape is not tape or n.tpos < start:   # a value from outside: not remade
                    return None
                if n.op in MADE_FRESH:
                    return None   # data, a random draw or a torch call: made again, it would repeat
                new[id(n)] = n
                stack.extend(n.srcs)
            # in tape order: the nodes, and where ``fn`` entered a storage's value (``(None, k, ...)``: a
            # replay enters it there, so that it makes the tape op-by-op recording makes)
            entered = [(n.tpos, k) for k, n in enumerate(before) if n.tape is tape and n.tpos >= start]
            items = sorted([(n.tpos, n) for n in new.values()] + entered, key=lambda e: e[0])
            index, made = {}, []
            for j, (_, item) in enumerate(items):
                if item.__class__ is int:
                    made.append((None, item, None, None, None))
                else:
                    # (a source: ``j`` for the recording's own entry j, ``~k`` for storage k's value)
                    made.append((item.op, tuple([index[id(s)] if id(s) in index else ~inputs[id(s)]
                                                 for s in item.srcs]), item.dtype, item.shape, item.arg))
                    index[id(item)] = j
            writes = [(k, index[id(storages[k].current)])
                      for k in sorted(written, key=lambda k: storages[k].current.tpos)]
            return Recording(made, writes, engine.stats.ops_recorded - counted - len(writes))

    def replay(self, storages: list) -> bool:
        """Make the recorded nodes again over the storages' current values, and write them (the
        storages of ``of``'s call, in its order, or others of the same dtypes, shapes and views).
        Each node is entered on the tape as it is made, in the recording's order (a storage's value
        where ``fn`` entered it, or else before the first node that reads it, ``remake``): the tape
        op-by-op recording makes, without a walk from each write to the nodes it reads. False, with
        nothing made, where the writes would pass the pending queue's bound (the drain it forces between two of them would cut the
        nodes a later write reads off the tape): the caller records op by op."""
        engine = storages[0].engine
        with engine.lock:
            if len(engine.pending) + len(self.writes) >= MAX_PENDING:
                return False
            made = remake(engine, self.nodes, [s.current for s in storages], self.last)
            for k, j in self.writes:
                storages[k].update(made[j])
            engine.count_extra_ops(self.extra_ops)
            return True
