"""The Python and torch protocols a torch user's script leans on, on lazyfuse Tensors, each against
torch: formatting (``f"{loss:.4f}"``), ``in``, pickling (``torch.save``, ``copy.deepcopy``,
``lf.save``/``lf.load``), ``x.device.type``, ``stride(dim)``, ``nbytes``, ``x.data``, ``@=``,
lists of tensors as data, and autograd's ``retain_grad``, ``register_hook`` and
``lf.autograd.grad``."""
from __future__ import annotations

import copy
import io
import pickle

import numpy as np
import pytest
import torch

import lazyfuse as lf

DATA = np.arange(6.0, dtype=np.float32).reshape(2, 3) - 2


def _pair():
    return lf.tensor(DATA), torch.tensor(DATA)


def _same(lazy, ref):
    torch.testing.assert_close(lazy.torch(), ref.detach())


@pytest.mark.parametrize("spec", [".4f", "", ".2e", "8.3g"])
def test_a_zero_dim_tensor_formats_as_its_number(spec):
    if spec:
        assert format(lf.tensor(2.71828), spec) == format(torch.tensor(2.71828), spec)
    x, t = _pair()
    if spec:
        with pytest.raises(TypeError, match="unsupported format string"):
            format(t, spec)
        with pytest.raises(TypeError, match="unsupported format string"):
            format(x, spec)
    else:
        assert format(x, spec) == repr(x)


@pytest.mark.parametrize("element", [3.0, -2, 7, 0.5])
def test_in_is_any_equal(element):
    x, t = _pair()
    assert (element in x) == (element in t)
    assert (lf.tensor(element) in x) == (torch.tensor(element) in t)
    with pytest.raises(lf.DTypeError, match="only supports Tensor or scalar"):
        "a" in x


def test_pickle_and_deepcopy_keep_value_dtype_device_and_requires_grad():
    x = lf.tensor(DATA, dtype=lf.float64) * 2    # pending: pickling drains it
    back = pickle.loads(pickle.dumps(x))
    assert back.dtype is lf.float64 and back.device is x.device
    _same(back, torch.tensor(DATA, dtype=torch.float64) * 2)
    p = lf.tensor(DATA, requires_grad=True)
    (p * 3).sum().backward()
    q = copy.deepcopy(p)
    assert q.requires_grad and q.is_leaf and q is not p
    _same(q.grad, p.grad.torch())
    assert copy.deepcopy([p, p])[0] is not p
    shared = copy.deepcopy([p, p])
    assert shared[0] is shared[1]   # one copy per original, as deepcopy's memo gives
    with pytest.raises(lf.AutogradError, match="Only Tensors created explicitly by the user"):
        copy.deepcopy(p * 2)
    with pytest.raises(RuntimeError, match="Only Tensors created explicitly by the user"):
        copy.deepcopy(torch.tensor(DATA, requires_grad=True) * 2)


def test_save_and_load_a_checkpoint_of_lazyfuse_tensors():
    state = {"w": lf.tensor(DATA), "step": 3, "moments": [lf.arange(4), lf.ones(2, dtype=lf.bfloat16)],
             "torch": torch.ones(2)}
    buf = io.BytesIO()
    lf.save(state, buf)
    buf.seek(0)
    back = lf.load(buf)   # weights_only=True by default: lazyfuse's rebuild is the one trusted global
    assert back["step"] == 3 and isinstance(back["torch"], torch.Tensor)
    assert isinstance(back["w"], lf.Tensor) and back["moments"][1].dtype is lf.bfloat16
    _same(back["w"], torch.tensor(DATA))
    _same(back["moments"][0], torch.arange(4))
    buf.seek(0)
    moved = lf.load(buf, map_location="interpreter")
    assert moved["w"].device is lf.device("interpreter")
    buf.seek(0)
    with pytest.raises(Exception, match="weights_only"):
        torch.load(buf)   # torch alone does not trust lazyfuse's rebuild function
    buf.seek(0)
    assert isinstance(torch.load(buf, weights_only=False)["w"], lf.Tensor)


def test_device_type_and_index_are_torchs():
    x, t = _pair()
    assert x.device.type == t.device.type == "cpu"
    assert x.device.index is t.device.index is None
    assert lf.ones(1, device="interpreter").device.type == "interpreter"


