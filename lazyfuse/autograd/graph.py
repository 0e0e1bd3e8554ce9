"""The backward graph: leaves, backward nodes, and the reverse sweep of ``Tensor.backward``.

A tensor's ``_ag`` slot is None for every tensor outside autograd (the no-grad fast path
checks only that), a ``Leaf`` for a tensor the user marked with ``requires_grad``, or a
``GradFn`` for a result computed from one. A GradFn holds one edge per differentiable input:
the input's own ``_ag`` and a VJP closure written with lazyfuse Tensor ops. The sweep runs
those closures under ``no_grad``, so the backward pass is itself lazy IR: it fuses and drains
like any program (and can be captured).
"""
from __future__ import annotations

from ..errors import AutogradError, DTypeError, ShapeError
from ..ir.node import post_order
from .mode import is_grad_enabled, no_grad


class Leaf:
    """A user-created tensor's autograd state: its flag, its accumulated ``.grad`` and the hooks
    ``register_hook`` gave it (each sees the gradient before it is accumulated)."""

    __slots__ = ("requires_grad", "grad", "hooks")
    is_leaf = True

    def __init__(self, requires_grad: bool):
        self.requires_grad = requires_grad
        self.grad = None
        self.hooks = None


class GradFn:
    """How to send a result's gradient to its inputs: ``edges`` is ((input _ag, vjp), ...)."""

    __slots__ = ("name", "edges", "saved", "hooks", "retains_grad", "grad")
    is_leaf = False
    requires_grad = True

    def __init__(self, name: str, edges: tuple):
        self.name = name
        self.edges = edges
        self.saved = _saved_versions(edges)
        self.hooks = None           # register_hook on the result: each sees (and may replace) its gradient
        self.retains_grad = False   # retain_grad(): the result keeps its gradient as .grad
        self.grad = None

    def check_saved(self) -> None:
        """torch's version-counter rule: a tensor this gradient reads was written in place after
        the op used it, so its value is no longer the one the gradient needs."""
        for storage, version in self.saved:
            if storage.version != version:
                raise AutogradError(
                    f"a tensor that {self.name}'s gradient needs was modified by an in-place operation "
                    f"after the forward used it (version {storage.version}, expected {version}): the "
                    "gradient would use the new value. Clone it before writing in place, or write "
                    "after backward()")


def _saved_versions(edges) -> tuple:
    """(storage, version) of every tensor the edges' vjp closures hold: what backward will read.
    (A closure that holds a tensor only for its shape is checked too: stricter than torch, never
    a silently wrong gradient.)"""
    saved, seen = {}, set()
    functions = [vjp for _, vjp in edges]
    while functions:   # vjps wrap rule closures (a cast to the input's dtype around g * b): look inside
        fn = functions.pop()
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        for cell in getattr(fn, "__closure__", None) or ():
            value = cell.cell_contents
            # an extern's vjp holds its tensor arguments in a list, read again at backward
            for item in (value if isinstance(value, (list, tuple)) else (value,)):
                if isinstance(item, _tensor.Tensor):
                    saved.setdefault(id(item._storage), (item._storage, item._storage.version))
                elif callable(item) and item is value:
                    functions.append(item)
    return tuple(saved.values())


def needs_grad(x) -> bool:
    ag = getattr(x, "_ag", None)
    return ag is not None and ag.requires_grad


def recording(*xs) -> bool:
    """True when grad mode is on and one of ``xs`` (tensors or anything else) requires grad."""
    return is_grad_enabled() and any(needs_grad(x) for x in xs)


def attach(out, name: str, edges):
    """Give ``out`` a GradFn over ``edges`` ((input, vjp(g) -> grad of input), ...); inputs that
    need no grad are dropped, and a non-float result (a comparison, an index) records nothing."""
    kept = tuple((x._ag, vjp) for x, vjp in edges if needs_grad(x))
    if kept and out.dtype.is_float:
        out._ag = GradFn(name, kept)
    return out


