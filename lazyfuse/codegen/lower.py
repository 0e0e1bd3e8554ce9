"""Lowering: one planned group of IR nodes -> one ``Kernel`` description.

Nodes are evaluated *at an index*: the kernel's output is evaluated at its loop variables,
an elementwise node passes the same index to its sources, a view turns it into the index of
its source (affine arithmetic, simplified by ``index.unravel``), and a leaf or a value that
another kernel materialized becomes a load. Results are memoised per (node, index), so a
value used twice at the same index is computed once.
"""
from __future__ import annotations

import dataclasses

from ..ir.dtypes import bool_, int64
from ..ir.node import Kind, Op
from ..ir.shapes import contiguous_strides
from . import index as ix
from .kernel import (Acc, Affine, Apply, IndexValue, Kernel, KernelArg, Load, Matmul, MatmulValue, Random, Scalar,
                     Stage, Store, Var)


class Unfusable(Exception):
    """The planner inlined a node the lowering cannot index: re-plan with it materialized."""

    def __init__(self, node: int, reason: str):
        super().__init__(reason)
        self.node = node
        self.reason = reason


def lower_group(nodes, pos, group, slots, producers, name: str):
    """``(kernel, lowering)`` of one planned group: the lowering holds the kernel's argument
    and scalar bindings. A foreach group (``group.parts``) becomes one kernel whose segments
    are its parts, lowered with shared bindings."""
    if not group.parts:
        low = Lowering(nodes, pos, group, slots, producers)
        return low.kernel(name), low
    first = None
    segments = []
    for j, part in enumerate(group.parts):
        low = Lowering(nodes, pos, part, slots, producers, shared=first)
        first = first or low
        segments.append(low.kernel(f"{name}_s{j}"))
    args = tuple(KernelArg(d, w) for d, w in zip(first.arg_dtypes, first.arg_written))
    scalars = tuple(nodes[i].dtype for i in first.scalar_nodes)
    segments = tuple(dataclasses.replace(k, args=args, scalars=scalars) for k in segments)
    return Kernel(name, (), (), (), (), args, scalars, segments=segments), first


def reindexed_source(n, idx) -> tuple:
    """The index at which a ``FLIP`` or ``ROLL`` node reads its source for its own ``idx``:
    n - 1 - i along each flipped dim, (i - shift) mod n along each rolled one (from the
    non-negative form i + n - shift). The printers print both n's as the runtime extent of the
    loop that reads the dim (``index.render``), so neither is a new library at a new size."""
    if n.op is Op.FLIP:
        return tuple(Affine(s - 1, ()) + a.scale(-1) if d in n.arg else a for d, (a, s) in enumerate(zip(idx, n.shape)))
    shifts = dict(n.arg)
    return tuple(ix.mod(a + Affine(s - shifts[d], ()), s) if d in shifts else a for d, (a, s) in enumerate(zip(idx, n.shape)))


