"""Extern nodes (lf.extern): torch functions recorded lazily, run at the drain between kernels."""
import numpy as np
import pytest
import torch

import lazyfuse as lf
from lazyfuse.explain import describe_plan
from lazyfuse.runtime import engine as engine_mod

CPU = lf.device("cpu")


def _x(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def test_extern_values_kwargs_and_tuple_results_match_torch():
    xt = _x(3, 5)
    x = lf.tensor(xt)
    torch.testing.assert_close(lf.extern(torch.cumsum, x * 2, dim=1).torch(), torch.cumsum(xt * 2, dim=1))
    top = lf.extern(torch.topk, x, 2, dim=-1, largest=False)
    want = torch.topk(xt, 2, dim=-1, largest=False)
    assert isinstance(top, torch.return_types.topk)
    torch.testing.assert_close(top.values.torch(), want.values)
    assert top.indices.dtype is lf.int64 and top.indices.tolist() == want.indices.tolist()
    # a strided view is passed as the view, not copied first
    torch.testing.assert_close(lf.extern(torch.flip, x.T[1:], [0, 1]).torch(), torch.flip(xt.T[1:], [0, 1]))
    # lists of tensors and lazyfuse dtypes among the arguments
    torch.testing.assert_close(lf.extern(torch.cat, [x, x + 1], dim=0, ).torch(), torch.cat([xt, xt + 1]))
    assert lf.extern(torch.cumsum, x, 0, dtype=lf.float64).dtype is lf.float64


def test_extern_records_without_draining_and_is_elided_when_dropped():
    x = lf.tensor(_x(4, 4))
    lf.sync(CPU)
    lf.reset_stats(CPU)
    y = lf.extern(torch.cumsum, x.exp(), 0)
    assert lf.stats(CPU).kernels_launched == 0 and lf.stats(CPU).extern_launches == 0
    assert y.shape == (4, 4) and y.dtype is lf.float32   # from torch's meta device
    del y
    lf.sync(CPU)
    s = lf.stats(CPU)
    assert s.kernels_launched == 0 and s.extern_launches == 0 and s.ops_elided >= 2


def test_a_dropped_extern_of_a_tensor_that_requires_grad_is_elided_too():
    # its vjp held the result itself (a cycle through its GradFn): it lived on until Python's
    # cyclic GC, ran at the next drain, and a refusal torch gives only when it runs (a float shift,
    # a conv2d padding of the wrong length) was raised by an unrelated read (tinygrad's
    # test_conv2d_errors, then the next test)
    x = lf.tensor(_x(4, 4), requires_grad=True)
    lf.sync(CPU)
    lf.reset_stats(CPU)
    y = lf.extern(torch.cumsum, x.exp(), 0)
    del y
    lf.sync(CPU)
    assert lf.stats(CPU).extern_launches == 0
    refused = lf.extern(torch.bitwise_left_shift, x, 1)   # torch's CPU kernel refuses it, its meta kernel not
    del refused
    assert (lf.ones(2) + 1).tolist() == [2.0, 2.0]
    y = lf.extern(torch.cumsum, x, 0)   # kept, it still differentiates
    y.sum().backward()
    torch.testing.assert_close(x.grad.torch(), torch.arange(4, 0, -1.0).reshape(4, 1).expand(4, 4))


def test_chain_of_native_and_extern_ops_launches_one_kernel_per_native_run():
    xt = _x(6, 7)
    x = lf.tensor(xt)

    def chain(x, cumsum, flip):
        a = (x * 2 + 1).tanh()                 # native run 1
        b = cumsum(a, 1)                       # extern
        c = (b.sin() * 3 - b).exp() * 0.5      # native run 2
        d = flip(c, [0])                       # extern
        return (d + 1).sigmoid() * d           # native run 3

    lf.sync(CPU)
    for _ in range(2):   # the build path, then the steady state: the same launches
        lf.reset_stats(CPU)
        y = chain(x, lambda t, d: lf.extern(torch.cumsum, t, d), lambda t, d: lf.extern(torch.flip, t, d))
        got = y.torch()
        s = lf.stats(CPU)
        assert (s.kernels_launched, s.extern_launches) == (5, 2)
    torch.testing.assert_close(got, chain(xt, torch.cumsum, torch.flip))


def test_explain_and_debug_line_name_the_extern_and_its_reason():
    x = lf.tensor(_x(3, 3))
    text = str(lf.explain(lf.extern(torch.cumsum, x.exp(), 0).sin()))
    assert "no native lowering (torch.cumsum)" in text
    seen = []
    saved = engine_mod.drain_hook
    engine_mod.drain_hook = lambda dev, plan, build: seen.append(describe_plan(plan, build))
    try:
        lf.extern(torch.cumsum, x.exp(), 0).sin().numpy()
    finally:
        engine_mod.drain_hook = saved
    assert any("extern torch.cumsum (extern)" in line for line in seen[-1].splitlines())


def test_capture_and_replay_of_a_closure_with_an_extern():
    xt = _x(5, 4)
    x = lf.tensor(xt)
    w = lf.tensor(_x(4, 4, seed=1))

    def step():
        return lf.extern(torch.cumsum, (x @ w).relu(), dim=0).tanh() + 1

    graph = lf.capture(CPU, step)
    assert graph.is_hardware and graph.fallback_reason is None
    for k in range(3):
        new = _x(5, 4, seed=10 + k)
        x.copy_(new)
        want = torch.cumsum((new @ w.torch()).relu(), 0).tanh() + 1
        torch.testing.assert_close(graph.replay().torch(), want)


def test_random_extern_follows_lazyfuse_generator_and_replays_draw_fresh_numbers():
    p = lf.tensor(torch.softmax(_x(4, 6), -1))

    def draw():
        return lf.extern(torch.multinomial, p, 8, replacement=True)

    lf.manual_seed(3)
    first = draw().numpy()
    lf.manual_seed(3)
    again = draw().numpy()
    np.testing.assert_array_equal(first, again)
    assert (first >= 0).all() and (first < 6).all()
    # torch's own generator is untouched
    torch.manual_seed(0)
    ref = torch.rand(3)
    torch.manual_seed(0)
    draw().numpy()
    torch.testing.assert_close(torch.rand(3), ref)
    graph = lf.capture(CPU, lambda: lf.extern(torch.rand_like, p) + 1)
    a, b = graph.replay().numpy().copy(), graph.replay().numpy().copy()
    assert not np.array_equal(a, b) and ((a >= 1) & (a < 2)).all()


def test_extern_gradient_matches_torch():
    xt, wt = _x(3, 5, dtype=torch.float64), _x(5, dtype=torch.float64, seed=2)
    x, w = lf.tensor(xt).requires_grad_(), lf.tensor(wt).requires_grad_()
    vals, idx = lf.extern(torch.sort, lf.extern(torch.cumprod, x.sin() * w, dim=1), dim=1)
    ((vals * vals).sum() + vals[:, 0].sum()).backward()
    xr, wr = xt.clone().requires_grad_(), wt.clone().requires_grad_()
    vr, _ = torch.sort(torch.cumprod(xr.sin() * wr, dim=1), dim=1)
    ((vr * vr).sum() + vr[:, 0].sum()).backward()
    torch.testing.assert_close(x.grad.torch(), xr.grad)
    torch.testing.assert_close(w.grad.torch(), wr.grad)
    assert idx.grad_fn is None   # integer results carry no gradient


def test_data_dependent_externs_drain_and_are_refused_inside_a_capture():
    xt = _x(4, 5)
    x = lf.tensor(xt)
    torch.testing.assert_close(lf.extern(torch.nonzero, x > 0).torch(), torch.nonzero(xt > 0))
    with pytest.raises(lf.CaptureError, match="data-dependent.*where"):
        lf.capture(CPU, lambda: lf.extern(torch.nonzero, x > 0))
    assert (x + 1).numpy().shape == (4, 5)   # the device stays usable


def test_extern_runs_on_the_interpreter_device():
    dev = lf.device("interpreter")
    xt = _x(3, 4)
    x = lf.tensor(xt, device=dev)
    torch.testing.assert_close(lf.extern(torch.cumsum, x * 2, 1).exp().torch(), torch.cumsum(xt * 2, 1).exp())


def test_extern_bad_arguments_raise_lazyfuse_errors():
    x = lf.tensor(_x(3, 4))
    with pytest.raises(lf.ShapeError, match="torch.cumsum"):
        lf.extern(torch.cumsum, x, 5)
    with pytest.raises(lf.DTypeError, match="complex"):
        lf.extern(torch.view_as_complex, x.reshape(3, 2, 2))
    with pytest.raises(lf.DTypeError, match="at least one lazyfuse Tensor"):
        lf.extern(torch.zeros, 3)
    assert (x * 2).shape == (3, 4)


# -- views: where torch returns a view of an input, the extern result aliases it ----------------
VIEW_OPS = {
    "diagonal": lambda x: x.diagonal(1),
    "unfold": lambda x: x.unfold(1, 2, 1),
    "as_strided": lambda x: torch.as_strided(x, (2, 2), (1, 2), 3),
    "t": lambda x: x.t(),
    "narrow": lambda x: torch.narrow(x, 1, 1, 2),
}


@pytest.mark.parametrize("name", sorted(VIEW_OPS))
def test_an_extern_that_torch_returns_as_a_view_aliases_its_input(name):
    fn = VIEW_OPS[name]
    base_t = _x(5, 6)
    base = lf.tensor(base_t)
    src, src_t = base[1:], base_t[1:]   # a view with an offset (as_strided's is absolute, in the storage)
    lf.sync(CPU)
    lf.reset_stats(CPU)
    v = lf.extern(fn, src)
    want = fn(src_t)
    assert v.shape == tuple(want.shape) and v.stride() == want.stride()
    torch.testing.assert_close(v.torch(), want)
    assert lf.stats(CPU).extern_launches == 0   # index arithmetic: no torch call at all
    # the base's later writes show in the view, and the view's writes land in the base
    base.mul_(2)
    base_t.mul_(2)
    torch.testing.assert_close(v.torch(), want)
    if name != "unfold":   # (torch refuses in-place writes through overlapping views too)
        v.add_(100)
        want.add_(100)
        torch.testing.assert_close(base.torch(), base_t)


def test_view_results_of_a_pending_input_and_of_a_tuple_result():
    x_t = _x(4, 6)
    x = lf.tensor(x_t)
    y = x * 3   # pending: the views read it when it is computed
    parts = lf.extern(torch.split, y, 2, dim=1)
    assert isinstance(parts, tuple) and len(parts) == 3
    parts[1].zero_()
    want = x_t * 3
    want[:, 2:4] = 0
    torch.testing.assert_close(y.torch(), want)
    torch.testing.assert_close(torch.cat([p.torch() for p in parts], 1), want)
    # a view of a dtype the storage does not hold is a value, as a copy
    bits = lf.extern(lambda t: t.view(torch.int32), x)
    assert bits.dtype is lf.int32 and bits.tolist() == x_t.view(torch.int32).tolist()


def test_an_extern_view_carries_the_gradient():
    xt = _x(4, 4, dtype=torch.float64)
    x = lf.tensor(xt).requires_grad_()
    (lf.extern(torch.diagonal, x * x, 0, 0, 1) * 3).sum().backward()
    xr = xt.clone().requires_grad_()
    (torch.diagonal(xr * xr, 0, 0, 1) * 3).sum().backward()
    torch.testing.assert_close(x.grad.torch(), xr.grad)


# -- the results of one call come from one torch call --------------------------------------------
class _Counted:
    """``fn`` counting its calls on real (not meta) tensors."""

    def __init__(self, fn):
        self.fn, self.calls, self.__name__ = fn, 0, fn.__name__

    def __call__(self, *args, **kwargs):
        if not any(isinstance(a, torch.Tensor) and a.is_meta for a in args):
            self.calls += 1
        return self.fn(*args, **kwargs)


MULTI = {
    "sort": (torch.sort, lambda x: ((x,), {"dim": 1})),
    "topk": (torch.topk, lambda x: ((x, 2), {})),
    "aminmax": (torch.aminmax, lambda x: ((x,), {"dim": 0})),
    "frexp": (torch.frexp, lambda x: ((x,), {})),
    "native_layer_norm": (torch.native_layer_norm, lambda x: ((x, [5], None, None, 1e-5), {})),
}


@pytest.mark.parametrize("name", sorted(MULTI))
def test_a_multi_output_extern_calls_torch_once_for_all_its_results(name):
    fn, make = MULTI[name]
    xt = _x(4, 5)
    x = lf.tensor(xt)
    counted = _Counted(fn)
    for _ in range(2):   # the build path, then the steady state
        args, kwargs = make(x.exp())
        counted.calls = 0
        lf.reset_stats(CPU)
        got = lf.extern(counted, *args, **kwargs)
        values = [g.torch() for g in got]
        assert counted.calls == 1 and lf.stats(CPU).extern_launches == 1
    targs, tkwargs = make(xt.exp())
    for g, w in zip(values, fn(*targs, **tkwargs)):
        torch.testing.assert_close(g, w)
    # one result dropped: the call still runs once, for the other
    counted.calls = 0
    args, kwargs = make(x.exp())
    first = lf.extern(counted, *args, **kwargs)[0]
    torch.testing.assert_close(first.torch(), values[0])
    assert counted.calls == 1


def test_sibling_results_in_a_captured_graph_replay_one_call():
    xt = _x(3, 6)
    x = lf.tensor(xt)
    counted = _Counted(torch.sort)

    def step():
        v, i = lf.extern(counted, x * 2, dim=1)
        return v + i.float()

    graph = lf.capture(CPU, step)
    counted.calls = 0
    new = _x(3, 6, seed=5)
    x.copy_(new)
    v, i = torch.sort(new * 2, dim=1)
    torch.testing.assert_close(graph.replay().torch(), v + i.float())
    assert counted.calls == 1


@pytest.mark.parametrize("fn, args", [(torch.flip, ([0],)), (torch.repeat_interleave, (2,)), (torch.sort, (1,))])
def test_one_call_recorded_twice_on_the_same_input_gives_both_results(fn, args):
    # two calls of one family on the same sources taking the same element were merged as siblings:
    # one step stored one of them, and the other's consumer read garbage (tinygrad's test_ops found it
    # through enable_gqa attention's repeat_interleave, recorded in the forward and again in the backward)
    xt = _x(3, 4)
    x = lf.tensor(xt)
    want = fn(xt, *args)
    want = want[0] if isinstance(want, tuple) else want
    first, second = (lf.extern(fn, x, *args) for _ in range(2))
    first, second = (r[0] if isinstance(r, tuple) else r for r in (first, second))
    a, b = first * 1, second * 2   # each read by a kernel of its own drain, drained together
    torch.testing.assert_close(a.torch(), want)
    torch.testing.assert_close(b.torch(), want * 2)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_saved_statistics_of_cpu_norms_keep_the_input_dtype_as_torch_cpu(dtype):
    xt = _x(4, 3, 5).to(dtype)
    w = torch.ones(3, dtype=dtype)
    x = lf.tensor(xt)
    for fn, args in ((torch.native_layer_norm, ((5,), None, None, 1e-5)),
                     (torch.native_batch_norm, (lf.tensor(w), lf.tensor(w), None, None, True, 0.1, 1e-5))):
        got = getattr(lf, fn.__name__)(x, *args)
        want = fn(xt, *[a.torch() if isinstance(a, lf.Tensor) else a for a in args])
        for g, t in zip(got, want):
            assert g.dtype.torch == t.dtype
            torch.testing.assert_close(g.torch(), t, rtol=2e-2, atol=2e-2)


def test_the_steady_state_launch_binds_the_buffers_of_each_drain():
    # one plan, drained with other input and output buffers each time (and some reused): the
    # call kept for a step's blocks is never the call for other blocks
    inputs = [_x(4, 6, seed=k) for k in range(4)]
    held = []
    for k in range(8):
        xt = inputs[k % 4]
        y = lf.extern(torch.cumsum, lf.tensor(xt), 1)
        torch.testing.assert_close(y.torch(), torch.cumsum(xt, 1))
        if k % 2:
            held.append(y)   # keeps this output's block out of the pool: the next drain binds another
    for k, y in enumerate(held):
        torch.testing.assert_close(y.torch(), torch.cumsum(inputs[(2 * k + 1) % 4], 1))


@pytest.mark.parametrize("fn,has_training", [(torch._native_batch_norm_legit, True), (torch.native_batch_norm, True),
                                             (torch._native_batch_norm_legit_no_training, False)])
def test_batch_norm_externs_in_eval_mode_give_torch_cpus_empty_statistics(fn, has_training):
    # torch's meta kernel says the saved statistics are (C,); its CPU kernel saves nothing in eval
    # mode, (0,): the recording takes the CPU's shapes, so eval calls run (they raised before)
    xt, w, b, rm, rv = _x(3, 2, 4), _x(2, seed=1), _x(2, seed=2), _x(2, seed=3), _x(2, seed=4).abs()
    for training in (False, True, False):
        args = [w, b, rm.clone(), rv.clone()] + ([training] if has_training else []) + [0.1, 1e-5]
        want = fn(xt, *args)
        got = lf.extern(fn, lf.tensor(xt), *[lf.tensor(a) if isinstance(a, torch.Tensor) else a for a in args])
        assert [g.shape for g in got] == [tuple(t.shape) for t in want]
        for g, t in zip(got, want):
            torch.testing.assert_close(g.torch(), t)
    if has_training:   # training by keyword
        got = lf.extern(fn, lf.tensor(xt), *[lf.tensor(a) for a in (w, b, rm, rv)], training=False, momentum=0.1, eps=1e-5)
        assert got[1].shape == (0,) and got[2].shape == (0,)


@pytest.mark.parametrize("name", ["_batch_norm_with_update", "_batch_norm_with_update_functional",
                                  "_batch_norm_no_update"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_aten_batch_norm_externs_take_torch_cpus_statistics_dtypes_and_shapes(name, dtype):
    # torch's meta kernels type the saved statistics float32 for a half input (CUDA's), its CPU
    # kernels the input's dtype (the uint8 reserve stays uint8); _batch_norm_no_update saves
    # nothing on the CPU, (0,): OpInfo's _batch_norm_with_update was a float16 dtype mismatch
    fn = getattr(torch.ops.aten, name)
    xt, w, b, rm, rv = (t.to(dtype) for t in (_x(3, 2, 4), _x(2, seed=1), _x(2, seed=2), _x(2, seed=3),
                                              _x(2, seed=4).abs()))
    want = fn(xt, w, b, rm.clone(), rv.clone(), 0.1, 1e-5)
    got = lf.extern(fn, lf.tensor(xt), *[lf.tensor(t) for t in (w, b, rm, rv)], 0.1, 1e-5)
    assert [(g.dtype.torch, g.shape) for g in got] == [(t.dtype, tuple(t.shape)) for t in want]
    for g, t in zip(got, want):
        torch.testing.assert_close(g.torch(), t)


def test_calls_that_differ_only_by_an_int_a_float_or_a_bool_are_not_one_signature():
    # 2 == 2.0 == True in Python: a signature keyed on the values alone took torch.pow(x, 2.0)
    # for torch.pow(x, 2) (an int64 result where torch's is float32), at the top level and nested
    xt = torch.tensor([1, 2, 3])
    x = lf.tensor(xt)
    for args in ((2,), (2.0,), (True,)):
        for fn in (torch.pow, lambda t, e: torch.pow(t, [e][0])):
            got, want = lf.extern(fn, x, *args), fn(xt, *args)
            assert got.dtype.torch == want.dtype, (args, fn)
            torch.testing.assert_close(got.torch(), want)
    for exponent in (2, 2.0):   # by keyword
        got, want = lf.extern(torch.pow, x, exponent=exponent), torch.pow(xt, exponent=exponent)
        assert got.dtype.torch == want.dtype
        torch.testing.assert_close(got.torch(), want)
    y = lf.tensor([[0.5, 1.5]])
    torch.testing.assert_close(lf.extern(torch.nn.functional.pad, y, [1, 1], value=1.0).torch(),
                               torch.nn.functional.pad(y.torch(), [1, 1], value=1.0))


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
def test_intermediates_of_a_chain_of_externs_share_buffers_and_keep_their_values(device):
    # temporaries whose lifetimes do not overlap share a buffer (ir.planner._share_temps): an
    # (m, n) intermediate's buffer is taken by a later (m, 1) one and the other way round, so a
    # shared buffer must be as large as its largest node, at every size the plan is reused at
    dev = lf.device(device)

    def chain(x):
        a = lf.extern(torch.cumsum, x, 1)            # (m, n)
        b = lf.extern(torch.sum, a, 1, keepdim=True)  # (m, 1), while a is live
        c = lf.extern(torch.cumsum, b, 0)            # (m, 1), in a's buffer
        d = lf.extern(torch.mul, x, c)               # (m, n), in b's
        return lf.extern(torch.flip, d, [1])

    def reference(xt):
        return torch.flip(xt * torch.cumsum(torch.cumsum(xt, 1).sum(1, keepdim=True), 0), [1])

    for shape in ((40, 24), (24, 40), (40, 24)):   # (a size class holds 64 float64 elements)
        xt = _x(*shape, seed=sum(shape), dtype=torch.float64)
        got = chain(lf.tensor(xt, device=dev))
        torch.testing.assert_close(got.torch(), reference(xt))
        plan = next(reversed(dev.engine.plans.values()))
        assert plan.n_extern == 5 and len(plan.temps) == 2   # four intermediates in two buffers
