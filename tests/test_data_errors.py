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
from lazyfuse.torch_index import checked_positions

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
F, TF = lf.nn.functional, torch.nn.functional
SIZE = 6


def out_of_range(value, dim, size):
    """The pattern of index ``value`` out of range along ``dim`` of ``size`` in a refusal: in torch's
    sentence where it names them (``index 6 is out of bounds for dimension 0 with size 6``), else in
    lazyfuse's parenthetical (``index 6 is out of range for dim 0 of size 6``)."""
    return rf"index {value} is out of (bounds for dimension {dim} with|range for dim {dim} of) size {size}"


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
    "index_select": lambda m, i, kw: m.arange(SIZE * 2.0, **kw).reshape(SIZE, 2).index_select(0, i),
    "embedding": lambda m, i, kw: m.nn.functional.embedding(i, m.arange(SIZE * 2.0, **kw).reshape(SIZE, 2)),
    "gather": lambda m, i, kw: m.arange(SIZE * 1.0, **kw).gather(0, i),
    "gather_2d": lambda m, i, kw: m.arange(SIZE * 3.0, **kw).reshape(3, SIZE).gather(1, i.reshape(1, 4)),
    "take_along_dim": lambda m, i, kw: m.take_along_dim(m.arange(SIZE * 1.0, **kw), i),
    "scatter": lambda m, i, kw: m.zeros(SIZE, **kw).scatter(0, i, m.ones(4, **kw)),
    "scatter_value": lambda m, i, kw: m.zeros(3, SIZE, **kw).scatter(1, i.reshape(1, 4), 2.0),
}
# what torch refuses: a negative index too, except index_fill's [-size, size)
NEGATIVE_OK = {"index_fill"}


@pytest.mark.parametrize("name", sorted(OPS))
@pytest.mark.parametrize("bad", [SIZE, -1])
def test_a_refusal_says_torchs_sentence(name, bad):
    """torch's message for the bad index, word for word, in ours (what a torch test's
    ``assertRaisesRegex`` and a program's message check match)."""
    if bad == -1 and name in NEGATIVE_OK:
        return
    index = [0, 2, bad, 1]
    with pytest.raises(Exception) as theirs:
        OPS[name](torch, torch.tensor(index), {})
    with pytest.raises(InvalidIndexError) as ours:
        _lf(name, index)
    sentence = str(theirs.value).splitlines()[0]
    assert sentence in str(ours.value)
    assert str(ours.value).startswith(sentence) or name.startswith("index_add")   # (its two sentences: cpu.py)


def test_take_along_dim_along_a_dim_reads_any_index_modulo_its_size_as_torchs():
    """torch's take_along_dim with a dim takes each index modulo the dim's size (its reference
    wraps the negative ones so, and so reads past the end too); without one it is a gather."""
    x = np.arange(18.0, dtype=np.float32).reshape(3, SIZE)
    index = np.array([[-7, -1, 0, 5, 6, 100]])
    want = torch.take_along_dim(torch.tensor(x), torch.tensor(index), 1)
    np.testing.assert_array_equal(lf.take_along_dim(lf.tensor(x), lf.tensor(index), 1).numpy(), want.numpy())
    with pytest.raises(RuntimeError, match="ZeroDivisionError") as raised:
        lf.take_along_dim(lf.zeros(2, 0), lf.tensor(np.array([[0]])), 1).numpy()
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        torch.take_along_dim(torch.zeros(2, 0), torch.tensor([[0]]), 1)
    assert isinstance(raised.value, lf.DivisionByZeroError)


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
    with pytest.raises(torch_type, match=out_of_range(bad, r"\d", SIZE)) as raised:
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
    with pytest.raises(IndexError, match=out_of_range(6, 0, 6)):
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
        with pytest.raises(IndexError, match=out_of_range(9, r"\d", r"\d+")):
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
                assert ("tl.atomic_max(meta +" in src) is (k.error_flag_word is not None)
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


