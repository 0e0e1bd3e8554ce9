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
    "embedding_bag_max": (lambda: nn.EmbeddingBag(5, 3, mode="max"), lambda: torch.tensor([[1, 2, 1], [0, 3, 4]])),
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


# the modules that compute otherwise in eval mode (running statistics, dropout); the others run in train
MODE_DEPENDENT = ("batchnorm1d", "batchnorm1d_cumulative", "batchnorm2d", "dropout", "transformer_encoder_layer")


@pytest.mark.parametrize("name,training", [(n, True) for n in MODULES] + [(n, False) for n in MODE_DEPENDENT],
                         ids=[f"{n}-train" for n in MODULES] + [f"{n}-eval" for n in MODE_DEPENDENT])
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


# -- the autograd API --------------------------------------------------------------------------------------
def _differential(program, *inputs, tol=1e-5, grad=True):
    """``program(*tensors)`` on plain leaves and on frontend leaves of the same values (floating ones
    requiring grad, with ``grad``): its results, and the inputs' gradients, equal."""
    plain_in = [x.detach().clone().requires_grad_(grad and x.is_floating_point()) for x in inputs]
    lazy_in = [lf.lazy(x.detach().clone()).requires_grad_(grad and x.is_floating_point()) for x in inputs]
    torch.manual_seed(0)
    out_e = program(*plain_in)
    torch.manual_seed(0)
    out_l = program(*lazy_in)
    assert_same(out_l, out_e, tol)
    for xl, xe in zip(lazy_in, plain_in):
        assert (xl.grad is None) == (xe.grad is None)
        if xe.grad is not None:
            assert_same(xl.grad, xe.grad, tol)


A, W = _inputs(3, 4), _inputs(4, 4) * 0.5


def test_autograd_grad_with_create_graph_takes_a_double_backward():
    def program(x, w):
        g, = torch.autograd.grad((x @ w).tanh().sum(), x, create_graph=True)
        gw, = torch.autograd.grad((g ** 2).sum(), w)
        return g, gw
    _differential(program, A, W)


def test_retain_grad_hooks_and_backward_with_a_gradient():
    def program(x, w):
        h = x @ w
        h.retain_grad()
        h.register_hook(lambda g: g * 2)              # a tensor hook rewrites the gradient flowing on
        seen = []
        x.register_hook(lambda g: seen.append(g.sum()))
        out = h.relu() * 3
        out.backward(gradient=torch.ones_like(out) * 0.5)
        return h.grad, seen[0], out.grad_fn is not None, h.is_leaf
    _differential(program, A, W)


def test_gradients_accumulate_over_two_backwards_and_zero_in_place():
    def program(x, w):
        (x * w[0]).sum().backward()
        first = x.grad.clone()
        (x ** 2).sum().backward(retain_graph=False)
        second = x.grad.clone()
        w.grad.zero_()
        return first, second, w.grad
    _differential(program, A, W)


def test_grad_modes_and_detach_keep_torch_semantics():
    def program(x, w):
        with torch.no_grad():
            a = x * 2
            with torch.enable_grad():
                b = x * 3
        with torch.inference_mode():
            c = x + 1
        d = (x * 2).detach()
        d.add_(1)                                       # a detached result is a tensor of its own
        e = x * 4
        e.detach_()
        return (a, b, c, d, e, a.requires_grad, b.requires_grad, c.requires_grad, c.is_inference(),
                d.requires_grad, e.requires_grad, e.grad_fn is None)
    _differential(program, A, W)


class _Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return a ** 3

    @staticmethod
    def backward(ctx, g):
        a, = ctx.saved_tensors
        return 3 * a * a * g


def test_autograd_function_subclass_and_checkpointing():
    import torch.utils.checkpoint as checkpoint

    def program(x, w):
        y = _Cube.apply(x @ w)
        z = checkpoint.checkpoint(lambda a: (a @ w).sin(), y, use_reentrant=False)
        zr = checkpoint.checkpoint(lambda a: (a * w[0]).cos(), x, use_reentrant=True)
        (z.sum() + zr.sum()).backward()
        return y, z, zr
    _differential(program, A, W)


# -- views and in-place writes (torch's test_view_ops style) ------------------------------------------------
B = _inputs(4, 6)


