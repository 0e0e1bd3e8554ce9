"""Issue 7, item 1: a bad-input matrix over the public API.

Every misuse raises its error class (docs/semantics.md, Errors) with a message naming the argument or the fix, and
leaves the engine and the next capture working (tests/test_errors.py's checks, over more of the API: creation,
each op category, reduction dims, views, indexing, casts, devices, capture states, scalars of
every kind, numpy dtypes, out-of-memory). Inputs lazyfuse accepts get torch's value, or the
documented rule where torch has none (README, "Reliability"): NaN/inf -> int casts give what
torch gives on this CPU, an integer to a negative integer power follows torch's tensor rule,
numpy scalars act as the Python scalar of their kind.
Element counts beyond int32 run with 64-bit indices (checked without allocating them).
"""
from __future__ import annotations

import decimal
import fractions
import math
import re

import numpy as np

import pytest
import torch

import lazyfuse as lf
from lazyfuse.codegen.triton_printer import I32_LIMIT
from test_errors import refuses_and_keeps_working

F = lf.nn.functional
DEVICES = ["cpu", "interpreter"]


def mixed(op):
    return lambda: op(lf.ones(2), lf.ones(2, device="interpreter"))


def _read_inside_capture():
    x = lf.ones(3)
    lf.capture("cpu", lambda: lf.tensor([(x * 2).sum().item()]))


def _sync_inside_capture():
    x = lf.ones(3)

    def closure():
        y = x + 1
        lf.sync()
        return y
    lf.capture("cpu", closure)


def _nested_capture():
    x = lf.ones(3)
    lf.capture("cpu", lambda: lf.capture("cpu", lambda: x + 1).output)


def _graph_input_from_another_device():
    x = lf.ones(3)
    lf.capture("cpu", lambda: x * 2)
    x.copy_(lf.ones(3, device="interpreter"))


def _out_of_memory():
    # a live value of 2**61 bytes: the pool asks for it, the allocator refuses
    huge = lf.ones(1).expand(1 << 59) + 1
    huge[:2].tolist()


def _gather_index_out_of_range():
    # the index values are only known at the drain: the launch fails, only its result is lost
    lf.zeros(3)[lf.tensor([0, 5])].tolist()


SHAPE, DTYPE, DEVICE, CAPTURE = (lf.ShapeError, ValueError), (lf.DTypeError, TypeError), (lf.DeviceError,), \
    (lf.CaptureError,)

