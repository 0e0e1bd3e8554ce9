"""Data-dependent refusals (docs/semantics.md, Errors): the ops that take indices from data refuse
an out-of-range one at the drain as torch (CPU) does, with torch's exception type (lazyfuse's
``InvalidIndexError`` is an ``IndexError`` and a ``RuntimeError``) and a message naming the
index and the dim's size; afterwards the engine works and earlier tensors keep their values.
In-range data gives torch's values."""
import contextlib
import os

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

import lazyfuse as lf
from lazyfuse.errors import InvalidIndexError
from lazyfuse.runtime import stream as stream_module

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
F, TF = lf.nn.functional, torch.nn.functional
SIZE = 6


def _logp(m, kw):
    return m.tensor(np.linspace(-2, 1, 4 * SIZE, dtype=np.float32).reshape(4, SIZE), **kw).log_softmax(-1)


# name -> the call on module ``m`` (lf or torch) with index tensor ``i`` of 4 entries (a dim of size
# SIZE), its tensors made with the keywords ``kw`` (lazyfuse's device)
OPS = {
    "scatter_add": lambda m, i, kw: m.zeros(SIZE, **kw).scatter_add(0, i, m.ones(4, **kw)),
    "scatter_add_2d": lambda m, i, kw: m.zeros(3, SIZE, **kw).scatter_add(1, i.reshape(1, 4), m.ones(1, 4, **kw)),
    "index_add": lambda m, i, kw: m.zeros(SIZE, **kw).index_add(0, i, m.ones(4, **kw)),
    "index_add_2d": lambda m, i, kw: m.zeros(3, SIZE, **kw).index_add(1, i, m.ones(3, 4, **kw)),
    "index_copy": lambda m, i, kw: m.zeros(SIZE, **kw).index_copy(0, i, m.ones(4, **kw)),
    "index_fill": lambda m, i, kw: m.zeros(3, SIZE, **kw).index_fill(1, i, 2.0),
    "nll_loss": lambda m, i, kw: m.nn.functional.nll_loss(_logp(m, kw), i),
    "nll_loss_none": lambda m, i, kw: m.nn.functional.nll_loss(_logp(m, kw), i, reduction="none"),
    "cross_entropy": lambda m, i, kw: m.nn.functional.cross_entropy(_logp(m, kw), i),
    "cross_entropy_smoothing": lambda m, i, kw: m.nn.functional.cross_entropy(_logp(m, kw), i, label_smoothing=0.1),
    "one_hot": lambda m, i, kw: m.nn.functional.one_hot(i, SIZE),
}
# what torch refuses: a negative index too, except index_fill's [-size, size)
NEGATIVE_OK = {"index_fill"}


def _torch_error(name, index):
    with pytest.raises(Exception) as raised:
        OPS[name](torch, torch.tensor(index), {})
    return type(raised.value)


def _lf(name, index, device="cpu"):
    return OPS[name](lf, lf.tensor(np.array(index), device=device), {"device": device}).numpy()


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
@pytest.mark.parametrize("name", sorted(OPS))
@pytest.mark.parametrize("bad", [SIZE, 100000000, -SIZE - 1, -1])
def test_an_out_of_range_index_raises_torchs_type_and_the_engine_stays_right(name, bad, device):
    index = [0, 2, bad, 1]
    if bad == -1 and name in NEGATIVE_OK:
        np.testing.assert_array_equal(_lf(name, index, device), OPS[name](torch, torch.tensor(index), {}).numpy())
        return
    torch_type = _torch_error(name, index)
    before = lf.tensor(np.arange(5, dtype=np.float32), device=device) * 2
    before.numpy()
    kept = before + 1   # recorded, not yet drained: computed right after the failure
    with pytest.raises(torch_type, match=rf"index {bad} is out of range for dim \d of size {SIZE}") as raised:
        _lf(name, index, device)
    assert isinstance(raised.value, InvalidIndexError)
    np.testing.assert_array_equal(kept.numpy(), np.arange(5) * 2 + 1)
    np.testing.assert_array_equal(before.numpy(), np.arange(5) * 2)
    good = [0, 2, 5, 1]
    np.testing.assert_allclose(_lf(name, good, device), OPS[name](torch, torch.tensor(good), {}).numpy(), rtol=1e-6)