class Lowering:
    def __init__(self, nodes, pos, group, slots, producers, shared: "Lowering | None" = None):
        self.nodes = nodes
        self.pos = pos
        self.group = group
        self.slots = slots
        self.producers = producers  # node index -> group id, for materialized nodes
        # a foreach kernel's segments bind one argument and scalar list (``shared``'s)
        self.arg_slots: list = shared.arg_slots if shared else []
        self.arg_written: list = shared.arg_written if shared else []
        self.arg_dtypes: list = shared.arg_dtypes if shared else []
        self.scalar_nodes: list = shared.scalar_nodes if shared else []
        self.memo: dict = {}
        self.stages: list = []
        self.stage_of: dict = {}
        self.matmul: Matmul | None = None
        out = nodes[group.output]
        self.space = out.arg.shape if out.kind is Kind.WRITE else out.shape
        self.inner: tuple = ()
        self.row = False
        if group.reduce is not None:
            in_shape, axes = group.reduce
            order = group.row_order or tuple(range(len(in_shape)))
            self.inner = tuple(Var(f"r{j}", in_shape[a]) for j, a in enumerate(axes))
            keep = tuple(1 if d in axes else n for d, n in enumerate(in_shape))
            # (a scan is row-wise at any extent: it stores its running value along the row; so is
            # a permuted row: its statistic is read along the rows, not at the output's own index)
            self.row = (tuple(self.space) == tuple(in_shape[d] for d in order) and
                        (keep != tuple(in_shape) or out.kind is Kind.SCAN or group.row_order is not None))
        if self.row:
            # row-wise: the outer loop runs over the rows, the output is written along the row
            # (``row_order``: the output's dims are the rows' permuted, its stores strided)
            self.outer = tuple(Var(f"p{d}", n) for d, n in enumerate(in_shape) if d not in axes)
            outer_it, inner_it = iter(self.outer), iter(self.inner)
            self.row_index = tuple(Affine.var(next(inner_it) if d in axes else next(outer_it))
                                   for d in range(len(in_shape)))
            self.out_index = tuple(self.row_index[d] for d in order)
        else:
            self.outer = tuple(Var(f"p{d}", s) for d, s in enumerate(self.space))
            self.out_index = tuple(Affine.var(v) for v in self.outer)
        self.flat_out = ix.linear(self.out_index, contiguous_strides(self.space))

    # -- bindings ---------------------------------------------------------------------------
    def arg(self, slot, dtype, written=False) -> int:
        for k, s in enumerate(self.arg_slots):
            if s == slot:
                self.arg_written[k] |= written
                return k
        self.arg_slots.append(slot)
        self.arg_written.append(written)
        self.arg_dtypes.append(dtype)
        return len(self.arg_slots) - 1

    def scalar(self, i) -> Scalar:
        if i not in self.scalar_nodes:
            self.scalar_nodes.append(i)
        return Scalar(self.scalar_nodes.index(i), self.nodes[i].dtype)

    def in_memory(self, i) -> bool:
        n = self.nodes[i]
        if n.op is Op.BUFFER:
            return True
        return i in self.producers and i not in self.group.outputs

    # -- evaluation -------------------------------------------------------------------------
    def load_flat(self, i, flat: Affine):
        n = self.nodes[i]
        return Load(self.arg(self.slots[i], n.dtype), flat, n.dtype)

    def ev(self, i, idx: tuple):
        key = (i, idx)
        hit = self.memo.get(key)
        if hit is None:
            hit = self.memo[key] = self._ev(i, idx)
        return hit

    def _ev(self, i, idx):
        n = self.nodes[i]
        pos = self.pos
        if n.op is Op.SCALAR:
            return self.scalar(i)
        if self.in_memory(i):
            return self.load_flat(i, ix.linear(idx, contiguous_strides(n.shape)))
        if n.op is Op.MATMUL:
            return self.matmul_value(i, idx)
        flat = None
        if n.kind is Kind.VIEW:
            flat = ix.linear(idx, n.arg.strides, n.arg.offset)
            si = pos[id(n.srcs[0])]
            src = self.nodes[si]
            if self.in_memory(si):
                return self.load_flat(si, flat)
            if src.op is Op.SCALAR:
                return self.scalar(si)
            return self.ev(si, ix.unravel(flat, src.shape))
        if n.op is Op.CAT:
            return self.concatenation(n, idx)
        if n.op in (Op.FLIP, Op.ROLL):
            return self.ev(pos[id(n.srcs[0])], reindexed_source(n, idx))
        if n.kind is Kind.ELEMENTWISE:
            return Apply(n.op, tuple(self.ev(pos[id(s)], idx) for s in n.srcs), n.dtype, n.arg)
        flat = ix.linear(idx, contiguous_strides(n.shape))
        if n.op is Op.ARANGE:
            start, step = (self.ev(pos[id(s)], ()) for s in n.srcs)
            return Apply(Op.ADD, (start, Apply(Op.MUL, (step, IndexValue(flat, n.dtype)), n.dtype)), n.dtype)
        if n.op in (Op.RAND, Op.RANDN):
            seed, offset = (self.ev(pos[id(s)], ()) for s in n.srcs)
            return Random(seed, offset, flat, n.op is Op.RANDN, n.dtype)
        if n.kind is Kind.REDUCE:
            return self.reduction(i, idx)
        if n.kind is Kind.SCAN:
            return self.scan(i, idx)
        raise AssertionError(f"cannot lower {n} inside a kernel")

    def concatenation(self, n, idx):
        """``CAT`` at ``idx``: the source whose slice of dim ``n.arg`` holds the index, selected
        by comparisons of the index with the slices' ends. Every source is read at its own index
        clamped into its size along the dim, so the reads of the sources not selected stay in
        bounds (a kernel computes every operand of a select); the starts, the sizes and the ends
        are the kernel's runtime sizes (``Kernel.sizes``), not literals."""
        d = n.arg
        j = idx[d]
        value, start = None, n.shape[d]
        for src in reversed(n.srcs):
            size = src.shape[d]
            start -= size
            at = ix.clamped(j + Affine(-start, ()), size)
            piece = self.ev(self.pos[id(src)], idx[:d] + (at,) + idx[d + 1:])
            if value is None:
                value = piece
            else:
                inside = Apply(Op.LT, (IndexValue(j, int64), IndexValue(Affine(start + size, ()), int64)), bool_)
                value = Apply(Op.WHERE, (inside, piece, value), n.dtype)
        return value

    def canonical(self, shape) -> tuple:
        """The index at which a reduction of this kernel is read: its row, reduced dims at 0."""
        if self.row:
            axes = self.group.reduce[1]
            return tuple(Affine(0, ()) if d in axes else a for d, a in enumerate(self.row_index))
        return ix.unravel(self.flat_out, shape)

    def reduction(self, i, idx):
        n = self.nodes[i]
        if idx != self.canonical(n.shape):
            raise Unfusable(i, "reduction read at another index than its row")
        stage = self.stage_of.get(i)
        if stage is None:
            in_shape, axes = self.group.reduce
            outer_idx = self.canonical(n.shape)
            in_idx = list(outer_idx)
            for j, a in enumerate(axes):
                in_idx[a] = Affine.var(self.inner[j])
            value = self.ev(self.pos[id(n.srcs[0])], tuple(in_idx))
            arg_index = None
            if n.op in (Op.ARGMAX, Op.ARGMIN):
                arg_index = ix.linear([Affine.var(v) for v in self.inner],
                                      contiguous_strides([v.extent for v in self.inner]))
            self.stages.append(Stage(n.op, value, n.dtype, arg_index))
            stage = self.stage_of[i] = len(self.stages) - 1
        return Acc(stage, n.dtype)

    def scan(self, i, idx):
        """A scan is its kernel's one stage, read where the kernel stores it: the running value
        at each position of the row (the planner makes it the output of a group of its own)."""
        n = self.nodes[i]
        if i != self.group.output or idx != self.out_index or self.stages:
            raise Unfusable(i, "scan read at another index than its own")
        value = self.ev(self.pos[id(n.srcs[0])], idx)
        self.stages.append(Stage(n.op, value, n.dtype, None))
        self.stage_of[i] = 0
        return Acc(0, n.dtype)

    def matmul_value(self, i, idx):
        """The product of a matmul-template kernel, which the planner placed at the group's
        output index. Each operand must be one strided load (a same-dtype copy of a view is
        one too); any other operand is materialized first."""
        n = self.nodes[i]
        if self.group.matmul != i or idx != self.out_index:
            raise Unfusable(i, "matmul read at another index than the one its tile computes")
        if self.matmul is None:
            m, nv = self.outer[-2], self.outer[-1]
            k = Var("kk", self.nodes[self.pos[id(n.srcs[0])]].shape[-1])
            batch = idx[:-2]
            a = self.operand(n.srcs[0], batch + (idx[-2], Affine.var(k)))
            b = self.operand(n.srcs[1], batch + (Affine.var(k), idx[-1]))
            self.matmul = Matmul(a.arg, a.index, b.arg, b.index, m, nv, k, a.dtype)
        return MatmulValue(n.dtype)

    def operand(self, src, idx) -> Load:
        e = self.ev(self.pos[id(src)], idx)
        while isinstance(e, Apply) and e.op is Op.CAST and e.srcs[0].dtype is e.dtype:
            e = e.srcs[0]
        if not isinstance(e, Load):
            base = src.srcs[0] if src.kind is Kind.VIEW else src
            raise Unfusable(self.pos[id(base)], "matmul operand")
        return e

    def kernel(self, name: str):
        g = self.group
        out = self.nodes[g.output]
        outer_idx = self.out_index
        if out.kind is Kind.WRITE:
            value = self.ev(self.pos[id(out.srcs[1])], outer_idx)
            index = ix.linear(outer_idx, out.arg.strides, out.arg.offset)
        else:
            value = self.ev(g.output, outer_idx)
            index = self.flat_out
        if value.dtype is not out.dtype:
            value = Apply(Op.CAST, (value,), out.dtype)
        store = Store(self.arg(self.slots[g.output], out.dtype, written=True), index, value)
        # a multi-output kernel (planner: pointwise, every output stored whole at the loop index)
        extra = tuple(Store(self.arg(self.slots[o], self.nodes[o].dtype, written=True), index, self.ev(o, outer_idx))
                      for o in g.extra)
        stores, inner_stores = ((), (store,)) if self.row else ((store,) + extra, ())
        k = Kernel(name, self.outer, self.inner, tuple(self.stages), stores,
                   tuple(KernelArg(d, w) for d, w in zip(self.arg_dtypes, self.arg_written)),
                   tuple(self.nodes[i].dtype for i in self.scalar_nodes), inner_stores, self.matmul,
                   rows_across_memory=self.row and g.row_order is not None)
        # a matmul tile needs its (batch, m, n) loops as they are: merging them would hide m and n
        return k if self.matmul is not None else coalesce(k)