# -- the index checks are fused: a check sets its kernel's error flag -------------------------------
# each op's launches on the 4-entry index of OPS. The losses launch as many as before any check was
# made (the commit before the checks, 78f6c38^: the check is in their per-sample count); one_hot
# and the index writes one more, their positions checked once per index, not once per element of
# the broadcast read (the planner's ``_read_expanded``), where the checked gather of arange the
# checks were first made with took one more than that (cross_entropy: 6)
LAUNCHES = {"cross_entropy": 2, "cross_entropy_smoothing": 4, "index_add": 2, "index_add_2d": 3, "index_copy": 6,
            "index_fill": 3, "nll_loss": 2, "nll_loss_none": 1, "one_hot": 2, "scatter_add": 2, "scatter_add_2d": 3,
            # the gathers: the range checked by the library gather on the host (cpu, interpreter), none
            # added to the arange of the table and the gather (gather's index arithmetic, where its check
            # fuses, the third); scatter: torch's own, an extern, which checks as it runs
            "index_select": 2, "embedding": 2, "gather": 3, "gather_2d": 3, "take_along_dim": 3, "scatter": 3,
            "scatter_value": 2}


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
@pytest.mark.parametrize("name", sorted(OPS))
def test_a_checked_op_launches_at_most_one_kernel_for_its_check(name, device):
    from lazyfuse.testing import count_launches
    _lf(name, [0, 2, 5, 1], device)   # (built)
    index = lf.tensor(np.array([0, 2, 5, 1]), device=device)
    lf.sync(lf.device(device))
    with count_launches(lf.device(device)) as launched:
        OPS[name](lf, index, {"device": device}).numpy()
    assert launched.kernels_launched == LAUNCHES[name]


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
def test_cross_entropy_of_4096_by_512_is_two_kernels_and_refuses_a_bad_target(device):
    from lazyfuse.testing import count_launches
    rng = np.random.default_rng(0)
    logits, target = rng.standard_normal((4096, 512), dtype=np.float32), rng.integers(0, 512, 4096)
    x, t = lf.tensor(logits, device=device), lf.tensor(target, device=device)
    F.cross_entropy(x, t).item()   # (built)
    with count_launches(lf.device(device)) as launched:
        ours = F.cross_entropy(x, t).item()
    assert launched.kernels_launched == 2
    assert ours == pytest.approx(TF.cross_entropy(torch.tensor(logits), torch.tensor(target)).item(), rel=1e-5)
    target[4000] = 512
    with pytest.raises(InvalidIndexError, match=r"nll_loss target: index 512 is out of range for dim 1 of size 512"):
        F.cross_entropy(x, lf.tensor(target, device=device)).item()
    target[4000] = -100   # ignore_index: not checked
    assert F.cross_entropy(x, lf.tensor(target, device=device)).item() == pytest.approx(
        TF.cross_entropy(torch.tensor(logits), torch.tensor(target)).item(), rel=1e-5)


def test_a_new_size_or_class_count_compiles_nothing():
    def run(n, c):
        rng = np.random.default_rng(n * c)
        x, t = rng.standard_normal((n, c), dtype=np.float32), rng.integers(0, c, n)
        ours = [F.cross_entropy(lf.tensor(x), lf.tensor(t)).item(), F.one_hot(lf.tensor(t), c).numpy(),
                lf.zeros(c).index_add(0, lf.tensor(t), lf.ones(n)).numpy()]
        theirs = [TF.cross_entropy(torch.tensor(x), torch.tensor(t)).item(), TF.one_hot(torch.tensor(t), c).numpy(),
                  torch.zeros(c).index_add(0, torch.tensor(t), torch.ones(n)).numpy()]
        assert ours[0] == pytest.approx(theirs[0], rel=1e-5)
        for a, b in zip(ours[1:], theirs[1:]):
            np.testing.assert_array_equal(a, b)
    run(64, 10)
    before = lf.stats().compiler_runs
    for n, c in [(64, 11), (100, 10), (77, 13)]:   # (the dim's size is the check's runtime scalar)
        run(n, c)
    assert lf.stats().compiler_runs == before


