"""Bucketed captures: one graph per size bucket, for inputs whose size along some dims changes.

A graph is for one set of shapes. ``lf.graphed(fn, *example_inputs, buckets={0: [1, 2, 4, 8]})``
keeps one graph per bucket instead (as vLLM and SGLang capture a list of batch sizes): a call
whose inputs have size ``n`` along a bucketed dim runs the graph of the smallest bucket
``b >= n``, captured lazily on its first use. The call copies each input into that graph's
static inputs, fills the padding rows ``n..b`` with ``pad_value`` (default 0), replays, and
slices every output back to ``n`` along the same dim, where the output has the bucket's size
there (``out_dims={input dim: output dim}`` says where outputs carry a bucketed dim instead,
``None`` for nowhere: an output of a reduction over it, or one whose dim merely has the
bucket's size). With ``with_mask=True`` the function also receives, after its inputs, a bool mask per
bucketed dim (shape ``(b,)``, True for the ``n`` real rows) to keep padding out of reductions
along that dim (a mean over the batch, say).

Past the last bucket: ``beyond="error"`` (the default) raises a ``ShapeError`` naming the size
and the buckets; ``beyond="eager"`` runs ``fn`` on the inputs as they are, without a graph. At
most ``max_graphs`` graphs are recorded (their buffers are pinned for the graph's lifetime); a
bucket past that cap runs eagerly, with a warning once per bucket. ``call.captured`` reports
which buckets hold a graph, with their input shapes, launches and replays.
"""
from __future__ import annotations

import bisect
import warnings

import numpy as np

from ..creation import tensor as to_tensor
from ..creation import zeros
from ..errors import CaptureError, ShapeError
from ..ir import dtypes as dt
from ..tensor import Tensor
from .capture import capture


def _map(out, fn):
    if isinstance(out, Tensor):
        return fn(out)
    if isinstance(out, (tuple, list)):
        return type(out)(_map(o, fn) for o in out)
    if isinstance(out, dict):
        return {k: _map(v, fn) for k, v in out.items()}
    return out


def _span(ndim: int, dim: int, start: int, stop=None) -> tuple:
    return (slice(None),) * dim + (slice(start, stop),) + (slice(None),) * (ndim - dim - 1)


