"""torch's op_db samples on a fast subset of ops: every one runs, natively or as an extern, with 0
mismatches (the whole database: ``python -m lazyfuse.conformance``, see the README); and their
error_inputs: refused, no value where torch raises, no internal error leaking (``--errors``)."""
import io

import pytest

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
