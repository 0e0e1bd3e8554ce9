"""torch's op_db samples on a fast subset of ops: every one runs, natively or as an extern, with 0
mismatches (the whole database: ``python -m lazyfuse.conformance``, see the README); and their
error_inputs: refused, no value where torch raises, no internal error leaking (``--errors``)."""
import contextlib
import functools
import io
import math

import pytest
import torch

import lazyfuse as lf
from lazyfuse import conformance

FAST = ["add", "mul", "div", "exp", "sum", "mean", "var", "masked_fill", "tril", "where", "softmax",
        "nn.functional.cross_entropy", "cumsum", "topk", "flip", "nonzero", "__getitem__", "zeros_like",
        "to", "float", "nn.functional.leaky_relu", "logsumexp", "split", "roll"]
MORE = ["sub", "abs", "neg", "sqrt", "tanh", "sigmoid", "amax", "argmax", "std", "prod", "any", "all", "triu",
        "chunk", "unbind", "movedim", "narrow", "repeat", "tile", "diagonal", "t", "sort", "einsum", "gather",
        "nn.functional.mse_loss", "nn.functional.l1_loss", "nn.functional.nll_loss", "nn.functional.elu",
        "nn.functional.softplus", "nn.functional.one_hot", "nn.functional.pad", "nn.functional.gelu",
        "masked_select", "index_select", "new_zeros", "type_as", "clamp", "lerp", "addcmul", "isinf"]


def _run(names, samples):
    out = io.StringIO()
    results = conformance.run(set(names), samples_per_dtype=samples, stream=out)
    bad = {k: v for k, v in results.items() if v[0] in ("mismatch", "error", "skipped")}
    assert not bad, out.getvalue()
    return results


def test_fast_subset_has_no_mismatch():
    results = _run(FAST, 2)
    kinds = {k: v[0] for k, v in results.items()}
    assert kinds["masked_fill"] == "native" and kinds["tril"] == "native" and kinds["add"] == "native"
    assert kinds["cumsum"] == "native" and kinds["topk"] == "extern" and kinds["nonzero"] == "extern"
    assert all(any(k == n or k.startswith(n + ".") for k in kinds) for n in FAST)   # (variants: div.trunc_rounding)


@pytest.mark.slow
def test_larger_subset_has_no_mismatch():
    _run(FAST + MORE, None)


# the frontend mode (``--frontend``: torch's own op on ``lf.lazy`` tensors), on the entries where it
# found bugs (geometric_ of int64 raised; float16 addcdiv, lerp, softmax backward and native_layer_norm's
# statistics rounded as torch does not; int64 baddbmm came back float32; adaptive_max_pool2d of uneven
# sizes and a 0-d bucketize raised) and common ones
FRONTEND_FAST = ["add", "mul", "sum", "softmax", "nn.functional.cross_entropy", "masked_fill", "where", "t", "matmul",
                 "geometric", "addcdiv", "lerp", "_softmax_backward_data", "native_layer_norm", "baddbmm",
                 "nn.functional.adaptive_max_pool2d", "bucketize"]


def test_frontend_subset_has_no_mismatch():
    out = io.StringIO()
    results = conformance.run(set(FRONTEND_FAST), samples_per_dtype=3, stream=out, frontend=True)
    bad = {k: v for k, v in results.items() if v[0] in ("mismatch", "error", "skipped", "refused")}
    assert not bad, out.getvalue()
    assert all(any(k == n or k.startswith(n + ".") for k in results) for n in FRONTEND_FAST)
    kinds = {k: v[0] for k, v in results.items()}
    assert kinds["add"] == kinds["softmax"] == kinds["geometric"] == kinds["native_layer_norm"] == "native"