def test_writes_through_view_chains_reach_the_base_and_back():
    def program(b):
        b = b.clone()
        v = b.view(2, 12)
        v[0, :3] = 7                                   # setitem through a view
        t = b.t()
        t[1].mul_(2)                                   # in place through a transpose's row
        n = b.narrow(1, 2, 3)
        n.zero_()
        d = b.diagonal()
        d.fill_(1)
        u = b.unfold(1, 2, 2)
        u[..., 0] += 10
        s = b.as_strided((2, 2), (6, 1), 1)
        s.mul_(-1)
        parts = b.split(2, dim=1)
        parts[1].add_(100)
        chunks = b.chunk(2, 0)
        chunks[0][0, 0] = -5
        p = b.permute(1, 0).unsqueeze(0)
        p[0, 2, 1] = 3
        b.reshape(24)[5] = -1                          # reshape of a contiguous tensor is a view
        e = b[0:1].expand(3, 6)
        b.add_(0.5)                                    # the base written: every view sees it
        return b, v, t, n, d, u, s, parts, chunks, p, e
    _differential(program, B, grad=False)


def test_strides_offsets_contiguity_and_aliasing_are_torchs():
    def layout(t):
        return tuple(t.shape), t.stride(), t.storage_offset(), t.is_contiguous()

    def program(b):
        views = [b.t(), b.narrow(1, 2, 3), b.diagonal(), b.unfold(1, 2, 2), b.as_strided((2, 2), (6, 1), 1),
                 b[1:, ::2], b.permute(1, 0).unsqueeze(0), b[0:1].expand(3, 6), b.split(2, dim=1)[1],
                 b.t().reshape(24), b.t().contiguous(), b.t().clone(), torch.empty_like(b.t()),
                 b.view(2, 12).transpose(0, 1)[3:], b + 1, (b[2:] + 1)]
        # (torch's own view tests tell a view from a copy by its storage's data pointer)
        aliases = [(v.data_ptr() == b.data_ptr() + v.storage_offset() * b.element_size(),
                    v.untyped_storage().data_ptr() == b.untyped_storage().data_ptr(), v._is_view(), v._base is b)
                   for v in views]
        return [layout(v) for v in views], aliases
    _differential(program, B, grad=False)
    _differential(program, B)


def test_copy_broadcasts_and_converts_dtypes_and_data_assignment_swaps_the_value():
    def program(b):
        a = b.new_zeros(4, 6)
        a.copy_(b[0])                                  # a row broadcast over the rows
        i = b.new_zeros(4, 6, dtype=torch.int64)
        i.copy_(b * 10)                                # float -> int64, truncating
        d = b.new_zeros(2, 3, dtype=torch.float64)
        d.copy_(b[:2, :3])
        d[1].copy_(torch.tensor([1.5, 2.5, 3.5]))      # a plain value copied in
        c = b.clone()
        c.data = c.data * 2                            # x.data = ...: the tensor now holds the new value
        return a, i, d, c, c + 1
    _differential(program, B, grad=False)


def test_data_assignment_of_a_plain_tensor_and_module_dtype_moves():
    model = lf.lazy(nn.Linear(3, 2))
    model.weight.data = torch.eye(2, 3)                # nn.init style: a plain value assigned
    assert type(model.weight) is LazyTensor and isinstance(model.weight, nn.Parameter)
    assert torch.equal(lf.eager(model.weight), torch.eye(2, 3))
    model.double()                                     # Module._apply assigns .data too
    assert model.weight.dtype == torch.float64 and isinstance(model.weight, LazyTensor)
    out = model(lf.lazy(torch.ones(1, 3, dtype=torch.float64)))
    torch.testing.assert_close(lf.eager(out), torch.ones(1, 2, dtype=torch.float64) + lf.eager(model.bias))


def test_manual_seed_reproduces_rand_randn_dropout_and_multinomial_as_torch_eager():
    def draws(x):
        out = []
        for _ in range(2):
            torch.manual_seed(5)
            out += [torch.rand(3), torch.randn(2, 2), F.dropout(x, 0.5), F.dropout(x.t(), 0.3),
                    torch.multinomial(x.softmax(-1), 2), torch.randint(0, 9, (4,)), x.new_empty(5).uniform_(),
                    x.new_empty(3).normal_(), torch.bernoulli(x.sigmoid())]
        return out
    eager, lazy = draws(B), draws(lf.lazy(B))
    assert_same([v for v in lazy if isinstance(v, LazyTensor)], [e for v, e in zip(lazy, eager)
                                                                 if isinstance(v, LazyTensor)])
    for v, e in zip(lazy, eager):
        torch.testing.assert_close(plain(v), e)
    assert torch.equal(plain(lazy[2]), plain(lazy[11]))   # the same seed, the same mask


