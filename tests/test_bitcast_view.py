"""``x.view(dtype)`` is a view, as torch's: the same bytes read as another dtype, writes through
either tensor seen by the other (lazyfuse.bitcast). Compared with torch 2.13 byte for byte: the
values, shapes, strides and offsets over dtype pairs, slices and transposes, aliasing in both
directions on lazy (pending) and realized bases, torch's refusals, autograd, the C backend and
the Triton interpreter, and the torch frontend (tinygrad's ``test_bitcast``).

(It was a copy through an extern: ``y = x.view(torch.int32); y[0] = 5`` left ``x`` as it was.)"""
import itertools

import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

import lazyfuse as lf
from lazyfuse.ir import dtypes as dt

DTYPES = [d.torch for d in dt.ALL]
SAME_SIZE = [(a, b) for a, b in itertools.permutations(DTYPES, 2) if a.itemsize == b.itemsize]
OTHER_SIZE = [(a, b) for a, b in itertools.permutations(DTYPES, 2) if a.itemsize != b.itemsize]
DEVICES = ["cpu", "interpreter"]
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def random_bytes(n_bytes: int, seed: int, *dtypes) -> torch.Tensor:
    """``n_bytes`` random bytes; 0/1 only where a dtype is bool (torch's other bytes read as a bool
    are undefined behaviour: lazyfuse reads them as ``!= 0``)."""
    g = torch.Generator().manual_seed(seed)
    high = 2 if torch.bool in dtypes else 256
    return torch.randint(0, high, (n_bytes,), generator=g, dtype=torch.uint8)


def base_pair(shape, dtype, seed, device, *others):
    """A torch tensor of ``shape`` and ``dtype`` from random bytes, and lazyfuse's copy of it."""
    n = torch.Size(shape).numel()
    t = random_bytes(n * dtype.itemsize, seed, dtype, *others).view(dtype).reshape(shape)
    return t, lf.tensor(t.clone(), device=device)


def same_bytes(got: lf.Tensor, want: torch.Tensor) -> None:
    """Equal shape, strides, offset, dtype and bytes (NaN payloads too)."""
    g = got.torch()
    assert got.dtype == want.dtype and got.shape == tuple(want.shape)
    assert got.stride() == want.stride() and got._view.offset == want.storage_offset()
    assert torch.equal(g.reshape(-1).contiguous().view(torch.uint8), want.reshape(-1).contiguous().view(torch.uint8))


def carve(t, how: int):
    """A view of ``t`` (2-d): itself, a transpose, a row slice, a column slice or a strided one."""
    return [lambda x: x, lambda x: x.t(), lambda x: x[1:], lambda x: x[:, 2:], lambda x: x[::2, 2:6]][how](t)


# -- values, shapes and strides ------------------------------------------------------------------------------------
@SETTINGS
@given(pair=st.sampled_from(SAME_SIZE + OTHER_SIZE), rows=st.integers(2, 5), cols=st.sampled_from([8, 16]),
       how=st.integers(0, 4), seed=st.integers(0, 2 ** 16))
def test_a_view_of_another_dtype_has_torchs_bytes_shape_and_strides(pair, rows, cols, how, seed):
    src, dst = pair
    t, x = base_pair((rows, cols), src, seed, "cpu", dst)
    try:
        want = carve(t, how).view(dst)
    except RuntimeError as e:
        with pytest.raises(lf.ShapeError) as got:
            carve(x, how).view(dst)
        assert str(got.value).startswith(str(e))
        return
    same_bytes(carve(x, how).view(dst), want)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("src,dst", SAME_SIZE)
def test_values_read_through_a_bitcast_go_into_kernels_as_torchs(device, src, dst):
    t, x = base_pair((3, 8), src, 7, device, dst)
    want, got = t.view(dst), x.view(dst)
    if dst.is_floating_point:
        # arithmetic on the reinterpreted values (NaN payloads are not kept by arithmetic)
        torch.testing.assert_close((got * 1).torch(), want * 1, rtol=0, atol=0, equal_nan=True)
    else:
        assert torch.equal((got & 3).torch() if dst is not torch.bool else (~got).torch(),
                           (want & 3) if dst is not torch.bool else ~want)
    # a bitcast of a computed (pending) value, then back: the bytes exactly
    assert torch.equal((x.clone().view(dst)).view(src).torch().view(torch.uint8), t.view(torch.uint8))
    if not dst.is_floating_point and dst is not torch.bool:
        assert torch.equal(got.clone().torch(), want.clone())


# -- aliasing -------------------------------------------------------------------------------------------------------
def _write(v, k: int, as_bits: bool):
    """A write through a view, by kind: an index write, a fill, an in-place op. ``as_bits``
    (a bool on the other side) writes 0 or 1 only: a bool byte of another value is undefined in
    torch, and lazyfuse stores a bool as ``!= 0``."""
    float_view = v.dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64)
    if k == 0:
        v[..., :1] = 1.5 if float_view else 1
    elif k == 1:
        v.fill_(1 if as_bits or v.dtype == torch.bool else 2)
    elif float_view:
        v.mul_(2)
    elif v.dtype == torch.bool:
        v.logical_not_()
    else:
        v.bitwise_xor_(1) if as_bits else v.add_(3)


