"""Seeing what the engine does: ``lf.explain`` (the fused schedule and generated source) and
``lf.to_dot`` (the fused graph in Graphviz DOT, one colour per kernel).

Both plan the pending work of the given tensors *without running it* (nothing drains), so
they can be called anywhere, capture excepted.
"""
from __future__ import annotations

from dataclasses import dataclass

from .ir.node import Kind, Op
from .ir.planner import DrainGraph
from .runtime.engine import matmul_template, plan_and_lower, trace
from .tensor import Tensor

COLORS = ["#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69", "#fccde5", "#d9d9d9",
          "#bc80bd", "#ccebc5", "#ffed6f"]


@dataclass
class KernelInfo:
    name: str
    kind: str          # pointwise | reduce | matmul | gather
    nodes: list        # node indices computed inside
    output: int
    reason: str        # why its output is materialized (the group boundary)
    source: str


@dataclass
class Explanation:
    nodes: list
    kernels: list
    roots: list

    def __str__(self) -> str:
        lines = [f"{len(self.nodes)} IR nodes, {len(self.kernels)} kernel(s)", "", "IR:"]
        owner = {}
        for k, info in enumerate(self.kernels):
            for i in info.nodes:
                owner.setdefault(i, k)
        for i, n in enumerate(self.nodes):
            srcs = ", ".join(f"%{self._pos[id(s)]}" for s in n.srcs)
            arg = "" if n.arg is None or n.op is Op.BUFFER else f" {n.arg}"
            where = f"  [kernel {owner[i]}]" if i in owner else ""
            lines.append(f"  %{i} = {n.op.label}({srcs}){arg} : {n.dtype.name}{list(n.shape)}{where}")
        for k, info in enumerate(self.kernels):
            lines += ["", f"kernel {k} ({info.kind}) writes %{info.output} — boundary: {info.reason}", info.source]
        return "\n".join(lines)

    @property
    def _pos(self):
        return {id(n): i for i, n in enumerate(self.nodes)}

    def to_dot(self) -> str:
        pos = self._pos
        owner = {}
        for k, info in enumerate(self.kernels):
            for i in info.nodes:
                owner.setdefault(i, k)
        out = ["digraph lazyfuse {", "  node [shape=box, style=filled, fontname=monospace];"]
        for i, n in enumerate(self.nodes):
            k = owner.get(i)
            color = COLORS[k % len(COLORS)] if k is not None else "white"
            label = f"%{i} {n.op.label}\\n{n.dtype.name}{list(n.shape)}" + (f"\\nkernel {k}" if k is not None else "")
            out.append(f'  n{i} [label="{label}", fillcolor="{color}"];')
        for i, n in enumerate(self.nodes):
            for s in n.srcs:
                out.append(f"  n{pos[id(s)]} -> n{i};")
        out.append("}")
        return "\n".join(out)


def _tensors(obj) -> list:
    if isinstance(obj, Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for o in obj for t in _tensors(o)]
    if isinstance(obj, dict):
        return [t for o in obj.values() for t in _tensors(o)]
    return []


def explain(fn_or_tensor, *args, **kwargs) -> Explanation:
    """The fused schedule of a tensor's (or a function's result's) pending work, not executed."""
    result = fn_or_tensor(*args, **kwargs) if callable(fn_or_tensor) and not isinstance(fn_or_tensor, Tensor) \
        else fn_or_tensor
    tensors = _tensors(result)
    storages, seen = [], set()
    for t in tensors:
        if t._storage.current.is_pending and id(t._storage) not in seen:
            seen.add(id(t._storage))
            storages.append(t._storage)
    if not storages:
        return Explanation([], [], [])
    device = tensors[0].device
    nodes, _key, _leaves, _scalars, targets = trace(storages)
    graph = DrainGraph(nodes, [r for r, _ in targets], [t for _, t in targets])
    pos = {id(n): i for i, n in enumerate(nodes)}
    from .codegen.lower import Lowering

    def lower(planned) -> list:
        producers = {g.output: g.id for g in planned.groups}
        kernels = []
        for grp in planned.groups:
            out = nodes[grp.output]
            members = sorted(i for i in grp.members if nodes[i].is_pending)
            if out.kind is Kind.EXTERN and grp.matmul is None:
                kernels.append(KernelInfo(f"k{len(kernels)}", out.op.label, members, grp.output, grp.reason,
                                          f"library call: torch.{out.op.label}"))
                continue
            kernel = Lowering(nodes, pos, grp, planned.slots, producers).kernel(f"k{len(kernels)}")
            kernels.append(KernelInfo(kernel.name, kernel.kind, members, grp.output, grp.reason,
                                      device.backend.preview(kernel)))
        return kernels

    _, kernels = plan_and_lower(graph, matmul_template(device), lower)
    return Explanation(nodes, kernels, [r for r, _ in targets])


def to_dot(fn_or_tensor, *args, path=None, **kwargs) -> str:
    """DOT text of the fused graph; with ``path`` ending in .png/.svg, rendered by Graphviz's ``dot``."""
    dot = explain(fn_or_tensor, *args, **kwargs).to_dot()
    if path is not None:
        import shutil
        import subprocess
        from pathlib import Path
        p = Path(path)
        if p.suffix in (".png", ".svg") and shutil.which("dot"):
            subprocess.run(["dot", f"-T{p.suffix[1:]}", "-o", str(p)], input=dot, text=True, check=True)
        else:
            p.write_text(dot)
    return dot


def describe_plan(plan, build: bool) -> str:
    """One line per launch of a drained plan (``LAZYFUSE_DEBUG=1``)."""
    path = "build" if build else "steady-state"
    lines = [f"[lazyfuse] drain ({path} path): {len(plan.steps)} launch(es)"]
    for st in plan.steps:
        cfg = f" config {st.config.label()}" if st.config is not None else ""
        reason = f" — {st.group.reason}" if st.group is not None else ""
        lines.append(f"[lazyfuse]   {st.name} ({st.kind}){cfg}{reason}")
    return "\n".join(lines)
