"""Torch programs as torch's own test suites and training scripts write them, run unchanged through
``lf.lazy`` / ``lf.eager`` and compared with the same program on plain torch: every ``torch.optim``
optimizer (both update paths, their state and state dicts), lr schedulers and gradient clipping,
``nn`` modules in training and eval mode (running statistics included), the autograd API, view and
in-place chains with their strides and offsets, seeded randomness, a nanoGPT ``train.py`` loop, and the
small-op patterns of tinygrad's torch-backend tests. Tiny sizes: the point is the semantics."""
import copy
import inspect
import io
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import lazyfuse as lf
from lazyfuse.torch_frontend import LazyTensor
from nanogpt_model import GPT, GPTConfig


def plain(t):
    """A plain torch value of ``t`` (a frontend tensor read out; anything else as is)."""
    return lf.eager(t) if isinstance(t, LazyTensor) else t


def assert_same(lazy_value, eager_value, tol=1e-5):
    """``lazy_value`` (a frontend tensor, or a nested structure of them) equals torch eager's: values,
    dtype and shape."""
    if isinstance(eager_value, (list, tuple)):
        assert len(lazy_value) == len(eager_value)
        for a, b in zip(lazy_value, eager_value):
            assert_same(a, b, tol)
        return
    if not isinstance(eager_value, torch.Tensor):
        assert lazy_value == eager_value
        return
    assert isinstance(lazy_value, LazyTensor), type(lazy_value)
    assert lazy_value.dtype == eager_value.dtype and lazy_value.shape == eager_value.shape
    torch.testing.assert_close(plain(lazy_value), eager_value, rtol=tol, atol=tol)


def lazy_copy(t: torch.Tensor) -> torch.Tensor:
    """A frontend copy of the plain tensor ``t`` (a leaf that requires grad stays one)."""
    return lf.lazy(t.detach().clone()).requires_grad_(t.requires_grad)


# -- torch.optim ---------------------------------------------------------------------------------------
def _classifier():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 3))


X, Y = torch.randn(6, 4, generator=torch.Generator().manual_seed(1)), torch.tensor([0, 2, 1, 1, 0, 2])

OPTIMIZERS = [
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.1, maximize=True)),
    ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=0.1)),
    ("Adam", dict(lr=0.01, maximize=True, differentiable=False)),
    ("AdamW", dict(lr=0.01, amsgrad=True)),
    ("RMSprop", dict(lr=0.01, centered=True, momentum=0.5, weight_decay=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01, weight_decay=0.1)),
    ("Adamax", dict(lr=0.01, weight_decay=0.1)),
    ("NAdam", dict(lr=0.01, decoupled_weight_decay=True, weight_decay=0.1)),
    ("RAdam", dict(lr=0.01, weight_decay=0.1)),
    ("ASGD", dict(lr=0.01, t0=1)),
    ("Rprop", dict(lr=0.01)),
    ("Adadelta", dict(lr=1.0, weight_decay=0.1)),
]


def _train(model, opt, x, y, steps):
    for i in range(steps):
        opt.zero_grad(set_to_none=i % 2 == 0)
        F.cross_entropy(model(x), y).backward()
        opt.step()


def _assert_same_state(lazy_opt, eager_opt, lazy_params, eager_params):
    """Each parameter's optimizer state: the same keys, and the same values, dtypes and shapes. (A step
    count torch keeps on the host, ``torch.zeros(())`` with no device, is a plain tensor in both.)"""
    for pl, pe in zip(lazy_params, eager_params):
        sl, se = lazy_opt.state[pl], eager_opt.state[pe]
        assert sorted(sl) == sorted(se)
        for k, v in se.items():
            if isinstance(v, torch.Tensor):
                assert sl[k].dtype == v.dtype and sl[k].shape == v.shape, k
                torch.testing.assert_close(plain(sl[k]), v, rtol=1e-5, atol=1e-5)
            else:
                assert sl[k] == pytest.approx(v), k


