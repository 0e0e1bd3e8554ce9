"""Conformance against torch's operator database: ``python -m lazyfuse.conformance [--ops a,b] [--samples N]``.

Every OpInfo of ``torch.testing._internal.common_methods_invocations.op_db`` is run on its
``sample_inputs`` (cpu) in float32, float16, int64 and bool (those the op supports), through
lazyfuse's own name for it: ``Tensor.<name>`` where torch has a method, else ``lf.<name>``,
``lf.nn.functional.<name>``; a ``linalg.``/``special.``/``fft.``/``signal.`` entry through
``lf.extern``. Inputs are lazyfuse tensors, pending (the product of a recorded op) for the
first sample of each dtype and strided views (a transpose of a transpose) for the second,
realized otherwise. Each result is compared with torch eager's on the same sample
(``torch.testing.assert_close``, NaNs equal; float16 within 1e-3, float32 within 1e-5 absolute
and 1.3e-5 relative — torch's own float32 tolerance is 1.3e-6, and composites such as
``log2`` = log / ln 2 differ from torch's kernels by a rounding step).

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
import sys
import warnings

import torch

DTYPES = (torch.float32, torch.float16, torch.int64, torch.bool)
REFERENCE_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool)
TOLERANCE = {torch.float16: (1e-3, 1e-3), torch.bfloat16: (1.6e-2, 1e-2), torch.float32: (1.3e-5, 1e-5),
             torch.float64: (1e-7, 1e-7)}
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


def _to_lazy(value, dev, mode, counter):
    """torch tensors (nested in lists/tuples) as lazyfuse tensors; ``mode`` makes the first
    one pending or a strided view."""
    import lazyfuse as lf
    if isinstance(value, torch.Tensor):
        if value.layout != torch.strided:
            raise lf.UnsupportedOpError(f"an input of layout {value.layout} (lazyfuse tensors are dense and strided)")
        if value.is_complex() or value.dtype not in (torch.float16, torch.bfloat16, torch.float32, torch.float64,
                                                     torch.int32, torch.int64, torch.bool):
            raise lf.UnsupportedOpError(f"an input of dtype {value.dtype} (lazyfuse has no such dtype)")
        t = lf.tensor(value.detach(), device=dev)
        counter[0] += 1
        if counter[0] == 1 and mode == "pending":
            t = t.clone()
        elif counter[0] == 1 and mode == "strided" and t.ndim >= 2:
            t = lf.tensor(value.detach().transpose(0, 1).contiguous(), device=dev).transpose(0, 1)
        return t
    if isinstance(value, (list, tuple)):
        items = [_to_lazy(v, dev, mode, counter) for v in value]
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, dict):
        return {k: _to_lazy(v, dev, mode, counter) for k, v in value.items()}
    if isinstance(value, torch.dtype):
        return value
    return value


def _to_torch(value):
    import lazyfuse as lf
    if isinstance(value, lf.Tensor):
        return value.torch()
    if isinstance(value, (list, tuple)):
        return type(value)(_to_torch(v) for v in value) if not hasattr(value, "_fields") else \
            tuple(_to_torch(v) for v in value)
    return value


def lazy_callable(op):
    """(how, callable(input, *args, **kwargs)) for OpInfo ``op`` on lazyfuse."""
    import lazyfuse as lf
    name = op.name
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
        # (a reference input may be a Python number, as in ``torch.add(2.5, t)``: then the function)
        return "method", lambda x, *a, **k: getattr(x, name)(*a, **k) if isinstance(x, lf.Tensor) else \
            getattr(lf, name)(x, *a, **k)
    if name.startswith("__r"):
        return "method", lambda x, *a, **k: getattr(x, name)(*a, **k)
    return "function", lambda x, *a, **k: getattr(lf, name)(x, *a, **k)


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
    if isinstance(value, torch.Tensor):
        return torch.zeros(value.shape, dtype=value.dtype)
    if isinstance(value, (list, tuple)):
        return tuple(_shape_only(v) for v in value)
    return value


def _strided_like(value, counter):
    """The torch inputs of a "strided" sample as ``_to_lazy`` lays them out (the first tensor of
    2+ dims a transpose of a transposed copy)."""
    if isinstance(value, torch.Tensor):
        counter[0] += 1
        return value.transpose(0, 1).contiguous().transpose(0, 1) if counter[0] == 1 and value.ndim >= 2 else value
    if isinstance(value, (list, tuple)):
        items = [_strided_like(v, counter) for v in value]
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, dict):
        return {k: _strided_like(v, counter) for k, v in value.items()}
    return value


def _matches_torch_on_layout(op, sample, got, dtype) -> bool:
    """Whether ``got`` matches torch run on the strided layout lazyfuse was given: some of
    torch's CPU kernels round differently by layout (float16 batch norm on a transposed input is
    1 ulp off its contiguous result), and an extern hands torch the layout it got."""
    counter = [0]
    try:
        want = op(_strided_like(sample.input, counter), *_strided_like(list(sample.args), counter),
                  **_strided_like(dict(sample.kwargs), counter))
        _compare(got, want, dtype)
    except Exception:  # noqa: BLE001 (torch refuses the layout, or it differs all the same)
        return False
    return True


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


def _widened(value):
    return _map_tensors(value, lambda t: t.double() if t.is_floating_point() else t)


def _copied(value):
    return _map_tensors(value, lambda t: t.clone())


def _run_torch(op, sample):
    """(torch's result, its input) on copies of the sample's tensors: an op that writes an input
    (``embedding_bag``'s ``max_norm`` renormalises its weight rows) must not change the sample
    lazyfuse is given."""
    x = _copied(sample.input)
    try:
        return op(x, *_copied(list(sample.args)), **_copied(dict(sample.kwargs))), x
    except Exception as e:  # noqa: BLE001
        raise TorchFailed(str(e)) from None


def _reproducible(op, sample, want) -> bool:
    """Whether torch gives ``want`` again on fresh copies of the inputs: its float16 CPU
    ``grid_sample`` depends on where the buffers lie, and such a result is nothing to compare with."""
    again, _ = _run_torch(op, sample)
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


def run_sample(op, fn, sample, dtype, dev, mode):
    """'ok-native' | 'ok-extern' | 'refused: why' | 'mismatch: why' | 'error: why' (TorchFailed: skip)."""
    import importlib
    import lazyfuse as lf
    ext = importlib.import_module("lazyfuse.extern")   # (``lazyfuse.extern`` the attribute is the function)
    want, torch_input = _run_torch(op, sample)
    if isinstance(want, torch.Tensor) and (want.is_complex() or want.layout != torch.strided):
        return f"refused: a {'complex' if want.is_complex() else str(want.layout)} result"
    counter = [0]
    try:
        x = _to_lazy(sample.input, dev, mode, counter)
        args = _to_lazy(list(sample.args), dev, mode, counter)
        kwargs = _to_lazy(dict(sample.kwargs), dev, mode, counter)
    except lf.LazyfuseError as e:
        return f"refused: {e}"
    except Exception as e:  # noqa: BLE001 (an input lazyfuse cannot even hold)
        return f"refused: input: {type(e).__name__}: {str(e)[:120]}"
    before, eager_before = lf.stats(dev).extern_launches, ext.eager_runs
    try:
        out = fn(x, *args, **kwargs)
        got = _to_torch(out)
    except lf.LazyfuseError as e:
        return f"refused: {type(e).__name__}: {str(e)[:160]}"
    except Exception as e:  # noqa: BLE001
        return f"error: {type(e).__name__}: {str(e)[:160]}"
    if op.name in RANDOM:
        got, want = _shape_only(got), _shape_only(want)
    try:
        _compare(got, want, dtype)
        if op.name.endswith("_") and isinstance(x, lf.Tensor):   # an in-place op: its input too
            _compare(x.torch(), torch_input, dtype)
    except AssertionError as e:
        if not (mode == "strided" and not op.name.endswith("_") and _matches_torch_on_layout(op, sample, got, dtype)
                or not op.name.endswith("_") and _no_worse_than_torch(op, sample, got, want)):
            if not _reproducible(op, sample, want):
                raise TorchFailed("torch's result differs between two runs on the same values")
            return f"mismatch: {str(e).splitlines()[0][:200]}"
    native = lf.stats(dev).extern_launches == before and ext.eager_runs == eager_before
    return "ok-native" if native else "ok-extern"


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
        span=(0, 1 << 30), inputs=sample_inputs):
    """Run the conformance check; returns {entry name: (outcome, detail)} and prints per-entry lines
    and a summary to ``stream``. ``inputs(op, dtype)`` gives an entry's samples (``sample_inputs``
    or ``reference_inputs``)."""
    import lazyfuse as lf
    dev = lf.device(device)
    results = {}
    for index, op in enumerate(op_database()):
        if not (span[0] <= index < span[1]):
            continue
        label = op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")
        if names is not None and op.name not in names and label not in names:
            continue
        how, fn = lazy_callable(op)
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
                mode = "pending" if k == 0 else "strided" if k == 1 else "realized"
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        outcome = run_sample(op, fn, sample, dtype, dev, mode)
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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m lazyfuse.conformance", description=__doc__.splitlines()[0])
    p.add_argument("--ops", help="comma-separated OpInfo names (default: all)")
    p.add_argument("--samples", type=int, default=None, help="samples per dtype (default: all)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--span", default="0:100000", help="the op_db entries to run, by index (start:stop)")
    p.add_argument("--reference", action="store_true",
                   help="run OpInfo's reference_inputs (also in bfloat16) instead of its sample_inputs")
    a = p.parse_args(argv)
    start, stop = (int(v) for v in a.span.split(":"))
    mode = dict(inputs=reference_inputs, dtypes=REFERENCE_DTYPES) if a.reference else {}
    results = run(set(a.ops.split(",")) if a.ops else None, a.samples, device=a.device, span=(start, stop), **mode)
    return 1 if any(r[0] in ("mismatch", "error") for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
