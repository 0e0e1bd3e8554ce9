"""``graphed``: a safe, structured call interface on top of ``capture``.

The raw ``Graph`` replays whatever buffers the closure touched; ``graphed`` makes the contract
explicit: it owns static input buffers, copies each call's arguments into them, replays,
copies the inputs ``fn`` writes in place back to the caller's tensors, and returns the outputs
— cloned (and materialized) by default, so a caller never sees a later replay overwrite a
result it kept.
"""
from __future__ import annotations

from ..errors import CaptureError, ShapeError
from ..tensor import Tensor
from .capture import _map_tensors, capture


def graphed(fn, *example_inputs, warmup_iters: int = 3, clone_outputs: bool = True, buckets=None, **bucket_options):
    """Capture ``fn(*inputs)`` with static inputs shaped like ``example_inputs``.

    Returns a callable ``call(*inputs)``; ``call.graph`` is the underlying Graph. With
    ``buckets={dim: [sizes...]}``, one graph per bucket of the inputs' size along ``dim``
    instead (``graph.buckets``: padding, masks, the cap and what happens past the last bucket).
    """
    if buckets is not None:
        from .buckets import BucketedGraphed
        return BucketedGraphed(fn, example_inputs, buckets, warmup_iters=warmup_iters, clone_outputs=clone_outputs,
                               **bucket_options)
    if bucket_options:
        raise TypeError(f"graphed: {sorted(bucket_options)} only apply with buckets=")
    if not example_inputs or not all(isinstance(x, Tensor) for x in example_inputs):
        raise CaptureError("graphed(fn, *example_inputs): give at least one example Tensor input")
    dev = example_inputs[0].device
    static = [x.clone() for x in example_inputs]
    dev.drain("graphed: materialize static inputs")
    versions = [s._storage.version for s in static]
    # uncloned outputs alias across calls: a call marks the previous call's outputs overwritten
    graph = capture(dev, lambda: fn(*static), warmup_iters=warmup_iters, check_overwrites=not clone_outputs)
    # inputs fn writes in place: each call copies them back to the caller's tensors, as calling
    # fn itself would have written them (a torch user's expectation)
    mutated = [k for k, (s, v) in enumerate(zip(static, versions)) if s._storage.version != v]

    def call(*inputs):
        if len(inputs) != len(static):
            raise CaptureError(f"this graphed function takes {len(static)} inputs, got {len(inputs)}")
        for s, x in zip(static, inputs):
            if tuple(getattr(x, "shape", ())) != s.shape and not isinstance(x, (int, float)):
                raise ShapeError(f"graphed input of shape {getattr(x, 'shape', None)} does not match the "
                                 f"captured shape {s.shape}")
            s.copy_(x)
        out = graph.replay()
        for k in mutated:
            if isinstance(inputs[k], Tensor):
                inputs[k].copy_(static[k])
        if not clone_outputs:
            return out
        copies = _map_tensors(out, lambda t: t.clone())
        dev.sync()   # materialize the copies (inside an outer capture: recorded there)
        return copies

    call.graph = graph
    call.static_inputs = tuple(static)
    return call