@SETTINGS
@given(pair=st.sampled_from(SAME_SIZE + OTHER_SIZE), how=st.integers(0, 4), kind=st.integers(0, 2),
       pending=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_writes_through_the_view_land_in_the_base_and_the_base_shows_in_the_view(pair, how, kind, pending, seed):
    src, dst = pair
    as_bits = torch.bool in pair
    if as_bits and (src.is_floating_point or dst.is_floating_point):
        return   # (a float's bytes are no bool's: undefined in torch)
    t, x = base_pair((4, 8), src, seed, "cpu", dst)
    if src.is_floating_point or dst.is_floating_point:
        # finite values only, both ways: a float op on a NaN gives some NaN whose bits torch does not fix
        t.copy_(torch.arange(32).reshape(4, 8).to(src))
        x = lf.tensor(t.clone())
    if pending:   # a base whose value is still a recorded op
        x = x.clone()
    try:
        tv = carve(t, how).view(dst)
    except RuntimeError:
        return
    xv = carve(x, how).view(dst)
    _write(tv, kind, as_bits)
    _write(xv, kind, as_bits)
    assert torch.equal(x.torch().view(torch.uint8), t.view(torch.uint8))   # the view's write is the base's
    # and a write of the base is the view's, read through it
    for base in (t, x):
        base.logical_not_() if src is torch.bool else base.bitwise_xor_(1) if as_bits else base.add_(1)
    same_bytes(xv, tv)


@pytest.mark.parametrize("device", DEVICES)
def test_float_bit_tricks_through_int_views(device):
    t = torch.tensor([1.5, -2.0, -0.0, float("inf"), -3.25e-40], dtype=torch.float32)
    x = lf.tensor(t.clone(), device=device)
    assert torch.equal((x.view(torch.int32) & 0x7fffffff).view(torch.float32).torch(),
                       (t.view(torch.int32) & 0x7fffffff).view(torch.float32))   # |x| by the sign bit
    bits = x.view(torch.int32)
    bits ^= -2 ** 31   # flip every sign in place, through the view
    tb = t.view(torch.int32)
    tb ^= -2 ** 31
    assert torch.equal(x.torch().view(torch.int32), t.view(torch.int32))
    x.view(torch.uint8)[3::4] ^= 0x80   # another itemsize: each float's sign byte, flipped back
    t.view(torch.uint8)[3::4] ^= 0x80
    assert torch.equal(x.torch().view(torch.int32), t.view(torch.int32))
    h = torch.tensor([1.0, -2.5, 65504.0], dtype=torch.bfloat16)
    y = lf.tensor(h.clone(), device=device)
    y.view(torch.int16)[1] = 16256   # bf16 1.0's bits
    h.view(torch.int16)[1] = 16256
    assert torch.equal(y.torch(), h)


def test_views_of_views_share_one_memory_and_version():
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    x = lf.tensor(t.clone())
    a = x.view(torch.int32).view(torch.uint8)[1:].view(torch.float32).view(torch.int32).t()
    ta = t.view(torch.int32).view(torch.uint8)[1:].view(torch.float32).view(torch.int32).t()
    same_bytes(a, ta)
    before = x._storage.version
    a.add_(1)
    ta.add_(1)
    assert torch.equal(x.torch(), t) and x._storage.version == before + 1
    assert x.view(torch.float32)._storage is x._storage   # its own dtype: the storage itself


# torch's own cases (test_view_ops.py, test_view_dtype_new): a base of each shape, then its view
TORCH_INPUTS = [((4, 4, 64), lambda b: b), ((4, 4, 64), lambda b: b.permute(1, 0, 2)),
                ((4, 64, 4), lambda b: b.permute(2, 0, 1)), ((1, 5, 1), lambda b: b.expand(5, 5, 64)),
                ((2, 5, 256), lambda b: b[1::2, 1:, ::2]), ((0, 5, 64), lambda b: b), ((), lambda b: b)]


@pytest.mark.parametrize("shape,carve_view", TORCH_INPUTS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_torchs_view_dtype_cases_natively_and_through_the_frontend(dtype, shape, carve_view):
    base = (torch.arange(torch.Size(shape).numel()) % (2 if dtype is torch.bool else 11) - 5 * (dtype is not torch.bool))
    base = base.to(dtype).reshape(shape)
    a, x, fa = carve_view(base), carve_view(lf.tensor(base.clone())), carve_view(lf.lazy(base.clone()))
    for view_dtype in DTYPES:
        if view_dtype is torch.bool:
            continue   # (as torch's test: another byte than 0/1 is no bool)
        try:
            want = a.view(view_dtype)
        except RuntimeError as e:
            for got in (x, fa):
                with pytest.raises(RuntimeError) as refused:
                    got.view(view_dtype)
                assert str(refused.value).startswith(str(e))
            continue
        same_bytes(x.view(view_dtype), want)
        assert torch.equal(x.view(view_dtype).view(dtype).torch(), a)
        fv = fa.view(view_dtype)
        assert fv.data_ptr() == fa.data_ptr() and fv.stride() == want.stride() and fv.shape == want.shape
        assert torch.equal(lf.eager(fv).reshape(-1).contiguous().view(torch.uint8), want.reshape(-1).contiguous().view(torch.uint8))


# -- refusals -------------------------------------------------------------------------------------------------------
REFUSED = [
    (lambda m: m.zeros(()), torch.float16),                                    # 0-d, another itemsize
    (lambda m: m.zeros(3, 4).t(), torch.float16),                              # last stride 4
    (lambda m: m.zeros(3, 1).expand(3, 4), torch.uint8),                       # last stride 0
    (lambda m: m.zeros(3, 3), torch.float64),                                  # last size 3
    (lambda m: m.zeros(9)[1:5], torch.float64),                                # offset 1
    (lambda m: m.zeros(4, 3)[:, :2], torch.float64),                           # stride(0) 3
    (lambda m: m.zeros(4, 3, dtype=m.int8)[:, :2], torch.int32),               # size(-1) 2 of a ratio 4
]


@pytest.mark.parametrize("make,dtype", REFUSED)
def test_refusals_are_torchs(make, dtype):
    with pytest.raises(RuntimeError) as want:
        make(torch).view(dtype)
    with pytest.raises(lf.ShapeError) as got:
        make(lf).view(dtype)
    assert str(got.value).startswith(str(want.value))
    assert (lf.ones(2) + 1).tolist() == [2.0, 2.0]   # the engine still works


def test_a_zero_d_tensor_views_a_dtype_of_its_itemsize():
    same_bytes(lf.tensor(1.5).view(torch.int32), torch.tensor(1.5).view(torch.int32))


# -- autograd ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("src,dst", [(torch.float16, torch.bfloat16), (torch.float32, torch.int32),
                                     (torch.float32, torch.float32), (torch.float32, torch.float16)])