@pytest.mark.filterwarnings("ignore:.*no graph support")   # (the interpreter's replay re-runs the closure)
@pytest.mark.parametrize("device", ["cpu", "interpreter"])
def test_a_replay_with_a_bad_target_raises_and_one_with_good_targets_after_works(device):
    rng = np.random.default_rng(1)
    logits, good = rng.standard_normal((16, 6), dtype=np.float32), rng.integers(0, 6, 16)
    x, t = lf.tensor(logits, device=device), lf.tensor(good, device=device)
    g = lf.capture(lf.device(device), lambda: F.cross_entropy(x, t) * 2)
    expect = 2 * TF.cross_entropy(torch.tensor(logits), torch.tensor(good)).item()
    assert g.replay().item() == pytest.approx(expect, rel=1e-5)
    bad = good.copy()
    bad[3] = 9
    t.copy_(bad)
    with pytest.raises(InvalidIndexError, match=out_of_range(9, 1, 6)):
        g.replay().item()
    t.copy_(good)
    assert g.replay().item() == pytest.approx(expect, rel=1e-5)


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
def test_a_value_of_the_failing_kernel_that_reads_no_check_keeps_its_value(device):
    """(execute ``salvage``: the kernel ran to its end, and only what reads a failed check is lost.)"""
    from lazyfuse.torch_index import checked_positions
    from lazyfuse.testing import count_launches
    dev = lf.device(device)
    t = lf.tensor(np.array([0, 3, 2, 5]), device=device)
    doubled = t * 2
    moved = checked_positions(t, 0, 10, False, "probe") + doubled
    with count_launches(dev) as launched:
        lf.sync(dev)
    assert launched.kernels_launched == 1   # (one kernel writes both)
    t = lf.tensor(np.array([0, 3, 12, 5]), device=device)
    doubled = t * 2
    moved = checked_positions(t, 0, 10, False, "probe") + doubled
    with pytest.raises(InvalidIndexError, match=out_of_range(12, 0, 10) +
                       r" \(probe: out of range; indices must lie in \[0, 10\)\)"):
        lf.sync(dev)
    with pytest.raises(InvalidIndexError):
        moved.numpy()
    np.testing.assert_array_equal(doubled.numpy(), [0, 6, 24, 10])
    # written in place by the failing kernel (it ran to its end): kept, and never written twice
    y = lf.tensor(np.array([1, 2, 3, 4]), device=device)
    y.mul_(2)
    moved = checked_positions(t, 0, 10, False, "probe") + y
    with pytest.raises(InvalidIndexError):
        lf.sync(dev)
    np.testing.assert_array_equal(y.numpy(), [2, 4, 6, 8])
    np.testing.assert_array_equal((y + 1).numpy(), [3, 5, 7, 9])
    np.testing.assert_array_equal((lf.tensor(np.array([1, 2]), device=device) * 3).numpy(), [3, 6])


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
@pytest.mark.parametrize("index", [0, [0], 1, [1], -1, [2]])
def test_index_add_into_a_0d_tensor_checks_its_index(index, device):
    def call(m, **kw):
        return m.tensor(5.0, **kw).index_add(0, m.tensor(index, **kw), m.tensor(2.0, **kw), alpha=3)
    try:
        want = call(torch).numpy()
    except IndexError:
        with pytest.raises(InvalidIndexError, match=rf"index -?\d is out of bounds for dimension 0 with size 1 \(index_add"):
            call(lf, device=device).numpy()
        return
    np.testing.assert_array_equal(call(lf, device=device).numpy(), want)


def test_every_autotune_candidate_of_a_checking_kernel_sets_its_flag(monkeypatch):
    from lazyfuse.codegen.c_printer import print_c
    from lazyfuse.codegen.triton_printer import candidate_configs, print_triton
    monkeypatch.setenv("LAZYFUSE_AUTOTUNE", "1")
    dev = lf.device("cpu")
    # (sizes where the checking kernel has several candidates: 3 in C and 5 in Triton for the
    # loss's reduction, 2 and 8 for one_hot's check)
    x = lf.tensor(np.random.default_rng(2).standard_normal((65536, 8), dtype=np.float32))
    t = lf.tensor(np.arange(65536) % 8)
    for result in (F.cross_entropy(x, t), F.one_hot(t, 8)):
        kernels = _kernels(dev, result)
        checking = [k for k in kernels if k.index_checks]
        assert len(checking) == 1 and all(k.error_flag_word is None for k in kernels if not k.index_checks)
        k = checking[0]
        c_sources = [print_c(k, cfg) for cfg in dev.backend.candidates(k)]
        t_sources = [print_triton(k, cfg)[1] for i in (False, True) for cfg in candidate_configs(k, i)]
        assert len(c_sources) > 1 and len(t_sources) > 1
        for src in c_sources:
            assert "lf_err[0] = 2; " in src and "lf_err[1] = lf_i;" in src
        for src in t_sources:
            assert f"tl.atomic_max(meta + {k.error_flag_word} + " in src and f"tl.store(meta + {k.error_flag_word + 1} + " in src
        del result


