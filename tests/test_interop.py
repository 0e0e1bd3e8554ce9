"""DLPack and numpy interop: memory is shared both ways on the host, never copied.

Sharing is checked by behaviour (a write on one side is seen on the other: a lazyfuse write
after a drain) and by pointers. Non-contiguous producers are imported without a copy when
their strides are non-negative; negative strides are refused with a ShapeError.
"""
import gc

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import lazyfuse as lf
from lazyfuse.testing import pool_info

DEVICES = ["cpu", "interpreter"]
TORCH_DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64, torch.bool]


def sample(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype is torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(-50, 50, shape, generator=g, dtype=dtype)


# -- import: the producer's memory becomes the tensor's storage ----------------------------------
@pytest.mark.parametrize("device", DEVICES)
def test_numpy_import_shares_memory_both_ways(device):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = lf.from_dlpack(a, device=device)
    assert t.shape == (3, 4) and t.dtype is lf.float32 and t.device is lf.device(device)
    a[1, 2] = 100.0                      # a numpy write is seen by lazyfuse work that drains after it
    np.testing.assert_array_equal((t * 2).numpy(), a * 2)
    t.mul_(3)                            # a lazyfuse write lands in the numpy array after a drain
    lf.sync(device)
    expected = np.arange(12, dtype=np.float32).reshape(3, 4) * 3
    expected[1, 2] = 300.0
    np.testing.assert_array_equal(a, expected)


@pytest.mark.parametrize("dtype", TORCH_DTYPES, ids=str)
def test_torch_round_trip_shares_memory_for_every_dtype(dtype):
    src = sample((5, 7), dtype)
    ref = src.clone()
    t = lf.from_dlpack(src)
    assert t.dtype.torch is dtype
    back = torch.from_dlpack(t)
    assert back.data_ptr() == src.data_ptr() and back.dtype is dtype
    assert torch.equal(t.torch(), ref)
    fill = True if dtype is torch.bool else 7
    t[1:3, ::2] = fill                    # a strided in-place write through lazyfuse
    lf.sync()
    ref[1:3, ::2] = fill
    assert torch.equal(src, ref) and torch.equal(back, ref)
    src[4, 6] = False if dtype is torch.bool else -3
    ref[4, 6] = src[4, 6]
    assert torch.equal(t.torch(), ref)


@pytest.mark.parametrize("device", DEVICES)
def test_non_contiguous_inputs_are_imported_without_a_copy(device):
    base = np.arange(48, dtype=np.float64).reshape(6, 8)
    view = base[1:5, ::3]                # a slice with a step: strides (64, 24) bytes
    t = lf.from_dlpack(view, device=device)
    np.testing.assert_array_equal(t.numpy(), view)
    np.testing.assert_array_equal((t.T + 1).numpy(), view.T + 1)
    t.add_(1000)
    lf.sync(device)
    expected = np.arange(48, dtype=np.float64).reshape(6, 8)
    expected[1:5, ::3] += 1000
    np.testing.assert_array_equal(base, expected)      # only the viewed elements changed
    tt = torch.arange(24.0).reshape(4, 6).T            # a transposed torch tensor
    u = lf.from_dlpack(tt, device=device)
    assert u.stride() == tt.stride()
    assert torch.equal((u * 2).torch(), tt * 2)


def test_negative_strides_and_read_only_arrays_are_refused_clearly():
    a = np.arange(6, dtype=np.float32)
    with pytest.raises(lf.ShapeError, match="negative strides.*ascontiguousarray"):
        lf.from_dlpack(a[::-1])
    ro = np.arange(4.0)
    ro.flags.writeable = False
    with pytest.raises(lf.DTypeError, match="read-only"):
        lf.from_dlpack(ro)
    with pytest.raises(lf.DTypeError, match="__dlpack__"):
        lf.from_dlpack([1.0, 2.0])
    with pytest.raises(lf.DTypeError, match="not supported"):
        lf.from_dlpack(torch.zeros(3, dtype=torch.uint16))
    np.testing.assert_array_equal(lf.tensor(a[::-1]).numpy(), a[::-1])   # lf.tensor copies instead


def test_memory_elsewhere_than_the_requested_device_is_refused():
    if torch.cuda.is_available():
        with pytest.raises(lf.DeviceError, match="never copies"):
            lf.from_dlpack(np.zeros(3, np.float32), device="cuda")
    t = lf.ones(3, device="cpu")
    with pytest.raises(lf.DeviceError, match="never copies"):
        lf.from_dlpack(t, device="interpreter")


def test_importing_shared_memory_again_aliases_the_same_storage():
    x = lf.arange(8, dtype=lf.float32) * 2
    again = lf.from_dlpack(torch.from_dlpack(x))
    assert again._storage is x._storage
    half = lf.from_dlpack(torch.from_dlpack(x)[4:])
    assert half._storage is x._storage and half.shape == (4,)
    before = half * 1                    # a pending read, then an in-place write: program order holds
    x.fill_(-1)
    np.testing.assert_array_equal(before.numpy(), [8, 10, 12, 14])
    np.testing.assert_array_equal(half.numpy(), [-1] * 4)
    a = np.zeros(5, np.int64)
    assert lf.from_dlpack(a)._storage is lf.from_dlpack(a)._storage


def test_an_imported_buffer_never_returns_to_the_pool():
    dev = lf.device("cpu")
    a = np.full(256, 5.0, np.float32)
    t = lf.from_dlpack(a)
    (t + 1).numpy()
    gc.collect()   # what earlier tests left in cycles returns its buffers now, not inside the check
    cached = pool_info(dev)["cached_bytes"]
    del t
    gc.collect()
    assert pool_info(dev)["cached_bytes"] == cached
    for _ in range(4):                   # new tensors of the same size never land in the array
        lf.full((256,), 9.0).numpy()
    np.testing.assert_array_equal(a, 5.0)


# -- export: drain, then share the buffer -------------------------------------------------------
@pytest.mark.parametrize("device", DEVICES)
def test_export_drains_pending_work_and_shares_the_buffer(device):
    x = lf.tensor(np.arange(6, dtype=np.float32).reshape(2, 3), device=device)
    y = (x * 2 + 1).exp().log()          # pending until the export
    t = torch.from_dlpack(y)
    np.testing.assert_allclose(t.numpy(), np.arange(6).reshape(2, 3) * 2 + 1, rtol=1e-6)
    t[0, 0] = 42.0                       # a torch write is seen by lazyfuse
    assert y[0, 0].item() == 42.0
    y.add_(1)                            # a lazyfuse write is seen by torch after a drain
    lf.sync(device)
    assert t[0, 0].item() == 43.0
    n = np.from_dlpack(y)
    assert n.ctypes.data == t.data_ptr()
    assert y.__dlpack_device__() == t.__dlpack_device__() == (1, 0)


def test_exported_views_keep_their_strides_and_offset():
    x = lf.tensor(np.arange(24, dtype=np.float32).reshape(4, 6), device="cpu")   # numpy reads host memory
    v = x[1:, ::2].T
    n = np.from_dlpack(v)
    np.testing.assert_array_equal(n, np.arange(24, dtype=np.float32).reshape(4, 6)[1:, ::2].T)
    n[0, 0] = -1                         # element (1, 0) of the base
    assert x[1, 0].item() == -1


def test_an_exported_buffer_outlives_its_tensor_and_is_never_reused():
    y = lf.full((512,), 3.0, device="cpu") * 1
    t = torch.from_dlpack(y)
    del y
    gc.collect()
    for _ in range(4):                   # would overwrite t if the block went back to the pool
        lf.full((512,), 9.0, device="cpu").numpy()
    assert torch.equal(t, torch.full((512,), 3.0))


def test_export_of_a_failed_value_or_inside_a_capture_raises():
    dev = lf.device("cpu")
    bad = lf.tensor([0, 1]).reshape(2)[lf.tensor([5])]   # an out-of-range gather fails at the drain
    with pytest.raises(lf.ShapeError, match="out of range"):
        torch.from_dlpack(bad)
    x = lf.ones(4, device=dev)

    def step():
        y = x * 2
        torch.from_dlpack(y)
        return y

    with pytest.raises(lf.CaptureError):
        lf.capture(dev, step)
    assert (x + 1).numpy().tolist() == [2.0] * 4     # the engine still works


def test_captured_graph_reads_an_imported_array_in_place():
    inp = np.zeros((2, 8), np.float32)
    x = lf.from_dlpack(inp)
    g = lf.capture(lf.device("cpu"), lambda: (x * 2).softmax(-1))
    for seed in range(3):
        inp[:] = np.random.default_rng(seed).standard_normal((2, 8))   # refreshed with no copy_
        out = g.replay().numpy()
        ref = torch.softmax(torch.tensor(inp, dtype=torch.float64) * 2, -1).numpy()
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


# -- np.asarray (numpy 2's __array__ protocol) -------------------------------------------------
def test_asarray_copies_by_default_and_shares_with_copy_false():
    x = lf.arange(6, dtype=lf.float32, device="cpu") + 1   # copy=False shares host memory only
    a = np.asarray(x)
    a[0] = 99
    assert x[0].item() == 1.0            # a copy
    np.testing.assert_array_equal(np.asarray(x, dtype=np.float64), np.arange(1, 7, dtype=np.float64))
    assert np.asarray(x, dtype=np.float64).dtype == np.float64
    s = np.asarray(x, copy=False)
    s[0] = 99
    assert x[0].item() == 99.0           # shared
    with pytest.raises(ValueError, match="without a copy"):
        np.asarray(x, dtype=np.float64, copy=False)
    with pytest.raises(ValueError, match="bfloat16"):
        np.asarray(x.bfloat16(), copy=False)
    np.testing.assert_array_equal(np.asarray(lf.tensor([True, False])), [True, False])


def test_numpy_refuses_bfloat16_over_dlpack_but_torch_takes_it():
    x = lf.tensor(torch.tensor([1.5, -2.0], dtype=torch.bfloat16))
    with pytest.raises((BufferError, RuntimeError, TypeError)):
        np.from_dlpack(x)
    t = torch.from_dlpack(x)
    assert t.dtype is torch.bfloat16 and t.tolist() == [1.5, -2.0]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("contiguous", [True, False])
def test_a_torch_slice_imported_from_inside_its_storage_reads_its_own_elements(device, contiguous):
    # its buffer starts at the slice's storage offset: host reads, gathers and torch calls (the
    # library views of a buffer) count a view's offset from there, as the compiled kernels do
    base = torch.arange(40.0)
    src = base[4:].reshape(6, 6) if contiguous else base[4:].reshape(6, 6)[1:, ::2]
    assert src.storage_offset() > 0
    t = lf.from_dlpack(src, device=device)
    assert torch.equal(t.torch(), src)
    np.testing.assert_array_equal(t[1:3].numpy(), src[1:3].numpy())
    index = [2, 0, 2]
    np.testing.assert_array_equal(t[lf.tensor(index, device=device)].numpy(), src[index].numpy())
    torch.testing.assert_close(lf.sort(t, 1, descending=True).values.torch(), src.sort(1, descending=True).values)
    torch.testing.assert_close((t @ t.T).torch(), src @ src.T)


# -- randomised: any non-negative strided view of a torch tensor computes like torch -------------
@settings(max_examples=25, deadline=None)
@given(rows=st.integers(1, 6), cols=st.integers(1, 6), r0=st.integers(0, 2), step=st.integers(1, 3),
       transpose=st.booleans(), seed=st.integers(0, 2**16))
def test_strided_imports_compute_like_torch(rows, cols, r0, step, transpose, seed):
    base = sample((rows + 2, cols * step), torch.float32, seed)
    src = base[r0:r0 + rows, ::step]
    if transpose:
        src = src.T
    t = lf.from_dlpack(src)
    got = (t * 2 - 1).sigmoid().sum(-1).torch()
    ref = (src.double() * 2 - 1).sigmoid().sum(-1)
    torch.testing.assert_close(got.double(), ref, rtol=1e-5, atol=1e-5)
    expect = base.clone()
    expect[r0:r0 + rows, ::step] *= 0.5
    t.mul_(0.5)
    lf.sync()
    torch.testing.assert_close(base, expect)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="GPU memory needs a CUDA/HIP GPU")
def test_gpu_memory_round_trips_without_copies():
    src = torch.arange(8.0, device="cuda")
    t = lf.from_dlpack(src)
    assert t.device is lf.device(str(src.device))
    t.mul_(2)
    lf.sync(t.device)
    assert torch.equal(src.cpu(), torch.arange(8.0) * 2)
    back = torch.from_dlpack(t)
    assert back.data_ptr() == src.data_ptr()
    with pytest.raises(ValueError, match="not in host memory"):
        np.asarray(t, copy=False)
    with pytest.raises(lf.DeviceError, match="never copies"):
        lf.from_dlpack(src, device="cpu")
