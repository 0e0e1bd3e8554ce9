"""``lf.nn.init``, ``lf.optim.Adam`` and ``lf.optim.lr_scheduler`` against torch's."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import lazyfuse as lf

W0 = np.random.default_rng(0).standard_normal((4, 3))


def _train(lib, optimizer, schedule, steps=7, **options):
    """(final weights, learning rates after each step) of a small quadratic under ``optimizer``."""
    if lib is torch:
        w = torch.tensor(W0, requires_grad=True)
        opt = getattr(torch.optim, optimizer)([w], **options)
        sched = schedule(torch.optim.lr_scheduler, opt)
    else:
        w = lf.tensor(W0, requires_grad=True)
        opt = getattr(lf.optim, optimizer)([w], **options)
        sched = schedule(lf.optim.lr_scheduler, opt)
    lrs = []
    for _ in range(steps):
        opt.zero_grad()
        ((w * w * w).sum() + w.sum()).backward()
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr()[0])
    return w.detach().numpy() if lib is torch else w.numpy(), lrs


SCHEDULES = {
    "LambdaLR": lambda m, o: m.LambdaLR(o, lambda e: 1 / (e + 1)),
    "StepLR": lambda m, o: m.StepLR(o, 2, 0.5),
    "MultiStepLR": lambda m, o: m.MultiStepLR(o, [1, 4], 0.3),
    "ExponentialLR": lambda m, o: m.ExponentialLR(o, 0.8),
    "LinearLR": lambda m, o: m.LinearLR(o, 0.25, 1.0, 4),
    "CosineAnnealingLR": lambda m, o: m.CosineAnnealingLR(o, 5, 0.01),
}


@pytest.mark.parametrize("schedule", sorted(SCHEDULES))
@pytest.mark.parametrize("optimizer,options", [("Adam", dict(lr=0.1)), ("Adam", dict(lr=0.1, weight_decay=0.1)),
                                               ("AdamW", dict(lr=0.1)), ("SGD", dict(lr=0.1, momentum=0.9))])
def test_optimizers_under_schedules_are_torchs(schedule, optimizer, options):
    ref_w, ref_lrs = _train(torch, optimizer, SCHEDULES[schedule], **options)
    w, lrs = _train(lf, optimizer, SCHEDULES[schedule], **options)
    np.testing.assert_allclose(lrs, ref_lrs, rtol=1e-12)
    np.testing.assert_allclose(w, ref_w, rtol=1e-10, atol=1e-12)


def test_a_schedule_drives_a_captured_training_step():
    x = lf.tensor(np.linspace(-1, 1, 12).reshape(4, 3).astype(np.float32))
    w = lf.tensor(W0.astype(np.float32), requires_grad=True)
    opt = lf.optim.Adam([w], lr=0.05)
    sched = lf.optim.lr_scheduler.StepLR(opt, 1, 0.5)

    def step():
        opt.zero_grad(set_to_none=False)
        ((x * w).sum(1) ** 2).mean().backward()
        opt.step()

    graph = lf.capture("cpu", step)   # three warmup steps and the captured one
    for _ in range(3):
        sched.step()
        graph.replay()
    tw = torch.tensor(W0.astype(np.float32), requires_grad=True)
    topt = torch.optim.Adam([tw], lr=0.05)
    tsched = torch.optim.lr_scheduler.StepLR(topt, 1, 0.5)
    for i in range(7):
        if i >= 4:
            tsched.step()
        topt.zero_grad()
        ((x.torch() * tw).sum(1) ** 2).mean().backward()
        topt.step()
    np.testing.assert_allclose(w.numpy(), tw.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_a_resumed_schedule_needs_initial_lr_as_torch():
    opt = lf.optim.SGD([lf.ones(2, requires_grad=True)], lr=0.1)
    with pytest.raises(lf.ShapeError, match="initial_lr"):
        lf.optim.lr_scheduler.StepLR(opt, 2, last_epoch=3)


# --- nn.init ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name,param", [("linear", None), ("conv2d", None), ("sigmoid", None), ("tanh", None),
                                        ("relu", None), ("leaky_relu", None), ("leaky_relu", 0.2), ("selu", None)])
def test_calculate_gain_is_torchs(name, param):
    assert lf.nn.init.calculate_gain(name, param) == torch.nn.init.calculate_gain(name, param)


SHAPE = (256, 384)


def _bound_and_std(name, kwargs):
    """torch's own formulas for the uniform bound / normal std of an initialiser on SHAPE."""
    fan_in, fan_out = torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(SHAPE))
    if name == "xavier_uniform_":
        return kwargs.get("gain", 1.0) * math.sqrt(6.0 / (fan_in + fan_out)), None
    if name == "xavier_normal_":
        return None, kwargs.get("gain", 1.0) * math.sqrt(2.0 / (fan_in + fan_out))
    fan = fan_in if kwargs.get("mode", "fan_in") == "fan_in" else fan_out
    gain = torch.nn.init.calculate_gain(kwargs.get("nonlinearity", "leaky_relu"), kwargs.get("a", 0))
    if name == "kaiming_uniform_":
        return math.sqrt(3.0) * gain / math.sqrt(fan), None
    return None, gain / math.sqrt(fan)