def test_checked_ops_raise_under_the_forced_candidate():
    """(Run by tests/test_autotune_candidates.py once per candidate index, on each device: the
    default device is the sweep's.) A bad index raises, a good one gives torch's values."""
    rng = np.random.default_rng(3)
    # (sizes where each checking kernel has several candidates: see the test above)
    for size, n, make in ((8, 16384, lambda m, i: m.nn.functional.cross_entropy(
                               m.tensor(np.linspace(-3, 3, 16384 * 8, dtype=np.float32).reshape(16384, 8)), i,
                               label_smoothing=0.1).reshape(1)),
                          (8, 65536, lambda m, i: m.nn.functional.one_hot(i, 8)),
                          (300, 4096, lambda m, i: m.zeros(300).index_add(0, i, m.ones(4096)))):
        index = rng.integers(0, size, n)
        np.testing.assert_allclose(make(lf, lf.tensor(index)).numpy(), make(torch, torch.tensor(index)).numpy(),
                                   rtol=1e-5)
        index[n // 2] = size + 1
        with pytest.raises(InvalidIndexError, match=out_of_range(size + 1, r"\d", size)):
            make(lf, lf.tensor(index)).numpy()
    for name in sorted(OPS):
        with pytest.raises(InvalidIndexError, match=out_of_range(SIZE, r"\d", r"\d+")):
            OPS[name](lf, lf.tensor(np.array([0, 2, SIZE, 1])), {}).numpy()
        good = [0, 2, 5, 1]
        np.testing.assert_allclose(OPS[name](lf, lf.tensor(np.array(good)), {}).numpy(),
                                   OPS[name](torch, torch.tensor(good), {}).numpy(), rtol=1e-6)


def test_a_gpus_deferred_read_of_a_kernels_flag_raises_once_and_replays_read_it_again():
    """The CUDA path's logic (``DeviceIndexCheck.watch``: no GPU here) on host tensors: a watched
    launch's flag is read at the next user drain, raised with the op, index, dim and size, and
    cleared; a graph's watched launches are read again after each replay."""
    from types import SimpleNamespace
    from lazyfuse.runtime.triton_devices import DeviceIndexCheck
    check = DeviceIndexCheck(torch.device("cpu"))
    words = torch.zeros(6, dtype=torch.int64)   # header (2), the size scalar, a scalar, flag, index word
    words[2] = 10
    meta = SimpleNamespace(buffer=SimpleNamespace(tensor=words))
    step = SimpleNamespace(error_flag=4, name="k0", index_checks=(("one_hot", 0, False, 2),))
    values = iter([3, 12, 4])

    def kernel():   # what the kernel does: the flag set where an index is out of [0, size)
        v = next(values)
        if not 0 <= v < int(words[2]):
            words[5], words[4] = v, 2

    check.recording = []
    launch = check.watch(kernel, meta, step)
    launch()
    recorded, check.recording = check.recording, None
    check.raise_if_set("cuda:0")   # 3: in range
    kernel()   # a replay of the graph runs the recorded kernel, not the launch
    check.replayed(recorded)
    with pytest.raises(InvalidIndexError, match=r"one_hot: index 12 is out of range for dim 0 of size 10"):
        check.raise_if_set("cuda:0")
    assert int(words[4]) == 0
    check.raise_if_set("cuda:0")   # cleared: raised once
    launch()
    check.raise_if_set("cuda:0")


def test_a_gpus_flag_raised_by_one_replay_survives_the_next_until_read(monkeypatch):
    """The CUDA path (``DeviceMeta``, ``DeviceIndexCheck``: no GPU here) on host tensors standing
    in for device memory: a replay runs the graph's recorded metadata push, then its kernel. The
    push copies the header and scalars only, so a check that failed in the first of two replays
    is still raised at the read after the second; the flag words a pool buffer held before are
    cleared once, when the capture closes (not inside it: each replay would clear them again)."""
    from types import SimpleNamespace
    from lazyfuse.runtime.triton_devices import DeviceIndexCheck, DeviceMeta
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)   # (no events to record)
    words = torch.full((6,), 7, dtype=torch.int64)   # header (2), the size, a scalar, flag, index word
    meta = DeviceMeta.__new__(DeviceMeta)   # (its pinned staging needs a GPU: a host one here)
    meta.buffer, meta.staging, meta._copied, meta._pushed, meta._count = \
        SimpleNamespace(tensor=words, numel=6), torch.zeros(6, dtype=torch.int64), None, False, 0
    meta._words = meta.staging.numpy()
    step = SimpleNamespace(error_flag=4, name="k0", index_checks=(("one_hot", 0, False, 2),))
    values = iter([3, 12, 4])

    def kernel():   # what the kernel does: the flag raised where an index is out of [0, size)
        v = next(values)
        if not 0 <= v < int(words[2]):
            words[5], words[4] = v, max(int(words[4]), 2)

    check = DeviceIndexCheck(torch.device("cpu"))
    check.recording = []
    meta.write([1, 1], [10, 0])
    launch = check.watch(kernel, meta, step)
    assert int(words[4]) == 7   # (not cleared inside the capture)
    launch()
    recorded, check.recording = check.recording, None
    check.capture_closed()
    assert words.tolist() == [1, 1, 10, 0, 0, 0]
    for _ in range(2):   # two replays (12, then 4: in range) before a host read
        meta.push()
        kernel()
        check.replayed(recorded)
    with pytest.raises(InvalidIndexError, match=r"one_hot: index 12 is out of range for dim 0 of size 10"):
        check.raise_if_set("cuda:0")
    check.raise_if_set("cuda:0")   # read once


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
@pytest.mark.parametrize("division_first", [False, True])
def test_a_division_by_zero_in_the_launch_of_a_failed_check_does_not_hide_it(device, division_first):
    # one kernel divides by zero in one lane and fails an index check in another: the flag's code
    # is raised to the greater (a check's), never overwritten, as a GPU (which reports no
    # division) needs; the Triton kernel is the GPU's
    dev = lf.device(device)
    a, d = lf.tensor(np.array([6, 4, 2, 8]), device=dev), lf.tensor(np.array([1, 0, 1, 1]), device=dev)
    checked = checked_positions(lf.tensor(np.array([0, 1, 9, 2]), device=dev), 0, 5, False, "probe")
    both = a // d + checked if division_first else checked + a // d
    assert len(_kernels(dev, both)) == 1
    with pytest.raises(InvalidIndexError, match=out_of_range(9, 0, 5) + r" \(probe: "):
        both.numpy()