# the error mode (``--errors``: torch's OpInfo error_inputs) on a fast subset: ops whose every
# error input lazyfuse refuses (or, for a Python number torch takes only as a tensor, computes
# torch's value on it as a 0-d tensor)
ERRORS_FAST = ["narrow", "movedim", "diff", "isclose", "bucketize", "nn.functional.rms_norm", "nn.functional.prelu",
               "nn.functional.hardtanh", "nn.functional.softshrink", "nn.functional.huber_loss",
               "nn.functional.triplet_margin_loss", "unbind", "roll", "rot90", "fmax", "heaviside", "clamp_max",
               "eye", "linspace", "uniform", "hypot", "logaddexp", "atan2", "ldexp", "xlogy", "masked_fill", "tril",
               "t", "diagonal", "reshape", "view", "mean", "dot", "nn.functional.gelu", "nn.functional.l1_loss",
               "multinomial", "logical_and", "eq", "maximum", "__radd__"]


def test_error_inputs_of_a_fast_subset_are_refused_with_no_silent_value_or_leak():
    out = io.StringIO()
    results = conformance.run_errors(set(ERRORS_FAST), stream=out)
    assert all(any(k == n or k.startswith(n + ".") for k in results) for n in ERRORS_FAST), out.getvalue()
    bad = {k: v for k, v in results.items() if v[0] in ("crash", "silent", "leaked")}
    assert not bad, out.getvalue()
    kinds = {k: v[0] for k, v in results.items()}
    assert kinds["narrow"] == kinds["movedim"] == kinds["nn.functional.rms_norm"] == "refused", out.getvalue()
    assert kinds["__radd__"] == "skipped"   # (only Python numbers' own methods: not lazyfuse's)
    assert "lenient" in kinds.values()


def test_frontend_reference_inputs_of_the_entries_it_found_wrong():
    # (float16 linspace/logspace of tensor bounds ran torch's decomposition, which rounds otherwise
    # than torch's kernel; multilabel_margin_loss's of a 1-d input is wrong, multi_margin_loss's of a
    # 0-d one has shape (1,) where torch's kernel gives ())
    out = io.StringIO()
    results = conformance.run({"linspace", "logspace", "nn.functional.multilabel_margin_loss",
                               "nn.functional.multi_margin_loss"}, inputs=functools.partial(conformance.reference_inputs,
                                                                               max_numel=128),
                              dtypes=(torch.float16, torch.float32), stream=out, frontend=True)
    assert {k: v for k, v in results.items() if v[0] not in ("native", "extern")} == {}, out.getvalue()
    assert "linspace.tensor_overload" in results and "logspace.tensor_overload" in results


# the error mode through the frontend (``--errors --frontend``): where its first pass found torch code
# over lazyfuse returning a value torch refuses (the frontend's handlers lacked torch's checks:
# masked_fill's value, native_layer_norm's shapes, index_add's source, t of 4 dims, embedding's
# weight; aminmax cast into float64 out tensors), or a ValueError (adaptive_max_pool2d's empty size)
ERRORS_FRONTEND = ["masked_fill", "aminmax", "native_layer_norm", "index_add", "t", "nn.functional.embedding",
                   "nn.functional.adaptive_max_pool2d", "narrow", "reshape", "mean", "maximum"]


def test_error_inputs_through_the_frontend_are_refused():
    out = io.StringIO()
    results = conformance.run_errors(set(ERRORS_FRONTEND), stream=out, frontend=True)
    assert all(any(k == n or k.startswith(n + ".") for k in results) for n in ERRORS_FRONTEND), out.getvalue()
    assert {k: v for k, v in results.items() if v[0] != "refused"} == {}, out.getvalue()


# -- the reference mode: OpInfo's reference_inputs (extremal values, NaN/inf, broadcasting, type
# promotion, Python-number operands), on the ops where it found bugs and the common ones -----------
REFERENCE_FAST = ["add", "div", "floor_divide", "acosh", "asinh", "hypot", "clone", "take_along_dim", "diff",
                  "sum", "amax", "nn.functional.cosine_similarity", "nn.functional.hinge_embedding_loss",
                  "nn.functional.normalize", "nn.functional.threshold"]