# -- a nanoGPT train.py loop -----------------------------------------------------------------------------
# (the shapes of tests/test_torch_frontend_gpt.py's GPT: in one test session the two share their kernels)
GPT_ARGS = dict(block_size=16, vocab_size=65, n_layer=2, n_head=4, n_embd=32, dropout=0.0, bias=True)


def _cosine_lr(it, warmup_iters=2, lr_decay_iters=8, learning_rate=6e-3, min_lr=6e-4):
    """train.py's ``get_lr``: linear warmup, then cosine decay to ``min_lr``."""
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    if it > lr_decay_iters:
        return min_lr
    ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (learning_rate - min_lr)


def _train_py(to_device):
    """train.py's loop at toy size, on tensors moved in by ``to_device`` (plain torch: the identity):
    AdamW groups from ``configure_optimizers``, the lr written into each group, two micro-steps
    of gradient accumulation through a disabled GradScaler, ``clip_grad_norm_``, ``estimate_loss`` under
    ``no_grad`` in eval mode, a checkpoint dict through ``torch.save``, then ``generate`` with top-k."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(**GPT_ARGS))
    model = lf.lazy(model) if to_device is lf.lazy else model
    optimizer = model.configure_optimizers(0.1, 6e-3, (0.9, 0.95), "cpu")
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    gen = torch.Generator().manual_seed(3)
    data = torch.randint(0, GPT_ARGS["vocab_size"], (500,), generator=gen)

    def get_batch():
        ix = torch.randint(len(data) - 16, (4,), generator=gen)
        x = torch.stack([data[i:i + 16] for i in ix])
        y = torch.stack([data[i + 1:i + 17] for i in ix])
        return to_device(x), to_device(y)

    @torch.no_grad()
    def estimate_loss():
        model.eval()
        losses = torch.zeros(2)
        for k in range(2):
            logits, loss = model(*get_batch())
            losses[k] = loss.item()
        model.train()
        return losses.mean()

    log = []
    X, Y = get_batch()
    for it in range(3):
        for group in optimizer.param_groups:
            group["lr"] = _cosine_lr(it)
        if it % 2 == 0:
            log.append(estimate_loss().item())
        for micro_step in range(2):
            logits, loss = model(X, Y)
            loss = loss / 2
            X, Y = get_batch()   # the next batch fetched while the step is pending (train.py's order)
            scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        log += [loss.item() * 2, float(norm)]
    checkpoint = io.BytesIO()
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "iter_num": 3,
                "best_val_loss": torch.tensor(log[0]), "model_args": GPT_ARGS}, checkpoint)
    checkpoint.seek(0)
    model.eval()
    torch.manual_seed(7)
    # (a few tokens: each new length is a new shape, and new kernels)
    sample = model.generate(to_device(torch.zeros((1, 1), dtype=torch.long)), 3, temperature=0.8, top_k=10)
    return log, torch.load(checkpoint, weights_only=False), plain(sample), model


def test_a_nanogpt_train_py_loop_matches_torch_eager_losses_checkpoint_and_samples():
    log_e, ckpt_e, sample_e, _ = _train_py(lambda t: t)
    log_l, ckpt_l, sample_l, model = _train_py(lf.lazy)
    assert log_l == pytest.approx(log_e, rel=1e-4, abs=1e-5)
    assert torch.equal(sample_l, sample_e)
    assert ckpt_l["model"].keys() == ckpt_e["model"].keys()
    for k, v in ckpt_e["model"].items():   # the checkpoint holds plain tensors: it loads anywhere
        assert type(ckpt_l["model"][k]) is torch.Tensor
        # (AdamW steps of lr 6e-3 on float32 gradients: a weight whose gradient is near zero moves by
        # rounding noise, up to ~1e-5 after three steps, in torch eager as here)
        torch.testing.assert_close(ckpt_l["model"][k], v, rtol=1e-3, atol=1e-4)
    assert ckpt_l["optimizer"]["param_groups"] == ckpt_e["optimizer"]["param_groups"]
    for i, state in ckpt_e["optimizer"]["state"].items():
        for k, v in state.items():
            assert type(ckpt_l["optimizer"]["state"][i][k]) is torch.Tensor
            torch.testing.assert_close(ckpt_l["optimizer"]["state"][i][k], v, rtol=1e-4, atol=1e-6)
    # resuming from the checkpoint: a plain model loads it, and crop_block_size's surgery works lazily
    resumed = GPT(GPTConfig(**GPT_ARGS))
    resumed.load_state_dict(ckpt_l["model"])
    resumed.eval()
    model.crop_block_size(8)
    resumed.crop_block_size(8)
    assert isinstance(model.transformer.wpe.weight, LazyTensor) and model.transformer.wpe.weight.shape == (8, 32)
    assert model.get_num_params() == resumed.get_num_params()
    idx = torch.randint(0, 65, (2, 8), generator=torch.Generator().manual_seed(1))
    assert model(lf.lazy(idx), lf.lazy(idx))[1].item() == pytest.approx(resumed(idx, idx)[1].item(), rel=1e-5)


# -- tinygrad's torch-backend test patterns -------------------------------------------------------------------
def test_small_op_patterns_of_a_torch_backend_suite():
    L = lf.lazy
    a = L(torch.ones(4, dtype=torch.int32))
    assert (a + 1).dtype == torch.int32 and (a + 1).cpu().numpy().tolist() == [2] * 4
    e = L(torch.tensor([1.0, 2, 3, 4])).reshape(4, 1).expand(4, 4)
    np.testing.assert_equal(e.cpu().numpy(), np.repeat(np.arange(1.0, 5)[:, None], 4, 1))
    s = L(torch.arange(70)).reshape(1, 1, 10, 7).as_strided((1, 1, 10, 5), (0, 0, 7, 1), storage_offset=0)
    s = s.as_strided((1, 1, 5, 5), (50, 50, 7, 1), storage_offset=21)
    np.testing.assert_equal(s.cpu().numpy().sum(-1), [[[115, 150, 185, 220, 255]]])
    r = L(torch.arange(8.0))
    assert (r[3:] + 1).storage_offset() == 0 and r[3:].detach().storage_offset() == 3
    tail = r[3:]
    torch.add(L(torch.ones(5)), L(torch.ones(5)), out=tail)           # out= into a view keeps its offset
    assert tail.storage_offset() == 3 and r.tolist() == [0, 1, 2, 2, 2, 2, 2, 2]
    assert L(torch.arange(12.0)).reshape(3, 4).permute(1, 0)[1:].storage_offset() == 1
    c = L(torch.arange(6.0))
    assert c[3:].as_strided((2,), (1,), 0).tolist() == [0, 1] and c[3:].as_strided((2,), (1,)).tolist() == [3, 4]
    p = L(torch.ones(4))
    p += L(torch.ones(4))
    p += 1
    assert p.exp2().tolist() == [8.0] * 4 and torch.isfinite(p).all().item()
    x = _inputs(2, 3, 4)
    lx = L(x)
    for dims in [(), (1, 2), 2]:
        assert torch.equal(plain(torch.amax(lx, dims)), torch.amax(x, dims))
        assert torch.equal(plain(torch.amin(lx, dims)), torch.amin(x, dims))
    top = torch.topk(L(torch.tensor([1, 3, 2, 4])), k=2)
    assert top.values.tolist() == [4, 3] and top.indices.tolist() == [3, 1]
    m = L(torch.tensor([4, 3, 2, 1]))
    assert torch.masked_select(m, L(torch.tensor([True, False, True, False]))).tolist() == [4, 2]
    assert torch.equal(L(torch.tensor([[1, 2], [3, 4]])), L(torch.tensor([[1, 2], [3, 4]])))
    assert not torch.equal(L(torch.tensor([[1, 2], [3, 4]])), L(torch.tensor([[1, 2], [1, 2]])))
    z = L(torch.tensor([1, 2, 3]))
    z[1] = 4
    assert z.tolist() == [1, 4, 3] and str(z) == str(torch.tensor([1, 4, 3]))
    assert (L(torch.tensor([10.0, 7, 5])) // L(torch.tensor([3.0, 2, 2]))).tolist() == [3, 3, 2]
    i64 = L(torch.zeros(4, dtype=torch.int64)) ^ L(torch.ones(4)).to(dtype=torch.int64)
    assert i64.dtype == torch.int64 and i64.tolist() == [1] * 4
    g = L(torch.arange(9.0)).reshape(1, 1, 3, 3).requires_grad_(True)
    F.max_pool2d(g, kernel_size=2, stride=1).sum().backward()
    assert g.grad.squeeze().tolist() == [[0, 0, 0], [0, 1, 1], [0, 1, 1]]
    q = L(torch.arange(4.0)).reshape(1, 1, 2, 2).requires_grad_(True)
    padded = F.pad(q, (1, 1, 1, 1), mode="circular")
    assert padded[0, 0].tolist() == [[3, 2, 3, 2], [1, 0, 1, 0], [3, 2, 3, 2], [1, 0, 1, 0]]
    padded.sum().backward()
    assert q.grad.tolist() == [[[[4, 4], [4, 4]]]]
    d = _inputs(4, 5, 6)
    assert torch.equal(plain(torch.linalg.diagonal(L(d))), torch.linalg.diagonal(d))
    sym = L(torch.tensor([[1.0, 2], [2, 1]]))
    w, v = torch.linalg.eigh(sym)
    torch.testing.assert_close(plain(v @ torch.diag(w) @ v.T), plain(sym), atol=1e-6, rtol=0)
    assert torch.linalg.det(torch.diag(L(torch.tensor([1.0, 2, 3, 4, 5])))).item() == pytest.approx(120)
    batch = L(_inputs(60, 1, 8, 8))
    picked = batch[torch.randint(0, 60, (7,))]
    assert picked.shape == (7, 1, 8, 8) and isinstance(picked, LazyTensor)


def test_host_reads_printing_and_python_protocols_behave_as_on_torch():
    x = _inputs(3, 4)
    lx = lf.lazy(x)
    assert lx.tolist() == x.tolist() and lx[0, 0].item() == x[0, 0].item()
    assert float(lx.sum()) == pytest.approx(float(x.sum())) and int(lx.argmax()) == int(x.argmax())
    assert f"{lx[0, 0]:.3f}" == f"{x[0, 0]:.3f}" and f"{lx.sum():8.2f}" == f"{x.sum():8.2f}"
    assert repr(lx) == repr(x) and str(lx * 2) == str(x * 2)
    assert lx.numpy().dtype == np.float32 and np.array_equal(np.asarray(lx), x.numpy())
    assert (len(lx), lx.size(1), lx.dim(), lx.numel(), lx.element_size(), lx.nbytes) == \
        (len(x), x.size(1), x.dim(), x.numel(), x.element_size(), x.nbytes)
    assert lx.device == x.device and lx.is_cpu and lx.layout == torch.strided
    assert [plain(row).tolist() for row in lx] == [row.tolist() for row in x]
    assert bool(lx.sum() > -100) and (lx > 0).any().item() == (x > 0).any().item()
    assert torch.allclose(lx, lf.lazy(x)) and lx.cpu().requires_grad is False
    i = torch.tensor([0, 2])
    lx[0] = torch.arange(4.0)
    lx[:, 1] += 1
    lx[lx < 0] = 0
    lx[i, 0] = 5
    x = x.clone()
    x[0] = torch.arange(4.0)
    x[:, 1] += 1
    x[x < 0] = 0
    x[i, 0] = 5
    assert torch.equal(plain(lx), x)
    assert torch.equal(plain(torch.einsum("ij,kj->ik", lx, lx)), torch.einsum("ij,kj->ik", x, x))
    for op in (lambda t: t.sort(dim=1).values, lambda t: t.cumsum(0), lambda t: t.flip(0), lambda t: t.roll(1, 0),
               lambda t: t.repeat(2, 1), lambda t: t.tril(), lambda t: t.triu(1), lambda t: t.unflatten(1, (2, 2)),
               lambda t: torch.cat([t, t], 1), lambda t: torch.stack([t, t]), lambda t: t[[0, 1], [1, 2]],
               lambda t: t.max(dim=1).values, lambda t: t.var(1, keepdim=True), lambda t: t.std(0, unbiased=False),
               lambda t: t.double().half().float()):
        assert_same(op(lx), op(x))


# -- what the frontend refuses, and how ---------------------------------------------------------------------------
def test_an_lstm_over_a_packed_sequence_matches_torch_eager():
    def program(lstm, x):
        packed = nn.utils.rnn.pack_padded_sequence(x, torch.tensor([2, 5, 3]), batch_first=True,
                                                   enforce_sorted=False)
        out, (h, c) = lstm(packed)
        (h[-1] ** 2).sum().backward()               # a sequence classifier's loss on the last hidden state
        return out.data, out.batch_sizes, h, c, [p.grad for p in lstm.parameters()]
    torch.manual_seed(0)
    eager = nn.LSTM(3, 4, batch_first=True, num_layers=2)
    torch.manual_seed(0)
    lazy = lf.lazy(nn.LSTM(3, 4, batch_first=True, num_layers=2))
    x = _inputs(3, 5, 3)
    data_e, sizes_e, *rest_e = program(eager, x)
    data_l, sizes_l, *rest_l = program(lazy, lf.lazy(x))
    assert type(sizes_l) is torch.Tensor and torch.equal(sizes_l, sizes_e)   # batch_sizes stays on the host
    assert_same([data_l, *rest_l], [data_e, *rest_e], 1e-5)


def test_a_sparse_gradient_is_refused_naming_the_op_and_the_fix():
    embedding = lf.lazy(nn.Embedding(5, 3, sparse=True))
    out = embedding(lf.lazy(torch.tensor([1, 2])))
    with pytest.raises(lf.DTypeError, match=r"sparse_coo_tensor.*nn\.Embedding\(sparse=True\).*sparse=False"):
        out.sum().backward()
    torch.testing.assert_close(lf.eager(embedding.weight * 2), lf.eager(embedding.weight) * 2)   # still usable


# -- mixed-precision training and data loading ---------------------------------------------------------------
@pytest.mark.parametrize("init_scale", [4.0, 2.0 ** 120], ids=["finite", "overflowing"])
def test_an_enabled_grad_scaler_unscales_skips_and_backs_off_like_torch_eager(init_scale):
    def program(model, x):
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        scaler = torch.amp.GradScaler("cpu", init_scale=init_scale)
        for _ in range(2):
            opt.zero_grad()
            scaler.scale((model(x) ** 2).sum()).backward()
            scaler.unscale_(opt)                       # gradients unscaled and checked for inf/NaN
            scaler.step(opt)                           # skipped where they are not finite
            scaler.update()
        return scaler.get_scale(), list(model.parameters())
    x = _inputs(2, 4) * (1e10 if init_scale > 1e30 else 1)
    scale_e, params_e = program(_classifier()[0], x)
    scale_l, params_l = program(lf.lazy(_classifier()[0]), lf.lazy(x))
    assert scale_l == scale_e
    assert_same(params_l, params_e)


def test_autocast_data_loading_and_a_random_out_variant_follow_torch():
    model, x = _classifier()[0], _inputs(2, 4)
    lazy = lf.lazy(copy.deepcopy(model))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert_same(lazy(lf.lazy(x)), model(x))        # a bfloat16 linear, as torch's autocast casts it
    data = torch.utils.data.TensorDataset(lf.lazy(_inputs(10, 3)), lf.lazy(torch.arange(10)))
    loader = torch.utils.data.DataLoader(data, batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(0))
    seen = []
    for xb, yb in loader:                              # the default collate stacks frontend tensors
        assert type(xb) is LazyTensor and xb.shape[1:] == (3,)
        seen += yb.tolist()
    assert sorted(seen) == list(range(10))
    out = lf.lazy(torch.empty(10, dtype=torch.long))
    torch.manual_seed(0)
    assert torch.randperm(10, out=out) is out
    torch.manual_seed(0)
    assert out.tolist() == torch.randperm(10).tolist()


def test_channels_last_layouts_are_torchs():
    x = _inputs(2, 3, 4, 5)
    for make in (lambda t: t.contiguous(memory_format=torch.channels_last),
                 lambda t: t.to(memory_format=torch.channels_last),
                 lambda t: torch.zeros_like(t, memory_format=torch.channels_last)):
        eager, lazy = make(x), make(lf.lazy(x))
        assert lazy.stride() == eager.stride() and lazy.is_contiguous(memory_format=torch.channels_last)
        assert torch.equal(plain(lazy), eager)
    torch.manual_seed(0)
    conv = nn.Conv2d(3, 4, 3).to(memory_format=torch.channels_last)
    torch.manual_seed(0)
    lazy_conv = lf.lazy(nn.Conv2d(3, 4, 3)).to(memory_format=torch.channels_last)
    assert lazy_conv.weight.stride() == conv.weight.stride()
    assert_same(lazy_conv(lf.lazy(x)), conv(x))


def test_resize_in_place_as_torch_where_no_view_can_tell_and_growing_refused():
    x = lf.lazy(torch.arange(6.0))
    assert x.resize_(6) is x                            # (what torch's out= kernels ask)
    assert x.resize_(2, 3) is x and x.shape == (2, 3)   # (a view of the same storage, as torch's)
    x.resize_(2, 2).add_(10)
    assert torch.equal(lf.eager(x), torch.arange(4.0).reshape(2, 2) + 10)
    empty_one = lf.lazy(torch.empty(0))
    assert empty_one.resize_(2, 3) is empty_one and empty_one.shape == (2, 3) and empty_one.stride() == (3, 1)
    assert torch.equal(lf.eager(empty_one.fill_(2.0)), torch.full((2, 3), 2.0))
    with pytest.raises(lf.ShapeError, match=r"aten\.resize_.*fixed size.*new tensor"):
        lf.lazy(torch.arange(6.0)).resize_(3, 3)


class _Tied(nn.Module):
    """A ModuleList, a registered buffer updated in place in forward, and an output head tied to the input
    embedding."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(7, 4)
        self.blocks = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])
        self.head = nn.Linear(4, 7, bias=False)
        self.head.weight = self.embed.weight
        self.register_buffer("calls", torch.zeros((), dtype=torch.int64))

    def forward(self, idx):
        self.calls += 1
        x = self.embed(idx)
        for block in self.blocks:
            x = x + block(x).relu()
        return self.head(x)


