"""Multi-output and foreach kernels, against torch, on the CPU and on Triton's interpreter, eagerly
and captured. Multi-output: a pointwise kernel that reads another pointwise kernel's output over
the same iteration space at its own index computes it itself and stores both (an optimizer
update: moments and parameter in one kernel); a read at another index keeps them apart.
Foreach: independent in-place updates of several buffers (an optimizer step over every
parameter) are launched as one kernel; an update that reads what another overwrites is not."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import lazyfuse as lf
from lazyfuse.testing import count_launches

DEVICES = ["cpu", "interpreter"] + (["cuda"] if torch.cuda.is_available() else [])   # gpu_check runs this file
FEW = settings(max_examples=8, deadline=None, derandomize=True)


def _adam_like(p, g, m, v, b1=0.9, b2=0.99, lr=0.1):
    """Three covering writes, each reading the previous ones' new values at its own index."""
    m.copy_(m * b1 + g * (1 - b1))
    v.copy_(v * b2 + g * g * (1 - b2))
    p.copy_(p - lr * m / (v.sqrt() + 1e-8))


def _arrays(shape, seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape) for _ in range(3)] + [rng.uniform(0.1, 1.0, shape)]


@pytest.mark.parametrize("device", DEVICES)
@FEW
@given(shape=st.lists(st.integers(1, 6), min_size=0, max_size=3).map(tuple), seed=st.integers(0, 2 ** 16))
def test_three_in_place_updates_are_one_kernel_and_match_torch(device, shape, seed):
    dev = lf.device(device)
    arrays = _arrays(shape, seed)
    p, g, m, v = (lf.tensor(a, device=dev) for a in arrays)
    tp, tg, tm, tv = (torch.tensor(a) for a in arrays)
    lf.sync(dev)
    with count_launches(dev) as d:
        _adam_like(p, g, m, v)
        lf.sync(dev)
    _adam_like(tp, tg, tm, tv)
    assert d.kernels_launched == 1
    for mine, ref in ((p, tp), (m, tm), (v, tv)):
        np.testing.assert_allclose(mine.numpy(), ref.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_a_live_intermediate_and_its_consumer_share_a_kernel(device):
    dev = lf.device(device)
    a = np.linspace(-2, 2, 24, dtype=np.float32).reshape(4, 6)
    x = lf.tensor(a, device=dev)
    lf.sync(dev)
    with count_launches(dev) as d:
        y = (x * 3).exp()
        z = (y + x).tanh()
        lf.sync(dev)
    assert d.kernels_launched == 1
    ty = np.exp(a.astype(np.float64) * 3)
    np.testing.assert_allclose(y.numpy(), ty, rtol=1e-5)
    np.testing.assert_allclose(z.numpy(), np.tanh(ty + a), rtol=1e-5)


def test_a_read_at_another_index_keeps_the_kernels_apart():
    """``p`` reads ``m``'s new value transposed: element (i, j) needs the (j, i) computed
    elsewhere, so ``m`` is stored by a kernel of its own first."""
    dev = lf.device("cpu")
    arrays = _arrays((5, 5), 3)
    p, g, m = (lf.tensor(a, device=dev) for a in arrays[:3])
    lf.sync(dev)
    with count_launches(dev) as d:
        m.copy_(m * 0.5 + g)
        p.copy_(p - m.T * 0.1)
        lf.sync(dev)
    tm = arrays[2] * 0.5 + arrays[1]
    assert d.kernels_launched == 2
    np.testing.assert_allclose(m.numpy(), tm, rtol=1e-12)
    np.testing.assert_allclose(p.numpy(), arrays[0] - tm.T * 0.1, rtol=1e-12)


def test_a_read_of_the_old_value_after_the_write_stays_in_program_order():
    """``b`` reads ``a`` before the write and ``c`` after it: merged or not, each sees its version."""
    dev = lf.device("cpu")
    x = lf.tensor(np.arange(6.0), device=dev)
    lf.sync(dev)
    b = x * 2
    x.copy_(x + 10)
    c = x * 3
    np.testing.assert_array_equal(b.numpy(), np.arange(6.0) * 2)
    np.testing.assert_array_equal(c.numpy(), (np.arange(6.0) + 10) * 3)
    np.testing.assert_array_equal(x.numpy(), np.arange(6.0) + 10)


@pytest.mark.filterwarnings("ignore:lazyfuse. graph replay falls back")
@pytest.mark.parametrize("device", DEVICES)
def test_a_captured_multi_output_update_replays_every_step(device):
    """On the interpreter (no graphs) the capture runs the closure once and replay re-runs it."""
    dev = lf.device(device)
    arrays = _arrays((3, 4), 7)
    p, g, m, v = (lf.tensor(a, device=dev) for a in arrays)
    tp, tg, tm, tv = (torch.tensor(a) for a in arrays)

    def step():
        _adam_like(p, g, m, v)
        return p
    graph = lf.capture(dev, step)
    assert graph.is_hardware == dev.supports_graphs and graph.num_launches == (1 if graph.is_hardware else 0)
    for _ in range(4 if dev.supports_graphs else 1):    # the warmup runs and the capture run
        _adam_like(tp, tg, tm, tv)
    for k in range(3):
        g.copy_(arrays[1] * (k + 2))
        tg.copy_(torch.tensor(arrays[1] * (k + 2)))
        graph.replay()
        _adam_like(tp, tg, tm, tv)
    for mine, ref in ((p, tp), (m, tm), (v, tv)):
        np.testing.assert_allclose(mine.numpy(), ref.numpy(), rtol=1e-12, atol=1e-12)


# -- foreach: independent in-place updates of several buffers in one launch -------------------------
def _update_all(tensors, k=1.0):
    for p, g, m, v in tensors:
        _adam_like(p, g, m, v, lr=0.1 * k)


@pytest.mark.parametrize("device", DEVICES)
@FEW
@given(shapes=st.lists(st.lists(st.integers(1, 5), min_size=0, max_size=3).map(tuple), min_size=2, max_size=4),
       seed=st.integers(0, 2 ** 16))
def test_updates_of_several_buffers_are_one_foreach_kernel(device, shapes, seed):
    dev = lf.device(device)
    arrays = [_arrays(shape, seed + j) for j, shape in enumerate(shapes)]
    mine = [[lf.tensor(a, device=dev) for a in group] for group in arrays]
    ref = [[torch.tensor(a) for a in group] for group in arrays]
    lf.sync(dev)
    with count_launches(dev) as d:
        _update_all(mine)
        lf.sync(dev)
    _update_all(ref)
    assert d.kernels_launched == 1
    for group, tgroup in zip(mine, ref):
        for a, b in zip(group, tgroup):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-12)


