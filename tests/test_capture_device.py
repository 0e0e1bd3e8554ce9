"""Capture and replay on the device named by ``LAZYFUSE_TEST_DEVICE`` (default ``cpu``).

CI runs these on the cpu host graph; ``bench/gpu_check.py`` runs this file with
``LAZYFUSE_TEST_DEVICE=cuda``, where the graphs are ``torch.cuda.CUDAGraph`` captures. The
rules here are the ones a GPU run broke: a capture after an earlier graph was dropped (torch's
graph memory pool must not be shared with a graph that no longer exists), live graphs replayed
in any order, and the capture run taking effect (a CUDA capture records kernels without running
them; the cpu's host graph runs them).
"""
import gc
import os

import numpy as np
import torch

import lazyfuse as lf

DEVICE = lf.device(os.environ.get("LAZYFUSE_TEST_DEVICE", "cpu"))
F = lf.nn.functional


def _step(hidden: int, seed: int):
    """A decode-like step on DEVICE and its float64 torch reference."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(1, hidden, generator=g)
    w1 = torch.randn(2 * hidden, hidden, generator=g) / hidden ** 0.5
    w2 = torch.randn(hidden, 2 * hidden, generator=g) / hidden ** 0.5
    lx, lw1, lw2 = (lf.tensor(t, device=DEVICE) for t in (x, w1, w2))

    def step():
        h = F.rms_norm(lx, (hidden,))
        return lx + F.linear(F.silu(F.linear(h, lw1)), lw2)

    def ref(xv: torch.Tensor) -> np.ndarray:
        xd, w1d, w2d = xv.double(), w1.double(), w2.double()
        h = torch.nn.functional.rms_norm(xd, (hidden,), eps=torch.finfo(torch.float32).eps)
        return (xd + torch.nn.functional.silu(h @ w1d.T) @ w2d.T).numpy()

    return lx, step, ref


def _check_replay(graph, lx, ref, seed: int) -> None:
    xv = torch.randn(1, lx.shape[1], generator=torch.Generator().manual_seed(seed))
    lx.copy_(lf.tensor(xv, device=DEVICE))
    np.testing.assert_allclose(graph.replay().numpy(), ref(xv), rtol=1e-4, atol=1e-5)


def test_captures_after_a_dropped_graph_stay_on_hardware():
    for round_ in range(3):
        lx, step, ref = _step(32, seed=round_)
        graph = lf.capture(DEVICE, step)
        assert graph.is_hardware, graph.fallback_reason
        _check_replay(graph, lx, ref, seed=10 + round_)
        del graph
        gc.collect()


def test_live_graphs_replay_in_any_order():
    a_x, a_step, a_ref = _step(32, seed=1)
    b_x, b_step, b_ref = _step(64, seed=2)
    a, b = lf.capture(DEVICE, a_step), lf.capture(DEVICE, b_step)
    assert a.is_hardware and b.is_hardware, (a.fallback_reason, b.fallback_reason)
    for i, (graph, lx, ref) in enumerate([(b, b_x, b_ref), (a, a_x, a_ref), (a, a_x, a_ref), (b, b_x, b_ref)]):
        _check_replay(graph, lx, ref, seed=20 + i)


def test_the_capture_run_takes_effect_like_every_warmup():
    """Capture (docs/semantics.md) runs the closure warmup_iters + 1 times before capture returns, on every device:
    its in-place writes land and the output holds the capture run's value."""
    counter = lf.zeros((4,), device=DEVICE)

    def step():
        counter.add_(1)
        return counter * 2

    graph = lf.capture(DEVICE, step, warmup_iters=3)
    np.testing.assert_array_equal(counter.numpy(), np.full(4, 4.0))
    np.testing.assert_array_equal(graph.output.numpy(), np.full(4, 8.0))
    graph.replay()
    np.testing.assert_array_equal(graph.output.numpy(), np.full(4, 10.0))