@pytest.mark.parametrize("dim", [0, 1, -1, -2])
def test_stride_of_a_dim_nbytes_and_itemsize(dim):
    x, t = _pair()
    assert x.stride(dim) == t.stride(dim)
    assert x.t().stride(dim) == t.t().stride(dim)
    assert x.stride() == t.stride()
    assert (x.nbytes, x.itemsize) == (t.nbytes, t.itemsize)
    assert lf.ones(3, dtype=lf.float16).nbytes == torch.ones(3, dtype=torch.float16).nbytes


def test_data_reads_a_detached_alias_and_assigning_it_swaps_the_storage():
    w = lf.tensor(DATA, requires_grad=True)
    tw = torch.tensor(DATA, requires_grad=True)
    w.data.mul_(2)   # old-style parameter update: through the alias, outside autograd
    tw.data.mul_(2)
    _same(w.detach(), tw)
    assert not w.data.requires_grad and w.requires_grad
    w.data = lf.zeros(4)
    tw.data = torch.zeros(4)
    assert w.shape == tuple(tw.shape) and w.requires_grad
    _same(w.detach(), tw)
    with pytest.raises(lf.DTypeError, match="must match the tensor's type"):
        w.data = lf.zeros(4, dtype=lf.float64)


def test_in_place_matmul_is_torchs():
    x, t = _pair()
    m = np.array([[1.0, 2.0, 0.0], [0.0, 1.0, 0.0], [3.0, 0.0, 1.0]], dtype=np.float32)
    x @= lf.tensor(m)
    t @= torch.tensor(m)
    _same(x, t)
    with pytest.raises(lf.ShapeError, match="keeps x's shape"):
        x @= lf.ones(3, 2)


def test_a_list_of_tensors_is_data_as_in_torch():
    _same(lf.tensor([lf.tensor(1.5), lf.tensor(2.0) * 2]), torch.tensor([torch.tensor(1.5), torch.tensor(2.0) * 2]))
    _same(lf.tensor([[lf.tensor(1), 2]]), torch.tensor([[torch.tensor(1), 2]]))
    with pytest.raises(ValueError):
        torch.tensor([torch.ones(2), torch.ones(2)])
    with pytest.raises(lf.DTypeError, match="only one element tensors"):
        lf.tensor([lf.ones(2), lf.ones(2)])


# --- autograd: retain_grad, hooks, autograd.grad ------------------------------------------------

def _params():
    a = lf.tensor([1.0, -2.0, 3.0], requires_grad=True)
    ta = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
    return a, ta


def test_retain_grad_keeps_a_results_gradient():
    a, ta = _params()
    h, th = a.exp(), ta.exp()
    h.retain_grad()
    th.retain_grad()
    assert h.retains_grad and th.retains_grad
    (h * h).sum().backward()
    (th * th).sum().backward()
    _same(h.grad, th.grad)
    _same(a.grad, ta.grad)
    assert (a * 2).grad is None
    with pytest.raises(lf.AutogradError, match="can't retain_grad on Tensor that has requires_grad=False"):
        lf.ones(2).retain_grad()


@pytest.mark.parametrize("on_result", [False, True])
def test_register_hook_sees_and_replaces_the_gradient(on_result):
    a, ta = _params()
    seen, tseen = [], []
    x, tx = (a * 2, ta * 2) if on_result else (a, ta)
    handle = x.register_hook(lambda g: seen.append(g.numpy().copy()) or g * 10)
    th = tx.register_hook(lambda g: tseen.append(g.numpy().copy()) or g * 10)
    (x * x).sum().backward()
    (tx * tx).sum().backward()
    np.testing.assert_allclose(seen[0], tseen[0])
    _same(a.grad, ta.grad)
    handle.remove()
    th.remove()
    a.grad, ta.grad = None, None
    x, tx = (a * 2, ta * 2) if on_result else (a, ta)
    (x * x).sum().backward()
    (tx * tx).sum().backward()
    _same(a.grad, ta.grad)
    assert len(seen) == 1
    with pytest.raises(lf.AutogradError, match="cannot register a hook on a tensor that doesn't require"):
        lf.ones(2).register_hook(lambda g: g)


def test_autograd_grad_returns_gradients_without_accumulating():
    a, ta = _params()
    b, tb = lf.tensor([0.5], requires_grad=True), torch.tensor([0.5], requires_grad=True)
    h, th = a.sin() * b, ta.sin() * tb
    out, tout = (h * h).sum(), (th * th).sum()
    got = lf.autograd.grad(out, [a, b, h], retain_graph=True)
    ref = torch.autograd.grad(tout, [ta, tb, th], retain_graph=True)
    for g, r in zip(got, ref):
        _same(g, r)
    assert a.grad is None and b.grad is None
    # two outputs with their grad_outputs
    o1, o2 = a * 2, (a * a).sum()
    t1, t2 = ta * 2, (ta * ta).sum()
    seed = [1.0, 0.0, -1.0]
    g, = lf.autograd.grad([o1, o2], a, grad_outputs=[lf.tensor(seed), None])
    r, = torch.autograd.grad([t1, t2], ta, grad_outputs=[torch.tensor(seed), None])
    _same(g, r)


