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


def _order(root) -> list:
    """GradFns reachable from ``root``, each before every GradFn it sends gradient to."""
    return post_order([root], _inputs)[::-1]


def _inputs(fn) -> list:
    """The GradFns ``fn`` sends gradient to (``_order``'s children)."""
    if fn.edges is None:
        raise AutogradError("backward through the graph a second time: its saved tensors were freed by the "
                            "first backward(); pass retain_graph=True to the first call")
    return [ag for ag, _ in fn.edges if not ag.is_leaf]


def backward(root, gradient=None, retain_graph: bool = False) -> None:
    """Accumulate d(root)/d(leaf) into every reachable leaf's ``.grad`` (torch's ``backward``)."""
    ag = root._ag
    if ag is None or not ag.requires_grad:
        raise AutogradError("backward() of a tensor that does not require grad: no input of it has "
                            "requires_grad=True (or it was computed under lf.no_grad())")
    with no_grad():
        if gradient is None:
            if root.numel() != 1:
                raise ShapeError(f"grad can be implicitly created only for scalar outputs: backward() without a "
                                 f"gradient needs a one-element output, this one has shape {root.shape}; pass "
                                 "gradient= (a tensor of that shape)")
            from ..creation import ones
            seed = ones(root.shape, dtype=root.dtype, device=root.device)
        else:
            if not isinstance(gradient, _tensor.Tensor):
                from ..creation import tensor
                gradient = tensor(gradient, dtype=root.dtype, device=root.device)
            if gradient.shape != root.shape:
                raise ShapeError(f"backward(gradient=...): gradient shape {gradient.shape} differs from the "
                                 f"output's {root.shape}")
            seed = gradient.to(root.dtype).clone()   # a fresh storage: .grad never aliases the caller's tensor
        if ag.is_leaf:
            _accumulate_leaves({id(ag): (ag, seed)}, root)
            return
        grads = {id(ag): seed}
        leaves = {}
        for fn in _order(ag):
            g = grads.pop(id(fn), None)
            if g is None:
                continue
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
        _accumulate_leaves(leaves, root)


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