def test_reference_subset_has_no_mismatch():
    out = io.StringIO()
    results = conformance.run(set(REFERENCE_FAST), inputs=functools.partial(conformance.reference_inputs,
                                                                            max_numel=128),
                              dtypes=(torch.float32, torch.float16, torch.int64), stream=out)   # (CI budget)
    bad = {k: v for k, v in results.items() if v[0] in ("mismatch", "error", "skipped", "refused")}
    assert not bad, out.getvalue()
    assert all(any(k == n or k.startswith(n + ".") for k in results) for n in REFERENCE_FAST)


def test_reference_mode_is_the_cli_flag(monkeypatch):
    calls, real_run = [], conformance.run

    def recorded(*args, **kwargs):
        calls.append(kwargs)
        return real_run(*args, **dict(kwargs, stream=io.StringIO()))
    monkeypatch.setattr(conformance, "run", recorded)
    assert conformance.main(["--reference", "--ops", "hypot", "--samples", "3"]) == 0
    assert calls[0]["inputs"] is conformance.reference_inputs and torch.bfloat16 in calls[0]["dtypes"]


def test_reference_inputs_leave_out_large_samples_only():
    op = next(o for o in conformance.op_database() if o.name == "add")
    every = list(conformance.reference_inputs(op, torch.float32))
    small = list(conformance.reference_inputs(op, torch.float32, max_numel=1024))
    assert len(every) > len(small) > 50   # (the extremal-value samples are small ones)
    assert all(conformance._largest_numel((s.input, s.args, s.kwargs)) <= 1024 for s in small)


# -- the bugs the reference mode found, one test each ---------------------------------------------
def _lazy(values, dtype=torch.float32):
    return lf.tensor(torch.tensor(values, dtype=dtype))


@pytest.mark.parametrize("name", ["asinh", "acosh"])
def test_inverse_hyperbolics_of_huge_arguments_do_not_overflow(name):
    # x^2 overflowed from 1.8e19: acosh(1e20) was inf (torch: 46.74), acosh(-1e20) inf (NaN)
    values = [1e20, 3e38, -1e20, -3e38, 2.0 ** 28, 2.0 ** 28 + 64, 1e10, 2.0, 1.0, 0.5, 0.0, -0.0, 1e-30,
              math.inf, -math.inf, math.nan]
    got = getattr(lf, name)(_lazy(values)).torch()
    exact = getattr(torch, name)(torch.tensor(values, dtype=torch.float64)).float()
    torch.testing.assert_close(got, exact, equal_nan=True)


def test_hypot_of_huge_tiny_and_special_operands():
    # (a^2 + b^2) overflowed from 1.8e19: hypot(1e20, 1e20) was inf
    a = [0.0, 3.0, 1e20, 3e38, math.inf, math.nan, math.nan, -1e-30, 0.0, 1e-40, -math.inf, 5.0, -2e30]
    b = [0.0, 4.0, 1e20, 3e38, math.nan, math.inf, 1.0, 0.0, math.nan, 1e-40, 2.0, -12.0, 1e-30]
    got = lf.hypot(_lazy(a), _lazy(b)).torch()
    torch.testing.assert_close(got, torch.hypot(torch.tensor(a), torch.tensor(b)), equal_nan=True)
    torch.testing.assert_close(lf.hypot(_lazy(a), 2.0).torch(), torch.hypot(torch.tensor(a), torch.tensor(2.0)),
                               equal_nan=True)
    half = lf.hypot(_lazy([6e4, 3.0], torch.float16), _lazy([6e4, 4.0], torch.float16)).torch()
    assert half.dtype == torch.float16 and half.tolist() == [math.inf, 5.0]   # (8.5e4: past float16's range)