@pytest.mark.parametrize("name,kwargs", OPTIMIZERS, ids=[f"{n}-{'-'.join(k)}" for n, k in OPTIMIZERS])
def test_every_torch_optimizer_steps_like_torch_eager_on_both_update_paths(name, kwargs):
    for foreach in (False, True):
        eager, lazy = _classifier(), lf.lazy(_classifier())
        opt_e = getattr(torch.optim, name)(eager.parameters(), foreach=foreach, **kwargs)
        opt_l = getattr(torch.optim, name)(lazy.parameters(), foreach=foreach, **kwargs)
        _train(eager, opt_e, X, Y, 3)
        _train(lazy, opt_l, lf.lazy(X), lf.lazy(Y), 3)
        assert_same(list(lazy.parameters()), list(eager.parameters()))
        _assert_same_state(opt_l, opt_e, list(lazy.parameters()), list(eager.parameters()))
        # the lazy optimizer's state dict loads into a plain one, which then steps as eager's own does
        assert opt_l.state_dict()["param_groups"] == opt_e.state_dict()["param_groups"]
        resumed = _classifier()
        resumed.load_state_dict(lazy.state_dict())   # (a plain module loads a lazy state dict)
        opt_r = getattr(torch.optim, name)(resumed.parameters(), foreach=foreach, **kwargs)
        opt_r.load_state_dict(opt_l.state_dict())
        _train(resumed, opt_r, X, Y, 1)
        _train(eager, opt_e, X, Y, 1)
        for a, b in zip(resumed.parameters(), eager.parameters()):
            assert type(a) is nn.Parameter and not isinstance(a.data, LazyTensor)
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_param_groups_schedulers_clipping_freezing_and_zero_grad_follow_torch_eager():
    def program(model, x, y):
        model[0].requires_grad_(False)   # frozen: no grad, never stepped
        sgd = torch.optim.SGD([{"params": model[2].parameters(), "lr": 0.05}], lr=0.1, momentum=0.9)
        adam = torch.optim.Adam(model[4].parameters(), lr=0.01)
        step_lr = torch.optim.lr_scheduler.StepLR(sgd, 2, 0.5)
        one_cycle = torch.optim.lr_scheduler.OneCycleLR(adam, max_lr=0.1, total_steps=10)
        log = []
        for i in range(4):
            sgd.zero_grad()
            adam.zero_grad(set_to_none=False)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            torch.nn.utils.clip_grad_value_(model.parameters(), 0.05)
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            sgd.step(), adam.step(), step_lr.step(), one_cycle.step()
            log += [loss.item(), norm.item(), sgd.param_groups[0]["lr"], adam.param_groups[0]["lr"]]
        assert model[0].weight.grad is None
        return log, list(model.parameters())

    def model():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 6), nn.Tanh(), nn.Linear(6, 3))
    log_e, params_e = program(model(), X, Y)
    log_l, params_l = program(lf.lazy(model()), lf.lazy(X), lf.lazy(Y))
    assert log_l == pytest.approx(log_e, rel=1e-5, abs=1e-6)
    assert_same(params_l, params_e)


def test_lambda_and_cosine_schedules_and_a_reloaded_optimizer_continue_like_torch_eager():
    def program(model, x, y):
        opt = torch.optim.AdamW(model.parameters(), lr=0.01, foreach=True)
        lam = torch.optim.lr_scheduler.LambdaLR(opt, lambda epoch: 0.9 ** epoch)
        _train_with(model, opt, lam, x, y, 2)
        reloaded = torch.optim.AdamW(model.parameters(), lr=0.01, foreach=True)
        reloaded.load_state_dict(copy.deepcopy(opt.state_dict()))
        cosine = torch.optim.lr_scheduler.CosineAnnealingLR(reloaded, T_max=5)
        _train_with(model, reloaded, cosine, x, y, 2)
        return reloaded.param_groups[0]["lr"], list(model.parameters())

    def _train_with(model, opt, schedule, x, y, steps):
        for _ in range(steps):
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
            schedule.step()
    lr_e, params_e = program(_classifier(), X, Y)
    lr_l, params_l = program(lf.lazy(_classifier()), lf.lazy(X), lf.lazy(Y))
    assert lr_l == lr_e
    assert_same(params_l, params_e)


# -- nn modules ------------------------------------------------------------------------------------------
def _inputs(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(2))


