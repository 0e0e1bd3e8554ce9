"""Collective nodes: what a ``lazyfuse.distributed`` op records, and the rules that keep every rank
in step.

A collective is recorded like any op (a ``COLLECTIVE`` node, a library call to the planner: its
input is materialized, so an elementwise producer is one kernel up to it, and its consumers
form the next kernel) but two rules set it apart, because every rank of the process group must
launch the same collectives in the same order or the group deadlocks:

* **Never elided.** A collective's result storage is pinned on its engine until the next drain
  consumes the queue, so the drain computes it even when its tensor was dropped — like an
  in-place write to a live buffer. A rank that drops a result still takes part; one that reads
  it gets the same value as the others.
* **Program order.** Each collective reads the previous collective still pending on the same
  device as an extra source (an ordering token, as XLA's effects are ordered): the planner can
  schedule independent kernels around it, never one collective before an earlier one.

Across drains the order is the drain order, which is program order. What a rank must still do
itself is *drain*: a collective runs at the next ``lf.sync``, host read or capture of its
device, and a peer waiting for it waits until then (up to the process group's timeout).
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass

from .. import autograd
from ..errors import AutogradError, DTypeError, ShapeError
from ..ir.node import Node, Op
from ..tensor import Tensor, result_tensor
from ..errors import CollectiveError

REDUCE_OPS = ("sum", "avg", "max", "min")

# engine -> weak references to the last collective recorded on it: (its storage, its node), the
# node being the next collective's ordering token while it is pending
_last_collective: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class Collective:
    """A collective's description: a node's ``arg``, so part of the plan key (equal descriptions on
    the same group share plans). ``root`` is broadcast's source rank (global, as in torch).

    ``group`` is None for the default group (looked up at each launch) and else a weak reference
    to the torch ProcessGroup: the plan cache outlives ``destroy_process_group``, and a process
    group kept alive past it aborts the interpreter at exit (seen with gloo)."""
    kind: str
    reduce: str | None
    root: int | None
    group: object
    world: int
    rank: int            # this process's rank in the group

    def process_group(self):
        """The torch ProcessGroup to launch on (None: the default group)."""
        if self.group is None:
            return None
        group = self.group()
        if group is None:
            raise CollectiveError(f"collective {self}: its process group was destroyed; record it again on a live one")
        return group

    def __str__(self) -> str:
        what = self.kind + (f"({self.reduce})" if self.reduce else "") + (f"(src={self.root})" if self.root is not None
                                                                           else "")
        return f"{what} on rank {self.rank} of {self.world}"


def process_group(group, what: str):
    """``group`` as a Collective holds it (None: the default group), and this process's rank and the
    world size in it."""
    import torch.distributed as dist
    if not dist.is_available() or not dist.is_initialized():
        raise CollectiveError(f"lf.distributed.{what} needs torch.distributed's process group: call "
                              "torch.distributed.init_process_group(backend, timeout=...) first (torchrun sets "
                              "its environment: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE)")
    if group is dist.group.WORLD:
        group = None
    try:
        rank, world = dist.get_rank(group), dist.get_world_size(group)
    except (RuntimeError, ValueError, TypeError) as e:
        raise CollectiveError(f"lf.distributed.{what}: group={group!r} is not a torch.distributed process group "
                              f"(pass one from torch.distributed.new_group, or None for the default): {e}") from e
    if rank < 0:
        raise CollectiveError(f"lf.distributed.{what}: this process (global rank {dist.get_rank()}) is not a "
                              "member of group=; only its members may call its collectives")
    return (None if group is None else weakref.ref(group)), rank, world


def reduce_name(op, what: str) -> str:
    """``op`` as one of REDUCE_OPS: a name ("sum"...) or torch.distributed.ReduceOp.SUM/AVG/MAX/MIN."""
    import torch.distributed as dist
    if isinstance(op, str):
        name = op.lower()
    else:
        names = {dist.ReduceOp.SUM: "sum", dist.ReduceOp.AVG: "avg", dist.ReduceOp.MAX: "max",
                 dist.ReduceOp.MIN: "min"}
        name = next((v for k, v in names.items() if op == k), None)
    if name not in REDUCE_OPS:
        raise CollectiveError(f"lf.distributed.{what}: op={op!r} is not supported; pass one of "
                              f"{', '.join(REDUCE_OPS)} (or torch.distributed.ReduceOp.SUM/AVG/MAX/MIN)")
    return name


def record(t, spec: Collective, shape: tuple) -> Tensor:
    """Record collective ``spec`` on ``t`` with result shape ``shape``; the result is pinned."""
    if not isinstance(t, Tensor):
        raise DTypeError(f"lf.distributed.{spec.kind}: tensor={type(t).__name__} is not a lazyfuse Tensor; "
                         "wrap it with lf.tensor / lf.from_torch first")
    if t.requires_grad and autograd.is_grad_enabled():
        raise AutogradError(f"lf.distributed.{spec.kind} is not differentiable: call it on a tensor that does not "
                            "require grad (detach() or under lf.no_grad()); for data-parallel training "
                            "all-reduce the gradients after backward (lf.distributed.all_reduce_gradients)")
    if spec.reduce == "avg" and not (t.dtype.is_float):
        raise DTypeError(f"lf.distributed.{spec.kind}: op='avg' needs a floating tensor, got {t.dtype.name}; "
                         "use op='sum' and divide")
    x = t.contiguous()   # torch.distributed takes dense tensors: a strided view is copied first
    engine = t.device.engine
    with engine.lock:   # the token and the recording are one step: no other thread's collective between
        srcs = (x._read(),)
        prev = _token(engine)
        if prev is not None:
            srcs += (prev,)
        node = Node(Op.COLLECTIVE, srcs, t.dtype, shape, spec)
        out = result_tensor(t.device, node)
        engine.pinned.append(out._storage)
        _last_collective[engine] = (weakref.ref(out._storage), weakref.ref(node))
    return out


def _token(engine):
    """The previous collective's node, if the next drain of ``engine`` still has to run it: recorded
    since the last drain (on the current tape) and not failed (a failed one was poisoned: a token
    on it would re-run it, on this rank only)."""
    refs = _last_collective.get(engine)
    if refs is None:
        return None
    storage, node = refs[0](), refs[1]()
    if node is None or node.tape is not engine.tape or storage is None or storage.current.op is Op.ERROR:
        return None
    return node


def check_divisible(t, dim: int, world: int, what: str) -> None:
    if t.shape[dim] % world:
        raise ShapeError(f"lf.distributed.{what}: dim {dim} of tensor {t.shape} has size {t.shape[dim]}, not a "
                         f"multiple of the group's world size {world}; pad it or pick another dim")
