"""bench/torch_frontend.py's page and the floors under issue 19's bars (bench/torch_frontend_floors.py):
the matmuls it times are the captured step's own calls and torch's own, remade right; its dispatch
counter counts what torch dispatches (a TorchDispatchMode on plain torch is the reference); the smoke
run writes the page with the bars and both floors."""
import json

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import lazyfuse as lf
from bench import common
from bench import torch_frontend
from bench import torch_frontend_floors as floors
from lazyfuse.torch_frontend import LazyTensor


def test_the_captured_matmuls_are_the_replays_own_calls():
    """Each library matmul of a capture is listed with its sizes and orientation, and its call is
    the replay's: run alone after new input data, it writes the graph's output anew."""
    dev = lf.device("cpu")
    rng = np.random.default_rng(0)
    x = lf.tensor(rng.standard_normal((300, 200)).astype(np.float32), device=dev)
    w = lf.tensor(rng.standard_normal((100, 200)).astype(np.float32), device=dev)   # (a linear's weight)
    graph = lf.capture(dev, lambda: x @ w.T)
    (mm, call), = floors.lazyfuse_matmuls(graph)
    assert mm.size == (1, 300, 200, 100) and mm.b_column_major and not mm.a_column_major
    assert mm.flops == 2 * 300 * 200 * 100
    fresh = rng.standard_normal((300, 200)).astype(np.float32)
    x.copy_(fresh)
    lf.sync(dev)
    call()
    np.testing.assert_allclose(graph.output.numpy(), fresh @ w.numpy().T, rtol=1e-4, atol=1e-4)


def test_torch_matmuls_records_a_linear_layers_three_products_and_remakes_each_call():
    torch.manual_seed(0)
    layer = torch.nn.Linear(24, 40)
    x = torch.randn(6, 24, requires_grad=True)

    def step():
        layer(x).square().sum().backward()

    matmuls, attention = floors.torch_matmuls(step)
    assert attention == []
    # forward (6x24 @ 24x40, the weight read transposed), the input's and the weight's gradients
    assert sorted(m.size for m, _ in matmuls) == sorted([(1, 6, 24, 40), (1, 6, 40, 24), (1, 40, 6, 24)])
    assert sum(m.flops for m, _ in matmuls) == 3 * 2 * 6 * 24 * 40
    forward = next(call for m, call in matmuls if m.size == (1, 6, 24, 40))
    assert forward.args[-1].stride() == (1, 24)   # (the weight's own transposed layout, kept)
    torch.testing.assert_close(forward(), layer(x).detach())


def test_the_dispatch_counter_counts_what_torch_dispatches_and_the_new_results():
    """An MLP's forward and backward: as many entries into the frontend's handler as a
    TorchDispatchMode sees for the same program on plain torch; an in-place op returns no new
    tensor, a view one; the handler is torch's own again after the block, an exception included."""
    class Count(TorchDispatchMode):
        ops = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops += 1
            return func(*args, **(kwargs or {}))

    def program(model, x):
        model(x).relu().sum().backward()

    def mlp():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))

    x = torch.randn(5, 8)
    plain, lazy, lazy_x = mlp(), lf.lazy(mlp()), lf.lazy(x)
    with Count() as want:
        program(plain, x)
    handler = LazyTensor.__dict__["__torch_dispatch__"]
    with floors.count_dispatches() as got:
        program(lazy, lazy_x)
    assert got.ops == want.ops > 10
    t = lf.lazy(torch.zeros(4))
    with floors.count_dispatches() as c:
        t.add_(1)
        t.view(2, 2)
    assert (c.ops, c.results) == (2, 1)
    with pytest.raises(ZeroDivisionError), floors.count_dispatches():
        1 / 0
    assert LazyTensor.__dict__["__torch_dispatch__"] is handler
    assert floors.lazy_floor_ms({"a": (10, 4), "b": (5, 0)}, 2.0, 1.0, 3.0) == pytest.approx(3.034)


def test_the_smoke_run_writes_its_page_with_the_bars_and_both_floors(tmp_path):
    try:
        assert torch_frontend.main(["--quick", "--out", str(tmp_path)]) == 0
    finally:
        common.configure(None)
    (page,) = tmp_path.glob("torch_frontend-*.json")
    data = json.loads(page.read_text())
    assert isinstance(data["verdicts"]["lazy bar met"], bool)
    cfg, x, _ = torch_frontend.gpt_setup(quick=True)
    rows, c = x.numel(), cfg.n_embd
    # torch's own step: each linear's forward and two gradients, 12 C^2 weights a layer and the head
    assert data["matmul_floor"]["torch flops"] == 6 * rows * (12 * cfg.n_layer * c * c + c * cfg.vocab_size)
    assert all(data["dispatches"][phase][0] > 0 for phase in ("forward", "backward", "optimizer"))
    markdown = next(tmp_path.glob("torch_frontend-*.md")).read_text()
    for section in ("## Bars (issue 19)", "## The captured bar's floor", "## The lazy bar's floor", "Smoke run"):
        assert section in markdown