def test_the_view_does_not_require_grad_as_torchs(src, dst):
    t = torch.ones(4, dtype=src, requires_grad=True)
    x = lf.ones(4, dtype=src, requires_grad=True)
    assert x.view(dst).requires_grad is t.view(dst).requires_grad is False
    assert (x * 2).view(dst).requires_grad is (t * 2).view(dst).requires_grad is False


def test_a_write_through_the_view_bumps_the_version_autograd_checks():
    x = lf.ones(4, requires_grad=True)
    y = x.exp()
    z = y.exp()   # saves y
    y.detach().view(torch.int32).add_(1)
    with pytest.raises(lf.AutogradError):
        z.sum().backward()


# -- the torch frontend ---------------------------------------------------------------------------------------------
def test_tinygrads_test_bitcast_through_the_frontend():
    a = torch.tensor([[1.0, -2.0], [3.5, 1e-30]], dtype=torch.float32)
    la = lf.lazy(a.clone())
    assert torch.equal(lf.eager(la.view(torch.int32)), a.view(torch.int32))
    assert torch.equal(lf.eager(la.view(torch.int32) + 1), a.view(torch.int32) + 1)
    h = torch.tensor([1.0, 2.0], dtype=torch.float16)
    assert torch.equal(lf.eager(lf.lazy(h).view(torch.int16)), h.view(torch.int16))


def test_the_frontend_view_aliases_both_ways_with_torchs_data_ptr():
    a = torch.arange(8, dtype=torch.float32)
    la = lf.lazy(a.clone())
    b, lb = a[2:].view(torch.int32), la[2:].view(torch.int32)
    assert lb.data_ptr() - la.data_ptr() == b.data_ptr() - a.data_ptr()
    u, lu = a.view(torch.uint8), la.view(torch.uint8)
    assert lu[5:].data_ptr() - la.data_ptr() == u[5:].data_ptr() - a.data_ptr()
    assert tuple(lu.shape) == tuple(u.shape) and lu.stride() == u.stride()
    b[0] = 7
    lb[0] = 7
    u[1] = 9
    lu[1] = 9
    assert torch.equal(lf.eager(la).view(torch.int32), a.view(torch.int32))
    a.mul_(3)
    la.mul_(3)
    assert torch.equal(lf.eager(lb), b) and torch.equal(lf.eager(lu), u)


# -- capture and explain --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.int32, torch.int16])
def test_a_captured_graphs_view_output_is_poisoned_like_any_output(dtype):
    a = lf.tensor(torch.arange(4, dtype=torch.float32))
    g = lf.capture(lf.device("cpu"), lambda: (a * 2).view(dtype), check_overwrites=True)
    first, second = g.replay(), g.replay()
    assert torch.equal(second.torch(), (torch.arange(4.0) * 2).view(dtype))
    with pytest.raises(lf.CaptureError, match="overwritten"):
        first.tolist()   # (it was returned as is: it showed the later replay's values)


def test_explain_of_a_view_shows_its_roots_work_and_the_fused_bitcast():
    x = lf.tensor([1.0, 2.0])
    assert "bitcast(" in str(lf.explain(x.view(torch.int32) + 1))
    assert "add(" in str(lf.explain((x + 1).view(torch.int32)))   # (a KeyError: the view's node changed per read)