def test_hypot_gradient_matches_torch():
    a, b = torch.tensor([3.0, -1e20, 0.5], requires_grad=True), torch.tensor([4.0, 1e20, -2.0], requires_grad=True)
    torch.hypot(a, b).sum().backward()
    la, lb = lf.tensor(a.detach(), requires_grad=True), lf.tensor(b.detach(), requires_grad=True)
    lf.hypot(la, lb).sum().backward()
    torch.testing.assert_close(la.grad.torch(), a.grad)
    torch.testing.assert_close(lb.grad.torch(), b.grad)


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "floor_divide", "true_divide"])
@pytest.mark.parametrize("a, b", [(2.5, 1), (2, 3), (True, 2), (3, 2.0), (-8, 6)])
def test_arithmetic_of_two_numbers_is_a_tensor(name, a, b):
    # torch.add(2.5, 1) is a 0-d tensor; lazyfuse gave the Python number
    try:
        want = getattr(torch, name)(a, b)
    except RuntimeError:   # (torch refuses a bool operand of ``-``: so does lazyfuse)
        with pytest.raises(lf.DTypeError):
            getattr(lf, name)(a, b)
        return
    got = getattr(lf, name)(a, b)
    assert isinstance(got, lf.Tensor) and got.dtype.name == str(want.dtype).split(".")[1]
    assert got.shape == () and got.item() == want.item()


def test_two_number_division_rounding_modes_and_alpha():
    assert lf.div(7, -2, rounding_mode="trunc").item() == torch.div(7, -2, rounding_mode="trunc").item() == -3
    assert lf.div(7, -2, rounding_mode="floor").item() == -4
    assert lf.add(2, 3, alpha=2).item() == 8 and lf.sub(2.0, 3, alpha=2).item() == -4.0


@pytest.mark.parametrize("fmt", [torch.preserve_format, torch.contiguous_format])
def test_clone_takes_memory_format(fmt):
    x = lf.tensor(torch.arange(6.0).reshape(2, 3)).T
    y = x.clone(memory_format=fmt)
    x.add_(1)
    assert y.torch().tolist() == torch.arange(6.0).reshape(2, 3).T.tolist()


def test_take_along_dim_without_dim_flattens_both():
    x, idx = torch.randn(5, 5), torch.tensor([[0, 0], [4, 4], [1, 1], [3, 3], [2, 0]])
    got = lf.take_along_dim(lf.tensor(x), lf.tensor(idx)).torch()
    assert got.shape == (10,)
    torch.testing.assert_close(got, torch.take_along_dim(x, idx))


def test_diff_of_order_zero_is_a_copy_that_ignores_prepend():
    x = torch.randn(3, 4)
    lx = lf.tensor(x)
    got = lf.diff(lx, n=0, dim=0, prepend=lf.tensor(torch.ones(2, 4)))
    assert got.shape == (3, 4)
    lx.mul_(2)   # a copy: the write does not reach it
    torch.testing.assert_close(got.torch(), torch.diff(x, n=0, dim=0, prepend=torch.ones(2, 4)))
    with pytest.raises(lf.LazyfuseError, match="non-negative"):
        lf.diff(lx, n=-1)


# -- the script's own rules ------------------------------------------------------------------------
def _op(name):
    return next(o for o in conformance.op_database() if o.name == name)


def test_a_result_no_worse_than_torch_against_float64_is_no_mismatch():
    # torch's float16 floor_divide is off by one: 4.3633 // -0.0059586 = floor(-732.27), torch -734
    op = _op("floor_divide")
    sample = type("Sample", (), {})()
    sample.input = torch.tensor([4.36328125, 4.94140625], dtype=torch.float16)
    sample.args, sample.kwargs = (torch.tensor([-0.00595855712890625, 0.0028438568115234375], dtype=torch.float16),), {}
    want = op(sample.input, *sample.args)
    exact = torch.floor_divide(sample.input.double(), sample.args[0].double()).half()
    assert want.tolist() == [-734, 1738] and exact.tolist() == [-733, 1737]   # (torch itself is off here)
    assert conformance._no_worse_than_torch(op, sample, exact, want)
    assert not conformance._no_worse_than_torch(op, sample, exact + 8, want)


