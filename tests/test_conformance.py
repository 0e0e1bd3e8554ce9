"""torch's op_db samples on a fast subset of ops: every one runs, natively or as an extern, with 0
mismatches (the whole database: ``python -m lazyfuse.conformance``, see the README)."""
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