def set_requires_grad(t, flag: bool):
    if flag and not t.dtype.is_float:
        raise DTypeError(f"only Tensors of floating point dtype can require gradients: this one is {t.dtype.name}; "
                         "call .float() first")
    ag = t._ag
    if ag is not None and not ag.is_leaf:
        if flag:
            return t
        raise AutogradError("requires_grad_(False) on a non-leaf tensor: use .detach() to get a tensor cut "
                            "from the graph")
    if ag is None:
        if flag:
            t._ag = Leaf(True)
    else:
        ag.requires_grad = flag
    return t


def _order(root) -> list:
    """GradFns reachable from ``root``, each before every GradFn it sends gradient to."""
    return post_order([root], _inputs)[::-1]


def _inputs(fn) -> list:
    """The GradFns ``fn`` sends gradient to (``_order``'s children)."""
    if fn.edges is None:
        raise AutogradError("backward through the graph a second time: its saved tensors were freed by the "
                            "first backward(); pass retain_graph=True to the first call")
    return [ag for ag, _ in fn.edges if not ag.is_leaf]


def _seed(root, gradient, what: str):
    """The gradient the sweep starts ``root`` from: ``gradient`` (a fresh storage of the root's
    dtype, so ``.grad`` never aliases the caller's tensor), or ones for a one-element root."""
    if gradient is None:
        if root.numel() != 1:
            raise ShapeError(f"grad can be implicitly created only for scalar outputs: {what} without a "
                             f"gradient needs a one-element output, this one has shape {root.shape}; pass "
                             "gradient= (a tensor of that shape)")
        from ..creation import ones
        return ones(root.shape, dtype=root.dtype, device=root.device)
    if not isinstance(gradient, _tensor.Tensor):
        from ..creation import tensor
        gradient = tensor(gradient, dtype=root.dtype, device=root.device)
    if gradient.shape != root.shape:
        raise ShapeError(f"{what}: gradient shape {gradient.shape} differs from the output's {root.shape}")
    return gradient.to(root.dtype).clone()


def _hooked(ag, g):
    """``g`` after the hooks registered on ``ag``'s tensor (a hook returning None keeps it)."""
    for hook in ag.hooks.values():
        out = hook(g)
        if out is not None:
            g = out
    return g


def _sweep(seeds: dict, retain_graph: bool, wanted=frozenset()) -> tuple:
    """Send the gradients in ``seeds`` (id(ag) -> (ag, g)) back through the graph: returns
    (leaves: id -> (leaf, summed gradient), reached: id -> gradient of each GradFn in ``wanted``)."""
    grads = {i: g for i, (ag, g) in seeds.items() if not ag.is_leaf}
    leaves = {i: (ag, g) for i, (ag, g) in seeds.items() if ag.is_leaf}
    reached = {}
    for fn in post_order([ag for ag, _ in seeds.values() if not ag.is_leaf], _inputs)[::-1]:
        g = grads.pop(id(fn), None)
        if g is None:
            continue
        if fn.hooks:
            g = _hooked(fn, g)
        if fn.retains_grad:
            fn.grad = g if fn.grad is None else fn.grad + g
        if id(fn) in wanted:
            reached[id(fn)] = g
        fn.check_saved()
        for dst, vjp in fn.edges:
            gi = vjp(g)
            if dst.is_leaf:
                prev = leaves.get(id(dst))
                leaves[id(dst)] = (dst, gi if prev is None else prev[1] + gi)
            else:
                prev = grads.get(id(dst))
                grads[id(dst)] = gi if prev is None else prev + gi
        if not retain_graph:
            fn.edges, fn.saved = None, ()   # the saved storages go with the closures that read them
    for i, (leaf, g) in list(leaves.items()):
        if leaf.hooks:
            leaves[i] = (leaf, _hooked(leaf, g))
    return leaves, reached


def _graph_root(root, what: str):
    ag = root._ag
    if ag is None or not ag.requires_grad:
        raise AutogradError(f"{what} of a tensor that does not require grad: no input of it has "
                            "requires_grad=True (or it was computed under lf.no_grad())")
    return ag


