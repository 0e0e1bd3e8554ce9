"""Conformance against torch's operator database: ``python -m lazyfuse.conformance [--ops a,b] [--samples N]``.

(``--errors`` runs the OpInfos' ``error_inputs`` instead, the inputs torch refuses: ``run_errors``.)

Every OpInfo of ``torch.testing._internal.common_methods_invocations.op_db`` is run on its
``sample_inputs`` (cpu) in float32, float16, int64 and bool (those the op supports), through
lazyfuse's own name for it: ``Tensor.<name>`` where torch has a method, else ``lf.<name>``,
``lf.nn.functional.<name>``; a ``linalg.``/``special.``/``fft.``/``signal.`` entry through
``lf.extern``. Inputs are lazyfuse tensors; the first tensor of the first five samples of each
dtype is, in turn, pending (the product of a recorded op), a strided view (a transpose of a
transpose), a slice (an offset, a step of 2), and those two views of a pending result
(``MODES``); the rest are realized. Each result is compared with torch eager's on the same sample
(``torch.testing.assert_close``, NaNs equal; float16 within 1e-3, float32 within 1e-5 absolute
and 1.3e-5 relative — torch's own float32 tolerance is 1.3e-6, and composites such as
``log2`` = log / ln 2 differ from torch's kernels by a rounding step).

``--frontend`` runs torch's own op (the OpInfo's ``op``: ``torch.add``, its wrapper lambda) on torch
tensors backed by lazyfuse (``lf.lazy``, the torch frontend), as a torch program runs unchanged;
the layouts are made by torch's own view ops on them.

``--reference`` runs OpInfo's ``reference_inputs`` instead (a larger and harsher set: extremal
values, NaN/inf, broadcasting, type promotion, Python-number operands, empty and 0-d tensors),
in bfloat16 too. Either way torch runs on copies of the sample (an op that writes an input must
not change what lazyfuse is given); a result that differs from torch's is still no mismatch
where it is at least as close as torch's to the op run in float64 (torch's float16 CPU kernels
are themselves off at times), nor where torch does not reproduce its own result on a copy.

Per entry the outcome is one of ``native`` / ``extern`` (every sample ran and matched; native:
no extern launch and no eager run), ``refused`` (every sample raised a LazyfuseError — the
message says why), ``mismatch`` (a value or dtype or shape differs from torch's), ``error``
(another exception: a bug), ``skipped`` (torch itself raised on every sample, or no dtype
lazyfuse has). The summary counts them.
"""
from __future__ import annotations

import argparse
import collections
import functools
import sys
import warnings

import torch

from .ir.dtypes import ALL

HELD = tuple(d.torch for d in ALL)   # the torch dtypes lazyfuse holds
DTYPES = (torch.float32, torch.float16, torch.int64, torch.bool, torch.uint8, torch.int8, torch.int16)
REFERENCE_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool)
TOLERANCE = {torch.float16: (1e-3, 1e-3), torch.bfloat16: (1.6e-2, 1e-2), torch.float32: (1.3e-5, 1e-5),
             torch.float64: (1e-7, 1e-7)}
# lf.linalg, lf.special, lf.fft, lf.signal.windows mirror torch's
MIRRORED_NAMESPACES = ("linalg", "special", "fft", "signal.windows")
NAMESPACED = ("linalg.", "special.", "fft.", "signal.", "masked.", "sparse.", "_refs.", "torch.")
# entries whose values are random draws: torch's and lazyfuse's generators differ, so only the
# result's dtype and shape are compared (and that the draw ran)
RANDOM = {"bernoulli", "multinomial", "normal", "uniform", "cauchy", "exponential", "geometric", "log_normal",
          "rand_like", "randn_like", "randint_like", "randint", "randn", "rand", "randperm", "poisson",
          "nn.functional.dropout", "nn.functional.dropout2d", "nn.functional.dropout3d", "nn.functional.alpha_dropout",
          "nn.functional.feature_alpha_dropout", "nn.functional.rrelu",
          # uninitialised memory: no values to compare either
          "empty", "empty_like", "new_empty", "new_empty_strided", "empty_permuted", "empty_strided"}


class TorchFailed(Exception):
    """torch eager itself refused the sample: nothing to compare."""


def op_database():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torch.testing._internal.common_methods_invocations import op_db
    return op_db


def _map_tensors(value, fn):
    """``value`` with ``fn`` applied to its tensors (nested in lists/tuples/dicts)."""
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, (list, tuple)):
        items = [_map_tensors(v, fn) for v in value]
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, dict):
        return {k: _map_tensors(v, fn) for k, v in value.items()}
    return value


