"""Bucketed captures (``lf.graphed(..., buckets=...)``): one graph per size bucket, captured on
first use, inputs padded up to the bucket and outputs sliced back; compared with eager torch."""
import warnings

import numpy as np
import pytest
import torch

import lazyfuse as lf

CPU = lf.device("cpu")
W = np.random.default_rng(0).standard_normal((8, 5)).astype(np.float32)


def mlp(lib, x, w, b):
    return (x @ w + b).relu() * 2 - 1


def make(**options):
    w, b = lf.tensor(W), lf.tensor(W[0])
    fn = lambda x, *masks: mlp(lf, x, w, b)  # noqa: E731
    return lf.graphed(fn, lf.zeros(2, 8), buckets={0: [1, 2, 4, 8]}, **options)


def reference(a):
    return mlp(torch, torch.from_numpy(a).double(), torch.from_numpy(W).double(), torch.from_numpy(W[0]).double())


def rows(n, seed=0):
    return np.random.default_rng(seed + n).standard_normal((n, 8)).astype(np.float32)


def test_sizes_between_and_at_buckets_match_eager_and_capture_lazily():
    call = make()
    replays = lf.stats(CPU).graph_replays
    for n in (3, 4, 1, 3, 8, 2):
        got = call(lf.tensor(rows(n)))
        assert got.shape == (n, 5)
        np.testing.assert_allclose(got.numpy(), reference(rows(n)).numpy(), rtol=1e-5, atol=1e-5)
    assert sorted(call.captured) == [(1,), (2,), (4,), (8,)]
    assert call.captured[(4,)]["replays"] == 2 and call.captured[(8,)]["replays"] == 0   # 3, 4, 3: one capture
    assert lf.stats(CPU).graph_replays - replays == 2
    assert "bucket (4,): inputs [(4, 8)]" in call.describe()
    assert call(rows(3)).shape == (3, 5)   # numpy inputs too


def test_past_the_last_bucket_is_an_error_or_runs_eagerly():
    call = make()
    with pytest.raises(lf.ShapeError, match=r"size \{0: 9\} is past the last bucket \{0: 8\}.*beyond='eager'"):
        call(lf.tensor(rows(9)))
    eager = make(beyond="eager")
    np.testing.assert_allclose(eager(lf.tensor(rows(11))).numpy(), reference(rows(11)).numpy(), rtol=1e-5, atol=1e-5)
    assert eager.captured == {}
    np.testing.assert_allclose(call(lf.tensor(rows(5))).numpy(), reference(rows(5)).numpy(), rtol=1e-5, atol=1e-5)


def test_padding_value_and_mask_keep_padding_out_of_reductions():
    # padded with -inf, a max over the bucketed dim sees only the real rows (the output has no
    # batch dim: its size 8 only equals a bucket)
    amax = lf.graphed(lambda x: x.amax(0), lf.zeros(2, 8), buckets={0: [4, 8]}, pad_value=float("-inf"),
                      out_dims={0: None})
    # the mask (True for real rows) gives a mean over the real rows
    mean = lf.graphed(lambda x, m: (x * m.unsqueeze(1)).sum(0) / m.sum(), lf.zeros(2, 8), buckets={0: [4, 8]},
                      with_mask=True, out_dims={0: None})
    for n in (3, 6, 8):
        a = rows(n) - 5
        np.testing.assert_allclose(amax(lf.tensor(a)).numpy(), a.max(0), rtol=1e-6)
        np.testing.assert_allclose(mean(lf.tensor(a)).numpy(), a.mean(0), rtol=1e-5)


def test_a_hard_cap_on_graphs_warns_and_runs_eagerly_past_it():
    call = make(max_graphs=2)
    call(lf.tensor(rows(1)))
    call(lf.tensor(rows(2)))
    with pytest.warns(RuntimeWarning, match=r"2 graphs recorded \(max_graphs=2\); bucket \(4,\) runs without a graph"):
        got = call(lf.tensor(rows(3)))
    np.testing.assert_allclose(got.numpy(), reference(rows(3)).numpy(), rtol=1e-5, atol=1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # once per bucket
        call(lf.tensor(rows(3)))
    assert sorted(call.captured) == [(1,), (2,)]


def test_inputs_must_agree_on_the_bucketed_dim_and_match_elsewhere():
    add = lf.graphed(lambda x, y: x + y, lf.zeros(2, 3), lf.zeros(2, 3), buckets={0: [4]})
    np.testing.assert_allclose(add(lf.ones(3, 3), lf.ones(3, 3)).numpy(), np.full((3, 3), 2.0))
    with pytest.raises(lf.ShapeError, match="disagree on bucketed dim 0"):
        add(lf.ones(3, 3), lf.ones(2, 3))
    with pytest.raises(lf.ShapeError, match="outside the bucketed dims"):
        add(lf.ones(3, 4), lf.ones(3, 4))
    with pytest.raises(lf.ShapeError, match="not a dim of every example input"):
        lf.graphed(lambda x: x, lf.zeros(3), buckets={1: [4]})
    with pytest.raises(lf.ShapeError, match="out_dims names dim 1, which is not bucketed"):
        lf.graphed(lambda x: x, lf.zeros(3, 2), buckets={0: [4]}, out_dims={1: 0})
    with pytest.raises(TypeError, match="only apply with buckets"):
        lf.graphed(lambda x: x, lf.zeros(3), pad_value=1)