MODULES = {
    "linear": (lambda: nn.Linear(6, 3), lambda: _inputs(4, 6)),
    "conv1d_groups_stride": (lambda: nn.Conv1d(4, 6, 3, groups=2, stride=2, padding=1), lambda: _inputs(2, 4, 9)),
    "conv2d_bias": (lambda: nn.Conv2d(4, 6, 3), lambda: _inputs(2, 4, 7, 7)),
    "conv2d_same_dilated": (lambda: nn.Conv2d(4, 2, 3, padding="same", dilation=2, bias=False),
                            lambda: _inputs(2, 4, 7, 7)),
    **{f"conv2d_{mode}": (lambda mode=mode: nn.Conv2d(4, 4, 3, padding=1, padding_mode=mode, groups=4),
                          lambda: _inputs(1, 4, 5, 5)) for mode in ("reflect", "replicate", "circular")},
    "batchnorm1d": (lambda: nn.BatchNorm1d(6), lambda: _inputs(4, 6)),
    "batchnorm1d_cumulative": (lambda: nn.BatchNorm1d(6, momentum=None), lambda: _inputs(4, 6)),
    "batchnorm2d": (lambda: nn.BatchNorm2d(4), lambda: _inputs(2, 4, 5, 5)),
    "layernorm": (lambda: nn.LayerNorm(6), lambda: _inputs(4, 6)),
    "groupnorm": (lambda: nn.GroupNorm(2, 4), lambda: _inputs(2, 4, 5, 5)),
    "embedding_padding_idx": (lambda: nn.Embedding(5, 3, padding_idx=1), lambda: torch.tensor([[1, 2, 1], [0, 1, 4]])),
    "dropout": (lambda: nn.Dropout(0.3), lambda: _inputs(4, 6)),
    "maxpool2d": (lambda: nn.MaxPool2d(2), lambda: _inputs(2, 4, 7, 7)),
    "maxpool1d_padded": (lambda: nn.MaxPool1d(3, stride=2, padding=1), lambda: _inputs(2, 4, 9)),
    "avgpool2d": (lambda: nn.AvgPool2d(2, stride=1), lambda: _inputs(2, 4, 5, 5)),
    "adaptive_avgpool2d": (lambda: nn.AdaptiveAvgPool2d(1), lambda: _inputs(2, 4, 5, 5)),
    "sequential_cnn": (lambda: nn.Sequential(nn.Conv2d(4, 3, 3), nn.ReLU(), nn.Flatten(), nn.Linear(75, 2)),
                       lambda: _inputs(2, 4, 7, 7)),
    "activations": (lambda: nn.Sequential(nn.GELU(approximate="tanh"), nn.SiLU(), nn.LeakyReLU(0.1), nn.ELU(),
                                          nn.Softplus(), nn.Hardtanh(), nn.Mish()), lambda: _inputs(4, 6)),
    "multihead_attention": (lambda: nn.MultiheadAttention(6, 2, batch_first=True), lambda: (_inputs(2, 5, 6),) * 3),
    "multihead_attention_causal_mask": (
        lambda: nn.MultiheadAttention(6, 2),
        lambda: (_inputs(5, 2, 6), _inputs(5, 2, 6) * 2, _inputs(5, 2, 6) - 1, None, True,
                 torch.triu(torch.ones(5, 5, dtype=torch.bool), 1))),
    "transformer_encoder_layer": (lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1, batch_first=True),
                                  lambda: _inputs(2, 5, 8)),
    "lstm_batch_first": (lambda: nn.LSTM(3, 5, batch_first=True), lambda: _inputs(2, 4, 3)),
    "lstm_two_layers_bidirectional": (lambda: nn.LSTM(3, 5, num_layers=2, bidirectional=True),
                                      lambda: (_inputs(4, 2, 3), (_inputs(4, 2, 5), _inputs(4, 2, 5) * 0.5))),
    "gru": (lambda: nn.GRU(4, 5, num_layers=2), lambda: _inputs(3, 2, 4)),
}


def _as_inputs(made):
    return made if isinstance(made, tuple) else (made,)


def _to_lazy(x, made=None):
    """Frontend copies of the tensors in ``x``; one tensor passed twice (self-attention's query, key and
    value) gives one copy, so that its gradient accumulates as torch eager's does."""
    made = {} if made is None else made
    if isinstance(x, torch.Tensor):
        if id(x) not in made:
            made[id(x)] = lazy_copy(x)
        return made[id(x)]
    if isinstance(x, tuple):
        return tuple(_to_lazy(a, made) for a in x)
    return x


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("name", list(MODULES))
def test_nn_modules_match_torch_eager_outputs_gradients_and_buffers(name, training):
    make, inputs = MODULES[name]
    torch.manual_seed(0)
    eager = make().train(training)
    torch.manual_seed(0)
    lazy = lf.lazy(make()).train(training)
    xs = tuple(x.requires_grad_() if isinstance(x, torch.Tensor) and x.is_floating_point() else x
               for x in _as_inputs(inputs()))
    lxs = _to_lazy(xs)
    for it in range(2):   # twice: running statistics carry over, gradients accumulate
        torch.manual_seed(10 + it)
        out_e = eager(*xs)
        torch.manual_seed(10 + it)
        out_l = lazy(*lxs)
        out_e, out_l = (out_e[0], out_l[0]) if isinstance(out_e, tuple) else (out_e, out_l)
        assert_same(out_l, out_e, 1e-4)
        (out_e ** 2).sum().backward()
        (out_l ** 2).sum().backward()
    for (pname, pe), pl in zip(eager.named_parameters(), lazy.parameters()):
        assert (pl.grad is None) == (pe.grad is None), pname
        if pe.grad is not None:
            assert_same(pl.grad, pe.grad, 1e-3)
    for x, lx in zip(xs, lxs):
        if isinstance(x, torch.Tensor) and x.grad is not None:
            assert_same(lx.grad, x.grad, 1e-3)
    for (bname, be), bl in zip(eager.named_buffers(), lazy.buffers()):   # running_mean/var, num_batches_tracked
        assert_same(bl, be)