def test_autograd_grad_unused_inputs_and_refusals_are_torchs():
    a, ta = _params()
    c, tc = lf.ones(2, requires_grad=True), torch.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="appears to not have been used in the graph"):
        torch.autograd.grad((ta * 2).sum(), [ta, tc])
    with pytest.raises(lf.AutogradError, match="appears to not have been used in the graph"):
        lf.autograd.grad((a * 2).sum(), [a, c])
    g = lf.autograd.grad((a * 2).sum(), [a, c], allow_unused=True)
    r = torch.autograd.grad((ta * 2).sum(), [ta, tc], allow_unused=True)
    assert g[1] is None and r[1] is None
    _same(g[0], r[0])
    g = lf.autograd.grad((a * 2).sum(), [a, c], materialize_grads=True)
    r = torch.autograd.grad((ta * 2).sum(), [ta, tc], materialize_grads=True)
    _same(g[1], r[1])
    with pytest.raises(lf.AutogradError, match="does not require grad"):
        lf.autograd.grad((a * 2).sum(), [lf.ones(3)])
    with pytest.raises(lf.AutogradError, match="create_graph"):
        lf.autograd.grad((a * 2).sum(), [a], create_graph=True)
    with pytest.raises(lf.ShapeError, match="grad can be implicitly created only for scalar outputs"):
        lf.autograd.grad(a * 2, [a])


@pytest.mark.parametrize("make", [lambda: torch.tensor([1.5, -2.0]), lambda: np.array([1.5, -2.0]),
                                  lambda: torch.tensor(3), lambda: torch.tensor([1, 2], dtype=torch.int32)],
                         ids=["torch float", "numpy float64", "torch 0-d int", "torch int32"])
def test_torch_tensors_and_numpy_arrays_are_operands_as_torch_reads_them(make):
    x, t = lf.tensor([0.5, 4.0]), torch.tensor([0.5, 4.0])
    other, tother = make(), make()
    tother = torch.as_tensor(tother)
    for fn in (lambda a, b: a + b, lambda a, b: b * a, lambda a, b: a < b, lambda a, b: a.maximum(b) if
               isinstance(a, (lf.Tensor, torch.Tensor)) else None):
        got, ref = fn(x, other), fn(t, tother)
        assert isinstance(got, lf.Tensor) and got.dtype.torch == ref.dtype
        _same(got, ref)
    _same(lf.where(x > 1, x, other), torch.where(t > 1, t, tother))


def test_an_unsupported_operand_is_named_with_its_module():
    with pytest.raises(lf.DTypeError, match="unsupported operand of type builtins.str"):
        lf.ones(2) + "a"


@pytest.mark.parametrize("shape,fmt", [((2, 3, 4, 5), torch.channels_last), ((2, 3, 2, 4, 5), torch.channels_last_3d),
                                       ((2, 3, 4, 5), torch.contiguous_format)])
def test_contiguous_memory_formats_give_torchs_strides(shape, fmt):
    data = np.arange(float(np.prod(shape)), dtype=np.float32).reshape(shape)
    x, t = lf.tensor(data), torch.tensor(data)
    for a, b in ((x, t), (x.transpose(0, 1), t.transpose(0, 1))):
        got, ref = a.contiguous(memory_format=fmt), b.contiguous(memory_format=fmt)
        assert got.stride() == ref.stride()
        _same(got, ref)
    again = x.contiguous(memory_format=fmt)
    assert again.contiguous(memory_format=fmt) is again
    with pytest.raises(lf.ShapeError, match="required rank 4 tensor to use"):
        lf.ones(2, 3).contiguous(memory_format=torch.channels_last)


def test_contiguous_preserve_format_is_torchs():
    x, t = lf.ones(2, 3), torch.ones(2, 3)
    assert x.contiguous(memory_format=torch.preserve_format) is x
    with pytest.raises(RuntimeError, match="preserve memory format is unsupported"):
        t.t().contiguous(memory_format=torch.preserve_format)
    with pytest.raises(lf.ShapeError, match="preserve memory format is unsupported"):
        x.t().contiguous(memory_format=torch.preserve_format)