def test_an_ignored_target_is_not_checked_and_counts_nothing():
    target = [0, -100, 3, -100]
    for name in ("nll_loss", "nll_loss_none", "cross_entropy", "cross_entropy_smoothing"):
        np.testing.assert_allclose(_lf(name, target), OPS[name](torch, torch.tensor(target), {}).numpy(), rtol=1e-6)
    ours = F.nll_loss(_logp(lf, {}), lf.tensor(np.array([7, 1, 2, 3])), ignore_index=7).item()
    assert ours == pytest.approx(TF.nll_loss(_logp(torch, {}), torch.tensor([7, 1, 2, 3]), ignore_index=7).item())


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(-SIZE, SIZE - 1), min_size=4, max_size=4), st.sampled_from(sorted(OPS)))
def test_in_range_indices_give_torchs_values(index, name):
    if any(i < 0 for i in index) and name not in NEGATIVE_OK:
        index = [i % SIZE for i in index]
    np.testing.assert_allclose(_lf(name, index), OPS[name](torch, torch.tensor(index), {}).numpy(), rtol=1e-5, atol=1e-6)


def test_a_replay_with_bad_data_raises_and_one_with_good_data_after_works():
    index = lf.tensor(np.array([0, 2, 5, 1]))
    src = lf.tensor(np.arange(4, dtype=np.float32))
    g = lf.capture(lf.device("cpu"), lambda: lf.zeros(SIZE).index_add(0, index, src) * 2)
    expect = (torch.zeros(SIZE).index_add(0, torch.tensor([0, 2, 5, 1]), torch.arange(4.0)) * 2).numpy()
    np.testing.assert_array_equal(g.replay().numpy(), expect)
    index.copy_(np.array([0, 2, 6, 1]))
    with pytest.raises(IndexError, match="index 6 is out of range for dim 0 of size 6"):
        g.replay().numpy()
    index.copy_(np.array([0, 2, 5, 1]))
    np.testing.assert_array_equal(g.replay().numpy(), expect)


@contextlib.contextmanager
def _stream_on():
    saved, saved_min = os.environ.get("LAZYFUSE_ASYNC"), stream_module.MIN_LAUNCHES
    os.environ["LAZYFUSE_ASYNC"] = "1"
    stream_module.MIN_LAUNCHES = 0
    try:
        yield
    finally:
        stream_module.MIN_LAUNCHES = saved_min
        if saved is None:
            del os.environ["LAZYFUSE_ASYNC"]
        else:
            os.environ["LAZYFUSE_ASYNC"] = saved


@pytest.mark.skipif(lf.device("cpu").stream is None, reason="the cpu device runs the interpreter here: no stream")
def test_on_the_async_stream_the_error_is_raised_at_the_next_wait():
    dev = lf.device("cpu")
    with _stream_on():
        before = lf.tensor(np.arange(4, dtype=np.float32)) * 3
        dev.engine.sync("test: a drain of its own")
        bad = lf.zeros(SIZE).scatter_add(0, lf.tensor(np.array([0, 9])), lf.ones(2))
        dev.engine.sync("test: queue the failing drain")
        with pytest.raises(IndexError, match="index 9 is out of range"):
            lf.sync(dev)
        with pytest.raises(lf.ShapeError):
            bad.numpy()
        np.testing.assert_array_equal(before.numpy(), np.arange(4) * 3)
        np.testing.assert_array_equal(lf.zeros(SIZE).scatter_add(0, lf.tensor(np.array([0, 5])), lf.ones(2)).numpy(),
                                      torch.zeros(SIZE).scatter_add(0, torch.tensor([0, 5]), torch.ones(2)).numpy())