def test_torch_runs_on_copies_of_the_sample():
    # embedding_bag's max_norm renormalises its weight in place: lazyfuse must get the sample unchanged
    op = _op("nn.functional.embedding_bag")
    sample = next(s for s in op.sample_inputs("cpu", torch.float32) if s.kwargs.get("max_norm"))
    before = [a.clone() for a in (sample.input, *sample.args) if isinstance(a, torch.Tensor)]
    conformance._run_torch(op, sample)
    after = [a for a in (sample.input, *sample.args) if isinstance(a, torch.Tensor)]
    assert all(torch.equal(b, a) for b, a in zip(before, after))


def test_hinge_embedding_loss_of_an_infinite_input():
    # its zeros were ``input * 0``, NaN where the input is inf (torch: 0 for target -1)
    x = torch.tensor([-8.5, -1.75, math.inf, math.inf, 3.5, -math.inf])
    y = torch.tensor([-1.0, 1.0, -1.0, 1.0, -1.0, -1.0])
    for reduction in ("none", "sum", "mean"):
        got = lf.nn.functional.hinge_embedding_loss(lf.tensor(x), lf.tensor(y), reduction=reduction).torch()
        torch.testing.assert_close(got, torch.nn.functional.hinge_embedding_loss(x, y, reduction=reduction),
                                   equal_nan=True)


@pytest.mark.parametrize("p", [0, -math.inf, math.inf, 1, 3.5, -2])
def test_normalize_of_every_order(p):
    # p=0 raised ZeroDivisionError (the power formula's 1/p); p=-inf gave the power formula's 1
    x = torch.randn(4, 5)
    x[0, 1], x[2] = 0, 0
    got = lf.nn.functional.normalize(lf.tensor(x), p=p).torch()
    torch.testing.assert_close(got, torch.nn.functional.normalize(x, p=p), equal_nan=True)


def test_cosine_similarity_broadcasts_before_the_norms():
    # (1, 2, 3) against (2, 1, 3) over dim -2: each norm was taken over its own unbroadcast size
    a, b = torch.randn(1, 2, 3), torch.randn(2, 1, 3)
    for dim in (-2, -1, 0):
        got = lf.nn.functional.cosine_similarity(lf.tensor(a), lf.tensor(b), dim=dim).torch()
        torch.testing.assert_close(got, torch.nn.functional.cosine_similarity(a, b, dim=dim))


def test_bce_with_logits_in_half_precision_rounds_once():
    # each step rounded to float16: -7.6758 where float64 says -7.6689 (torch -7.6680)
    x = torch.tensor([[-2.400390625, 3.611328125, 1.134765625]], dtype=torch.float16)
    t = torch.tensor([[0.7841796875, 0.666015625, 0.475830078125]], dtype=torch.float16)
    w = torch.tensor([[5.7734375, -3.97265625, 3.271484375]], dtype=torch.float16)
    got = lf.nn.functional.binary_cross_entropy_with_logits(lf.tensor(x), lf.tensor(t), weight=lf.tensor(w),
                                                            reduction="none").torch()
    exact = torch.nn.functional.binary_cross_entropy_with_logits(x.double(), t.double(), weight=w.double(),
                                                                 reduction="none")
    assert got.dtype == torch.float16
    torch.testing.assert_close(got.double(), exact.half().double(), rtol=0, atol=0)


def test_threshold_keeps_nan():
    # ``where(x > t, x, value)`` sent NaN to ``value``; torch's rule is ``x <= t ? value : x``
    x = torch.tensor([math.inf, -math.inf, math.nan, 0.1533203125, 0.2, -1.0])
    got = lf.nn.functional.threshold(lf.tensor(x), 0.1533203125, -9.0).torch()
    torch.testing.assert_close(got, torch.nn.functional.threshold(x, 0.1533203125, -9.0), equal_nan=True)


