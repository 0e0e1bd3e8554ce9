"""``lf.distributed`` for torch code on the torch frontend (``lf.lazy``): its parameters in
``DataParallel``, and torch's own ``torch.distributed.all_reduce`` / ``broadcast`` on frontend
tensors recorded as lazy collectives.

``torch.distributed.all_reduce(t)`` reaches ``LazyTensor.__torch_dispatch__`` as the c10d op
``c10d::allreduce_`` (its process group and reduce op as TorchScript objects). The handlers here
record ``all_reduce_`` / ``broadcast_`` on the lazyfuse Tensor instead, so the collective fuses,
captures and follows the collective rules like one written with ``lf.distributed``; the Work
handed back is already complete (``work.wait()`` returns at once: the collective runs at the
next drain, every rank drains it, and reading ``t`` drains). Any other c10d op, and a reduce op
lazyfuse lacks (product, the bitwise ones), runs eagerly on plain copies (``_eagerly``): correct,
a drain.
"""
from __future__ import annotations

from ..torch_frontend import drains
from ..torch_frontend.aten_table import NAMESPACES
from ..torch_frontend.tensor import LazyTensor
from .collective import REDUCE_OPS


def grad_slot(p):
    """``(value, grad, set_grad)`` of a parameter: a lazyfuse Tensor, or a frontend torch
    parameter (``lf.lazy(model).parameters()``), whose lazyfuse Tensors are its ``._lf``."""
    if isinstance(p, LazyTensor):
        def set_grad(g):
            p.grad = LazyTensor(g)
        return p._lf, (None if p.grad is None else p.grad._lf), set_grad

    def set_lf_grad(g):
        p.grad = g
    return p, p.grad, set_lf_grad


def _recorded(func, tensors):
    """What the c10d op returns: its tensors and a Work that is already complete. Counted as
    recorded natively in ``lf.torch_frontend.report()``."""
    import torch
    from torch._C._distributed_c10d import _create_work_from_future
    fut = torch.futures.Future()
    fut.set_result(tensors)
    drains.counters.native[str(func)] += 1
    return tensors, _create_work_from_future(fut).boxed()


def _lazy_only(tensors) -> bool:
    return bool(tensors) and all(type(t) is LazyTensor for t in tensors)


def _all_reduce(func, args, kwargs):
    import torch.distributed as dist
    from . import all_reduce_
    tensors, group, op = args[0], args[1], args[2]
    reduce = dist.ReduceOp.RedOpType(op.op()).name.lower()
    if not _lazy_only(tensors) or reduce not in REDUCE_OPS or (len(args) > 3 and args[3] is not None):
        return _eagerly(func, args, kwargs)   # plain tensors mixed in, product/bitwise, sparse
    group = dist.ProcessGroup.unbox(group)
    for t in tensors:
        all_reduce_(t._lf, reduce, group=group)
    return _recorded(func, tensors)


def _broadcast(func, args, kwargs):
    import torch.distributed as dist
    from . import broadcast_
    tensors, group, root_rank, root_tensor = args[0], args[1], args[2], args[3]
    if not _lazy_only(tensors) or root_tensor != 0 or len(tensors) != 1:
        return _eagerly(func, args, kwargs)
    group = dist.ProcessGroup.unbox(group)
    src = dist.get_global_rank(group, root_rank)   # the op has the group's rank; lf takes torch's global one
    broadcast_(tensors[0]._lf, src, group=group)
    return _recorded(func, tensors)


def _eagerly(func, args, kwargs):
    """Any other c10d op (all_gather into a list, send, barrier...) on plain copies of the frontend
    tensors, then every copy written back: c10d ops write into their tensor arguments without
    declaring it in their schema, so the frontend's generic fallback would lose what they wrote.
    A drain, counted as a fallback; the Work is waited for before the write-back."""
    from torch.utils._pytree import tree_map
    name = str(func)
    drains.counters.fallback[name] += 1
    drains.note(f"fallback {name}")
    plain = []

    def realize(a):
        if type(a) is LazyTensor:
            plain.append((a, a._lf.torch()))
            return plain[-1][1]
        return a
    out = func(*tree_map(realize, args), **tree_map(realize, kwargs))
    work = out[-1] if isinstance(out, tuple) and out else out
    if hasattr(work, "wait"):
        work.wait()
    for lazy, value in plain:
        lazy._lf.copy_(value)
    back = {id(value): lazy for lazy, value in plain}
    return tree_map(lambda o: back.get(id(o), o), out)


LAZY = {"allreduce_": _all_reduce, "broadcast_": _broadcast}
NAMESPACES["c10d"] = lambda func: LAZY.get(func._schema.name.split("::", 1)[1], _eagerly)
