"""The cpu host graph's two replay paths: the short one (a plain hardware graph) and the general
one (overwrite checks, shared pools, random draws, replays inside a capture) give the same
outputs and counts; a replay sizes the kernels' thread teams only for a graph whose kernels open a
parallel region; C kernels, library calls and externs interleave in one replay."""
import numpy as np
import pytest
import torch

import lazyfuse as lf
from lazyfuse.testing import count_launches
from test_capture import make_block, rnd

CPU = lf.device("cpu")
pytestmark = pytest.mark.skipif(CPU.threads is None, reason="no C compiler: the interpreter runs the cpu device")


@pytest.mark.parametrize("hidden", [16, 64, 72])
def test_short_and_general_replay_paths_agree(hidden):
    """The same step captured twice: plainly (the short path) and with overwrite checks (the
    general path, which hands out fresh aliases). Same outputs for fresh inputs, same counts."""
    x, step, ref = make_block(hidden, widen=4, seed=hidden)   # the decode step of bench.capture
    plain = lf.capture(CPU, step)
    checked = lf.capture(CPU, step, check_overwrites=True)
    assert plain._plain and not checked._plain
    assert plain.num_launches == checked.num_launches
    for i in range(5):
        xv = rnd(1, hidden, seed=1000 + i)
        x.copy_(xv)
        with count_launches(CPU) as d_plain:
            a = plain.replay()
        with count_launches(CPU) as d_checked:
            b = checked.replay()
        assert a is plain.output and b is not checked.output
        np.testing.assert_array_equal(a.numpy(), b.numpy())
        np.testing.assert_allclose(a.numpy(), ref(xv), rtol=1e-5, atol=1e-5)
        for d in (d_plain, d_checked):
            assert d.graph_replays == 1 and d.kernels_launched == 0 and d.fusion_cache_misses == 0


def test_a_graph_that_starts_a_shared_pool_leaves_the_short_path():
    """Once another graph shares its pool, the first graph's replays must check their turn."""
    x = lf.tensor(rnd(32))
    first = lf.capture(CPU, lambda: (x * 2).exp())
    assert first._plain
    second = lf.capture(CPU, lambda: (x * 3).exp(), pool=first)
    assert not first._plain and not second._plain
    first.replay()
    second.replay()
    with pytest.raises(lf.CaptureError, match="capture order"):
        second.replay()
    first.reset()
    assert not first._plain


def test_pending_writes_land_before_a_short_path_replay():
    x, step, ref = make_block(16, widen=4, seed=5)
    g = lf.capture(CPU, step)
    xv = rnd(1, 16, seed=77)
    x.copy_(lf.tensor(xv) * 1.0)      # a lazy write, still pending when replay() starts
    np.testing.assert_allclose(g.replay().numpy(), ref(xv), rtol=1e-5, atol=1e-5)


def _count_applies(monkeypatch):
    calls = []
    real = CPU.threads.apply
    monkeypatch.setattr(CPU.threads, "apply", lambda: calls.append(1) or real())
    return calls


def test_a_replay_sizes_the_thread_team_only_for_threaded_kernels(monkeypatch):
    small = lf.tensor(rnd(48))
    serial = lf.capture(CPU, lambda: (small * 2 + 1).tanh())
    monkeypatch.setenv("LAZYFUSE_PARALLEL_THRESHOLD", "0")   # every kernel with a loop gets a region
    big = lf.tensor(rnd(3, 1000))
    threaded = lf.capture(CPU, lambda: (big * 2 - 1).exp().sum(-1))
    assert not serial._hardware.threaded and threaded._hardware.threaded
    calls = _count_applies(monkeypatch)
    serial.replay()
    assert not calls
    got = threaded.replay().numpy()
    assert calls
    np.testing.assert_allclose(got, np.exp(rnd(3, 1000).astype(np.float64) * 2 - 1).sum(-1), rtol=1e-5)


def test_kernels_library_calls_and_externs_interleave_in_one_replay():
    """A graph of C kernels around a library matmul and an extern: the C kernels between them
    are batched into runner calls, the others called in their place, in recorded order."""
    a, b = rnd(8, 32, seed=1), rnd(32, 24, seed=2)
    la, lb = lf.tensor(a), lf.tensor(b)

    def step():
        h = lf.matmul(la.exp() * 0.5, lb)                      # kernel, then a library matmul
        c = lf.extern(torch.cumsum, h.tanh() + 1, dim=1)       # kernel, then an extern
        return (c * 2).sum(-1) + c[:, 0]                        # kernels after it
    g = lf.capture(CPU, step)
    hw = g._hardware
    assert len(hw.launches) < len(hw.thunks) == g.num_launches
    assert hw.threaded   # torch's calls run on at most the budget's count too: a replay sizes it first
    for i in range(3):
        av = rnd(8, 32, seed=10 + i)
        la.copy_(av)
        h = np.tanh((np.exp(av.astype(np.float64)) * 0.5) @ b.astype(np.float64)) + 1
        c = np.cumsum(h, axis=1)
        np.testing.assert_allclose(g.replay().numpy(), (c * 2).sum(-1) + c[:, 0], rtol=1e-4, atol=1e-4)