# -- loop merging ------------------------------------------------------------------------------
def map_affines(kernel: Kernel, fn, outer, inner) -> Kernel:
    """Rebuild ``kernel`` with every index expression passed through ``fn``."""
    memo = {}

    def m(e):
        r = memo.get(id(e))
        if r is not None:
            return r
        if isinstance(e, Load):
            r = Load(e.arg, fn(e.index), e.dtype)
        elif isinstance(e, IndexValue):
            r = IndexValue(fn(e.index), e.dtype)
        elif isinstance(e, Random):
            r = Random(m(e.seed), m(e.offset), fn(e.index), e.normal, e.dtype)
        elif isinstance(e, Apply):
            r = Apply(e.op, tuple(m(s) for s in e.srcs), e.dtype, e.arg)
        else:
            r = e
        memo[id(e)] = r
        return r

    stages = tuple(Stage(s.op, m(s.value), s.dtype, fn(s.arg_index) if s.arg_index is not None else None)
                   for s in kernel.stages)
    stores = tuple(Store(s.arg, fn(s.index), m(s.value)) for s in kernel.stores)
    inner_stores = tuple(Store(s.arg, fn(s.index), m(s.value)) for s in kernel.inner_stores)
    return Kernel(kernel.name, outer, inner, stages, stores, kernel.args, kernel.scalars, inner_stores,
                  rows_across_memory=kernel.rows_across_memory)


