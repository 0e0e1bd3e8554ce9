"""Data-parallel training: average every parameter's gradient over the ranks after backward.

``all_reduce_gradients`` packs the gradients into flat buckets of at most ``bucket_bytes``
(one per dtype and device at least, as torch's DistributedDataParallel buckets them), records
one ``all_reduce(avg)`` per bucket and writes the averages back into the ``.grad`` buffers in
place. Everything is lazy: packing a bucket is one kernel (a ``cat``), the average one
collective, the write-back one foreach kernel, and the whole thing — forward, backward, the
all-reduces and the optimizer step — is captured by ``lf.capture`` as one replayable graph.
Writing in place keeps each ``.grad`` buffer the same across steps, which is what a captured
step (``zero_grad(set_to_none=False)``) needs, and what ``lf.optim`` or any optimizer reading
``p.grad`` then uses.

Overlap: the buckets are cut in reverse parameter order (the order backward produces the
gradients), the planner runs each bucket's packing and all-reduce as soon as its gradients are
computed, and on the host the engine launches the all-reduce asynchronously and waits for it
only where its result is read (the write-back, before the optimizer step): the all-reduces run
during the rest of backward, in a drain and in a captured replay alike. Smaller buckets start
sooner. (On a GPU, NCCL runs on a collective stream joined where the result is read: untested,
see README.)

Works with ``lf.optim`` and with ``torch.optim`` on a frontend model (``lf.lazy(model)``): its
parameters' ``.grad`` are frontend tensors, averaged the same way.
"""
from __future__ import annotations

DEFAULT_BUCKET_BYTES = 25 * 2 ** 20   # torch DistributedDataParallel's default bucket_cap_mb=25


def buckets(grads, bucket_bytes: int) -> list:
    """``grads`` (in order) cut into lists of one dtype and device, each at most ``bucket_bytes``
    (a gradient larger than that is a bucket alone). The same on every rank for the same model."""
    out, open_ = [], {}
    for g in grads:
        key = (g.dtype, g.device)
        size = g.numel() * g.dtype.itemsize
        cur = open_.get(key)
        if cur is None or cur[1] + size > bucket_bytes:
            cur = open_[key] = [[], 0]
            out.append(cur[0])
        cur[0].append(g)
        cur[1] += size
    return out


def all_reduce_gradients(params, *, bucket_bytes: int = DEFAULT_BUCKET_BYTES, group=None) -> None:
    """Average ``p.grad`` over the ranks of ``group`` for every ``p`` in ``params`` (lazyfuse
    Tensors, or a frontend model's torch parameters), in place, in buckets (recorded lazily; they
    run at the next drain, e.g. the optimizer step's). A parameter with no gradient on this rank
    contributes zeros (its ``.grad`` becomes the average), so every rank reduces the same buckets
    even when a parameter went unused on one of them.

    The buckets are cut in *reverse* parameter order, as torch's DistributedDataParallel cuts
    them: backward produces the last layers' gradients first, and collectives run in program
    order, so the first bucket recorded must be the first one ready for its all-reduce to start
    while the rest of backward still runs (the planner starts a collective as soon as its
    inputs are ready; see ``runtime/collectives.py``)."""
    from ..autograd import no_grad
    from ..creation import zeros
    from ..functions import cat
    from . import all_reduce
    from .frontend import grad_slot
    if not isinstance(bucket_bytes, int) or bucket_bytes <= 0:
        from ..errors import ShapeError
        raise ShapeError(f"bucket_bytes={bucket_bytes!r} must be a positive int (bytes per all-reduce)")
    grads = []
    with no_grad():
        for p in reversed(list(params)):
            value, grad, set_grad = grad_slot(p)
            if grad is None:
                set_grad(zeros(value.shape, dtype=value.dtype, device=value.device))
                grad = grad_slot(p)[1]
            grads.append(grad)
        for bucket in buckets(grads, bucket_bytes):
            flat = cat([g.reshape(-1) for g in bucket]) if len(bucket) > 1 else bucket[0].reshape(-1)
            avg = all_reduce(flat, "avg", group=group)
            at = 0
            for g in bucket:
                n = g.numel()
                g.copy_(avg[at:at + n].reshape(g.shape))
                at += n


class DataParallel:
    """Data-parallel training over ``params`` (a model's parameters, the same list on every rank:
    lazyfuse Tensors, or the torch parameters of a frontend model, ``lf.lazy(model).parameters()``):
    at construction rank ``src``'s values are broadcast to every rank (as torch's
    DistributedDataParallel does), and ``all_reduce_gradients()`` averages the gradients after
    each backward, before the optimizer step.

        dp = lf.distributed.DataParallel(params)
        loss.backward(); dp.all_reduce_gradients(); opt.step()   # lf.optim or torch.optim
    """

    def __init__(self, params, *, bucket_bytes: int = DEFAULT_BUCKET_BYTES, group=None, src: int = 0):
        from ..autograd import no_grad
        from . import broadcast_
        from .frontend import grad_slot
        self.params = list(params)
        self.bucket_bytes = bucket_bytes
        self.group = group
        with no_grad():
            for p in self.params:
                broadcast_(grad_slot(p)[0].detach(), src, group=group)

    def all_reduce_gradients(self) -> None:
        all_reduce_gradients(self.params, bucket_bytes=self.bucket_bytes, group=self.group)