def test_a_check_in_a_matmul_templates_epilogue_sets_its_flag():
    """On a Triton device a matmul is a tiled kernel whose epilogue takes in the elementwise ops
    after it (``Kernel.matmul``): a check there sets that kernel's flag as in any other."""
    from lazyfuse.torch_index import checked_positions
    rng = np.random.default_rng(4)
    a, w = rng.standard_normal((128, 128), dtype=np.float32), rng.standard_normal((128, 128), dtype=np.float32)
    A, W = lf.tensor(a, device="interpreter"), lf.tensor(w, device="interpreter")

    def shifted(index):   # (an index of the product's shape: read at the epilogue's own index)
        return (A @ W) + checked_positions(lf.tensor(index, device="interpreter"), 0, 5, False, "probe").float()
    good = np.arange(128 * 128).reshape(128, 128) % 5
    kernels = _kernels(lf.device("interpreter"), shifted(good))
    assert len(kernels) == 1 and kernels[0].matmul is not None and kernels[0].index_checks
    np.testing.assert_allclose(shifted(good).numpy(), a @ w + good, rtol=1e-4, atol=1e-4)
    bad = good.copy()
    bad[70, 3] = 9
    with pytest.raises(InvalidIndexError, match=out_of_range(9, 0, 5) + r" \(probe: "):
        shifted(bad).numpy()


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
def test_a_checked_kernel_with_runtime_sizes_names_the_checks_size(device):
    """(the size a failed check names is a scalar word, after the kernel's runtime sizes: a slice
    of a fused producer puts its offset there, which the message once read as the size)"""
    t = lf.tensor(np.array([0, 1, 2, 3, 9, 4, 5, 6, 7, 8]), device=device) + 0
    with pytest.raises(InvalidIndexError, match=r"one_hot: index 9 is out of range for dim 0 of size 6;"):
        F.one_hot(t[3:7], 6).numpy()
    good = lf.tensor(np.array([0, 1, 2, 3, 5, 4, 5, 0, 1, 2]), device=device) + 0
    np.testing.assert_array_equal(F.one_hot(good[3:7], 6).numpy(), TF.one_hot(torch.tensor([3, 5, 4, 5]), 6).numpy())


ONE_BAD_INDEX = {
    "gather": lambda m: m.ones(6).gather(0, m.tensor([0, 9])),
    "tensor_index": lambda m: m.ones(6)[m.tensor([0, 9])],
    "index_copy": lambda m: m.zeros(6).index_copy(0, m.tensor([0, 9]), m.ones(2)),
    "index_add": lambda m: m.zeros(6).index_add(0, m.tensor([0, 9]), m.ones(2)),
    "one_hot": lambda m: m.nn.functional.one_hot(m.tensor([0, 9]), 6),
}


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
@pytest.mark.parametrize("name", sorted(ONE_BAD_INDEX))
def test_an_out_of_range_message_names_the_index_and_the_size_once(name, device):
    with pytest.raises(Exception) as theirs:
        ONE_BAD_INDEX[name](torch)
    with lf.device(device), pytest.raises(InvalidIndexError) as ours:
        ONE_BAD_INDEX[name](lf).numpy()
    text = str(ours.value)
    assert text.startswith(str(theirs.value).splitlines()[0]), text
    assert text.count("9") == 1 and text.count("size 6") == 1, text   # torch's sentence or ours, not both
    assert "[0, 6)" in text or "[-6, 6)" in text, text