def _all_affines(kernel: Kernel) -> list:
    from .kernel import affines
    return affines(kernel)


def _divmod_vars(affines) -> set:
    out = set()
    for a in affines:
        for t, _ in a.terms:
            if not isinstance(t, Var):
                out |= t.base.vars()
    return out


def _merge_run(vars_, affines, locked) -> tuple[list, list]:
    """Merge adjacent loop variables whenever every index treats them as one dense dim.

    Returns the new variables and the substitution steps, applied in order: dropping ``prev``
    and renaming ``v`` to the merged ``q`` is exact because every index has
    ``coeff(prev) == coeff(v) * extent(v)``.
    """
    steps = [{v: Affine(0, ()) for v in vars_ if v.extent == 1}]
    merged = []
    # an extent-0 loop stays (an empty reduction still stores its identity, an empty output
    # stores nothing): dropping it like an extent-1 loop would run the body once
    for v in (v for v in vars_ if v.extent != 1):
        if merged:
            prev = merged[-1]
            if prev not in locked and v not in locked and all(
                    a.coeff(prev) == a.coeff(v) * v.extent for a in affines):
                q = Var(prev.name, prev.extent * v.extent)
                step = {prev: Affine(0, ()), v: Affine.var(q)}
                steps.append(step)
                affines = [ix.substitute(a, step) for a in affines]
                merged[-1] = q
                continue
        merged.append(v)
    return merged, steps


def coalesce(kernel: Kernel) -> Kernel:
    affines = _all_affines(kernel)
    locked = _divmod_vars(affines)
    outer, s1 = _merge_run(kernel.outer, affines, locked)
    inner, s2 = _merge_run(kernel.inner, affines, locked)
    steps = [s for s in s1 + s2 if s]
    if not steps:
        return kernel

    def rewrite(a):
        for step in steps:
            a = ix.substitute(a, step)
        return a
    return map_affines(kernel, rewrite, tuple(outer), tuple(inner))


__all__ = ["Lowering", "Unfusable", "coalesce", "lower_group"]