@pytest.mark.parametrize("name,kwargs", [("xavier_uniform_", {}), ("xavier_uniform_", dict(gain=2.0)),
                                         ("xavier_normal_", {}), ("kaiming_uniform_", dict(a=math.sqrt(5))),
                                         ("kaiming_uniform_", dict(mode="fan_out", nonlinearity="relu")),
                                         ("kaiming_normal_", dict(nonlinearity="relu")),
                                         ("kaiming_normal_", dict(mode="fan_out"))])
def test_fan_based_initialisers_follow_torchs_formulas(name, kwargs):
    w = lf.empty(SHAPE)
    assert getattr(lf.nn.init, name)(w, **kwargs) is w
    values = w.numpy()
    bound, std = _bound_and_std(name, kwargs)
    if bound is not None:
        assert values.min() >= -bound and values.max() < bound
        assert values.max() > 0.99 * bound and abs(values.std() - bound / math.sqrt(3)) < 0.02 * bound
    else:
        assert abs(values.std() - std) < 0.02 * std and abs(values.mean()) < 0.02 * std


def test_normal_uniform_and_trunc_normal_draw_repeatably_from_lazyfuses_generator():
    g = lf.Generator()
    a = lf.nn.init.normal_(lf.empty(SHAPE), 0.5, 0.02, generator=g.manual_seed(1)).numpy()
    b = lf.nn.init.normal_(lf.empty(SHAPE), 0.5, 0.02, generator=g.manual_seed(1)).numpy()
    assert np.array_equal(a, b) and abs(a.mean() - 0.5) < 1e-3 and abs(a.std() - 0.02) < 1e-3
    lf.manual_seed(3)
    u = lf.nn.init.uniform_(lf.empty(SHAPE), -3, -1).numpy()
    assert u.min() >= -3 and u.max() < -1 and abs(u.mean() + 2) < 0.01
    t = lf.nn.init.trunc_normal_(lf.empty(SHAPE), mean=1.0, std=2.0, a=-1.0, b=2.0).numpy()
    ref = torch.nn.init.trunc_normal_(torch.empty(SHAPE, dtype=torch.float64), mean=1.0, std=2.0, a=-1.0, b=2.0)
    assert t.min() >= -1.0 and t.max() <= 2.0
    assert abs(t.mean() - float(ref.mean())) < 0.02 and abs(t.std() - float(ref.std())) < 0.02


def test_constant_zeros_ones_eye_orthogonal_dirac_are_torchs():
    for name, kw in [("zeros_", {}), ("ones_", {}), ("constant_", dict(val=-2.5))]:
        w = lf.empty(3, 4)
        getattr(lf.nn.init, name)(w, **kw)
        np.testing.assert_array_equal(w.numpy(), getattr(torch.nn.init, name)(torch.empty(3, 4), **kw).numpy())
    e = lf.nn.init.eye_(lf.empty(3, 5))
    np.testing.assert_array_equal(e.numpy(), torch.nn.init.eye_(torch.empty(3, 5)).numpy())
    q = lf.nn.init.orthogonal_(lf.empty(4, 6), gain=2.0).numpy().astype(np.float64)
    np.testing.assert_allclose(q @ q.T, 4.0 * np.eye(4), atol=1e-5)
    d = lf.nn.init.dirac_(lf.empty(2, 2, 3, 3))
    np.testing.assert_array_equal(d.numpy(), torch.nn.init.dirac_(torch.empty(2, 2, 3, 3)).numpy())


