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

Overlap: on the ``cpu`` device a drain runs its steps one after another, so the all-reduces run
after the backward kernels of the same drain, not during them; smaller buckets only change
how the traffic is cut. (On a GPU, NCCL runs on the same stream as the kernels: also no
overlap yet — overlapping needs the collective on a side stream with events, see README.)
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
    """Average ``p.grad`` over the ranks of ``group`` for every ``p`` in ``params``, in place, in
    buckets (recorded lazily; they run at the next drain, e.g. the optimizer step's). A parameter
    with no gradient on this rank contributes zeros (its ``.grad`` becomes the average), so every
    rank reduces the same buckets even when a parameter went unused on one of them."""
    from ..autograd import no_grad
    from ..creation import zeros
    from ..functions import cat
    from . import all_reduce
    if not isinstance(bucket_bytes, int) or bucket_bytes <= 0:
        from ..errors import ShapeError
        raise ShapeError(f"bucket_bytes={bucket_bytes!r} must be a positive int (bytes per all-reduce)")
    params = list(params)
    with no_grad():
        for p in params:
            if p.grad is None:
                p.grad = zeros(p.shape, dtype=p.dtype, device=p.device)
        for bucket in buckets([p.grad for p in params], bucket_bytes):
            flat = cat([g.reshape(-1) for g in bucket]) if len(bucket) > 1 else bucket[0].reshape(-1)
            avg = all_reduce(flat, "avg", group=group)
            at = 0
            for g in bucket:
                n = g.numel()
                g.copy_(avg[at:at + n].reshape(g.shape))
                at += n


class DataParallel:
    """Data-parallel training over ``params`` (a model's parameters, the same list on every rank):
    at construction rank ``src``'s values are broadcast to every rank (as torch's
    DistributedDataParallel does), and ``all_reduce_gradients()`` averages the gradients after
    each backward, before the optimizer step.

        dp = lf.distributed.DataParallel(params)
        loss.backward(); dp.all_reduce_gradients(); opt.step()
    """

    def __init__(self, params, *, bucket_bytes: int = DEFAULT_BUCKET_BYTES, group=None, src: int = 0):
        from ..autograd import no_grad
        from . import broadcast_
        self.params = list(params)
        self.bucket_bytes = bucket_bytes
        self.group = group
        with no_grad():
            for p in self.params:
                broadcast_(p.detach(), src, group=group)

    def all_reduce_gradients(self) -> None:
        all_reduce_gradients(self.params, bucket_bytes=self.bucket_bytes, group=self.group)
