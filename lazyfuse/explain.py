"""Seeing what the engine does: ``lf.explain`` (the fused schedule and generated source),
``lf.to_dot`` (the fused graph in Graphviz DOT, one colour and one cluster per kernel) and the
per-drain reports of ``LAZYFUSE_DEBUG=1`` and ``python -m lazyfuse explain script.py``.

``explain``/``to_dot`` plan the pending work of the given tensors *without running it*
(nothing drains), so they can be called anywhere, capture excepted. The drain reports
describe the compiled plan each drain actually ran, with the autotuned config of each kernel.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from . import config
from .ir.node import Kind, Op
from .ir.planner import DrainGraph
from .runtime import engine
from .runtime.backend import StepKind
from .runtime.build import matmul_template, plan_and_lower, trace
from .tensor import Tensor

COLORS = ["#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462", "#b3de69", "#fccde5", "#d9d9d9",
          "#bc80bd", "#ccebc5", "#ffed6f"]


@dataclass
class KernelInfo:
    name: str
    kind: str          # pointwise | reduce | matmul | gather
    nodes: list        # node indices computed inside
    outputs: tuple     # the nodes it stores (several: a multi-output kernel)
    reason: str        # why its output is materialized (the group boundary)
    source: str
    config: str = ""   # the launch config the autotuner (or the heuristic default) chose


@dataclass
class Explanation:
    """A fused schedule: ``str()`` lists the IR and each kernel with its boundary reason and
    source; ``to_dot()`` draws it. ``recompiles``: the device's recent plan-cache misses, each
    saying what differed from the nearest cached plan."""
    nodes: list
    kernels: list
    roots: list
    recompiles: list = field(default_factory=list)

    @classmethod
    def from_plan(cls, plan) -> "Explanation":
        """The schedule a compiled plan (one drain's) runs, with each kernel's chosen config."""
        kernels = []
        for st in plan.steps:
            grp = st.group
            members = sorted(i for i in grp.members if plan.graph.nodes[i].is_pending)
            kernel = st.kind is StepKind.KERNEL
            source = st.source if kernel else _library_source(st.kind, st.kernel.arg)
            config = config_label(st.config)
            kernels.append(KernelInfo(st.name, st.kernel.kind if kernel else st.kind.value, members,
                                      grp.outputs, grp.reason, source, config))
        return cls(plan.graph.nodes, kernels, list(plan.graph.roots))

    def aten_ops(self) -> list:
        """Per kernel, the aten ops of torch code (``lf.lazy`` tensors) whose IR nodes it computes, in IR
        order. Empty lists for native lazyfuse code, and unless the nodes were recorded while the torch
        frontend traced origins (``lf.torch_frontend.trace_origins()``; on inside ``python -m lazyfuse
        explain`` and ``lf.explain(fn, *args)``)."""
        from .torch_frontend.origins import origin_of
        out = []
        for info in self.kernels:
            names = []
            for i in info.nodes:
                name = origin_of(self.nodes[i])
                if name is not None and name not in names:
                    names.append(name)
            out.append(names)
        return out

    def _owners(self) -> dict:
        owner = {}
        for k, info in enumerate(self.kernels):
            for i in info.nodes:
                owner.setdefault(i, k)
        return owner

    def __str__(self) -> str:
        lines = [f"{len(self.nodes)} IR nodes, {len(self.kernels)} kernel(s)", "", "IR:"]
        owner = self._owners()
        pos = self._pos
        for i, n in enumerate(self.nodes):
            srcs = ", ".join(f"%{pos[id(s)]}" for s in n.srcs)
            arg = "" if n.arg is None or n.op is Op.BUFFER else f" {n.arg}"
            where = f"  [kernel {owner[i]}]" if i in owner else ""
            lines.append(f"  %{i} = {n.op.label}({srcs}){arg} : {n.dtype.name}{list(n.shape)}{where}")
        aten_ops = self.aten_ops()
        for k, info in enumerate(self.kernels):
            config = f", config {info.config}" if info.config else ""
            writes = ", ".join(f"%{o}" for o in info.outputs)
            lines += ["", f"kernel {k} ({info.kind}{config}) writes {writes} — boundary: {info.reason}"]
            if aten_ops[k]:
                lines.append(f"from aten ops: {', '.join(aten_ops[k])}")
            lines.append(info.source)
        if any(aten_ops):
            lines += ["", "aten op -> kernel(s):"]
            kernels_of: dict = {}
            for k, names in enumerate(aten_ops):
                for name in names:
                    kernels_of.setdefault(name, []).append(f"{k}" + (" (extern)" if self.kernels[k].kind == "extern"
                                                                      else ""))
            lines += [f"  {name}: kernel {', '.join(ks)}" for name, ks in kernels_of.items()]
        if self.recompiles:
            lines += ["", "recent plan-cache misses (why each drain recompiled):"] + [f"  {r}" for r in self.recompiles]
        return "\n".join(lines)

    @property
    def _pos(self):
        return {id(n): i for i, n in enumerate(self.nodes)}

    def to_dot(self) -> str:
        """Graphviz DOT: one filled cluster per kernel, labelled with its boundary reason."""
        pos = self._pos
        owner = self._owners()
        out = ["digraph lazyfuse {", "  node [shape=box, style=filled, fontname=monospace];"]

        def node_line(i, n, k):
            color = COLORS[k % len(COLORS)] if k is not None else "white"
            label = f"%{i} {n.op.label}\\n{n.dtype.name}{list(n.shape)}"
            return f'n{i} [label="{label}", fillcolor="{color}"];'

        for k, info in enumerate(self.kernels):
            out.append(f"  subgraph cluster_{k} {{")
            out.append(f'    label="kernel {k} ({info.kind}): {_dot_escape(info.reason)}"; '
                       f'style=filled; color="{COLORS[k % len(COLORS)]}"; fillcolor="#ffffff";')
            out += [f"    {node_line(i, self.nodes[i], k)}" for i in sorted(i for i in owner if owner[i] == k)]
            out.append("  }")
        out += [f"  {node_line(i, n, None)}" for i, n in enumerate(self.nodes) if i not in owner]
        for i, n in enumerate(self.nodes):
            for s in n.srcs:
                out.append(f"  n{pos[id(s)]} -> n{i};")
        out.append("}")
        return "\n".join(out)


def _library_source(kind: StepKind, arg) -> str:
    if kind is StepKind.EXTERN:
        return f"library call: {arg.name} (extern: no native lowering)"
    return f"library call: torch.{kind.value}"


def _dot_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _tensors(obj) -> list:
    if getattr(obj, "_lazyfuse_frontend", False):   # a torch frontend tensor (lf.lazy): its lazyfuse Tensor
        return [obj._lf]
    if isinstance(obj, Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for o in obj for t in _tensors(o)]
    if isinstance(obj, dict):
        return [t for o in obj.values() for t in _tensors(o)]
    return []


def explain(fn_or_tensor, *args, **kwargs) -> Explanation:
    """The fused schedule of a tensor's (or a function's result's) pending work, not executed.

    ``print(lf.explain(y))`` lists the recorded IR, the kernels it fuses into, why each kernel
    boundary exists, and each kernel's generated source (with the heuristic default config);
    for torch code (``lf.lazy`` tensors) recorded inside ``fn``, which aten ops each kernel computes.
    """
    if callable(fn_or_tensor) and not isinstance(fn_or_tensor, Tensor):
        from .torch_frontend.origins import trace_origins
        with trace_origins():          # torch code in fn: name each node's aten op
            result = fn_or_tensor(*args, **kwargs)
    else:
        result = fn_or_tensor
    tensors = _tensors(result)
    storages, seen = [], set()
    for t in tensors:
        st = t._storage.root   # (a view of another dtype computes nothing of its own: its root's work)
        if st.current.is_pending and id(st) not in seen:
            seen.add(id(st))
            storages.append(st)
    device = tensors[0].device if tensors else None
    recompiles = device.engine.misses.reports() if device is not None else []
    if not storages:
        return Explanation([], [], [], recompiles)
    nodes, _leaves, _scalars, targets = trace(storages)
    graph = DrainGraph(nodes, [r for r, _ in targets], [t for _, t in targets])
    pos = {id(n): i for i, n in enumerate(nodes)}
    from .codegen.lower import lower_group

    def lower(planned) -> list:
        producers = planned.producers()
        kernels = []
        for grp in planned.groups:
            out = nodes[grp.output]
            members = sorted(i for i in grp.members if nodes[i].is_pending)
            if out.kind is Kind.EXTERN and grp.matmul is None:
                kernels.append(KernelInfo(f"k{len(kernels)}", out.op.label, members, grp.outputs, grp.reason,
                                          _library_source(StepKind(out.op.label), out.arg)))
                continue
            kernel, _ = lower_group(nodes, pos, grp, planned.slots, producers, f"k{len(kernels)}")
            kernels.append(KernelInfo(kernel.name, kernel.kind, members, grp.outputs, grp.reason,
                                      device.backend.preview(kernel)))
        return kernels

    _, kernels = plan_and_lower(graph, matmul_template(device), lower)
    return Explanation(nodes, kernels, [r for r, _ in targets], recompiles)


def to_dot(fn_or_tensor, *args, path=None, **kwargs) -> str:
    """DOT text of the fused graph (see ``explain``); with ``path``, also written to a file."""
    dot = explain(fn_or_tensor, *args, **kwargs).to_dot()
    if path is not None:
        write_dot(dot, path)
    return dot


def write_dot(dot: str, path) -> Path:
    """Write DOT text to ``path``; a .png or .svg path is rendered by Graphviz's ``dot``.

    Without Graphviz on PATH the DOT text goes to ``path`` with a .dot suffix instead, with a
    warning saying how to get the picture. Returns the file written.
    """
    p = Path(path)
    if p.suffix not in (".png", ".svg"):
        p.write_text(dot)
        return p
    exe = shutil.which("dot")
    if exe is None:
        fallback = p.with_suffix(".dot")
        fallback.write_text(dot)
        warnings.warn(f"Graphviz 'dot' is not on PATH, so {p.name} was not rendered: wrote the DOT text to "
                      f"{fallback} instead. Install Graphviz (apt install graphviz, brew install graphviz) and "
                      f"run: dot -T{p.suffix[1:]} -o {p} {fallback}", RuntimeWarning, stacklevel=3)
        return fallback
    subprocess.run([exe, f"-T{p.suffix[1:]}", "-o", str(p)], input=dot, text=True, check=True)
    return p


def config_label(config) -> str:
    """A step's chosen config as text: a kernel's config labels itself; a library step's config
    is the library's name (a tuned matmul's ``"onednn"``)."""
    if config is None:
        return ""
    return config if isinstance(config, str) else config.label()


def describe_plan(plan, build: bool) -> str:
    """One line per launch of a drained plan (``LAZYFUSE_DEBUG=1``)."""
    path = "steady-state path" if not build else "build path" + {
        "rebound": ", from its structure's cached plan", "loaded": ", from the plan store"}.get(plan.origin, "")
    lines = [f"[lazyfuse] drain ({path}): {len(plan.steps)} launch(es)"]
    for st in plan.steps:
        cfg = f" config {config_label(st.config)}" if st.config is not None else ""
        reason = f" — {st.group.reason}" if st.group is not None else ""
        lines.append(f"[lazyfuse]   {st.name} ({st.kind}){cfg}{reason}")
    return "\n".join(lines)


def print_drain(device, plan, build: bool) -> None:
    """``LAZYFUSE_DEBUG=1``'s drain observer: each drain's path and launches, and for a build
    why the plan cache missed."""
    print(describe_plan(plan, build))
    if build and device.engine.misses.misses:
        print(f"[lazyfuse]   why: {device.engine.misses.misses[-1]}")


if config.DEBUG.get():
    engine.drain_hook = print_drain


class DrainReporter:
    """The engine's drain hook for ``python -m lazyfuse explain``: the full explanation of each
    plan the first time a drain runs it (IR, kernels, boundary reasons, source, chosen config),
    one line for each later drain of the same plan. With ``dot_dir``, each plan's DOT is
    written there too (rendered when ``dot_format`` is png/svg and Graphviz is installed)."""

    def __init__(self, stream=None, dot_dir=None, dot_format="dot"):
        self.stream = stream if stream is not None else sys.stdout
        self.dot_dir = Path(dot_dir) if dot_dir is not None else None
        self.dot_format = dot_format
        self.plan_ids: dict = {}   # plan key -> number
        self.drains = 0
        self.written: list = []    # DOT/picture files

    def __call__(self, device, plan, build: bool) -> None:
        self.drains += 1
        path = "build" if build else "steady-state"
        number = self.plan_ids.get(plan.key)
        if number is not None:
            print(f"=== drain {self.drains} on {device.name} ({path} path): plan {number} again, "
                  f"{len(plan.steps)} launch(es)", file=self.stream)
            return
        number = self.plan_ids[plan.key] = len(self.plan_ids) + 1
        info = Explanation.from_plan(plan)
        print(f"=== drain {self.drains} on {device.name} ({path} path): plan {number}, "
              f"{len(plan.steps)} launch(es)", file=self.stream)
        print(info, file=self.stream)
        if self.dot_dir is not None:
            self.dot_dir.mkdir(parents=True, exist_ok=True)
            written = write_dot(info.to_dot(), self.dot_dir / f"plan-{number}.{self.dot_format}")
            self.written.append(written)
            print(f"DOT of plan {number}: {written}", file=self.stream)
        self.stream.flush()


def explain_script(path, args=(), stream=None, dot_dir=None, dot_format="dot") -> DrainReporter:
    """Run the script at ``path`` as ``__main__`` (with ``sys.argv = [path, *args]``) and report
    every drain it makes through a ``DrainReporter`` (``python -m lazyfuse explain``)."""
    import runpy
    reporter = DrainReporter(stream, dot_dir, dot_format)
    saved = engine.drain_hook, sys.argv, list(sys.path)
    engine.drain_hook = reporter
    sys.argv = [str(path), *args]
    sys.path.insert(0, str(Path(path).resolve().parent))   # as ``python script.py`` would
    from .torch_frontend.origins import trace_origins
    try:
        with trace_origins():          # torch code in the script: name each node's aten op
            runpy.run_path(str(path), run_name="__main__")
    finally:
        engine.drain_hook, sys.argv, sys.path[:] = saved
        print(f"=== {reporter.drains} drain(s), {len(reporter.plan_ids)} distinct plan(s)", file=reporter.stream)
        from .torch_frontend import drains as frontend
        if frontend.used():   # the script ran torch code on lf.lazy tensors
            print(frontend.report(), file=reporter.stream)
    return reporter
