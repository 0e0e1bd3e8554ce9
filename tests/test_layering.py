"""The package's layout as a rule: each module imports only its own layer and the layers below.

Layers, bottom up (README, Layout): the base (errors, config, version) -> ``ir/`` (nodes, dtypes,
views, the planner) -> ``codegen/`` (lowering, printers, compilers, autotuning) -> ``runtime/``
(engine, pool, devices, backends) -> the API (tensor, ops, creation, functions, indexing,
interop, autograd, nn, optim, explain, testing, distributed, torch_frontend) -> ``graph/`` (capture, replay) -> the package's
entry points (``__init__``, ``__main__``, demo). Every import counts, those inside functions too:
a lazy import is still an arrow. A lower layer that must call up does it through a registration
the upper one makes (the engine's ``drain_hook``, installed by explain.py; a device's backend,
chosen by the device), never by importing it; ``DECLARED_UPWARD`` lists the exceptions, each
with its reason.
"""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "lazyfuse"

BASE = {"lazyfuse.errors", "lazyfuse.config", "lazyfuse.version"}
API = {"lazyfuse." + m for m in ("tensor", "ops", "creation", "functions", "indexing", "interop", "autograd",
                                 "nn", "optim", "explain", "testing", "distributed", "torch_frontend", "extern", "surface",
                                 "torch_ops", "torch_math", "torch_index", "advanced_indexing", "linalg", "special",
                                 "fft", "cuda", "serialization", "random_draws", "signal", "bitcast")}
TOP = {"lazyfuse", "lazyfuse.__main__", "lazyfuse.demo", "lazyfuse.conformance"}
LAYERS = ["base", "ir", "codegen", "runtime", "api", "graph", "top"]
DECLARED_UPWARD: dict = {   # (importer, imported) -> why
    ("lazyfuse.surface", "lazyfuse"): "classify() answers what `lf.<name>` resolves to, and torch_function() calls "
                                      "it, so they read the package's own namespace (inside the function, once the "
                                      "package is whole)",
    ("lazyfuse.special", "lazyfuse"): "lf.special.erf is lf.erf (native or its extern): it reads the package's "
                                      "namespace (inside the function, once the package is whole)",
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def layer(module: str) -> str:
    if module in BASE:
        return "base"
    if module in TOP:
        return "top"
    for sub in ("ir", "codegen", "runtime", "graph"):
        if module == f"lazyfuse.{sub}" or module.startswith(f"lazyfuse.{sub}."):
            return sub
    if any(module == m or module.startswith(m + ".") for m in API):
        return "api"
    raise AssertionError(f"{module} has no layer: add it to tests/test_layering.py")


def imports(module: str):
    """(imported module, line) for every import of a lazyfuse module in ``module``'s source."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "lazyfuse":
                    yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "lazyfuse":
                continue
            for alias in node.names:   # ``from pkg import submodule`` imports the submodule
                sub = f"{target}.{alias.name}"
                yield (sub if sub in MODULES else target), node.lineno


def arrows():
    for module in sorted(MODULES):
        for target, line in imports(module):
            assert target in MODULES, f"{module}:{line} imports {target}, which does not exist"
            yield module, target, line


def test_every_module_has_a_layer():
    for module in MODULES:
        layer(module)


def test_no_import_goes_up_a_layer():
    upward = []
    for module, target, line in arrows():
        if LAYERS.index(layer(target)) > LAYERS.index(layer(module)) and (module, target) not in DECLARED_UPWARD:
            upward.append(f"{MODULES[module].relative_to(ROOT)}:{line}: {layer(module)} {module} imports "
                          f"{layer(target)} {target}")
    assert upward == []


def test_the_walk_sees_the_arrows_it_judges():
    """The rule cannot pass by finding nothing: known arrows of each kind are seen."""
    found = {(m, t) for m, t, _ in arrows()}
    assert ("lazyfuse.runtime.build", "lazyfuse.ir.planner") in found        # module level, relative
    assert ("lazyfuse.runtime.build", "lazyfuse.codegen.lower") in found     # inside a function
    assert ("lazyfuse.explain", "lazyfuse.runtime.engine") in found          # ``from .runtime import engine``
    assert ("lazyfuse.demo", "lazyfuse") in found                            # ``import lazyfuse as lf``
    assert LAYERS.index(layer("lazyfuse.explain")) > LAYERS.index(layer("lazyfuse.runtime.engine"))


def test_the_engine_holds_no_build_path():
    """runtime/engine.py records and drains; planning and lowering are runtime/build.py's (which
    explain reads), so the engine imports neither the planner nor any of codegen/."""
    build_imports = [t for m, t, _ in arrows() if m == "lazyfuse.runtime.engine"
                     and (layer(t) == "codegen" or t == "lazyfuse.ir.planner")]
    assert build_imports == []
    assert ("lazyfuse.explain", "lazyfuse.runtime.build") in {(m, t) for m, t, _ in arrows()}


def test_graph_reaches_the_engine_only_through_the_device_protocol():
    """graph/ drains, captures and replays through Device methods (runtime/device.py), so the
    engine can change behind them; it never touches ``device.engine``."""
    reach = []
    for module, path in MODULES.items():
        if layer(module) == "graph":
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Attribute) and node.attr == "engine":
                    reach.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert reach == []
