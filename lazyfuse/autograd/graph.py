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
    """A user-created tensor's autograd state: its flag and its accumulated ``.grad``."""

    __slots__ = ("requires_grad", "grad")
    is_leaf = True

    def __init__(self, requires_grad: bool):
        self.requires_grad = requires_grad
        self.grad = None


class GradFn:
    """How to send a result's gradient to its inputs: ``edges`` is ((input _ag, vjp), ...)."""

    __slots__ = ("name", "edges", "saved")
    is_leaf = False
    requires_grad = True

    def __init__(self, name: str, edges: tuple):
        self.name = name
        self.edges = edges
        self.saved = _saved_versions(edges)

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


def _order(roots) -> list:
    """GradFns reachable from ``roots``, each before every GradFn it sends gradient to."""
    return post_order(roots, _inputs)[::-1]


def _inputs(fn) -> list:
    """The GradFns ``fn`` sends gradient to (``_order``'s children)."""
    if fn.edges is None:
        raise AutogradError("backward through the graph a second time: its saved tensors were freed by the "
                            "first backward(); pass retain_graph=True to the first call")
    return [ag for ag, _ in fn.edges if not ag.is_leaf]


def backward(root, gradient=None, retain_graph: bool = False) -> None:
    """Accumulate d(root)/d(leaf) into every reachable leaf's ``.grad`` (torch's ``backward``)."""
    ag = _requiring_grad(root, "backward()")
    with no_grad():
        seed = _seed(root, gradient, "backward(gradient=...)")
        if ag.is_leaf:
            _accumulate_leaves({id(ag): (ag, seed)}, root)
            return
        leaves, _ = _sweep([(ag, seed)], retain_graph)
        _accumulate_leaves(leaves, root)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=None,
         is_grads_batched=False, materialize_grads=False):
    """torch's ``autograd.grad``: the gradients of ``outputs`` (a tensor or a sequence, each seeded
    with its ``grad_outputs`` entry, or ones for a one-element output) with respect to ``inputs``
    (leaves or intermediate results), returned as a tuple; no ``.grad`` is written. An input the
    outputs do not depend on raises unless ``allow_unused`` (then None, or zeros with
    ``materialize_grads``). ``create_graph`` (higher-order gradients) is not supported: the
    backward pass is recorded under ``no_grad``."""
    if create_graph or is_grads_batched:
        raise AutogradError("autograd.grad(create_graph=True / is_grads_batched=True): lazyfuse records the backward "
                            "pass without a graph of its own, so higher-order gradients are not supported")
    outputs = _as_tensors(outputs)
    inputs = _as_tensors(inputs)
    grad_outputs = [None] * len(outputs) if grad_outputs is None else list(_as_tensors(grad_outputs, keep_none=True))
    if len(grad_outputs) != len(outputs):
        raise ShapeError(f"grad requires one grad_output per output: got {len(grad_outputs)} for {len(outputs)} outputs")
    for x in inputs:
        if not needs_grad(x):
            raise AutogradError("One of the differentiated Tensors does not require grad: every input of "
                                "autograd.grad must have requires_grad=True (or be computed from one)")
    allow_unused = materialize_grads if allow_unused is None else allow_unused
    with no_grad():
        roots = [(_requiring_grad(out, "autograd.grad"), _seed(out, g, "autograd.grad(grad_outputs=...)"))
                 for out, g in zip(outputs, grad_outputs)]
        wanted = {id(x._ag) for x in inputs}
        leaves, caught = _sweep([r for r in roots if not r[0].is_leaf], bool(retain_graph), wanted)
        for ag, seed in roots:   # an output that is itself a leaf: its seed is its gradient
            if ag.is_leaf:
                prev = leaves.get(id(ag))
                leaves[id(ag)] = (ag, seed if prev is None else prev[1] + seed)
        caught.update({key: g for key, (_, g) in leaves.items() if key in wanted})
        result = []
        for x in inputs:
            g = caught.get(id(x._ag))
            if g is None:
                if not allow_unused:
                    raise AutogradError("One of the differentiated Tensors appears to not have been used in the "
                                        "graph. Set allow_unused=True if this is the desired behavior.")
                if materialize_grads:
                    from ..creation import zeros
                    g = zeros(x.shape, dtype=x.dtype, device=x.device)
            result.append(g)
    return tuple(result)


def _as_tensors(value, keep_none=False) -> list:
    if isinstance(value, _tensor.Tensor) or (keep_none and value is None):
        return [value]
    return list(value)


def _requiring_grad(root, what):
    ag = root._ag
    if ag is None or not ag.requires_grad:
        raise AutogradError(f"{what} of a tensor that does not require grad: no input of it has "
                            "requires_grad=True (or it was computed under lf.no_grad())")
    return ag


def _seed(root, gradient, what):
    """The gradient the sweep starts from at ``root``: ones for a one-element output, else ``gradient``."""
    if gradient is None:
        if root.numel() != 1:
            raise ShapeError(f"grad can be implicitly created only for scalar outputs: backward() without a "
                             f"gradient needs a one-element output, this one has shape {root.shape}; pass "
                             "gradient= (a tensor of that shape)")
        from ..creation import ones
        return ones(root.shape, dtype=root.dtype, device=root.device)
    if not isinstance(gradient, _tensor.Tensor):
        from ..creation import tensor
        gradient = tensor(gradient, dtype=root.dtype, device=root.device)
    if gradient.shape != root.shape:
        raise ShapeError(f"{what}: gradient shape {gradient.shape} differs from the output's {root.shape}")
    return gradient.to(root.dtype).clone()   # a fresh storage: .grad never aliases the caller's tensor


def _sweep(roots, retain_graph, wanted=frozenset()):
    """The reverse sweep from ``roots`` ((GradFn, seed), ...): ``{id: (leaf, gradient)}`` of the
    leaves reached, and ``{id: gradient}`` of the GradFns among ``wanted`` (each popped once all
    its gradient has arrived: the order puts a GradFn before every one it sends to)."""
    grads, leaves, caught = {}, {}, {}
    for ag, seed in roots:
        prev = grads.get(id(ag))
        grads[id(ag)] = seed if prev is None else prev + seed
    for fn in _order([ag for ag, _ in roots]):
        g = grads.pop(id(fn), None)
        if g is None:
            continue
        if id(fn) in wanted:
            caught[id(fn)] = g
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
    return leaves, caught


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