# -- found in the reference mode's second span (entries 269..350) ----------------------------------
_SPECIAL = [math.nan, math.inf, -math.inf, -0.2, 0.2, -0.0, 0.5, -0.5, -3.0, 3.0]


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
@pytest.mark.parametrize("name", ["hardshrink", "softshrink"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_shrinks_keep_nan_and_torch_signed_zeros(name, dtype, device):
    # both sent NaN to 0 (``where(x > lambd, ...)``); torch's rules: hardshrink ``-l <= x <= l ? 0 : x``,
    # softshrink's middle ``x * 0`` (NaN stays NaN, -0.2 gives -0)
    x = torch.tensor(_SPECIAL, dtype=dtype)
    got = getattr(lf.nn.functional, name)(lf.tensor(x, device=device)).torch()
    want = getattr(torch.nn.functional, name)(x)
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
    assert torch.equal(got.signbit(), want.signbit())


@pytest.mark.parametrize("sections", [1, 2, 3, 7])
def test_tensor_split_takes_a_0d_tensor_as_the_count(sections):
    # (a 0-d tensor is a number of sections, a 1-d one the cut indices, as in torch; the 0-d one raised
    # "iteration over a 0-d tensor")
    x = torch.arange(30.0).reshape(5, 6)
    for dim in (0, 1):
        got = lf.tensor_split(lf.tensor(x), lf.tensor(torch.tensor(sections)), dim)
        want = torch.tensor_split(x, torch.tensor(sections), dim)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            torch.testing.assert_close(g.torch(), w, rtol=0, atol=0)
    got = lf.tensor_split(lf.tensor(x), lf.tensor(torch.tensor([1, 4])), 1)
    assert [tuple(g.shape) for g in got] == [(5, 1), (5, 3), (5, 2)]


@pytest.mark.parametrize("name", ["__rmod__", "__rpow__"])   # (the entries whose samples pass a number self)
def test_reflected_methods_of_a_number_self_as_torch_s_opinfo_calls_them(name):
    # the OpInfo calls ``torch.Tensor.__rmod__(5.1, t)`` (``t % 5.1``): the harness ran
    # ``(5.1).__rmod__(t)`` and compared NotImplemented; it calls lazyfuse's unbound method now
    op = next(o for o in conformance.op_database() if o.name == name)
    _, fn = conformance.lazy_callable(op)
    t = torch.tensor([[3.6116, -8.0676, -0.5735, 3.1285, -3.0337]])
    for self_, other in ((5.1, t), (t, 2.5)):
        got = fn(self_, other if isinstance(other, float) else lf.tensor(other)) if isinstance(self_, float) \
            else fn(lf.tensor(self_), other)
        torch.testing.assert_close(got.torch(), op.op(self_, other), equal_nan=True)


def test_a_sample_torch_declines_with_not_implemented_is_skipped_not_compared():
    # ``torch.Tensor.__rsub__(5.1, t)`` returns NotImplemented (a C method: the number is no self),
    # which the harness compared with lazyfuse's NotImplemented as a pass
    op = next(o for o in conformance.op_database() if o.name == "__rsub__")
    _, fn = conformance.lazy_callable(op)
    sample = next(s for s in conformance.reference_inputs(op, torch.float32) if not isinstance(s.input, torch.Tensor))
    assert op.op(sample.input, *sample.args) is NotImplemented
    with pytest.raises(conformance.TorchFailed, match="NotImplemented"):
        conformance.run_sample(op, fn, sample, torch.float32, lf.device("cpu"), "realized")


def test_a_torch_result_that_depends_on_the_buffers_alignment_is_not_reproducible():
    # torch's bfloat16 CPU grid_sample gives other values on buffers aligned otherwise; a fresh copy
    # is as aligned as the first, so it agreed by chance and the harness reported lazyfuse's extern
    # (torch on lazyfuse's buffers) as a mismatch at times
    from torch.testing._internal.opinfo.core import SampleInput

    def by_alignment(t):
        return t + (t.data_ptr() % 64 != 0)
    sample = SampleInput(torch.zeros(8))
    want, _ = conformance._run_torch(by_alignment, sample)
    assert not conformance._reproducible(by_alignment, sample, want)
    assert conformance._reproducible(torch.neg, sample, conformance._run_torch(torch.neg, sample)[0])
