"""The floors under issue 19's two bars, measured (bench/torch_frontend.py prints them on its page).

1. **The captured bar's floor** (the frontend's captured step at least 1.5x faster than torch.compile's):
   the step's matrix products alone. ``lazyfuse_matmuls`` takes them from a captured step's own launch
   list: the very calls its replay makes (torch's MKL/oneDNN: the libraries torch.compile calls too) on
   the graph's own buffers; ``torch_matmuls`` records torch's own step (a ``TorchDispatchMode``: every
   mm/addmm/bmm/baddbmm with its sizes and strides, and the fused attention kernels that hold
   torch's attention matmuls) and remakes each call on copies of its operands. Timed alone, in launch
   order, the best of several runs: no replay of that step can take less than its matmuls take.
2. **The lazy bar's floor** (the lazy step no slower than torch eager): ``count_dispatches`` counts the
   entries torch makes into the frontend's ``__torch_dispatch__`` per phase of one step, and the new
   tensors they return (each needs a wrapper tensor); times the per-op cost of torch's dispatch into an
   empty Python handler and of a wrapper (bench/torch_frontend.py measures both), plus the kernels the
   step must run anyway (its captured replay), that is what any ``__torch_dispatch__`` design pays.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from math import prod

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from bench.common import cpu_info
from lazyfuse.runtime import cpu
from lazyfuse.torch_frontend import LazyTensor

aten = torch.ops.aten
TORCH_MATMULS = (aten.mm.default, aten.addmm.default, aten.bmm.default, aten.baddbmm.default)


@dataclass(frozen=True)
class Matmul:
    """One matrix product: ``batch`` products of (m, k) by (k, n); ``*_column_major``: an operand
    stored transposed (a library reads it as such, with no copy)."""
    batch: int
    m: int
    k: int
    n: int
    a_column_major: bool = False
    b_column_major: bool = False

    @property
    def flops(self) -> int:
        return 2 * self.batch * self.m * self.k * self.n

    @property
    def size(self) -> tuple:
        return self.batch, self.m, self.k, self.n

    def __str__(self):
        t = lambda flag: "^T" if flag else ""  # noqa: E731
        return (f"{self.batch}x " if self.batch > 1 else "") + \
            f"({self.m}x{self.k}){t(self.a_column_major)} @ ({self.k}x{self.n}){t(self.b_column_major)}"


def _column_major(x: torch.Tensor) -> bool:
    return x.stride(-2) == 1 and x.stride(-1) != 1


def _product(a: torch.Tensor, b: torch.Tensor, batched: bool) -> Matmul:
    """``a @ b``: batched (both (batch, r, c)), or a's leading dims rows of one product by matrix b."""
    if batched:
        return Matmul(a.shape[0], a.shape[1], a.shape[2], b.shape[2], _column_major(a), _column_major(b))
    return Matmul(1, prod(a.shape[:-1]), a.shape[-1], b.shape[-1], _column_major(a), _column_major(b))


def _launch_matmul(thunk):
    """The Matmul a captured cpu launch computes, or None: it is not one of the backend's matmul
    calls (``runtime/cpu.py``: ``torch.matmul`` into the pooled output, a ``bmm`` over merged batch
    dims, oneDNN's linear)."""
    if not isinstance(thunk, functools.partial):
        return None
    if thunk.func is torch.matmul:
        a, b = thunk.args
        return _product(a, b, batched=b.dim() > 2)
    if thunk.func is cpu._bmm:
        _, a, b, _ = thunk.args
        return _product(a, b, batched=True)
    if thunk.func is cpu._onednn_matmul:
        _, a, w, _ = thunk.args   # w: linear's (n, k) weight, b transposed
        return _product(a, w.t(), batched=False)
    return None


def lazyfuse_matmuls(graph) -> list:
    """``(Matmul, call)`` per matmul launch of a captured cpu ``graph``, in launch order: the call is
    the one its replay makes (on the graph's buffers)."""
    found = []
    for thunk in graph._hardware.host.thunks:
        mm = _launch_matmul(thunk)
        if mm is not None:
            found.append((mm, thunk))
    return found


def _copy(x):
    """A tensor with ``x``'s values, sizes and strides on a storage of its own (a view into a larger
    buffer stays one: the library reads it as it read the original)."""
    if not isinstance(x, torch.Tensor):
        return x
    storage = x.untyped_storage()
    return torch.empty(0, dtype=x.dtype).set_(storage.clone(), x.storage_offset(), x.size(), x.stride())