CASES = {
    # creation
    "zeros with a float size": (lambda: lf.zeros(2.5), SHAPE, ["shape", "int"]),
    "zeros with a negative size": (lambda: lf.zeros(2, -1), SHAPE, ["negative"]),
    "ones with a bool size": (lambda: lf.ones((True, 2)), SHAPE, ["shape"]),
    "full with a complex value": (lambda: lf.full((2,), 1j), DTYPE, ["fill_value"]),
    "full with a string": (lambda: lf.full((2,), "1"), DTYPE, ["fill_value"]),
    "full nan into an int": (lambda: lf.full((2,), float("inf"), dtype=lf.int64), DTYPE, ["inf", "int64"]),
    "arange with a zero step": (lambda: lf.arange(0, 1, 0), SHAPE, ["step"]),
    "arange of a string": (lambda: lf.arange("3"), DTYPE, ["end"]),
    "randn of bools": (lambda: lf.randn(2, dtype=lf.bool), DTYPE, ["float", "bool"]),
    "from_numpy of a list": (lambda: lf.from_numpy([1, 2]), DTYPE, ["numpy", "list"]),
    "from_torch of an array": (lambda: lf.from_torch(np.zeros(2)), DTYPE, ["torch", "ndarray"]),
    "torch uint16": (lambda: lf.from_torch(torch.zeros(2, dtype=torch.uint16)), DTYPE, ["uint16"]),
    **{f"numpy {d}": (lambda d=d: lf.tensor(np.zeros(2, dtype=d)), DTYPE, [str(np.dtype(d))])
       for d in ("uint16", "uint32", "uint64", "complex128", "datetime64[s]", "U3")},
    "numpy complex copied in": (lambda: lf.zeros(2).copy_(np.zeros(2, np.complex64)), DTYPE, ["complex64"]),
    # Python and numpy scalars of every kind
    "complex scalar operand": (lambda: lf.ones(2) + 1j, DTYPE, ["complex"]),
    "numpy complex scalar": (lambda: lf.ones(2) * np.complex64(1), DTYPE, ["complex64"]),
    "Decimal scalar": (lambda: lf.ones(2) + decimal.Decimal(1), DTYPE, ["Decimal"]),
    "Fraction scalar": (lambda: lf.ones(2) + fractions.Fraction(1, 2), DTYPE, ["Fraction"]),
    "int beyond 64 bits": (lambda: (lf.tensor([1]) + 2 ** 70).tolist(), DTYPE, ["64 bits"]),
    "int beyond 64 bits, reflected": (lambda: 2 ** 64 * lf.tensor([1]), DTYPE, ["64 bits"]),
    "float beyond float range": (lambda: lf.ones(2) * 10 ** 400, DTYPE, ["too large"]),
    "complex copied in": (lambda: lf.zeros(2).copy_(2j), DTYPE, ["complex"]),
    # (torch tensors and numpy arrays are operands, as torch reads them: tests/test_tensor_protocols.py)
    "list operand": (lambda: lf.ones(2) + [1.0, 2.0], DTYPE, ["list"]),
    "string operand": (lambda: lf.ones(2) * "2", DTYPE, ["str"]),
    # op categories
    "bool - bool": (lambda: lf.tensor([True]) - True, DTYPE, ["bool"]),
    "bool // bool": (lambda: lf.tensor([True]) // lf.tensor([True]), DTYPE, ["bool"]),
    "bool % bool": (lambda: lf.tensor([True]) % lf.tensor([True]), DTYPE, ["bool"]),
    "bool ** bool tensor": (lambda: lf.tensor([True]) ** lf.tensor([True]), DTYPE, ["bool"]),
    "abs of bool": (lambda: lf.tensor([True]).abs(), DTYPE, ["bool"]),
    "relu of bool": (lambda: lf.tensor([True]).relu(), DTYPE, ["bool"]),
    "int | float": (lambda: lf.tensor([1]) | lf.tensor([1.0]), DTYPE, ["float32"]),
    "where on an int condition": (lambda: lf.where(lf.tensor([1, 0]), 1.0, 2.0), DTYPE, ["condition", "int64"]),
    "where without a tensor condition": (lambda: lf.where(True, lf.ones(1), 0.0), DTYPE, ["condition", "bool"]),
    "matmul of bools": (lambda: lf.tensor([[True]]) @ lf.tensor([[True]]), DTYPE, ["bool"]),
    "matmul of a 0-d tensor": (lambda: lf.tensor(1.0) @ lf.ones(2), SHAPE, ["0-d"]),
    "matmul inner dims": (lambda: lf.ones(2, 3) @ lf.ones(2, 3), SHAPE, ["(2, 3)", "3 != 2"]),
    "linear weight shape": (lambda: F.linear(lf.ones(2, 3), lf.ones(4, 5)), SHAPE, ["inner dims"]),
    "layer_norm shape": (lambda: F.layer_norm(lf.ones(2, 3), (4,)), SHAPE, ["normalized_shape"]),
    "embedding of floats": (lambda: F.embedding(lf.ones(2), lf.ones(4, 5)), DTYPE, ["integer"]),
    "clamp without bounds": (lambda: lf.ones(2).clamp(), SHAPE, ["min or max"]),
    "var of ints": (lambda: lf.tensor([1, 2]).var(), DTYPE, ["float"]),
    "argmax of bools": (lambda: lf.tensor([True]).argmax(), DTYPE, ["bool"]),
    # reduction dims
    "sum over a float dim": (lambda: lf.ones(2).sum(dim=0.5), SHAPE, ["dim", "float"]),
    "sum over a string dim": (lambda: lf.ones(2).sum(dim="0"), SHAPE, ["dim"]),
    "sum over a 0-d tensor's dim 1": (lambda: lf.tensor(3.0).sum(1), SHAPE, ["dim=1", "0-d"]),
    "amax over a dim out of range": (lambda: lf.ones(2, 3).amax(dim=(0, 2)), SHAPE, ["dim=2"]),
    "max(dim) out of range": (lambda: lf.ones(2, 3).max(dim=-3), SHAPE, ["dim=-3"]),
    "argmin dim out of range": (lambda: lf.ones(2).argmin(dim=1), SHAPE, ["dim=1"]),
    "var over a dim twice": (lambda: lf.ones(2, 3).var(dim=(1, 1)), SHAPE, ["dim 1", "multiple times"]),
    "amax over an empty dim": (lambda: lf.ones(0, 3).amax(0), SHAPE, ["empty"]),
    # (softmax over an empty dim computes an empty result, as torch's: tests/test_torch_gaps.py)
    "log_softmax dim out of range": (lambda: lf.ones(3).log_softmax(1), SHAPE, ["dim=1"]),
    # views
    "reshape to a float size": (lambda: lf.ones(2).reshape(2.0), SHAPE, ["shape", "float"]),
    "reshape with two -1": (lambda: lf.ones(4).reshape(-1, -1), SHAPE, ["-1"]),
    "expand with fewer dims": (lambda: lf.ones(2, 3).expand(3), SHAPE, ["fewer dims"]),
    "permute with too few dims": (lambda: lf.ones(2, 3).permute(0), SHAPE, ["permute"]),
    "transpose dim out of range": (lambda: lf.ones(2, 3).transpose(0, 5), SHAPE, ["dim1=5"]),
    "unsqueeze dim out of range": (lambda: lf.ones(2).unsqueeze(3), SHAPE, ["dim=3"]),
    "flatten start after end": (lambda: lf.ones(2, 3, 4).flatten(2, 1), SHAPE, ["start_dim"]),
    "cat along a dim out of range": (lambda: lf.cat([lf.ones(2), lf.ones(2)], dim=1), SHAPE, ["dim=1"]),
    "cat of nothing": (lambda: lf.cat([]), SHAPE, ["non-empty"]),   # (torch: a ValueError)
    "stack of different shapes": (lambda: lf.stack([lf.ones(2), lf.ones(3)]), SHAPE, ["same shape"]),
    "write into an expanded 0-d": (lambda: lf.tensor(1.0).expand(3).fill_(2.0), SHAPE, ["expand"]),
    # indexing
    "float index": (lambda: lf.ones(3)[1.5], DTYPE, ["1.5"]),
    "index of a 0-d tensor": (lambda: lf.tensor(1.0)[0], SHAPE, ["too many indices"]),
    "too many indices": (lambda: lf.ones(3)[0, 0], SHAPE, ["too many indices"]),
    "tensor index out of range (at the drain)": (_gather_index_out_of_range, SHAPE, ["5", "range"]),
    "setitem of a wrong shape": (lambda: lf.ones(3, 2).__setitem__(0, lf.ones(3)), SHAPE, ["(3,)", "(2,)"]),
    # casts
    "to a device with no GPU": (lambda: lf.ones(2).to("cuda"), DEVICE, ["cuda"]),
    "to complex": (lambda: lf.ones(2).to(torch.complex64), DTYPE, ["complex64"]),
    "sum with a bad dtype": (lambda: lf.ones(2).sum(dtype="x"), DTYPE, ["dtype"]),
    "int tensor fill_ nan": (lambda: lf.tensor([1]).fill_(float("nan")), DTYPE, ["nan", "int64"]),
    "float index via __index__": (lambda: [1, 2][lf.tensor(1.0)], DTYPE, ["integer"]),
    # devices
    "cpu + interpreter": (mixed(lambda a, b: a + b), DEVICE, ["cpu", "interpreter"]),
    "copy_ across devices": (mixed(lambda a, b: a.copy_(b)), DEVICE, ["mixed"]),
    "matmul across devices": (mixed(lambda a, b: a @ b), DEVICE, ["mixed"]),
    "where across devices": (mixed(lambda a, b: lf.where(a > 0, a, b)), DEVICE, ["mixed"]),
    "cat across devices": (mixed(lambda a, b: lf.cat([a, b])), DEVICE, ["mixed"]),
    "maximum across devices": (mixed(lf.maximum), DEVICE, ["mixed"]),
    "index with another device's tensor": (lambda: lf.ones(3)[lf.tensor([1], device="interpreter")], DEVICE,
                                           ["mixed"]),
    "out of memory": (_out_of_memory, DEVICE, ["out of memory", "bytes"]),
    # capture states
    "host read inside a capture": (_read_inside_capture, CAPTURE, ["capture", ".item()"]),
    "lf.sync inside a capture": (_sync_inside_capture, CAPTURE, ["capture", "lf.sync"]),
    "nested capture": (_nested_capture, CAPTURE, ["nest"]),
    "graph input from another device": (_graph_input_from_another_device, DEVICE, ["mixed"]),
    "capture of a non-callable": (lambda: lf.capture("cpu", 3), CAPTURE, ["callable"]),
    "capture returning a number": (lambda: lf.capture("cpu", lambda: 3), CAPTURE, ["int"]),
    "negative warmup": (lambda: lf.capture("cpu", lambda: None, warmup_iters=-1), CAPTURE, ["warmup_iters"]),
}


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_matrix(name):
    dev = lf.device("cpu")
    refuses_and_keeps_working(name, *CASES[name])         # the checks of tests/test_errors.py
    assert not dev.capturing and not dev.pool.capturing and lf.testing.pool_info(dev)["persistent"] is False
    live = lf.tensor([1.0, 2.0, 3.0])
    assert lf.capture(dev, lambda: live * 3).replay().tolist() == [3.0, 6.0, 9.0]


# -- inputs lazyfuse accepts: torch's value, or the documented rule ----------------------------------------
def same(got: lf.Tensor, want: torch.Tensor):
    g = got.torch()
    assert g.dtype == want.dtype, (g.dtype, want.dtype)
    assert tuple(g.shape) == tuple(want.shape), (g.shape, want.shape)
    if want.dtype.is_floating_point:
        torch.testing.assert_close(g, want, rtol=1e-6, atol=1e-6, equal_nan=True)
    else:
        assert torch.equal(g, want), (g, want)


SPECIAL = [1.5, -1.5, math.nan, math.inf, -math.inf, 3e9, -3e9, 0.0, -0.0, 2.0 ** 62]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("src", [torch.float32, torch.float64, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("dst", [torch.int32, torch.int64, torch.bool], ids=str)
def test_nan_and_out_of_range_float_to_int_casts_match_torch_on_this_cpu(device, src, dst):
    """C leaves these casts undefined; on x86 both backends give the "integer indefinite" value
    (INT_MIN), exactly as torch on this CPU, and NaN -> bool is True."""
    t = torch.tensor(SPECIAL, dtype=torch.float64).to(src)
    same(lf.tensor(t, device=device).to(lf.ir.dtypes.from_torch(dst)), t.to(dst))
    same((lf.tensor(t, device=device) * 1).to(lf.ir.dtypes.from_torch(dst)), t.to(dst))   # fused with an op


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=str)
def test_integer_division_and_modulo_by_zero_raise_as_torch_does(device, dtype):
    """torch's CPU raises ``RuntimeError: ZeroDivisionError``; lazyfuse raises it at the drain
    (the fused kernel's error flag: tests/test_data_errors.py), and every element of a division
    by non-zero divisors is torch's."""
    a = torch.tensor([7, -7, 0, 5, -6, 9], dtype=dtype)
    b = torch.tensor([0, 0, 0, 2, -4, -2], dtype=dtype)
    A, B = lf.tensor(a, device=device), lf.tensor(b, device=device)
    for fn in (lambda x, y: x // y, lambda x, y: x % y, lambda x, y: x // 0, lambda x, y: x % 0, lambda x, y: 7 // y):
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            fn(a, b)
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            fn(A, B).numpy()
    same(A[3:] // B[3:], a[3:] // b[3:])
    same(A[3:] % B[3:], a[3:] % b[3:])
    same(7 // B[3:], 7 // b[3:])


@pytest.mark.parametrize("device", DEVICES)
def test_integer_to_a_negative_integer_power(device):
    """torch computes it for a tensor exponent (1 -> 1, -1 -> +-1, else 0) and refuses a negative
    Python int exponent; so does lazyfuse (DTypeError)."""
    a = torch.tensor([2, 1, -1, -1, 0, 3, -3])
    e = torch.tensor([-1, -3, -3, -2, 2, -2, 3])
    same(lf.tensor(a, device=device) ** lf.tensor(e, device=device), a ** e)
    same(lf.tensor(a, device=device) ** lf.tensor(-2, device=device), a ** torch.tensor(-2))
    with pytest.raises(RuntimeError, match="negative integer powers"):
        a ** -2
    with pytest.raises(lf.DTypeError, match="negative integer powers"):
        lf.tensor(a, device=device) ** -2


@pytest.mark.parametrize("device", DEVICES)
def test_true_division_of_ints_and_bools_is_float(device):
    a, b = torch.tensor([3, -3, 0, 1]), torch.tensor([2, 0, 0, -4])
    same(lf.tensor(a, device=device) / lf.tensor(b, device=device), a / b)
    p, q = torch.tensor([True, False, True]), torch.tensor([True, True, False])
    same(lf.tensor(p, device=device) / lf.tensor(q, device=device), p / q)


@pytest.mark.parametrize("device", DEVICES)
def test_bool_arithmetic_that_torch_accepts(device):
    p, q = torch.tensor([True, False, True, False]), torch.tensor([True, True, False, False])
    P, Q = lf.tensor(p, device=device), lf.tensor(q, device=device)
    same(P + Q, p + q)
    same(P * Q, p * q)
    same(P + 1, p + 1)
    same(P * 2.5, p * 2.5)
    same(P.sum(), p.sum())
    same(P ** True, p ** True)
    same(lf.maximum(P, Q), torch.maximum(p, q))


SCALARS = [2, -3, 2.5, True, False, np.int32(3), np.int64(-2), np.float16(0.5), np.float32(1.5), np.float64(-2.0)]


@pytest.mark.parametrize("scalar", SCALARS, ids=lambda s: f"{type(s).__name__}({s})")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32, torch.int64, torch.bool], ids=str)
def test_python_and_numpy_scalars_of_every_kind(scalar, dtype):
    """Scalars promote as torch's Python scalars do; a numpy scalar acts as the Python scalar of
    its kind (torch agrees for numbers)."""
    t = torch.tensor([1, 0, 3]).to(dtype)
    py = scalar.item() if isinstance(scalar, np.generic) else scalar
    same(lf.tensor(t) + scalar, t + py)
    same(scalar * lf.tensor(t), py * t)
    same(lf.tensor(t) > scalar, t > py)


def test_numpy_bool_scalar_is_a_bool_unlike_torch():
    """torch reads ``np.bool_`` as a float scalar (``int_tensor + np.bool_(True)`` is float32);
    lazyfuse reads it as the bool it is, like numpy and like a Python bool."""
    t = torch.tensor([1, 2])
    assert (lf.tensor(t) + np.bool_(True)).dtype is lf.int64
    same(lf.tensor(t) + np.bool_(True), t + True)


def test_maximum_with_a_python_scalar_and_max_over_a_dim_tuple():
    """Two conveniences torch refuses: ``lf.maximum(t, 2.0)`` is ``clamp(min=2.0)`` with torch's
    NaN propagation, ``t.max(dim=(0, 1))`` is ``amax(dim=(0, 1))``."""
    t = torch.tensor([[1.0, math.nan, 3.0], [-2.0, 5.0, 2.0]])
    same(lf.maximum(lf.tensor(t), 2.0), torch.maximum(t, torch.tensor(2.0)))
    same(lf.minimum(lf.tensor(t), 2.0), torch.minimum(t, torch.tensor(2.0)))
    same(lf.tensor(t).max(dim=(0, 1)), t.amax(dim=(0, 1)))
    same(lf.tensor(t).min(dim=(1,), keepdim=True), t.amin(dim=(1,), keepdim=True))


@pytest.mark.parametrize("device", DEVICES)
def test_zero_size_and_0d_tensors(device):
    e, s = torch.zeros(0, 3), torch.tensor(2.5)
    E, S = lf.tensor(e, device=device), lf.tensor(s, device=device)
    same(E.sum(0), e.sum(0))
    same(E.sum(1), e.sum(1))
    same(E.mean(0), e.mean(0))
    same(E.softmax(1), e.softmax(1))
    same((E + 1).exp(), (e + 1).exp())
    same(E @ lf.ones(3, 2, device=device), e @ torch.ones(3, 2))
    same(lf.ones(2, 0, device=device) @ lf.ones(0, 2, device=device), torch.ones(2, 0) @ torch.ones(0, 2))
    same(lf.cat([E, lf.ones(1, 3, device=device)]), torch.cat([e, torch.ones(1, 3)]))
    same(E[1:], e[1:])
    same(S.sum(0), s.sum(0))
    same(S.argmax(), s.argmax())
    same(S.softmax(0), s.softmax(0))
    same(S.unsqueeze(0) * lf.ones(3, device=device), s.unsqueeze(0) * torch.ones(3))
    same(S + lf.ones(2, 1, device=device), s + torch.ones(2, 1))
    assert S.item() == 2.5 and E.tolist() == []
    z = lf.zeros(0, device=device)
    z.add_(1)                            # an in-place write of nothing
    assert z.tolist() == []


@pytest.mark.parametrize("device", DEVICES)
def test_non_contiguous_inputs_and_writes(device):
    base = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
    B = lf.tensor(base, device=device)
    same(B.permute(2, 0, 1) * 2, base.permute(2, 0, 1) * 2)
    same(B[:, ::2, 1::2].exp(), base[:, ::2, 1::2].exp())
    same(B.transpose(0, 2).sum(1), base.transpose(0, 2).sum(1))
    same(B[0].T @ B[1], base[0].T @ base[1])
    same(lf.tensor(base[:, 1], device=device).expand(3, 2, 4).amax(0), base[:, 1].expand(3, 2, 4).amax(0))
    want = base.clone()
    want.transpose(1, 2)[:, ::2].mul_(-1)
    B.transpose(1, 2)[:, ::2].mul_(-1)
    same(B, want)


def test_numpy_inputs_that_are_non_contiguous_read_only_or_0d():
    a = np.arange(12, dtype=np.float64).reshape(3, 4)[:, ::-2]
    same(lf.tensor(a), torch.from_numpy(a.copy()))
    ro = np.arange(3, dtype=np.int32)
    ro.setflags(write=False)
    same(lf.from_numpy(ro) * 2, torch.from_numpy(ro.copy()) * 2)
    same(lf.tensor(np.array(3.5)), torch.tensor(3.5, dtype=torch.float64))


# -- element counts beyond int32 --------------------------------------------------------------------------
BEYOND_I32 = 2 ** 31 + 7


def test_a_reduction_over_more_than_int32_elements_counts_every_one():
    """Nothing is allocated: an expanded view of one element, reduced on the CPU with 64-bit loops."""
    assert lf.ones(1, dtype=lf.int32).expand(BEYOND_I32).sum().item() == BEYOND_I32


@pytest.mark.parametrize("device", DEVICES)
def test_generated_code_indexes_with_64_bits_where_int32_overflows(device):
    """C kernels always use int64 loops and indices; Triton kernels switch their program ids and
    offsets to int64 when an extent or index could pass int32 (``I32_LIMIT``), and stay int32
    (faster on GPUs) otherwise. Checked on the printed source (no launch, nothing allocated)."""
    big = (lf.ones(1, device=device).expand(3, BEYOND_I32) * 2).sum(1)
    small = (lf.ones(1, device=device).expand(3, 1000) * 2).sum(1)
    big_src, small_src = (lf.explain(t).kernels[0].source for t in (big, small))
    if device == "cpu":
        for src in (big_src, small_src):
            loops = [line for line in src.splitlines() if line.strip().startswith("for (")]
            element_loops = [line for line in loops if "nparts" not in line]   # not the per-thread partials
            assert element_loops and all("for (int64_t" in line for line in element_loops), src
        # the reduced extent reaches the kernel as a 64-bit value: a metadata word (shape-generic
        # kernels) or a literal
        from lazyfuse.codegen import index
        if index.SHAPE_GENERIC:
            assert re.search(r"const int64_t n_r0 = meta\[\d+\];", big_src), big_src
        else:
            assert str(BEYOND_I32) in big_src
    else:
        assert BEYOND_I32 > I32_LIMIT
        assert "tl.program_id(0).to(tl.int64)" in big_src, big_src
        assert "tl.program_id(0).to(tl.int64)" not in small_src, small_src