# the layouts a sample's first tensor is given in, by the sample's index (the rest realized): a
# pending input (the product of a recorded op), a realized transpose of a transposed copy, a slice
# with an offset and a step, and those two views taken of a pending result; the views are where a
# fusion engine's index arithmetic goes wrong
MODES = ("pending", "strided", "sliced", "pending-strided", "pending-sliced")


def mode_of(k):
    return MODES[k] if k < len(MODES) else "realized"


def _layout(t, mode):
    """(a contiguous buffer, the view of it that holds ``t``'s values) for ``mode``'s layout, or
    None where the mode keeps ``t`` as it is (no view of that rank). The slice takes every second
    element of the last dim from index 1; the elements between hold NaN (a sentinel for the
    other dtypes), so an op that reads them gives a value torch's does not."""
    if mode.endswith("strided") and t.ndim >= 2:
        return t.transpose(0, 1).contiguous(), lambda b: b.transpose(0, 1)
    if mode.endswith("sliced") and t.ndim >= 1:
        gap = float("nan") if t.is_floating_point() else True if t.dtype == torch.bool else 123   # (fits int8)
        base = torch.full((*t.shape[:-1], 2 * t.shape[-1] + 1), gap, dtype=t.dtype)
        base[..., 1::2] = t
        return base, lambda b: b[..., 1::2]
    return None


def _to_lazy(value, dev, mode, counter, frontend=False):
    """torch tensors (nested in lists/tuples/dicts) as lazyfuse tensors (``frontend``: torch
    tensors backed by lazyfuse, ``lf.lazy``'s); ``mode`` (``MODES``) lays out the first one."""
    import lazyfuse as lf
    held = functools.partial(lf.lazy, device=dev) if frontend else functools.partial(lf.tensor, device=dev)

    def lazy(value):
        if value.layout != torch.strided:
            raise lf.UnsupportedOpError(f"an input of layout {value.layout} (lazyfuse tensors are dense and strided)")
        if value.is_complex() or value.dtype not in HELD:
            raise lf.UnsupportedOpError(f"an input of dtype {value.dtype} (lazyfuse has no such dtype)")
        counter[0] += 1
        laid_out = _layout(value.detach(), mode) if counter[0] == 1 else None
        if laid_out is not None:
            base = held(laid_out[0])
            return laid_out[1](base.clone() if mode.startswith("pending") else base)
        t = held(value.detach())
        return t.clone() if counter[0] == 1 and mode.startswith("pending") else t
    return _map_tensors(value, lazy)


def _to_torch(value):
    import lazyfuse as lf
    if isinstance(value, lf.Tensor):
        return value.torch()
    if type(value) is lf.torch_frontend.LazyTensor:
        return lf.eager(value).detach()
    if isinstance(value, (list, tuple)):
        return type(value)(_to_torch(v) for v in value) if not hasattr(value, "_fields") else \
            tuple(_to_torch(v) for v in value)
    return value


def lazy_callable(op):
    """(how, callable(input, *args, **kwargs)) for OpInfo ``op`` on lazyfuse."""
    import lazyfuse as lf
    name = op.name
    if getattr(op.op, "__name__", "") == "<lambda>" and not name.startswith(NAMESPACED) and \
            not (name.startswith("_") and not name.startswith("__")) and \
            (name in RANDOM or "wrapper_set_seed" not in op.op.__code__.co_names):
        # (a lambda seeding torch's generator for an op not compared by shape alone — dropout in
        # sdpa, fractional pooling — needs torch's random stream: it stays torch's, as an extern)
        return "lambda", _on_lazyfuse(op.op)
    namespace, _, short = name.rpartition(".")
    if namespace in MIRRORED_NAMESPACES and \
            getattr(functools.reduce(getattr, namespace.split("."), torch), short, None) is op.op:
        # (lf.linalg.vector_norm, lf.special.ndtr...: lazyfuse's own where it has one, else its extern)
        home = functools.reduce(getattr, namespace.split("."), lf)
        return "function", lambda x, *a, **k: getattr(home, short)(x, *a, **k)
    if name.startswith(NAMESPACED) or getattr(op.op, "__name__", "") == "<lambda>" or \
            name.startswith("_") and not name.startswith("__") or \
            op.method_variant is None and not hasattr(torch, name) and not name.startswith("nn.functional."):
        # (an OpInfo whose op is a wrapper lambda reorders or fixes arguments, or an aten op torch's
        # namespace does not export: run the OpInfo's op itself)
        fn = op.op
        return "extern", lambda x, *a, **k: lf.extern(fn, x, *a, **k)
    if name.startswith("nn.functional."):
        short = name[len("nn.functional."):]
        return "functional", lambda x, *a, **k: getattr(lf.nn.functional, short)(x, *a, **k)
    if op.method_variant is not None and not name.startswith("__r"):
        # (a reference input may be a Python number, as in ``torch.add(2.5, t)``, and an error input
        # may pass ``out=``, which only torch's function form takes, as in ``torch.amax(t, 0, out=o)``:
        # then the function)
        return "method", lambda x, *a, **k: getattr(x, name)(*a, **k) if isinstance(x, lf.Tensor) and \
            "out" not in k else getattr(lf, name)(x, *a, **k)
    if name.startswith("__r"):
        # (the OpInfo calls torch's unbound method, and a reference input passes a Python number as
        # its self, as in ``torch.Tensor.__rmod__(5.1, t)``, which is ``t % 5.1``: so lazyfuse's too)
        return "method", lambda x, *a, **k: getattr(lf.Tensor, name)(x, *a, **k)
    return "function", lambda x, *a, **k: getattr(lf, name)(x, *a, **k)


