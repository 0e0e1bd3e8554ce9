"""Data-dependent refusals (docs/semantics.md, Errors): the ops that take indices from data refuse
an out-of-range one at the drain as torch (CPU) does, with torch's exception type (lazyfuse's
``InvalidIndexError`` is an ``IndexError`` and a ``RuntimeError``) and a message naming the
index and the dim's size; afterwards the engine works and earlier tensors keep their values.
In-range data gives torch's values."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

import lazyfuse as lf
from lazyfuse.errors import InvalidIndexError

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


def test_on_the_async_stream_the_error_is_raised_at_the_next_wait():
    from test_async_stream import stream_on   # (it skips where the cpu device has no stream)
    dev = lf.device("cpu")
    with stream_on():
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


# -- integer division by zero: the fused kernel's error flag --------------------------------------
DIVISIONS = {
    "floor_divide": lambda m, a, b: a // b,
    "remainder": lambda m, a, b: a % b,
    "fmod": lambda m, a, b: m.fmod(a, b),
    "div_trunc": lambda m, a, b: m.div(a, b, rounding_mode="trunc"),
    "div_floor": lambda m, a, b: m.div(a, b, rounding_mode="floor"),
    "remainder_scalar": lambda m, a, b: a % 0 + b,
}


def _divide(name, m, a, b, device=None):
    kw = {} if m is torch else {"device": device}
    x, y = (m.tensor(np.array(v, dtype=np.int32 if name == "fmod" else np.int64), **kw) for v in (a, b))
    # (a sum of the quotients too: the division also inside a reduction's loop, masked lanes and all)
    q = DIVISIONS[name](m, x, y)
    return (q * 3).numpy(), q.reshape(-1).sum().item()


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
@pytest.mark.parametrize("name", sorted(DIVISIONS))
def test_an_integer_division_by_zero_raises_as_torchs_cpu_does(name, device):
    a, zero = list(range(-18, 19)), [3] * 37
    zero[20] = 0
    with pytest.raises(Exception) as torch_raised:
        _divide(name, torch, a, zero)
    assert type(torch_raised.value) is RuntimeError and str(torch_raised.value) == "ZeroDivisionError"
    before = lf.tensor(np.arange(4), device=device) * 2
    before.numpy()
    kept = before + 1
    with pytest.raises(RuntimeError, match="ZeroDivisionError") as raised:
        _divide(name, lf, a, zero, device)
    assert isinstance(raised.value, (lf.LazyfuseError, ZeroDivisionError))
    np.testing.assert_array_equal(kept.numpy(), np.arange(4) * 2 + 1)
    np.testing.assert_array_equal(before.numpy(), np.arange(4) * 2)
    if name != "remainder_scalar":   # (its divisor is the literal 0)
        nonzero = [3] * 20 + [-7] + [5] * 16
        ours, theirs = _divide(name, lf, a, nonzero, device), _divide(name, torch, a, nonzero)
        np.testing.assert_array_equal(ours[0], theirs[0])
        assert ours[1] == theirs[1]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(-50, 50), min_size=1, max_size=40), st.data(),
       st.sampled_from(sorted(set(DIVISIONS) - {"remainder_scalar"})))
def test_nonzero_integer_divisors_give_torchs_values(a, data, name):
    b = data.draw(st.lists(st.integers(-9, 9).filter(bool), min_size=len(a), max_size=len(a)))
    ours, theirs = _divide(name, lf, a, b, "cpu"), _divide(name, torch, a, b)
    np.testing.assert_array_equal(ours[0], theirs[0])
    assert ours[1] == theirs[1]


def test_integer_division_stays_fused_one_kernel():
    from lazyfuse.testing import count_launches
    a, b = lf.tensor(np.arange(1, 65)), lf.tensor(np.arange(64) % 5 + 1)
    (a // b).numpy()   # (built)
    with count_launches() as launched:
        ((a + 1) // b * 2 + a % (b + 3) - lf.fmod(a, b)).numpy()
    assert launched.kernels_launched == 1


def _kernels(device, result):
    from lazyfuse.ir.planner import DrainGraph
    from lazyfuse.runtime.backend import StepKind
    from lazyfuse.runtime.build import lower_steps, matmul_template, plan_and_lower, trace
    nodes, _leaves, _scalars, targets = trace([result._storage])
    graph = DrainGraph(nodes, [r for r, _ in targets], [t for _, t in targets])
    _, steps = plan_and_lower(graph, matmul_template(device), lambda p: lower_steps(nodes, p))
    return [st.kernel for st in steps if st.kind is StepKind.KERNEL]


def test_every_autotune_candidate_of_a_dividing_kernel_flags_and_other_kernels_get_no_flag(monkeypatch):
    from lazyfuse.codegen.c_printer import print_c
    from lazyfuse.codegen.triton_printer import candidate_configs, print_triton
    monkeypatch.setenv("LAZYFUSE_AUTOTUNE", "1")
    dev = lf.device("cpu")
    a = lf.tensor(np.arange(1, 4097).reshape(64, 64))
    for result, flagged in (((a // (a % 7 + 1)).sum(1), True), ((a * 2).sum(1), False), (a // 3 + a, True)):
        kernels = _kernels(dev, result)
        assert any(k.error_flag_word is not None for k in kernels) is flagged
        for k in kernels:
            c_sources = [print_c(k, cfg) for cfg in dev.backend.candidates(k)]
            t_sources = [print_triton(k, cfg)[1] for i in (False, True) for cfg in candidate_configs(k, i)]
            assert len(c_sources) > 1 or not flagged
            for src in c_sources:
                assert ("lf_err" in src) is (k.error_flag_word is not None)
            for src in t_sources:
                assert ("tl.store(meta +" in src) is (k.error_flag_word is not None)
        del result


def test_a_replay_meeting_a_zero_divisor_raises_and_one_after_with_good_data_works():
    a, b = lf.tensor(np.arange(8)), lf.tensor(np.full(8, 3))
    g = lf.capture(lf.device("cpu"), lambda: a // b + 1)
    np.testing.assert_array_equal(g.replay().numpy(), np.arange(8) // 3 + 1)
    b.copy_(np.array([3, 3, 0, 3, 3, 3, 3, 3]))
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        g.replay().numpy()
    b.copy_(np.full(8, 2))
    np.testing.assert_array_equal(g.replay().numpy(), np.arange(8) // 2 + 1)


def test_on_the_async_stream_a_zero_divisor_is_raised_at_the_next_wait():
    from test_async_stream import stream_on   # (it skips where the cpu device has no stream)
    dev = lf.device("cpu")
    with stream_on():
        before = lf.tensor(np.arange(4)) * 3
        dev.engine.sync("test: a drain of its own")
        bad = lf.tensor(np.arange(4)) % lf.tensor(np.array([1, 0, 1, 1]))
        dev.engine.sync("test: queue the failing drain")
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            lf.sync(dev)
        with pytest.raises(RuntimeError):
            bad.numpy()
        np.testing.assert_array_equal(before.numpy(), np.arange(4) * 3)
        np.testing.assert_array_equal((lf.tensor(np.arange(4)) % 3).numpy(), np.arange(4) % 3)