def backward(root, gradient=None, retain_graph: bool = False) -> None:
    """Accumulate d(root)/d(leaf) into every reachable leaf's ``.grad`` (torch's ``backward``)."""
    ag = _graph_root(root, "backward()")
    with no_grad():
        leaves, _ = _sweep({id(ag): (ag, _seed(root, gradient, "backward()"))}, retain_graph)
        _accumulate_leaves(leaves, root)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=None,
         is_grads_batched=False, materialize_grads=False) -> tuple:
    """torch.autograd.grad: the gradients of ``outputs`` (a tensor or a sequence, each seeded by
    ``grad_outputs`` or ones) with respect to each of ``inputs``, returned rather than
    accumulated into ``.grad``. An input the outputs do not depend on raises unless
    ``allow_unused`` (then None, or zeros with ``materialize_grads``)."""
    if create_graph:
        raise AutogradError("autograd.grad(create_graph=True): lazyfuse's backward pass is not itself "
                            "differentiable (no higher-order gradients); compute the gradient once, without "
                            "create_graph")
    if is_grads_batched:
        raise AutogradError("autograd.grad(is_grads_batched=True) is not supported: call grad once per "
                            "gradient")
    single = isinstance(inputs, _tensor.Tensor)
    outputs = [outputs] if isinstance(outputs, _tensor.Tensor) else list(outputs)
    inputs = [inputs] if single else list(inputs)
    if grad_outputs is None or isinstance(grad_outputs, _tensor.Tensor):
        grad_outputs = [grad_outputs] * len(outputs) if grad_outputs is None else [grad_outputs]
    grad_outputs = list(grad_outputs)
    if len(grad_outputs) != len(outputs):
        raise ShapeError(f"grad requires one grad_output per output: got {len(grad_outputs)} for {len(outputs)} "
                         "outputs")
    for i, t in enumerate(inputs):
        if not isinstance(t, _tensor.Tensor) or not needs_grad(t):
            raise AutogradError(f"One of the differentiated Tensors does not require grad (inputs[{i}]); "
                                "lazyfuse: set requires_grad=True on it before the forward")
    if allow_unused is None:
        allow_unused = materialize_grads
    with no_grad():
        seeds = {}
        for k, (out, g) in enumerate(zip(outputs, grad_outputs)):
            ag = _graph_root(out, f"autograd.grad (outputs[{k}])")
            g = _seed(out, g, "autograd.grad")
            seeds[id(ag)] = (ag, g if id(ag) not in seeds else seeds[id(ag)][1] + g)
        wanted = frozenset(id(t._ag) for t in inputs if not t._ag.is_leaf)
        leaves, reached = _sweep(seeds, bool(retain_graph), wanted)
        results = []
        for i, t in enumerate(inputs):
            found = reached.get(id(t._ag)) if not t._ag.is_leaf else leaves.get(id(t._ag), (None, None))[1]
            if found is None:
                if not allow_unused:
                    raise AutogradError(f"One of the differentiated Tensors appears to not have been used in the "
                                        f"graph (inputs[{i}]). Set allow_unused=True if this is the desired "
                                        "behavior.")
                if materialize_grads:
                    from ..creation import zeros_like
                    found = zeros_like(t)
            results.append(found)
    return tuple(results)


def _accumulate_leaves(leaves: dict, root) -> None:
    """``.grad = g`` the first time (a storage of its own, so later in-place accumulation and
    zero_grad(set_to_none=False) write one stable buffer), ``.grad += g`` in place after."""
    owned = set()
    for leaf, g in leaves.values():
        if not leaf.requires_grad:
            continue
        if leaf.grad is not None:
            leaf.grad.add_(g)
            continue
        st = g._storage
        if id(st) in owned or not g._view.covers(st.numel) or g.shape != st.shape:
            g = g.clone()
        owned.add(id(g._storage))
        leaf.grad = g


# (tensor.py imports autograd: the module, resolved at call time, rather than an import in the
# functions, which would run the import machinery on every call; _saved_versions runs per op recorded)
from .. import tensor as _tensor  # noqa: E402
