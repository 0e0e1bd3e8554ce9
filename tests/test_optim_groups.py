"""lf.optim's torch-style parameter groups, and hyperparameters that live on the device so a
schedule set between replays of a captured step takes effect (issue 15), against torch.optim."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import lazyfuse as lf

CPU = lf.device("cpu")


def _problem(lib, seed=0):
    """A tiny regression in float64: (params [w, b], loss closure)."""
    rng = np.random.default_rng(seed)
    w, b, x, y = rng.standard_normal((5, 3)), rng.standard_normal(3), rng.standard_normal((6, 5)), rng.standard_normal((6, 3))
    make = (lambda a, g: lf.tensor(a, requires_grad=g)) if lib is lf else (lambda a, g: torch.tensor(a, requires_grad=g))
    params = [make(w, True), make(b, True)]
    x, y = make(x, False), make(y, False)
    return params, lambda: ((x @ params[0] + params[1] - y).tanh() ** 2).sum()


OPTIMIZERS = {
    "adamw": lambda lib, groups: lib.optim.AdamW(groups, lr=0.05, betas=(0.8, 0.95)),
    "sgd": lambda lib, groups: lib.optim.SGD(groups, lr=0.05, momentum=0.5),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_param_groups_match_torch(name):
    results = []
    for lib in (lf, torch):
        (w, b), loss = _problem(lib)
        opt = OPTIMIZERS[name](lib, [{"params": [w], "weight_decay": 0.1, "lr": 0.1}, {"params": b}])
        for _ in range(5):
            opt.zero_grad()
            loss().backward()
            opt.step()
        results.append([t.numpy() if lib is lf else t.detach().numpy() for t in (w, b)])
        assert [len(g["params"]) for g in opt.param_groups] == [1, 1]
        assert opt.param_groups[0]["lr"] == 0.1 and opt.param_groups[1]["lr"] == 0.05
        assert opt.param_groups[0]["weight_decay"] == 0.1 and opt.param_groups[1]["weight_decay"] == 0.0 + \
            (0.01 if name == "adamw" else 0.0)
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_a_learning_rate_schedule_takes_effect_lazily_and_on_replay(name):
    """Steps 1-4 run lazily and as capture's warmup (each sees lr 0.05); then every replay runs
    with the lr set just before it, as torch's steps do."""
    schedule = [0.05] * 4 + [0.02, 0.01, 0.3, 0.0, 0.1]
    (tw, tb), tloss = _problem(torch)
    topt = OPTIMIZERS[name](torch, [tw, tb])
    for lr in schedule:
        for group in topt.param_groups:
            group["lr"] = lr
        topt.zero_grad()
        tloss().backward()
        topt.step()

    (w, b), loss = _problem(lf)
    opt = OPTIMIZERS[name](lf, [w, b])

    def step():
        opt.zero_grad(set_to_none=False)
        loss().backward()
        opt.step()
    graph = lf.capture(CPU, step)   # warmup 3 + the capture run: 4 steps at lr 0.05
    assert graph.is_hardware
    for lr in schedule[4:]:
        opt.param_groups[0]["lr"] = lr
        graph.replay()
    np.testing.assert_allclose(w.numpy(), tw.detach().numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(b.numpy(), tb.detach().numpy(), rtol=1e-9, atol=1e-12)


def test_betas_weight_decay_and_eps_are_device_values_too():
    (tw, tb), tloss = _problem(torch)
    topt = torch.optim.AdamW([tw, tb], lr=0.05)
    (w, b), loss = _problem(lf)
    opt = lf.optim.AdamW([w, b], lr=0.05)

    def step():
        opt.zero_grad(set_to_none=False)
        loss().backward()
        opt.step()
    graph = lf.capture(CPU, step)
    for _ in range(4):
        topt.zero_grad()
        tloss().backward()
        topt.step()
    changes = {"betas": (0.5, 0.9), "weight_decay": 0.3, "eps": 1e-3}
    for key, value in changes.items():
        opt.param_groups[0][key] = value
        topt.param_groups[0][key] = value
    graph.replay()
    topt.zero_grad()
    tloss().backward()
    topt.step()
    np.testing.assert_allclose(w.numpy(), tw.detach().numpy(), rtol=1e-9, atol=1e-12)


def test_bad_param_groups_are_refused_with_the_fix():
    (w, b), _ = _problem(lf)
    with pytest.raises(lf.ShapeError, match="more than one parameter group"):
        lf.optim.AdamW([{"params": [w]}, {"params": [w, b]}])
    with pytest.raises(lf.ShapeError, match="not options of AdamW"):
        lf.optim.AdamW([{"params": [w], "momentum": 0.9}])
    with pytest.raises(lf.ShapeError, match="'params' entry"):
        lf.optim.SGD([{"lr": 0.1}], lr=0.1)
    opt = lf.optim.SGD([w, b], lr=0.1)
    with pytest.raises(lf.ShapeError, match="lr=-1"):
        opt.param_groups[0]["lr"] = -1.0
    assert opt.param_groups[0]["lr"] == 0.1     # refused: the group is as it was