def _on_lazyfuse(fn):
    """OpInfo's wrapper lambda (``lambda x, shape: x.view(shape)``, ``lambda self, condition, other:
    torch.where(condition, self, other)``) run on lazyfuse: its own code with ``torch`` read as
    ``lazyfuse``, so the calls it makes are lazyfuse's; where lazyfuse has no such name
    (AttributeError) or refuses the op outright (UnsupportedOpError: ``resize_``), the lambda
    itself as an extern."""
    import types
    import lazyfuse as lf
    ours = types.FunctionType(fn.__code__, {**fn.__globals__, "torch": lf}, fn.__name__, fn.__defaults__,
                              fn.__closure__)

    def call(x, *a, **k):
        try:
            return ours(x, *a, **k)
        except (AttributeError, lf.UnsupportedOpError):
            return lf.extern(fn, x, *a, **k)
    return call


def _compare(got, want, dtype, exact=False):
    if isinstance(want, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            raise AssertionError(f"expected a tensor, got {type(got).__name__}")
        if got.dtype != want.dtype or tuple(got.shape) != tuple(want.shape):
            raise AssertionError(f"dtype/shape {got.dtype}{tuple(got.shape)} != torch's {want.dtype}{tuple(want.shape)}")
        rtol, atol = (0, 0) if exact else TOLERANCE.get(want.dtype, (0, 0))
        torch.testing.assert_close(got, want, rtol=rtol, atol=atol, equal_nan=True, check_device=False)
    elif isinstance(want, (list, tuple)):
        if not isinstance(got, (list, tuple)) or len(got) != len(want):
            raise AssertionError(f"expected a sequence of {len(want)}, got {type(got).__name__}")
        for g, w in zip(got, want):
            _compare(g, w, dtype, exact)
    elif isinstance(want, (bool, int, float)):
        if isinstance(got, torch.Tensor):
            got = got.item()
        if not (got == want or (got != got and want != want)):
            raise AssertionError(f"{got!r} != torch's {want!r}")


def _shape_only(value):
    """``value`` with each tensor replaced by zeros of its dtype and shape (a random op's result:
    only those are compared)."""
    return _map_tensors(value, lambda t: torch.zeros(t.shape, dtype=t.dtype))


def _laid_out_like(value, mode, counter):
    """The torch inputs of a sample as ``_to_lazy`` lays them out for ``mode``."""
    def lay_out(t):
        counter[0] += 1
        laid_out = _layout(t, mode) if counter[0] == 1 else None
        return laid_out[1](laid_out[0]) if laid_out is not None else t
    return _map_tensors(value, lay_out)


def _on_layout(op, sample, mode):
    """torch's result on the layout ``mode`` gives lazyfuse (raises what torch raises)."""
    counter = [0]
    return op(_laid_out_like(sample.input, mode, counter), *_laid_out_like(list(sample.args), mode, counter),
              **_laid_out_like(dict(sample.kwargs), mode, counter))


def _matches_torch_on_layout(op, sample, got, dtype, mode) -> bool:
    """Whether ``got`` matches torch run on the layout lazyfuse was given: some of
    torch's CPU kernels round differently by layout (float16 batch norm on a transposed input is
    1 ulp off its contiguous result), and an extern hands torch the layout it got."""
    try:
        _compare(got, _on_layout(op, sample, mode), dtype)
    except Exception:  # noqa: BLE001 (torch refuses the layout, or it differs all the same)
        return False
    return True


def _torch_refuses_layout(op, sample, mode) -> bool:
    """Whether torch too refuses the sample on the layout lazyfuse was given (``view`` of a
    transpose: no view holds it)."""
    if mode not in MODES[1:]:
        return False
    try:
        _on_layout(op, sample, mode)
    except Exception:  # noqa: BLE001
        return True
    return False


def _widened(value):
    return _map_tensors(value, lambda t: t.double() if t.is_floating_point() else t)


def _copied(value):
    return _map_tensors(value, lambda t: t.clone())


def _misaligned(value):
    """Copies of ``value``'s tensors that start one element into their buffer: another alignment
    than a fresh allocation's."""
    def misaligned(t):
        copy = torch.empty(t.numel() + 1, dtype=t.dtype)[1:].view(t.shape)
        return copy.copy_(t)
    return _map_tensors(value, misaligned)


def _run_torch(op, sample, copy=_copied):
    """(torch's result, its input) on copies of the sample's tensors: an op that writes an input
    (``embedding_bag``'s ``max_norm`` renormalises its weight rows) must not change the sample
    lazyfuse is given."""
    x = copy(sample.input)
    try:
        want = op(x, *copy(list(sample.args)), **copy(dict(sample.kwargs)))
    except Exception as e:  # noqa: BLE001
        raise TorchFailed(str(e)) from None
    if want is NotImplemented:
        # (torch's C-level ``Tensor.__rsub__`` declines a Python number as its self, which a reference
        # input passes, where its Python-level ``__rmod__``/``__rpow__`` compute: nothing to compare)
        raise TorchFailed("torch returned NotImplemented")
    return want, x


def _reproducible(op, sample, want) -> bool:
    """Whether torch gives ``want`` again on fresh copies of the inputs and on misaligned ones: its
    half-precision CPU ``grid_sample`` depends on the buffers' alignment (a fresh copy, as aligned
    as the first, agrees with it, while lazyfuse's buffers may lie otherwise), and such a result is
    nothing to compare with."""
    for copy in (_copied, _misaligned):
        again, _ = _run_torch(op, sample, copy)
        try:
            _compare(again, want, None, exact=True)
        except AssertionError:
            return False
    return True


def _no_worse_than_torch(op, sample, got, want) -> bool:
    """Whether lazyfuse's floating result ``got``, where it differs from torch's ``want``, is at
    least as close as torch's to the op run in float64 on the same inputs: torch's low-precision
    CPU kernels are themselves off by more than the tolerance at times (float16 ``floor_divide``
    of a large quotient rounds the quotient before the floor), and lazyfuse's answer is then the
    better one, not a mismatch."""
    if not (isinstance(want, torch.Tensor) and isinstance(got, torch.Tensor) and want.is_floating_point()
            and got.dtype == want.dtype and got.shape == want.shape):
        return False
    try:
        exact = op(_widened(sample.input), *_widened(list(sample.args)), **_widened(dict(sample.kwargs)))
    except Exception:  # noqa: BLE001 (no float64 kernel: nothing to judge by)
        return False
    if not isinstance(exact, torch.Tensor) or exact.shape != want.shape:
        return False
    exact, got64, want64 = exact.double(), got.double(), want.double()
    rtol, atol = TOLERANCE[want.dtype]
    same = (got64 == want64) | (got64.isnan() & want64.isnan())
    bound = torch.maximum((want64 - exact).abs(), atol + rtol * exact.abs())
    return bool((same | ((got64 - exact).abs() <= bound)).all())


def run_sample(op, fn, sample, dtype, dev, mode, frontend=False):
    """'ok-native' | 'ok-extern' | 'refused: why' | 'mismatch: why' | 'error: why' (TorchFailed: skip).
    ``frontend``: the inputs are torch tensors backed by lazyfuse (``lf.lazy``), ``fn`` torch's own op."""
    import importlib
    import lazyfuse as lf
    ext = importlib.import_module("lazyfuse.extern")   # (``lazyfuse.extern`` the attribute is the function)
    want, torch_input = _run_torch(op, sample)
    if isinstance(want, torch.Tensor) and (want.is_complex() or want.layout != torch.strided):
        return f"refused: a {'complex' if want.is_complex() else str(want.layout)} result"
    counter = [0]
    try:
        x = _to_lazy(sample.input, dev, mode, counter, frontend)
        args = _to_lazy(list(sample.args), dev, mode, counter, frontend)
        kwargs = _to_lazy(dict(sample.kwargs), dev, mode, counter, frontend)
    except lf.LazyfuseError as e:
        return f"refused: {e}"
    except Exception as e:  # noqa: BLE001 (an input lazyfuse cannot even hold)
        return f"refused: input: {type(e).__name__}: {str(e)[:120]}"
    before, eager_before = lf.stats(dev).extern_launches, _eager_runs(ext)
    try:
        out = fn(x, *args, **kwargs)
        got = _to_torch(out)
    except lf.LazyfuseError as e:
        if _torch_refuses_layout(op, sample, mode):
            raise TorchFailed("torch refuses the layout too") from None
        return f"refused: {type(e).__name__}: {str(e)[:160]}"
    except Exception as e:  # noqa: BLE001
        return f"error: {type(e).__name__}: {str(e)[:160]}"
    if op.name in RANDOM:
        got, want = _shape_only(got), _shape_only(want)
    try:
        _compare(got, want, dtype)
        if op.name.endswith("_") and isinstance(x, (lf.Tensor, lf.torch_frontend.LazyTensor)):   # in place: the input too
            _compare(_to_torch(x), torch_input, dtype)
    except AssertionError as e:
        if not (mode.endswith(("strided", "sliced")) and not op.name.endswith("_")
                and _matches_torch_on_layout(op, sample, got, dtype, mode)
                or not op.name.endswith("_") and _no_worse_than_torch(op, sample, got, want)):
            if not _reproducible(op, sample, want):
                raise TorchFailed("torch's result differs between two runs on the same values")
            return f"mismatch: {str(e).splitlines()[0][:200]}"
    native = lf.stats(dev).extern_launches == before and _eager_runs(ext) == eager_before
    return "ok-native" if native else "ok-extern"


def _eager_runs(ext) -> int:
    """Ops run eagerly so far: lazyfuse's eager externs and the torch frontend's fallback (drains)."""
    import lazyfuse as lf
    return ext.eager_runs + sum(lf.torch_frontend.counters.fallback.values())


def sample_inputs(op, dtype):
    return op.sample_inputs("cpu", dtype, requires_grad=False)


def reference_inputs(op, dtype, max_numel=None):
    """OpInfo's harsher set (extremal values, NaN/inf, broadcasting, type promotion, empty and 0-d
    operands...); an entry without its own falls back to its sample inputs, as in torch.
    ``max_numel`` leaves out the samples with a larger tensor (the CI subset's budget: the
    extremal values come in tensors of ~100 elements, the large ones test only vector paths)."""
    samples = op.reference_inputs("cpu", dtype, requires_grad=False)
    if max_numel is None:
        return samples
    return (s for s in samples if _largest_numel((s.input, s.args, s.kwargs)) <= max_numel)


def _largest_numel(value) -> int:
    sizes = []
    _map_tensors(value, lambda t: sizes.append(t.numel()))
    return max(sizes, default=0)


def run(names=None, samples_per_dtype=None, dtypes=DTYPES, device="cpu", stream=sys.stdout, verbose=True,
        span=(0, 1 << 30), inputs=sample_inputs, frontend=False):
    """Run the conformance check; returns {entry name: (outcome, detail)} and prints per-entry lines
    and a summary to ``stream``. ``inputs(op, dtype)`` gives an entry's samples (``sample_inputs``
    or ``reference_inputs``). ``frontend``: torch's own op (the OpInfo's ``op``) on torch tensors
    backed by lazyfuse (``lf.lazy``), as a torch program runs over the engine."""
    import lazyfuse as lf
    dev = lf.device(device)
    results = {}
    for index, op in enumerate(op_database()):
        if not (span[0] <= index < span[1]):
            continue
        label = op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")
        if names is not None and op.name not in names and label not in names:
            continue
        fn = op.op if frontend else lazy_callable(op)[1]
        outcomes = collections.Counter()
        first = {}
        for dtype in dtypes:
            if dtype not in op.supported_dtypes("cpu"):
                continue
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    samples = list(inputs(op, dtype))
            except Exception as e:  # noqa: BLE001
                first.setdefault("skip", f"sample_inputs failed: {e}")
                continue
            if samples_per_dtype is not None:
                samples = samples[:samples_per_dtype]
            for k, sample in enumerate(samples):
                mode = mode_of(k)
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        outcome = run_sample(op, fn, sample, dtype, dev, mode, frontend)
                except TorchFailed:
                    continue
                kind = outcome.split(":")[0]
                outcomes[kind] += 1
                first.setdefault(kind, f"{dtype}: {outcome}")
        if outcomes["mismatch"]:
            result = ("mismatch", first["mismatch"])
        elif outcomes["error"]:
            result = ("error", first["error"])
        elif outcomes["ok-native"] or outcomes["ok-extern"]:
            result = ("extern" if outcomes["ok-extern"] else "native",
                      f"{outcomes['ok-native'] + outcomes['ok-extern']} samples"
                      + (f", {outcomes['refused']} refused" if outcomes["refused"] else ""))
        elif outcomes["refused"]:
            result = ("refused", first["refused"])
        else:
            result = ("skipped", first.get("skip", "torch refused every sample"))
        results[label] = result
        if verbose:
            print(f"{label:50s} {result[0]:9s} {result[1]}", file=stream, flush=True)
    summary = collections.Counter(r[0] for r in results.values())
    print(f"\n{len(results)} OpInfo entries: " + ", ".join(f"{summary[k]} {k}" for k in
          ("native", "extern", "refused", "mismatch", "error", "skipped")) +
          f"; {summary['native'] + summary['extern']} run with 0 mismatches", file=stream)
    return results


# the outcomes of an error input, worst first: the engine broken after it (or a timeout), a value
# returned where torch raises, a bare Python/torch error escaping lazyfuse, a LazyfuseError a torch
# user's ``except`` for the ErrorInput's type misses, a Python number taken where torch's signature
# wants a tensor (torch's value on it as a 0-d tensor: an extension, not a wrong value), and a
# refusal of the expected type
ERROR_OUTCOMES = ("crash", "silent", "leaked", "wrong-type", "lenient", "refused")
ERROR_TIMEOUT_S = 120
_CANARY = [0.5, -1.0, 2.0, 4.0]


class TorchAccepts(Exception):
    """torch itself does not raise the ErrorInput's exception (this build, this device): nothing to check."""


def _engine_broken(dev, lazy_inputs, torch_inputs):
    """Why the engine is unusable after an error (a fresh op and drain fail, or a live input lost
    its value), else None: docs/semantics.md, Errors."""
    import lazyfuse as lf
    try:
        got = (lf.tensor(_CANARY, device=dev) * 2).sum().item()
        if got != 2 * sum(_CANARY):
            return f"a fresh op after the error computes {got!r}"
        for lazy, want in zip(lazy_inputs, torch_inputs):
            got, want = _to_torch(lazy).reshape(-1), want.reshape(-1)   # (torch compares at most 64 dims)
            same = got.dtype == want.dtype and got.shape == want.shape and bool(
                ((got == want) | (got != got) & (want != want)).all())   # (NaN equals NaN)
            if not same:
                return "a live input lost its value"
    except Exception as e:  # noqa: BLE001
        return f"a fresh op after the error raises {type(e).__name__}: {str(e)[:120]}"
    return None


def _tensors_in(value):
    """The torch or lazyfuse tensors of ``value`` (nested in lists, tuples and dicts)."""
    import lazyfuse as lf
    if isinstance(value, (torch.Tensor, lf.Tensor)):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors_in(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors_in(v)]
    return []


def _raised_inside_lazyfuse(e) -> bool:
    """Whether ``e`` came from lazyfuse's own code (or a torch call it made), not from Python binding
    the harness's call to lazyfuse's public function (a TypeError for an argument it does not take)."""
    import os
    import lazyfuse as lf
    root = os.path.dirname(lf.__file__)
    here = os.path.abspath(__file__)
    tb, frames = e.__traceback__, []
    while tb is not None:
        frames.append(os.path.abspath(tb.tb_frame.f_code.co_filename))
        tb = tb.tb_next
    return any(f.startswith(root) and f != here for f in frames)


def _classify_raise(e, expected, frontend=False) -> str:
    import lazyfuse as lf
    if isinstance(e, (RecursionError, MemoryError, SystemError)):
        return f"crash: {type(e).__name__}: {str(e)[:160]}"
    if frontend and not isinstance(e, lf.LazyfuseError):
        # (torch code over the frontend: torch's own checks raise, inside its decompositions too,
        # and the type is what a torch user's ``except`` sees)
        return f"refused: {type(e).__name__}: {str(e)[:160]}" if isinstance(e, expected) else \
            f"wrong-type: {type(e).__name__} is no {_type_name(expected)}: {str(e)[:160]}"
    if isinstance(e, lf.LazyfuseError):
        if isinstance(e, expected):
            return f"refused: {type(e).__name__}: {str(e)[:160]}"
        return f"wrong-type: {type(e).__name__} is no {_type_name(expected)}: {str(e)[:160]}"
    if _raised_inside_lazyfuse(e):
        return f"leaked: {type(e).__name__}: {str(e)[:160]}"
    # Python refused the harness's call itself (an argument lazyfuse's signature lacks): torch's own
    # Python bindings raise the same TypeError for theirs
    if isinstance(e, expected):
        return f"refused: {type(e).__name__} (signature): {str(e)[:160]}"
    return f"wrong-type: {type(e).__name__} (signature) is no {_type_name(expected)}: {str(e)[:160]}"


def _type_name(expected):
    return "/".join(t.__name__ for t in expected) if isinstance(expected, tuple) else expected.__name__


def _holdable(value) -> bool:
    """Whether lazyfuse can hold every tensor of an input (strided, cpu, a dtype it has)."""
    return all(t.layout == torch.strided and t.device.type == "cpu" and t.dtype in HELD for t in _tensors_in(value))


def _aliased(tensors) -> bool:
    """Whether two of ``tensors`` share memory (an ``out=`` onto the input), or one overlaps itself
    (an expanded ``out=``): lazyfuse is handed dense copies, so the overlap torch refuses is not
    there to refuse."""
    starts = [t.untyped_storage().data_ptr() for t in tensors if t.numel()]
    overlaps = any(s == 0 and n > 1 for t in tensors for n, s in zip(t.shape, t.stride()))
    # (one tensor passed twice, as cat's ``out=`` of its empty first piece: no memory to compare)
    return overlaps or len(starts) != len(set(starts)) or len({id(t) for t in tensors}) != len(tensors)


def _number_for_tensor(error_input) -> bool:
    """Whether ``error_input`` is one of OpInfo's generic "this binary op takes no Python number
    here" inputs (any Exception, no regex, a number where the signature wants a tensor)."""
    sample = error_input.sample_input
    return error_input.error_type is Exception and error_input.error_regex == "" and any(
        isinstance(v, (int, float, bool)) for v in (sample.input, *sample.args))


def _matches_torch_on_0d(op, sample, got) -> bool:
    """Whether ``got`` is torch's result with the sample's Python numbers as 0-d tensors."""
    def as_0d(v):
        return torch.tensor(v) if isinstance(v, (int, float, bool)) else v
    try:
        want = op(as_0d(sample.input), *[as_0d(a) for a in sample.args], **sample.kwargs)
        torch.testing.assert_close(torch.as_tensor(got), want, check_dtype=False, equal_nan=True)
    except Exception:  # noqa: BLE001 (torch refuses even that, or the values differ)
        return False
    return True


def run_error_input(op, fn, error_input, dev, mode, frontend=False):
    """One OpInfo ErrorInput through lazyfuse (``frontend``: torch's op on ``lf.lazy`` tensors): an
    ``ERROR_OUTCOMES`` kind and why, as 'kind: why'.
    Raises TorchAccepts where torch does not raise the expected error, UnsupportedOpError where
    lazyfuse cannot hold the input (complex, a dtype it lacks)."""
    import signal
    import lazyfuse as lf
    sample, expected = error_input.sample_input, error_input.error_type
    if not _holdable([sample.input, list(sample.args), dict(sample.kwargs)]):
        raise lf.UnsupportedOpError("an input lazyfuse cannot hold (complex, sparse, a dtype it lacks)")
    inputs = _tensors_in([sample.input, list(sample.args), dict(sample.kwargs)])
    if _aliased(inputs):
        raise lf.UnsupportedOpError("inputs that share memory (the harness copies each one densely)")
    originals = [t.detach().clone() for t in inputs]
    counter = [0]   # (lazyfuse's copies before torch runs: an in-place op may write before it raises)
    x = _to_lazy(sample.input, dev, mode, counter, frontend)
    args = _to_lazy(list(sample.args), dev, mode, counter, frontend)
    kwargs = _to_lazy(dict(sample.kwargs), dev, mode, counter, frontend)
    try:
        op(sample.input, *sample.args, **sample.kwargs)
    except expected:
        pass
    except Exception as e:  # noqa: BLE001
        raise TorchAccepts(f"torch raises {type(e).__name__}, not {_type_name(expected)}") from None
    else:
        raise TorchAccepts(f"torch returns a value, no {_type_name(expected)}")

    def timed_out(*_):
        raise TimeoutError(f"no answer in {ERROR_TIMEOUT_S} s")

    previous = signal.signal(signal.SIGALRM, timed_out)
    signal.alarm(ERROR_TIMEOUT_S)
    try:
        out = fn(x, *args, **kwargs)
        got = _to_torch(out)   # (the drain: a refusal at the launch counts as one)
        if _number_for_tensor(error_input) and _matches_torch_on_0d(op, sample, got):
            outcome = "lenient: takes a Python number where torch wants a tensor; torch's value on it as a 0-d tensor"
        else:
            outcome = f"silent: returned {_describe(got)} where torch raises {_type_name(expected)}"
    except TimeoutError as e:
        outcome = f"crash: {e}"
    except Exception as e:  # noqa: BLE001
        outcome = _classify_raise(e, expected, frontend)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    broken = _engine_broken(dev, _tensors_in([x, args, kwargs]), originals)
    return f"crash: {broken} ({outcome})" if broken else outcome


def _describe(value):
    if isinstance(value, torch.Tensor):
        return f"a {value.dtype} tensor of shape {tuple(value.shape)}"
    return f"a {type(value).__name__}"


def _function_form(name):
    import lazyfuse as lf
    return lambda x, *a, **k: getattr(lf, name)(x, *a, **k)


def run_errors(names=None, device="cpu", stream=sys.stdout, verbose=True, span=(0, 1 << 30), frontend=False):
    """Run every OpInfo's ``error_inputs`` (the inputs torch refuses, with the exception it raises)
    through lazyfuse (``frontend``: torch's op on ``lf.lazy`` tensors); returns {entry name: (outcome, detail)} (an ``ERROR_OUTCOMES`` kind, the worst
    over its inputs, or ``skipped``) and prints per-entry lines and a summary to ``stream``."""
    import lazyfuse as lf
    dev = lf.device(device)
    results = {}
    for index, op in enumerate(op_database()):
        if not (span[0] <= index < span[1]) or op.error_inputs_func is None:
            continue
        label = op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")
        if names is not None and op.name not in names and label not in names:
            continue
        how, method_fn = ("frontend", op.op) if frontend else lazy_callable(op)
        outcomes, first, skip = collections.Counter(), {}, None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                error_inputs = list(op.error_inputs("cpu"))
        except Exception as e:  # noqa: BLE001
            error_inputs, skip = [], f"error_inputs failed: {e}"
        for k, error_input in enumerate(error_inputs):
            fn = method_fn
            if how == "extern" and not _tensors_in([error_input.sample_input.input, list(error_input.sample_input.args),
                                                    dict(error_input.sample_input.kwargs)]):
                # (a namespaced factory: lazyfuse has no name for it, and lf.extern needs a tensor)
                skip = skip or "no tensor argument for lf.extern (lazyfuse has no name for this factory)"
                continue
            if how == "method" and not isinstance(error_input.sample_input.input, torch.Tensor):
                # a Python number's method is Python's, not lazyfuse's: the function form, where there is one
                if op.name.startswith("__"):
                    skip = skip or "a Python number's own dunder method"
                    continue
                fn = _function_form(op.name)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    outcome = run_error_input(op, fn, error_input, dev, "pending" if k == 0 else "realized", frontend)
            except (TorchAccepts, lf.UnsupportedOpError) as e:
                skip = skip or str(e)
                continue
            kind = outcome.split(":")[0]
            outcomes[kind] += 1
            first.setdefault(kind, f"#{k}: {outcome}")
        worst = next((kind for kind in ERROR_OUTCOMES if outcomes[kind]), None)
        if worst is None:
            result = ("skipped", skip or "no error inputs")
        elif worst == "refused":
            result = ("refused", f"{outcomes['refused']} inputs")
        else:
            result = (worst, first[worst] + "".join(f"; {outcomes[kind]} {kind}" for kind in ERROR_OUTCOMES
                                                     if outcomes[kind]))
        results[label] = result
        if verbose:
            print(f"{label:50s} {result[0]:10s} {result[1]}", file=stream, flush=True)
    summary = collections.Counter(r[0] for r in results.values())
    print(f"\n{len(results)} OpInfo entries with error inputs: " + ", ".join(
        f"{summary[k]} {k}" for k in ERROR_OUTCOMES[::-1] + ("skipped",)), file=stream)
    return results


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m lazyfuse.conformance", description=__doc__.splitlines()[0])
    p.add_argument("--ops", help="comma-separated OpInfo names (default: all)")
    p.add_argument("--samples", type=int, default=None, help="samples per dtype (default: all)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--span", default="0:100000", help="the op_db entries to run, by index (start:stop)")
    p.add_argument("--errors", action="store_true",
                   help="run the OpInfos' error_inputs (what torch refuses) instead of their samples")
    p.add_argument("--reference", action="store_true",
                   help="run OpInfo's reference_inputs (also in bfloat16) instead of its sample_inputs")
    p.add_argument("--frontend", action="store_true",
                   help="run torch's own ops on torch tensors backed by lazyfuse (lf.lazy: the torch frontend)")
    a = p.parse_args(argv)
    start, stop = (int(v) for v in a.span.split(":"))
    if a.errors:
        results = run_errors(set(a.ops.split(",")) if a.ops else None, device=a.device, span=(start, stop),
                             frontend=a.frontend)
        return 1 if any(r[0] in ("crash", "silent", "leaked", "wrong-type") for r in results.values()) else 0
    mode = dict(inputs=reference_inputs, dtypes=REFERENCE_DTYPES) if a.reference else {}
    results = run(set(a.ops.split(",")) if a.ops else None, a.samples, device=a.device, span=(start, stop),
                  frontend=a.frontend, **mode)
    return 1 if any(r[0] in ("mismatch", "error") for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
