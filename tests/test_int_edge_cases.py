"""Integer edge cases of the generated kernels, every integer dtype on ``cpu`` (C) and
``interpreter`` (Triton), differential against torch eager: division by 0 (torch raises) and
INT_MIN / -1 (x86's idiv traps with SIGFPE: a process crash), shift counts at or beyond the width
and negative, ``pow``'s overflow and the exponents torch refuses, abs/neg/sign of the minimum,
float -> int casts of NaN, inf and out-of-range values, and integer reductions that overflow.
Values are drawn at the limits, where C's undefined behaviour shows."""
from __future__ import annotations

import platform

import pytest
import torch
from hypothesis import given, settings, strategies as st

import lazyfuse as lf
from programs import COMMON, scaled

INTS = [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8]
DEVICES = ["cpu", "interpreter"]


def same(got: lf.Tensor, want: torch.Tensor) -> None:
    g = got.torch()
    assert g.dtype == want.dtype, (g.dtype, want.dtype)
    assert torch.equal(g, want), (g.tolist(), want.tolist())


def wrap(value: int, dtype) -> int:
    """``value`` modulo 2^bits, as ``dtype`` holds it (torch wraps a Python int operand so)."""
    info = torch.iinfo(dtype)
    value &= (1 << info.bits) - 1
    return value - (1 << info.bits) if info.min and value > info.max else value


def edges(dtype) -> list:
    info = torch.iinfo(dtype)
    return [v for v in (info.min, info.min + 1, -2, -1, 0, 1, 2, 7, info.max - 1, info.max) if info.min <= v <= info.max]


def ints(dtype, min_size=1):
    info = torch.iinfo(dtype)
    return st.lists(st.one_of(st.sampled_from(edges(dtype)), st.integers(info.min, info.max)),
                    min_size=min_size, max_size=40)


# -- division ---------------------------------------------------------------------------------------
DIVISIONS = {
    "//": lambda x, y: x // y,
    "floor": lambda x, y: x.div(y, rounding_mode="floor"),
    "trunc": lambda x, y: x.div(y, rounding_mode="trunc"),
    "%": lambda x, y: x % y,
    "remainder": lambda x, y: x.remainder(y),
    "fmod": lambda x, y: x.fmod(y),
}


def _ifloordiv(x, y):
    x //= y
    return x


def _imod(x, y):
    x %= y
    return x


IN_PLACE_DIVISIONS = {
    "//=": _ifloordiv, "%=": _imod,
    "div_floor_": lambda x, y: x.div_(y, rounding_mode="floor"),
    "div_trunc_": lambda x, y: x.div_(y, rounding_mode="trunc"),
    "remainder_": lambda x, y: x.remainder_(y), "fmod_": lambda x, y: x.fmod_(y),
}