class _Recorder(TorchDispatchMode):
    """Every matmul (``TORCH_MATMULS``) and fused attention kernel torch dispatches, remade as a
    call on copies of its operands."""

    def __init__(self):
        super().__init__()
        self.matmuls, self.attention = [], []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in TORCH_MATMULS or "attention" in func.name():
            call = functools.partial(func, *[_copy(a) for a in args], **kwargs)
            if func in TORCH_MATMULS:
                a, b = args[-2:]   # (addmm, baddbmm: the added input first)
                self.matmuls.append((_product(a, b, batched=a.dim() == 3), call))
            else:
                self.attention.append((func.name(), call))
        return func(*args, **kwargs)


def torch_matmuls(step) -> tuple:
    """``(matmuls, attention)`` of one call of torch's own ``step``: ``(Matmul, call)`` per matmul,
    ``(op name, call)`` per fused attention kernel (torch's attention matmuls run inside those)."""
    recorder = _Recorder()
    with recorder:
        step()
    return recorder.matmuls, recorder.attention


def best_time(calls, clock, rounds: int) -> float:
    """The least seconds (of ``clock``) that running ``calls`` in order took, over ``rounds`` runs
    after one warm run: a floor, so the best run, not a typical one."""
    best = float("inf")
    for r in range(rounds + 1):
        t0 = clock()
        for call in calls:
            call()
        if r:
            best = min(best, clock() - t0)
    return best


def gflops(flops: int, seconds: float) -> float:
    return flops / seconds / 1e9


def peak_gflops_per_core():
    """Float32 FMA peak of one core at the clock ``/proc/cpuinfo`` reports, and how it is derived;
    None where this script does not know the core's FMA width (it says so rather than guess).
    AMD family 25 (Zen 3, Zen 4): two 256-bit FMA pipes per core (Zen 4 runs an AVX-512 FMA as two
    256-bit halves), so 2 x 8 float32 lanes x 2 flops = 32 flops a cycle. A VM's reported clock is
    the nominal one: boost clocks are not counted."""
    info = cpu_info()
    try:
        mhz = float(info["cpu MHz"])
    except (KeyError, ValueError):
        return None
    if info.get("vendor_id") != "AuthenticAMD" or info.get("cpu family") != "25":
        return None
    return 32 * mhz / 1e3, (f"AMD family 25: 2 FMA pipes x 8 float32 lanes x 2 flops = 32 flops/cycle x "
                            f"{mhz:.0f} MHz (cpuinfo's clock, no boost)")


def large_gemm_gflops(clock, rounds: int = 5, n: int = 1024) -> float:
    """What torch's GEMM attains on a large square float32 product (``n``^3), the best of ``rounds``:
    the measured ceiling the step's small matmuls are compared to."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    out = torch.empty(n, n)
    return gflops(2 * n ** 3, best_time([functools.partial(torch.mm, a, b, out=out)], clock, rounds))


class count_dispatches:
    """Within the block, every entry torch makes into the frontend's ``__torch_dispatch__`` (the
    Python handler all its aten ops reach) is counted in ``ops``, and each new tensor it returns (not
    one of its arguments: an in-place op hands back its input) in ``results``: the two per-op costs
    of torch's route into any Python-level tensor subclass. Counted, not timed: the wrapper costs."""

    def __init__(self):
        self.ops = self.results = 0

    def __enter__(self):
        self._saved = LazyTensor.__dict__["__torch_dispatch__"]
        handler = self._saved.__func__

        def counting(cls, func, types, args=(), kwargs=None):
            out = handler(cls, func, types, args, kwargs)
            self.ops += 1
            given = {id(t) for t in _tensors(args)}
            self.results += sum(id(t) not in given for t in _tensors(out))
            return out

        LazyTensor.__torch_dispatch__ = classmethod(counting)
        return self

    def __exit__(self, *exc):
        LazyTensor.__torch_dispatch__ = self._saved


def _tensors(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors(v)


def step_dispatches(model, x, y, opt) -> dict:
    """``{phase: (ops, results)}`` of one frontend training step (forward, backward, optimizer), as
    ``count_dispatches`` counts them."""
    counts = {}
    with count_dispatches() as c:
        _, loss = model(x, y)
        counts["forward"] = (c.ops, c.results)
        opt.zero_grad()
        loss.backward()
        counts["backward"] = (c.ops - counts["forward"][0], c.results - counts["forward"][1])
        opt.step()
        counts["optimizer"] = (c.ops - sum(v[0] for v in counts.values()),
                               c.results - sum(v[1] for v in counts.values()))
    loss.item()
    return counts


def lazy_floor_ms(counts: dict, dispatch_us: float, wrapper_us: float, kernels_ms: float) -> float:
    """The lazy step's floor in ms: each counted dispatch at ``dispatch_us``, each new result's
    wrapper at ``wrapper_us``, and the step's kernels (``kernels_ms``)."""
    ops = sum(o for o, _ in counts.values())
    results = sum(r for _, r in counts.values())
    return (ops * dispatch_us + results * wrapper_us) / 1e3 + kernels_ms