def test_initialisers_write_parameters_without_recording_a_gradient():
    p = lf.empty(8, 4, requires_grad=True)
    lf.nn.init.kaiming_uniform_(p, a=math.sqrt(5))
    assert p.is_leaf and p.requires_grad
    (p * 2).sum().backward()
    np.testing.assert_array_equal(p.grad.numpy(), np.full((8, 4), 2.0, dtype=np.float32))
    with pytest.raises(lf.ShapeError, match="fewer than 2 dimensions"):
        lf.nn.init.xavier_uniform_(lf.empty(5))
    with pytest.raises(ValueError):
        torch.nn.init.xavier_uniform_(torch.empty(5))


# --- optimizer checkpoints ----------------------------------------------------------------------

OPTIMIZERS = [("AdamW", dict(lr=0.1)), ("Adam", dict(lr=0.1, weight_decay=0.01)), ("SGD", dict(lr=0.1, momentum=0.9))]


def _steps(w, opt, n):
    for _ in range(n):
        opt.zero_grad()
        ((w * w * w).sum() + w.sum()).backward()
        opt.step()


@pytest.mark.parametrize("optimizer,options", OPTIMIZERS)
def test_a_checkpointed_optimizer_resumes_where_it_stopped(optimizer, options):
    import io
    w = lf.tensor(W0, requires_grad=True)
    opt = getattr(lf.optim, optimizer)([w], **options)
    _steps(w, opt, 6)
    uninterrupted = w.numpy()
    w = lf.tensor(W0, requires_grad=True)
    opt = getattr(lf.optim, optimizer)([w], **options)
    _steps(w, opt, 3)
    buf = io.BytesIO()
    lf.save({"w": w.detach(), "opt": opt.state_dict()}, buf)
    buf.seek(0)
    checkpoint = lf.load(buf)
    w2 = checkpoint["w"].clone().requires_grad_()
    opt2 = getattr(lf.optim, optimizer)([w2], **options)
    opt2.load_state_dict(checkpoint["opt"])
    _steps(w2, opt2, 3)
    np.testing.assert_array_equal(w2.numpy(), uninterrupted)


@pytest.mark.parametrize("optimizer,options", OPTIMIZERS)
def test_a_torch_optimizers_state_dict_loads_and_continues_as_torch(optimizer, options):
    tw = torch.tensor(W0, requires_grad=True)
    topt = getattr(torch.optim, optimizer)([tw], **options)
    _steps(tw, topt, 3)
    w = lf.tensor(tw.detach().numpy(), requires_grad=True)
    opt = getattr(lf.optim, optimizer)([w], **options)
    opt.load_state_dict(topt.state_dict())
    assert set(opt.state_dict()["state"][0]) == set(topt.state_dict()["state"][0])
    _steps(tw, topt, 3)
    _steps(w, opt, 3)
    np.testing.assert_allclose(w.numpy(), tw.detach().numpy(), rtol=1e-9, atol=1e-9)


def test_load_state_dict_refuses_what_it_cannot_honour():
    opt = lf.optim.Adam([lf.ones(2, requires_grad=True)], lr=0.1)
    other = torch.optim.Adam([torch.ones(2, requires_grad=True)], lr=0.1, amsgrad=True)
    with pytest.raises(lf.ShapeError, match="amsgrad=True"):
        opt.load_state_dict(other.state_dict())
    two = torch.optim.Adam([{"params": [torch.ones(2, requires_grad=True)]},
                            {"params": [torch.ones(2, requires_grad=True)]}])
    with pytest.raises(lf.ShapeError, match="different number of parameter groups"):
        opt.load_state_dict(two.state_dict())