def test_an_update_reading_a_buffer_another_overwrites_is_not_in_its_foreach():
    """``b`` reads ``a`` transposed before ``a`` is overwritten: in one launch the two could run
    at once (a GPU's programs), so ``b``'s kernel runs first, then ``a``'s."""
    dev = lf.device("cpu")
    a0, b0 = np.arange(9.0).reshape(3, 3), np.ones((3, 3))
    a, b = lf.tensor(a0, device=dev), lf.tensor(b0, device=dev)
    lf.sync(dev)
    with count_launches(dev) as d:
        b.copy_(b + a.T)
        a.copy_(a * 2)
        lf.sync(dev)
    assert d.kernels_launched == 2
    np.testing.assert_array_equal(b.numpy(), b0 + a0.T)
    np.testing.assert_array_equal(a.numpy(), a0 * 2)


@pytest.mark.filterwarnings("ignore:lazyfuse. graph replay falls back")
@pytest.mark.parametrize("device", DEVICES)
def test_a_captured_foreach_update_replays_every_step(device):
    """On the interpreter (no graphs) the capture runs the closure once and replay re-runs it."""
    dev = lf.device(device)
    arrays = [_arrays(shape, j) for j, shape in enumerate([(3, 4), (4,), ()])]
    mine = [[lf.tensor(a, device=dev) for a in group] for group in arrays]
    ref = [[torch.tensor(a) for a in group] for group in arrays]

    def step():
        _update_all(mine)
        return mine[0][0]
    graph = lf.capture(dev, step)
    assert graph.is_hardware == dev.supports_graphs and graph.num_launches == (1 if graph.is_hardware else 0)
    for _ in range(4 if dev.supports_graphs else 1):    # the warmup runs and the capture run
        _update_all(ref)
    for k in range(3):
        for group, tgroup, a in zip(mine, ref, arrays):
            group[1].copy_(a[1] * (k + 2))
            tgroup[1].copy_(torch.tensor(a[1] * (k + 2)))
        graph.replay()
        _update_all(ref)
    for group, tgroup in zip(mine, ref):
        for a, b in zip(group, tgroup):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-12)