class BucketedGraphed:
    """``call(*inputs)``: the outputs of ``fn(*inputs)``, by the graph of the inputs' bucket."""

    def __init__(self, fn, example_inputs, buckets: dict, *, warmup_iters: int = 3, clone_outputs: bool = True,
                 pad_value=0, with_mask: bool = False, max_graphs: int = 8, beyond: str = "error",
                 out_dims: dict | None = None):
        if not example_inputs or not all(isinstance(x, Tensor) for x in example_inputs):
            raise CaptureError("graphed(fn, *example_inputs, buckets=...): give at least one example Tensor input")
        if beyond not in ("error", "eager"):
            raise ValueError(f"graphed: beyond={beyond!r}: use 'error' (raise past the last bucket) or 'eager'")
        if not isinstance(buckets, dict) or not buckets:
            raise ShapeError("graphed: buckets must be a dict {dim: [sizes...]}, e.g. {0: [1, 2, 4, 8]}")
        ndim = example_inputs[0].ndim
        self.buckets = {}
        for d, sizes in buckets.items():
            dim = d + ndim if isinstance(d, int) and d < 0 else d
            sizes = sorted({int(s) for s in sizes})
            if not isinstance(dim, int) or not all(0 <= dim < x.ndim for x in example_inputs):
                raise ShapeError(f"graphed: bucketed dim {d} is not a dim of every example input "
                                 f"(shapes {[x.shape for x in example_inputs]})")
            if not sizes or sizes[0] < 1:
                raise ShapeError(f"graphed: buckets for dim {d} must be positive sizes, got {buckets[d]}")
            self.buckets[dim] = sizes
        self.out_dims = {d: d for d in self.buckets}
        for d, o in (out_dims or {}).items():
            dim = d + ndim if d < 0 else d
            if dim not in self.buckets:
                raise ShapeError(f"graphed: out_dims names dim {d}, which is not bucketed ({sorted(self.buckets)})")
            self.out_dims[dim] = o
        self.fn = fn
        self.examples = example_inputs
        self.device = example_inputs[0].device
        self.warmup_iters = warmup_iters
        self.clone_outputs = clone_outputs
        self.pad_value = pad_value
        self.with_mask = with_mask
        self.max_graphs = int(max_graphs)
        self.beyond = beyond
        self.captured: dict = {}   # bucket (one size per bucketed dim) -> {"graph", "input_shapes", "replays"}
        self._static: dict = {}    # bucket -> (static inputs, static masks)
        self._warned: set = set()

    def sizes_of(self, inputs) -> tuple:
        """The inputs' common size along each bucketed dim."""
        out = []
        for dim in self.buckets:
            seen = {tuple(x.shape)[dim] for x in inputs if hasattr(x, "shape")}
            if len(seen) != 1:
                raise ShapeError(f"graphed: the inputs disagree on bucketed dim {dim}: sizes {sorted(seen)}")
            out.append(seen.pop())
        return tuple(out)

    def bucket_of(self, sizes: tuple):
        """The smallest bucket holding ``sizes``, or None past the last one."""
        out = []
        for (dim, options), n in zip(self.buckets.items(), sizes):
            i = bisect.bisect_left(options, n)
            if i == len(options):
                return None
            out.append(options[i])
        return tuple(out)

    def __call__(self, *inputs):
        if len(inputs) != len(self.examples):
            raise CaptureError(f"this graphed function takes {len(self.examples)} inputs, got {len(inputs)}")
        for x, ex in zip(inputs, self.examples):
            shape = tuple(getattr(x, "shape", ()))
            fixed = [(d, s, e) for d, (s, e) in enumerate(zip(shape, ex.shape)) if d not in self.buckets and s != e]
            if len(shape) != ex.ndim or fixed:
                raise ShapeError(f"graphed input of shape {shape} does not match the example's {ex.shape} outside "
                                 f"the bucketed dims {sorted(self.buckets)}")
        sizes = self.sizes_of(inputs)
        bucket = self.bucket_of(sizes)
        if bucket is None:
            if self.beyond == "eager":
                return self._eager(inputs, sizes)
            raise ShapeError(f"graphed: size {dict(zip(self.buckets, sizes))} is past the last bucket "
                             f"{ {d: s[-1] for d, s in self.buckets.items()} }: add a bucket, or pass beyond='eager' "
                             "to run such calls without a graph")
        if bucket not in self.captured and len(self.captured) >= self.max_graphs:
            if bucket not in self._warned:
                self._warned.add(bucket)
                warnings.warn(f"lazyfuse graphed: {len(self.captured)} graphs recorded (max_graphs={self.max_graphs}); "
                              f"bucket {bucket} runs without a graph. Raise max_graphs or use fewer buckets.",
                              RuntimeWarning, stacklevel=2)
            return self._eager(inputs, sizes)
        statics, masks = self._statics(bucket)
        for s, x, in zip(statics, inputs):
            self._fill(s, x, sizes, bucket)
        for m, n in zip(masks, sizes):
            m.copy_(np.arange(m.shape[0]) < n)
        entry = self.captured.get(bucket)
        if entry is None:
            graph = capture(self.device, lambda: self.fn(*statics, *masks), warmup_iters=self.warmup_iters)
            entry = self.captured[bucket] = {"graph": graph, "input_shapes": [s.shape for s in statics], "replays": 0}
            out = graph.output
        else:
            out = entry["graph"].replay()
            entry["replays"] += 1
        out = _map(out, lambda t: self._unpad(t, sizes, bucket))
        if not self.clone_outputs:
            return out
        copies = _map(out, lambda t: t.clone())
        self.device.drain("graphed: materialize output copies")
        return copies

    def _statics(self, bucket):
        """The static inputs (and masks) of ``bucket``'s graph, made on its first use."""
        got = self._static.get(bucket)
        if got is None:
            statics = []
            for ex in self.examples:
                shape = list(ex.shape)
                for dim, b in zip(self.buckets, bucket):
                    shape[dim] = b
                statics.append(zeros(tuple(shape), dtype=ex.dtype, device=self.device))
            masks = [zeros(b, dtype=dt.bool_, device=self.device) for b in bucket] if self.with_mask else []
            got = self._static[bucket] = (statics, masks)
            self.device.drain("graphed: materialize static inputs")
        return got

    def _fill(self, static: Tensor, x, sizes, bucket) -> None:
        """``x`` into the leading rows of ``static``; ``pad_value`` in the rest, per bucketed dim."""
        if sizes == bucket:
            static.copy_(x)
            return
        region = static[tuple(slice(0, sizes[list(self.buckets).index(d)]) if d in self.buckets else slice(None)
                              for d in range(static.ndim))]
        region.copy_(x)
        for dim, n, b in zip(self.buckets, sizes, bucket):
            if n < b:
                static[_span(static.ndim, dim, n)].fill_(self.pad_value)

    def _unpad(self, t: Tensor, sizes, bucket) -> Tensor:
        for dim, n, b in zip(self.buckets, sizes, bucket):
            out = self.out_dims[dim]
            if out is not None and out < 0:
                out += t.ndim
            if n < b and out is not None and 0 <= out < t.ndim and t.shape[out] == b:
                t = t[_span(t.ndim, out, 0, n)]
        return t

    def _eager(self, inputs, sizes):
        """``fn`` on the inputs as they are (no graph; the mask, if any, all True)."""
        xs = [x if isinstance(x, Tensor) else to_tensor(x, device=self.device) for x in inputs]
        masks = [to_tensor([True] * n, device=self.device) for n in sizes] if self.with_mask else []
        return self.fn(*xs, *masks)

    def describe(self) -> str:
        """Which buckets hold a graph, what they hold, and how often each replayed."""
        lines = [f"graphed over buckets {self.buckets}: {len(self.captured)} of at most {self.max_graphs} graphs"]
        for bucket, e in sorted(self.captured.items()):
            g = e["graph"]
            lines.append(f"  bucket {bucket}: inputs {e['input_shapes']}, {g.num_launches} launches, "
                         f"{e['replays']} replays" + ("" if g.fallback_reason is None else f" (fallback: {g.fallback_reason})"))
        return "\n".join(lines)