def test_module_api_state_dict_round_trips_save_load_tying_and_freezing():
    torch.manual_seed(0)
    eager = _Tied()
    lazy = lf.lazy(copy.deepcopy(eager))
    assert [n for n, _ in lazy.named_parameters()] == [n for n, _ in eager.named_parameters()]
    assert [n for n, _ in lazy.named_buffers()] == ["calls"] and lazy.head.weight is lazy.embed.weight
    assert all(isinstance(p, nn.Parameter) and isinstance(p, LazyTensor) for p in lazy.parameters())
    lazy.apply(lambda m: nn.init.zeros_(m.bias) if isinstance(m, nn.Linear) and m.bias is not None else None)
    eager.apply(lambda m: nn.init.zeros_(m.bias) if isinstance(m, nn.Linear) and m.bias is not None else None)
    lazy.blocks[0].requires_grad_(False)
    eager.blocks[0].requires_grad_(False)
    idx = torch.tensor([[1, 5, 2], [0, 6, 6]])
    for model, i in ((eager, idx), (lazy, lf.lazy(idx))):
        model.eval()
        assert not model.blocks[1].training
        model.train()
        model(i).logsumexp(-1).sum().backward()
    assert lazy.blocks[0].weight.grad is None and lazy.calls.item() == 1
    assert_same([p.grad for p in lazy.parameters() if p.requires_grad],
                [p.grad for p in eager.parameters() if p.requires_grad])
    # lazy -> bytes -> plain, and plain -> lazy: values, dtypes, and the tie kept
    buffer = io.BytesIO()
    torch.save(lazy.state_dict(), buffer)
    buffer.seek(0)
    saved = torch.load(buffer)
    assert all(type(v) is torch.Tensor for v in saved.values()) and saved["calls"].dtype == torch.int64
    restored = _Tied()
    restored.load_state_dict(saved)
    for k, v in eager.state_dict().items():
        torch.testing.assert_close(restored.state_dict()[k], v)
    again = lf.lazy(_Tied())
    again.load_state_dict(restored.state_dict())
    assert again.head.weight is again.embed.weight and type(again.calls) is LazyTensor
    assert_same(list(again.state_dict().values()), list(eager.state_dict().values()))