def trunc_reference(x: torch.Tensor, y) -> torch.Tensor:
    """``x.div(y, rounding_mode='trunc')`` in Python integers, wrapped to the result dtype: torch's
    own CPU kernel traps (SIGFPE) on INT_MIN / -1 in int32 and int64, so it cannot be asked there
    (test_the_trunc_reference_is_torchs_where_torch_does_not_trap checks this against it)."""
    out = torch.result_type(x, y)
    ys = torch.broadcast_to(y, x.shape).tolist() if isinstance(y, torch.Tensor) else [wrap(y, out)] * x.numel()
    q = [(abs(a) // abs(b)) * (1 if (a < 0) == (b < 0) else -1) for a, b in zip(x.tolist(), ys)]
    return torch.tensor([wrap(v, out) for v in q], dtype=out)


def expected_division(name: str, x: torch.Tensor, y) -> torch.Tensor:
    return trunc_reference(x, y) if name in ("trunc", "div_trunc_") else \
        {**DIVISIONS, **IN_PLACE_DIVISIONS}[name](x.clone(), y)


def divisors(dtype):
    """Non-zero divisors in ``dtype``: its limits and -1 often (INT_MIN / -1)."""
    info = torch.iinfo(dtype)
    return st.one_of(st.sampled_from([v for v in edges(dtype) if v] + [-1] * 3 if info.min else [1, 255]),
                     st.integers(info.min, info.max).filter(bool))


def number_divisors(dtype):
    """Python-number divisors, beyond the dtype too (torch wraps them: 2**32 - 1 is -1 in int32),
    none that wraps to 0 (refused at the call: test_a_zero_number_divisor_raises_at_the_call)."""
    bits = torch.iinfo(dtype).bits
    beyond = [v for v in ((1 << bits) - 1, -(1 << bits) + 1, (1 << bits) + 3, 2 ** 63 - 1) if -2 ** 63 <= v < 2 ** 63]
    return st.one_of(divisors(dtype), st.sampled_from(beyond), st.integers(-2 ** 40, 2 ** 40)) \
        .filter(lambda v: wrap(v, dtype) != 0)


@pytest.mark.parametrize("device", DEVICES)
@settings(COMMON, max_examples=scaled(40))
@given(data=st.data())
def test_integer_division_is_torchs_at_the_limits(device, data):
    """Every division op and its in-place form, by a tensor or a Python number, alone, fused with
    other ops and inside a reduction: torch's values (its wrap for INT_MIN // -1), no trap."""
    dtype = data.draw(st.sampled_from(INTS), "dtype")
    name = data.draw(st.sampled_from(sorted(DIVISIONS) + sorted(IN_PLACE_DIVISIONS)), "op")
    values = data.draw(ints(dtype), "x")
    tx = torch.tensor(values, dtype=dtype)
    if data.draw(st.booleans(), "tensor divisor"):
        y = torch.tensor(data.draw(st.lists(divisors(dtype), min_size=len(values), max_size=len(values)), "y"),
                         dtype=dtype)
        ly = lf.tensor(y, device=device)
    else:
        y = ly = data.draw(number_divisors(dtype), "y")
    want = expected_division(name, tx, y)
    fn = {**DIVISIONS, **IN_PLACE_DIVISIONS}[name]
    same(fn(lf.tensor(tx, device=device), ly), want)
    same(fn(lf.tensor(tx, device=device) * 1, ly) * 3 + lf.tensor(tx, device=device), want * 3 + tx)   # one kernel
    same(fn(lf.tensor(tx, device=device), ly).sum(), want.sum())


@settings(COMMON, max_examples=scaled(60))
@given(data=st.data())
def test_the_trunc_reference_is_torchs_where_torch_does_not_trap(data):
    dtype = data.draw(st.sampled_from(INTS), "dtype")
    info = torch.iinfo(dtype)
    traps = dtype in (torch.int32, torch.int64)
    tx = torch.tensor(data.draw(ints(dtype), "x"), dtype=dtype)
    y = data.draw(number_divisors(dtype), "y")
    if traps and wrap(y, dtype) == -1:
        tx = tx.clamp(min=info.min + 1)
    assert torch.equal(trunc_reference(tx, y), tx.div(y, rounding_mode="trunc"))
    ty = torch.tensor(data.draw(st.lists(divisors(dtype), min_size=tx.numel(), max_size=tx.numel()), "y"), dtype=dtype)
    if traps:
        ty = torch.where((tx == info.min) & (ty == -1), 1, ty).to(dtype)
    assert torch.equal(trunc_reference(tx, ty), tx.div(ty, rounding_mode="trunc"))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", INTS, ids=str)
def test_the_minimum_divided_by_minus_one(device, dtype):
    """The x86 trap: INT_MIN / -1 (and the narrow types' -128 / -1, computed wider). torch wraps
    the quotient to INT_MIN and the remainders are 0; for ``trunc`` its own int32/int64 kernel
    traps, and the quotient is the floor one's (-1 divides exactly)."""
    info = torch.iinfo(dtype)
    tx = torch.tensor([info.min, info.min + 1, -1, 0, info.max], dtype=dtype)
    minus_one = -1 if info.min else 255   # (uint8: the wrapped -1, whose quotients are 0 and 1)
    for y in (minus_one, -1, torch.full((5,), minus_one, dtype=dtype)):
        ly = lf.tensor(y, device=device) if isinstance(y, torch.Tensor) else y
        for name, fn in DIVISIONS.items():
            want = tx // y if name == "trunc" else fn(tx, y)
            same(fn(lf.tensor(tx, device=device), ly), want)
            same(fn(lf.tensor(tx, device=device), ly).sum(), want.sum())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", INTS, ids=str)
def test_trunc_division_by_a_negative_number_on_uint8_and_beyond_the_range(device, dtype):
    """The divisor is the dtype's wrap of the number: uint8 7 // -3 divides by 253 (0, not 1,
    which the sign of the number itself gave), int8 by -129 divides by 127."""
    tx = torch.tensor(edges(dtype), dtype=dtype)
    for y in (-3, -1, -129, 300, -(2 ** 40) - 3):
        if dtype in (torch.int32, torch.int64) and wrap(y, dtype) == -1:
            continue   # (torch traps: test_the_minimum_divided_by_minus_one)
        same(lf.tensor(tx, device=device).div(y, rounding_mode="trunc"), tx.div(y, rounding_mode="trunc"))
        same(lf.tensor(tx, device=device).div_(y, rounding_mode="trunc"), tx.clone().div_(y, rounding_mode="trunc"))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", INTS, ids=str)
def test_a_zero_tensor_divisor_raises_at_the_drain_and_leaves_the_engine_usable(device, dtype):
    tx = torch.tensor(edges(dtype), dtype=dtype)
    ty = torch.ones_like(tx)
    ty[3] = 0
    for name, fn in {**DIVISIONS, **IN_PLACE_DIVISIONS}.items():
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            fn(tx.clone(), ty)
        # (each program, and whether an in-place form of it writes into x)
        for program, writes_x in ((lambda x, y: fn(x, y), True), (lambda x, y: fn(x * 1, y) + x, False),
                                  (lambda x, y: fn(x, y).sum(), True)):
            x, y = lf.tensor(tx, device=device), lf.tensor(ty, device=device)
            view = x[1:]
            with pytest.raises(lf.DivisionByZeroError, match="non-zero"):
                program(x, y).tolist()
            if name in IN_PLACE_DIVISIONS and writes_x:
                # the kernel wrote into x's buffer before its flag was read: x and its views are
                # poisoned (docs/semantics.md, Errors), each read raising the division's error
                for poisoned in (x, view):
                    with pytest.raises(lf.DivisionByZeroError):
                        poisoned.tolist()
            else:
                same(x, tx)
                same(view * 2, tx[1:] * 2)
            # the engine goes on: the next program on the same data gives torch's values
            x, y = lf.tensor(tx, device=device), lf.tensor(ty, device=device)
            same(fn(x, y + (y == 0)), expected_division(name, tx, ty + (ty == 0)))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", INTS, ids=str)
def test_a_zero_number_divisor_raises_at_the_call(device, dtype):
    """torch raises at the call for a Python-number divisor that is 0 in the dtype (0, False,
    2**bits): so does lazyfuse, leaving an in-place operand and its views as they were."""
    tx = torch.tensor(edges(dtype), dtype=dtype)
    bits = torch.iinfo(dtype).bits
    for zero in [0, False] + [v for v in (1 << bits, -3 << bits) if -2 ** 63 <= v < 2 ** 63]:
        for fn in {**DIVISIONS, **IN_PLACE_DIVISIONS}.values():
            with pytest.raises(RuntimeError, match="ZeroDivisionError"):
                fn(tx.clone(), zero)
            x = lf.tensor(tx, device=device)
            view = x[2:]
            with pytest.raises(lf.DivisionByZeroError, match="is 0 in"):
                fn(x, zero)
            same(x, tx)
            same(view, tx[2:])
    # a float quotient has no zero to refuse: torch's inf and nan
    for fn in (lambda x: x // 0.0, lambda x: x.float() // 0, lambda x: x % 0.0, lambda x: x.double().fmod(0)):
        torch.testing.assert_close(fn(lf.tensor(tx, device=device)).torch(), fn(tx), rtol=0, atol=0, equal_nan=True)


# -- shifts -----------------------------------------------------------------------------------------
def _ilshift(x, y):
    x <<= y
    return x


def _irshift(x, y):
    x >>= y
    return x


SHIFTS = {
    "<<": lambda x, y: x << y, ">>": lambda x, y: x >> y,
    "bitwise_left_shift": lambda x, y: x.bitwise_left_shift(y),
    "bitwise_right_shift": lambda x, y: x.bitwise_right_shift(y),
    "<<=": _ilshift, ">>=": _irshift,
}


@pytest.mark.parametrize("device", DEVICES)
@settings(COMMON, max_examples=scaled(40))
@given(data=st.data())
def test_shifts_by_any_count_are_torchs(device, data):
    """Counts at and beyond the width, and negative (C leaves both undefined, and gcc folds a
    constant count differently from what the hardware does with a runtime one): by a Python
    number, a tensor, and reflected (``5 << t``); torch's CPU values."""
    dtype = data.draw(st.sampled_from(INTS), "dtype")
    info = torch.iinfo(dtype)
    name = data.draw(st.sampled_from(sorted(SHIFTS)), "op")
    tx = torch.tensor(data.draw(ints(dtype), "x"), dtype=dtype)
    counts = st.one_of(st.sampled_from([0, 1, info.bits - 1, info.bits, info.bits + 1, 31, 32, 63, 64, 65, -1, -8]),
                       st.integers(-70, 70)).filter(lambda c: info.min <= c <= info.max)
    fn = SHIFTS[name]
    c = data.draw(counts, "count")
    same(fn(lf.tensor(tx, device=device), c), fn(tx.clone(), c))
    tc = torch.tensor(data.draw(st.lists(counts, min_size=tx.numel(), max_size=tx.numel()), "counts"), dtype=dtype)
    same(fn(lf.tensor(tx, device=device) + 0, lf.tensor(tc, device=device)) * 1, fn(tx.clone() + 0, tc) * 1)
    if name in ("<<", ">>"):
        base = data.draw(st.sampled_from([1, 5, -3, info.max]), "base")
        same(fn(base, lf.tensor(tc, device=device)), fn(base, tc))


@pytest.mark.parametrize("device", DEVICES)
def test_an_in_place_shift_writes_through_views(device):
    """``x <<= s`` shifts x in place, as torch's (Python's fallback would rebind x to a new tensor,
    and a view of x would keep the old values)."""
    t = torch.tensor([1, -3, 7, 100], dtype=torch.int32)
    for fn in (_ilshift, _irshift):
        x = lf.tensor(t, device=device)
        view, want = x[1:], t.clone()
        tview = want[1:]
        assert fn(x, 3) is x
        fn(want, 3)
        same(view, tview)
        same(x, want)


# -- pow --------------------------------------------------------------------------------------------
def _ipow(x, y):
    x **= y
    return x


POWERS = {"**": lambda x, y: x ** y, "pow": lambda x, y: x.pow(y), "pow_": lambda x, y: x.pow_(y), "**=": _ipow}


@pytest.mark.parametrize("device", DEVICES)
@settings(COMMON, max_examples=scaled(40))
@given(data=st.data())
def test_integer_pow_wraps_as_torchs(device, data):
    """Powers that overflow wrap in the dtype (int8 3 ** 5 is -13), 0 ** 0 is 1, a tensor's
    negative exponents follow torch's rule (1 -> 1, -1 -> +-1, else 0)."""
    dtype = data.draw(st.sampled_from(INTS), "dtype")
    info = torch.iinfo(dtype)
    name = data.draw(st.sampled_from(sorted(POWERS)), "op")
    tx = torch.tensor(data.draw(ints(dtype), "x"), dtype=dtype)
    exponents = st.one_of(st.sampled_from([0, 1, 2, 3, 7, 31, 32, 63, 64, 65]),
                          st.integers(0, min(info.max, 200))).filter(lambda e: e <= info.max)
    fn = POWERS[name]
    e = data.draw(exponents, "exponent")
    same(fn(lf.tensor(tx, device=device), e), fn(tx.clone(), e))
    negative = st.sampled_from([v for v in (-1, -2, info.min) if v >= info.min])
    te = torch.tensor(data.draw(st.lists(st.one_of(exponents, negative),
                                         min_size=tx.numel(), max_size=tx.numel()), "exponents"), dtype=dtype)
    same(fn(lf.tensor(tx, device=device) * 1, lf.tensor(te, device=device)) + 1, fn(tx.clone() * 1, te) + 1)
    base = data.draw(st.sampled_from([0, 1, -1, 2, 3, 300, -7]), "base")
    same(base ** lf.tensor(te, device=device), base ** te)


@pytest.mark.parametrize("dtype", INTS + [torch.bool], ids=str)
@pytest.mark.parametrize("name", sorted(POWERS))
def test_integer_pow_refuses_the_exponents_torch_refuses(dtype, name):
    """A Python-int exponent that is negative, or beyond the result dtype's range (torch converts
    it checked: int8 ** 128 is refused, uint8 ** 255 taken, bool ** 2**40 is int64), raises
    DTypeError where torch raises, with the tensor left as it was; the others give its values."""
    fn = POWERS[name]
    t = torch.tensor([0, 1, 2, 3], dtype=dtype)
    for e in (-1, -129, 0, 127, 128, 255, 256, 2 ** 15, 2 ** 31 - 1, 2 ** 31, 2 ** 40, 2 ** 63 - 1):
        x = lf.tensor(t)
        try:
            want = fn(t.clone(), e)
        except RuntimeError as refusal:
            words = str(refusal)
            # (bool.pow_(2): the int64 result cannot be written back, refused as torch refuses it)
            match = "negative integer powers" if "negative" in words else "without overflow" if "overflow" in words \
                else "in place|can't be cast"
            with pytest.raises(lf.DTypeError, match=match):
                fn(x, e)
            same(x, t)
        else:
            same(fn(x, e), want)


# -- abs, neg, sign ---------------------------------------------------------------------------------
UNARY = {"neg": lambda x: -x, "abs": lambda x: x.abs(), "sign": lambda x: x.sign(), "sgn": lambda x: x.sgn(),
         "neg_": lambda x: x.neg_(), "abs_": lambda x: x.abs_()}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", INTS, ids=str)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_abs_neg_and_sign_of_the_minimum(device, dtype, name):
    """-INT_MIN and abs(INT_MIN) wrap to INT_MIN, uint8 -x is 256 - x, alone and fused."""
    fn = UNARY[name]
    tx = torch.tensor(edges(dtype) * 5, dtype=dtype)   # (long enough for the vector loops and their tail)
    same(fn(lf.tensor(tx, device=device)), fn(tx.clone()))
    same(fn(lf.tensor(tx, device=device) * 1) + 1, fn(tx.clone() * 1) + 1)
    same(fn(lf.tensor(tx, device=device)).sum(), fn(tx.clone()).sum())
    same(fn(lf.tensor(tx, device=device)) >= 0, fn(tx.clone()) >= 0)   # (the compare gcc may fold)


# -- float -> int casts -----------------------------------------------------------------------------
SPECIAL_FLOATS = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, -0.7, 2.5, -1.5, 127.9, 128.0, -129.0, 255.5,
                  256.0, 300.0, 65535.0, 65536.0 + 7, 2.0 ** 31 - 128, 2.0 ** 31, -2.0 ** 31, -2.0 ** 31 - 1,
                  2.0 ** 31 + 7, 2.0 ** 32 + 5, -2.0 ** 32 - 5, 1e10, -1e10, 2.0 ** 63, -2.0 ** 63, 1e19, -1e19, 1e300]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("src", [torch.float32, torch.float64, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("dst", INTS + [torch.bool], ids=str)
def test_float_to_int_casts_of_nan_inf_and_out_of_range_values(device, src, dst):
    """C leaves these conversions undefined (gcc's vector and scalar code may differ): a cast alone,
    fused after another op, and feeding a reduction give one value, torch's x86 CPU value: through
    int32 (NaN, inf, beyond it: INT32_MIN, truncated), int64 for int64 and for uint8 (c10 casts to
    uint8 through int64_t: float64 2**32 + 5 is 5 there), ``!= 0`` for bool."""
    t = torch.tensor(SPECIAL_FLOATS, dtype=torch.float64).to(src).repeat_interleave(19)   # vector loops and tails
    x = lf.tensor(t, device=device)
    alone = x.to(dst).torch()
    fused = ((x * 1).to(dst) | False if dst == torch.bool else (x * 1).to(dst) * 1).torch()
    assert torch.equal(alone, fused)
    assert torch.equal((x + 0).to(dst).reshape(-1, 19).sum(1).torch(), alone.reshape(-1, 19).sum(1))
    if platform.machine() in ("x86_64", "AMD64"):   # (torch's own values differ by platform)
        assert torch.equal(alone, t.to(dst)), [(v, a, w) for v, a, w in zip(t.tolist(), alone.tolist(),
                                                                             t.to(dst).tolist()) if a != w]


# -- reductions -------------------------------------------------------------------------------------
REDUCTIONS = {
    "sum": lambda x: x.sum(), "prod": lambda x: x.prod(), "cumsum": lambda x: x.cumsum(0),
    "cumprod": lambda x: x.cumprod(0), "sum(dtype)": lambda x: x.sum(dtype=x.dtype),
    "prod(dtype)": lambda x: x.prod(dtype=x.dtype), "cumsum(dtype)": lambda x: x.cumsum(0, dtype=x.dtype),
    "sum(0) of a product": lambda x: (x * x).reshape(-1, 1).expand(-1, 3).sum(0),
    "sum(1)": lambda x: x.reshape(-1, 1).expand(-1, 5).sum(1),
}


@pytest.mark.parametrize("device", DEVICES)
@settings(COMMON, max_examples=scaled(40))
@given(data=st.data())
def test_integer_reductions_overflow_as_torchs(device, data):
    """Sums and products of values at the limits wrap in int64 (torch's accumulator for every
    integer dtype) or in the ``dtype=`` asked for."""
    dtype = data.draw(st.sampled_from(INTS), "dtype")
    name = data.draw(st.sampled_from(sorted(REDUCTIONS)), "op")
    tx = torch.tensor(data.draw(ints(dtype, min_size=1), "x") * data.draw(st.integers(1, 40), "copies"), dtype=dtype)
    same(REDUCTIONS[name](lf.tensor(tx, device=device)), REDUCTIONS[name](tx))
