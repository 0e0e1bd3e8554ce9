"""Random programs run on lazyfuse and on torch eager side by side (the generator and checker of
tests/test_differential.py and bench/stress.py).

A program is 1-30 steps drawn by hypothesis. A small interpreter keeps an environment of
values; every value is a triple

* ``L`` - the lazyfuse tensor (lazy: nothing runs until a drain),
* ``T`` - torch eager in the same dtype (the truth for shapes, dtypes and integer/bool values),
* ``S`` - for floating values, a float64 torch *reference* computed op by op from the
  references of the inputs (the mathematical value, without the rounding of ``T``).

Each step applies one op to both sides (elementwise with scalars and broadcasting, views,
reductions, casts, comparisons/logic/where, in-place writes also through views, cat/stack,
factories), drops a value (its last reference: elision must not change live values), drains
(``lf.sync``) or reads a value. At the end every live value is read and compared.

Dtypes must match exactly (torch's type promotion). Integer and bool values must match
exactly. A floating value ``L`` passes, elementwise, when it equals ``T`` or when

    |L - S| <= MULT * |T - S| + RTOL * scale

``RTOL`` is the largest entry of ``RTOL_BY_DTYPE`` over the float dtypes the value's
computation went through, and ``scale`` the largest finite magnitude it saw (lazyfuse
computes fused float16/bfloat16 chains in float32 without rounding between ops, which is at
least as accurate as torch's op-by-op rounding, and its float32 transcendentals are within
a few ulp).

Discontinuous ops (comparisons, float->int casts, floor division, modulo, argmax/argmin) are
only applied to floating values that are *exact* (``T == S`` everywhere: no rounding has
happened yet, so any precision computes the same answer); division-like ops (``/``,
reciprocal, log, sqrt, rsqrt) skip divisors whose values near zero are unreliable. The sign
of a zero produced by max/min/relu/sums is not a torch contract (torch itself differs by
tensor size), so zeros are compared without sign and such zeros never become divisors.
"""
from __future__ import annotations

import math
import os
import types

import numpy as np
import torch
import torch.nn.functional as TF
from hypothesis import HealthCheck, Phase, note, settings
from hypothesis import strategies as st

import lazyfuse as lf
from lazyfuse.nn import functional as LFF

FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
INTS = (torch.int32, torch.int64)
NARROW_INTS = (torch.uint8, torch.int8, torch.int16)   # (drawn by their own tests)
ALL_DTYPES = FLOATS + INTS + (torch.bool,)
LF_DTYPE = {d.torch: d for d in lf.ir.dtypes.ALL}

# -- tolerances (see the module docstring) ----------------------------------------------------------
MULT = 4.0
RTOL_BY_DTYPE = {torch.float64: 1e-9, torch.float32: 2e-4, torch.float16: 1.5e-2, torch.bfloat16: 6e-2}
NEAR_ZERO = 1e-3          # relative to ``scale``: values this small may change sign under rounding
INT_LIMIT = 2 ** 24       # integer results beyond this are skipped (no wraparound games)
TRIG_LIMIT = 1e4          # sin/cos arguments beyond this: range reductions differ, skipped

FLOAT_POOL = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 0.25, -4.0, 7.0, 1.75, -0.125, 10.0, 2.0]
SPECIAL_POOL = [math.nan, math.inf, -math.inf, -0.0]
SCALAR_POOL = [2, -1, 0, 1, 3, 0.5, -1.5, 2.0, 0.25, -0.0, True, False, 1e-3]

TORCH_NS = types.SimpleNamespace(
    name="torch", where=torch.where, maximum=torch.maximum, minimum=torch.minimum, cat=torch.cat,
    stack=torch.stack, gelu=TF.gelu, silu=TF.silu, full=torch.full, arange=torch.arange, zeros=torch.zeros,
    ones=torch.ones, dt=lambda d: d)
LF_NS = types.SimpleNamespace(
    name="lf", where=lf.where, maximum=lf.maximum, minimum=lf.minimum, cat=lf.cat, stack=lf.stack,
    gelu=LFF.gelu, silu=LFF.silu, full=lf.full, arange=lf.arange, zeros=lf.zeros, ones=lf.ones,
    dt=lambda d: LF_DTYPE[d])


class Meta:
    """Shared by a storage's aliases: the tolerance bookkeeping of its value."""

    __slots__ = ("scale", "rtol", "tainted")

    def __init__(self, scale=1.0, rtol=0.0, tainted=False):
        self.scale = scale
        self.rtol = rtol
        self.tainted = tainted   # zeros whose sign is implementation-defined


class Val:
    __slots__ = ("L", "T", "S", "meta", "name")

    def __init__(self, L, T, S, meta, name):
        self.L, self.T, self.S, self.meta, self.name = L, T, S, meta, name

    @property
    def is_float(self):
        return self.T.dtype.is_floating_point


class Skip(Exception):
    """The drawn op is outside what the differential can check: try another."""


# -- value predicates used by the gates ---------------------------------------------------------------
def exact(v) -> bool:
    if not isinstance(v, Val) or not v.is_float:
        return True
    t = v.T.double()
    return bool(((t == v.S) | (torch.isnan(t) & torch.isnan(v.S))).all())


def finite_max(t: torch.Tensor) -> float:
    if t.numel() == 0:
        return 0.0
    a = t.double().abs()
    a = a[torch.isfinite(a)]
    return float(a.max()) if a.numel() else 0.0


def unreliable_near_zero(v) -> bool:
    """True when the sign (or zero-ness) of some element may differ between precisions."""
    if not isinstance(v, Val):
        return False     # Python scalars are exact, and so is the sign of their zeros
    if not v.is_float:
        return False
    t = v.T.double()
    if v.meta.tainted and bool((t == 0).any()):
        return True
    return not exact(v) and bool((t.abs() <= NEAR_ZERO * v.meta.scale).any())


def has_zero(v) -> bool:
    if isinstance(v, Val):
        return bool((v.T == 0).any())
    return v == 0


def is_float_val(a) -> bool:
    return isinstance(a, Val) and a.is_float


def overlapping(t: torch.Tensor) -> bool:
    """Whether a write into ``t`` is refused: two elements share memory (an empty tensor has none)."""
    return t.numel() > 0 and any(s == 0 and n > 1 for s, n in zip(t.stride(), t.shape))


# -- the interpreter ----------------------------------------------------------------------------------
class Program:
    def __init__(self, data, dtypes):
        self.data = data
        self.dtypes = dtypes
        self.env: list[Val] = []
        self.log: list[str] = []
        self.count = 0
        self.universe = ()

    def draw(self, strategy, label=None):
        return self.data.draw(strategy, label=label)

    def choice(self, seq, label=None):
        return seq[self.draw(st.integers(0, len(seq) - 1), label)]

    def note(self, line: str):
        self.log.append(line)

    # -- inputs ------------------------------------------------------------------------------------
    def new_shape(self):
        u = self.universe
        k = self.draw(st.integers(0, len(u)))
        dims = list(u[len(u) - k:])
        return tuple(1 if self.draw(st.integers(0, 3)) == 0 else d for d in dims)

    def make_input(self):
        dtype = self.choice(self.dtypes, "dtype")
        shape = self.new_shape()
        seed = self.draw(st.integers(0, 2 ** 31 - 1))
        rng = np.random.default_rng(seed)
        n = int(np.prod(shape, dtype=np.int64))
        if dtype.is_floating_point:
            vals = rng.choice(FLOAT_POOL, size=n)
            inexact = rng.random(n) < self.draw(st.sampled_from([0.0, 0.3, 1.0]))
            vals = np.where(inexact, rng.uniform(-3, 3, n), vals)
            special = rng.random(n) < self.draw(st.sampled_from([0.0, 0.0, 0.1, 0.3]))
            vals = np.where(special, rng.choice(SPECIAL_POOL, size=n), vals)
            t = torch.tensor(vals, dtype=torch.float64).to(dtype)
        elif dtype is torch.bool:
            t = torch.from_numpy(rng.random(n) < 0.5)
        else:
            t = torch.from_numpy(rng.integers(-8, 9, n)).to(dtype)
        t = t.reshape(shape)
        how = self.draw(st.integers(0, 3))
        if how == 0 and dtype is not torch.bfloat16:
            L = lf.tensor(t.numpy())
        elif how == 1 and dtype in (torch.float32, torch.int64, torch.bool) and t.ndim and n:
            L = lf.tensor(t.tolist())   # python data: float32 / int64 / bool inference
            assert L.dtype is LF_DTYPE[dtype]
        else:
            L = lf.from_torch(t.clone())
        S = t.to(torch.float64, copy=True) if dtype.is_floating_point else None  # never T itself
        meta = Meta(max(finite_max(t), 1.0), RTOL_BY_DTYPE.get(dtype, 0.0))
        self.add(L, t, S, meta, f"input {dtype} {tuple(shape)} {t.tolist() if n <= 12 else '...'} (how={how})")

    def add(self, L, T, S, meta, desc):
        name = f"v{self.count}"
        self.count += 1
        self.env.append(Val(L, T, S, meta, name))
        self.note(f"{name} = {desc}")
        return self.env[-1]

    # -- picking operands ----------------------------------------------------------------------------
    def pick(self, pred=lambda v: True, label="operand"):
        cands = [v for v in self.env if pred(v)]
        if not cands:
            raise Skip("no operand")
        return self.choice(cands, label)

    def scalar(self):
        return self.choice(SCALAR_POOL + [math.nan, math.inf] * (self.draw(st.integers(0, 9)) == 0), "scalar")

    def other_operand(self, a: Val, allow_scalar=True):
        kind = self.draw(st.integers(0, 9))
        if allow_scalar and kind < 3:
            return self.scalar()

        def fits(v):
            try:
                torch.broadcast_shapes(v.T.shape, a.T.shape)
                return True
            except RuntimeError:
                return False
        if kind == 9 and allow_scalar:   # anything: shape errors must match
            return self.pick()
        return self.pick(fits)

    # -- running one op on both sides ----------------------------------------------------------------
    def run(self, desc, f, args, *, view=False, taints=False, shadow=None, keep=(), outputs=1):
        """Apply ``f(ns, *args)`` on torch and lazyfuse; check dtype and shape; add the results."""
        t_args = [a.T if isinstance(a, Val) else a for a in args]
        try:
            T = f(TORCH_NS, *t_args)
        except Exception as e:  # noqa: BLE001 (torch's verdict decides: lazyfuse must refuse too)
            if "ZeroDivisionError" in str(e) or "negative integer powers" in str(e):
                raise Skip("torch raises on data lazyfuse cannot see lazily")
            self.note(f"# torch raises {type(e).__name__} for {desc}")
            try:
                f(LF_NS, *[a.L if isinstance(a, Val) else a for a in args])
            except lf.LazyfuseError:
                return None
            raise AssertionError(f"{desc}: torch raises {type(e).__name__}({e}) but lazyfuse accepts it\n"
                                 + "\n".join(self.log))
        Ts = list(T) if outputs > 1 else [T]
        for t in Ts:
            if not t.dtype.is_floating_point and t.numel() and t.dtype is not torch.bool and \
                    int(t.abs().max()) > INT_LIMIT:
                raise Skip("integer magnitude")
        try:
            L = f(LF_NS, *[a.L if isinstance(a, Val) else a for a in args])
        except Exception as e:  # noqa: BLE001
            raise AssertionError(f"{desc}: lazyfuse raises {e!r} where torch does not\n" + "\n".join(self.log)) from e
        Ls = list(L) if outputs > 1 else [L]
        S = None
        if any(t.dtype.is_floating_point for t in Ts):
            S = shadow(*args) if shadow is not None else self.shadow(f, args, keep)
        elif shadow is None and any(is_float_val(a) for a in args):
            # an integer or bool result read from floats: its float64 reference too (check())
            try:
                S = self.shadow(f, args, keep)
            except Exception:  # noqa: BLE001 (no reference: torch float32's value alone is checked)
                S = None
        Ss = (list(S) if outputs > 1 else [S]) if S is not None else [None] * len(Ts)
        first = next((a for a in args if isinstance(a, Val)), None)
        vals = []
        for k, (l, t, s) in enumerate(zip(Ls, Ts, Ss)):
            label = desc if outputs == 1 else f"{desc}[{k}]"
            assert isinstance(l, lf.Tensor), f"{label}: lazyfuse returned {type(l).__name__}"
            assert l.dtype.torch == t.dtype, f"{label}: dtype {l.dtype} != torch {t.dtype}\n" + "\n".join(self.log)
            assert tuple(l.shape) == tuple(t.shape), \
                f"{label}: shape {l.shape} != torch {tuple(t.shape)}\n" + "\n".join(self.log)
            aliases = view and first is not None and t.numel() and \
                t.untyped_storage().data_ptr() == first.T.untyped_storage().data_ptr()
            if not t.dtype.is_floating_point:
                s = s if isinstance(s, torch.Tensor) and s.dtype == t.dtype and s.shape == t.shape else None
            elif s is None or not s.dtype.is_floating_point:
                s = t.to(torch.float64, copy=True)
            else:
                s = s.double()
            if aliases:
                meta = first.meta
            else:
                if not view:
                    t = t.contiguous()
                    s = s.contiguous() if s is not None else None
                floats = [a for a in args if is_float_val(a)]
                rtol = max([a.meta.rtol for a in floats] + [RTOL_BY_DTYPE.get(t.dtype, 0.0)])
                scale = max([a.meta.scale for a in args if isinstance(a, Val)] + [1.0] +
                            [finite_max(s) if s is not None and s.dtype.is_floating_point else 0.0])
                scale = max([scale] + [abs(a) for a in args if isinstance(a, (int, float)) and math.isfinite(a)])
                meta = Meta(scale, rtol, taints or any(a.meta.tainted for a in floats))
            vals.append(self.add(l, t, s, meta, label))
        return vals

    @staticmethod
    def shadow(f, args, keep):
        """``f`` on the float64 references (int/bool inputs upcast unless kept, e.g. where's cond)."""
        def arg(k, a):
            if not isinstance(a, Val):
                return a
            if a.is_float:
                return a.S
            return a.T if k in keep else a.T.double()
        s_args = [arg(k, a) for k, a in enumerate(args)]
        return f(TORCH_NS, *s_args)

    # -- final and intermediate checks -----------------------------------------------------------------
    def check(self, v: Val, when="at the end"):
        got = v.L.torch()
        want = v.T
        ctx = f"{v.name} {when}: lazyfuse {got} vs torch {want}\n" + "\n".join(self.log)
        assert got.dtype == want.dtype, ctx
        assert tuple(got.shape) == tuple(want.shape), ctx
        if not want.dtype.is_floating_point:
            # an integer or bool result read from floats (isnan, a comparison, a cast) may take the
            # float64 reference's value instead of torch float32's, element by element: where torch
            # float32 is not the truth (its AVX-512 gelu(inf) is nan, below), isnan(gelu(inf)) is
            # True in torch and False in float64 and lazyfuse
            shadow = v.S
            agree = got == want
            if shadow is not None:
                agree |= got == shadow
            assert bool(agree.all()), f"{ctx}\nreference {shadow}"
            return
        g, t, s = got.double(), want.double(), v.S
        same = (g == t) | (torch.isnan(g) & torch.isnan(t))
        err_l = (g - s).abs()
        err_t = (t - s).abs()
        # where torch float32 is not finite but the float64 reference is (torch's AVX-512 gelu(inf)
        # is nan, and what follows from it), torch sets no error bar: lazyfuse is held to the
        # tolerance alone (a non-finite err_t would make every value "close", or none)
        err_t = torch.where(torch.isfinite(err_t), err_t, torch.zeros_like(err_t))
        close = err_l <= MULT * err_t + v.meta.rtol * v.meta.scale
        # Where the float64 reference is inf or nan, lazyfuse must give exactly that: inf equals
        # inf, nan equals nan, nan never equals a number. torch float32 itself is not the truth
        # there: its vectorised CPU gelu returns nan for gelu(inf) on AVX-512 machines (for
        # tensors of 2+ elements) where float64, and lazyfuse, return inf.
        special = ~torch.isfinite(s)
        exact = (g == s) | (torch.isnan(g) & torch.isnan(s))
        ok = same | torch.where(special, exact, close)
        assert bool(ok.all()), f"{ctx}\nreference {s}\nmismatch at {(~ok).nonzero().tolist()[:5]}"


# -- the op catalogue ---------------------------------------------------------------------------------
UNARY = {
    "neg": lambda ns, x: -x, "abs": lambda ns, x: x.abs(), "exp": lambda ns, x: x.exp(),
    "log": lambda ns, x: x.log(), "sqrt": lambda ns, x: x.sqrt(), "rsqrt": lambda ns, x: x.rsqrt(),
    "sin": lambda ns, x: x.sin(), "cos": lambda ns, x: x.cos(), "tanh": lambda ns, x: x.tanh(),
    "sigmoid": lambda ns, x: x.sigmoid(), "relu": lambda ns, x: x.relu(), "gelu": lambda ns, x: ns.gelu(x),
    "silu": lambda ns, x: ns.silu(x), "reciprocal": lambda ns, x: x.reciprocal(), "invert": lambda ns, x: ~x,
    "isnan": lambda ns, x: x.isnan(), "pos_abs": lambda ns, x: abs(x),
}
DIVISION_LIKE = {"log", "sqrt", "rsqrt", "reciprocal"}
SIGN_OF_ZERO = {"relu", "gelu", "silu", "sigmoid", "tanh", "sin", "exp", "log", "sqrt", "rsqrt", "cos", "reciprocal"}

BINARY = {
    "add": lambda ns, a, b: a + b, "sub": lambda ns, a, b: a - b, "mul": lambda ns, a, b: a * b,
    "div": lambda ns, a, b: a / b, "floordiv": lambda ns, a, b: a // b, "mod": lambda ns, a, b: a % b,
    "pow": lambda ns, a, b: a ** b, "lt": lambda ns, a, b: a < b, "le": lambda ns, a, b: a <= b,
    "gt": lambda ns, a, b: a > b, "ge": lambda ns, a, b: a >= b, "eq": lambda ns, a, b: a == b,
    "ne": lambda ns, a, b: a != b, "and": lambda ns, a, b: a & b, "or": lambda ns, a, b: a | b,
    "xor": lambda ns, a, b: a ^ b, "maximum": lambda ns, a, b: ns.maximum(a, b),
    "minimum": lambda ns, a, b: ns.minimum(a, b),
}
DISCONTINUOUS = {"floordiv", "mod", "lt", "le", "gt", "ge", "eq", "ne"}
BINARY_TAINTS = {"div", "floordiv", "mod", "pow", "maximum", "minimum"}


def op_unary(p: Program):
    x = p.pick()
    name = p.choice(sorted(UNARY), "unary")
    if name in ("gelu", "silu") and not x.is_float:
        raise Skip("torch has no integer gelu/silu")
    if name in DIVISION_LIKE and unreliable_near_zero(x):
        raise Skip("near zero")
    if name in ("sin", "cos") and finite_max(x.T) > TRIG_LIMIT:
        raise Skip("trig range")
    p.run(f"{name}({x.name})", UNARY[name], [x], taints=name in SIGN_OF_ZERO)


def op_binary(p: Program):
    a = p.pick()
    b = p.other_operand(a)
    name = p.choice(sorted(BINARY), "binary")
    if name in ("maximum", "minimum") and not isinstance(b, Val):
        raise Skip("torch.maximum takes tensors only")
    if p.draw(st.booleans(), "swap"):
        a, b = b, a
    if name in DISCONTINUOUS and not (exact(a) and exact(b)):
        raise Skip("discontinuous op on an inexact value")
    if name in ("div", "floordiv", "mod"):
        if unreliable_near_zero(b) or (has_zero(b) and not exact(a)):
            raise Skip("unreliable divisor")
    if name == "pow":
        if not exact(b) or unreliable_near_zero(a):
            raise Skip("pow of unreliable operands")
        if isinstance(b, Val) and not b.is_float and not is_float_val(a) and bool((b.T < 0).any()):
            raise Skip("integer negative powers")
        if isinstance(b, (int, float)) and not isinstance(b, bool) and b < 0 and not is_float_val(a):
            raise Skip("integer negative powers")
        if isinstance(b, Val) and has_zero(a) and (b.T < 0).any():
            raise Skip("zero to a negative power")
    desc = f"{name}({getattr(a, 'name', a)!s}, {getattr(b, 'name', b)!s})"
    p.run(desc, BINARY[name], [a, b], taints=name in BINARY_TAINTS)


def op_where(p: Program):
    cond = p.pick(lambda v: v.T.dtype is torch.bool, "cond")
    a = p.other_operand(cond)
    b = p.other_operand(cond)
    p.run(f"where({cond.name}, {getattr(a, 'name', a)}, {getattr(b, 'name', b)})",
          lambda ns, c, x, y: ns.where(c, x, y), [cond, a, b], keep=(0,))


def op_clamp(p: Program):
    x = p.pick()
    lo, hi = p.choice([(-1, None), (None, 2), (-0.5, 1.5), (0, 3), (-2.0, None)], "clamp")
    p.run(f"clamp({x.name}, {lo}, {hi})", lambda ns, t: t.clamp(min=lo, max=hi), [x], taints=True)


CAST_METHODS = {"float": torch.float32, "double": torch.float64, "half": torch.float16,
                "bfloat16": torch.bfloat16, "int": torch.int32, "long": torch.int64, "bool": torch.bool,
                "byte": torch.uint8, "char": torch.int8, "short": torch.int16}


def op_cast(p: Program):
    x = p.pick()
    method = p.choice(sorted(CAST_METHODS) + ["to"] * 3, "cast")
    target = CAST_METHODS[method] if method != "to" else p.choice(ALL_DTYPES, "to")
    if x.is_float and not target.is_floating_point:
        if not exact(x):
            raise Skip("float -> int/bool of an inexact value")
        if target is not torch.bool and (not bool(torch.isfinite(x.T).all()) or finite_max(x.T) >= 2 ** 31):
            raise Skip("float -> int of a non-finite value is undefined")

    def f(ns, t):
        return t.to(ns.dt(target)) if method == "to" else getattr(t, method)()

    same = target == x.T.dtype   # torch returns the tensor itself, an alias (so does lazyfuse)

    def shadow(v):
        if not target.is_floating_point:
            return v.T.to(target)
        if same:
            return v.S
        return v.S.clone() if v.is_float else v.T.double()
    p.run(f"{x.name}.{method}({target if method == 'to' else ''})", f, [x], shadow=shadow, view=same)


def draw_dim(p: Program, ndim: int, allow_tuple=True, allow_none=True):
    kinds = ["int"] + (["none"] if allow_none else []) + (["tuple"] if allow_tuple and ndim else [])
    kind = p.choice(kinds, "dim kind")
    if kind == "none":
        return None
    lo, hi = (-ndim, ndim - 1) if ndim else (-1, 0)
    if kind == "int":
        return p.draw(st.integers(lo, hi), "dim")
    dims = p.draw(st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True), "dims")
    return tuple(d - ndim if p.draw(st.booleans()) else d for d in dims)


def op_reduce(p: Program):
    x = p.pick()
    name = p.choice(["sum", "mean", "amax", "amin", "max", "min", "var", "std", "argmax", "argmin",
                     "sum", "max"], "reduction")
    keepdim = p.draw(st.booleans(), "keepdim")
    dim = draw_dim(p, x.T.ndim, allow_tuple=name in ("sum", "mean", "amax", "amin", "var", "std"))
    kwargs = {"dim": dim, "keepdim": keepdim}
    if name in ("var", "std") and p.draw(st.booleans(), "correction"):
        kwargs["correction"] = 0
    if name in ("argmax", "argmin") or (name in ("max", "min") and dim is not None):
        if not exact(x):
            raise Skip("argmax of an inexact value")
    outputs = 2 if name in ("max", "min") and dim is not None else 1
    if name in ("max", "min") and dim is None:
        kwargs = {}

    def f(ns, t):
        out = getattr(t, name)(**kwargs)
        return tuple(out) if outputs == 2 else out
    p.run(f"{x.name}.{name}({kwargs})", f, [x], taints=True, outputs=outputs)


def reshape_target(p: Program, shape):
    shape = list(shape)
    options = [(-1,), tuple(shape) + (1,), (1,) + tuple(shape)]
    for i in range(len(shape) - 1):
        options.append(tuple(shape[:i] + [shape[i] * shape[i + 1]] + shape[i + 2:]))
    for i, s in enumerate(shape):
        for a in (2, 3):
            if s % a == 0 and s > a:
                options.append(tuple(shape[:i] + [a, s // a] + shape[i + 1:]))
    if len(shape) >= 2:
        options.append(tuple(shape[:-2]) + (-1, shape[-1]))
    if not shape or int(np.prod(shape)) == 1:
        options.append(())
    return p.choice(options, "reshape to")


def op_view(p: Program):
    x = p.pick()
    shape = tuple(x.T.shape)
    nd = len(shape)
    kind = p.choice(["reshape", "view", "permute", "transpose", "T", "unsqueeze", "squeeze", "expand",
                     "slice", "select", "none", "ellipsis", "flatten", "contiguous", "clone", "gather"], "view")
    if kind in ("reshape", "view"):
        target = reshape_target(p, shape)
        f = lambda ns, t: getattr(t, kind)(*target) if target else getattr(t, kind)(())  # noqa: E731
        desc = f"{x.name}.{kind}{target}"
    elif kind == "permute":
        perm = tuple(p.draw(st.permutations(range(nd)), "perm"))
        f, desc = (lambda ns, t: t.permute(perm)), f"{x.name}.permute{perm}"
    elif kind == "transpose":
        lo, hi = (-nd, nd - 1) if nd else (-1, 0)
        d0, d1 = p.draw(st.integers(lo, hi)), p.draw(st.integers(lo, hi))
        f, desc = (lambda ns, t: t.transpose(d0, d1)), f"{x.name}.transpose({d0}, {d1})"
    elif kind == "T":
        if nd != 2:
            raise Skip(".T is deprecated on other than 2-d tensors in torch")
        f, desc = (lambda ns, t: t.T), f"{x.name}.T"
    elif kind == "unsqueeze":
        d = p.draw(st.integers(-nd - 1, nd))
        f, desc = (lambda ns, t: t.unsqueeze(d)), f"{x.name}.unsqueeze({d})"
    elif kind == "squeeze":
        d = draw_dim(p, nd, allow_tuple=True)
        f = (lambda ns, t: t.squeeze()) if d is None else (lambda ns, t: t.squeeze(d))
        desc = f"{x.name}.squeeze({d})"
    elif kind == "expand":
        lead = p.draw(st.integers(0, 1))
        sizes = [p.draw(st.sampled_from([1, 2, 3]))] * lead + [
            p.draw(st.sampled_from([1, 2, 3, -1])) if s == 1 else p.choice([s, -1]) for s in shape]
        f, desc = (lambda ns, t: t.expand(tuple(sizes))), f"{x.name}.expand{tuple(sizes)}"
    elif kind == "slice":
        if not nd:
            raise Skip("0-d")
        d = p.draw(st.integers(0, nd - 1))
        n = shape[d]
        start = p.draw(st.one_of(st.none(), st.integers(-n - 1, n + 1)))
        stop = p.draw(st.one_of(st.none(), st.integers(-n - 1, n + 1)))
        step = p.draw(st.sampled_from([None, 1, 2, 3]))
        key = (slice(None),) * d + (slice(start, stop, step),)
        f, desc = (lambda ns, t: t[key]), f"{x.name}[{key}]"
    elif kind == "select":
        if not nd:
            raise Skip("0-d")
        d = p.draw(st.integers(0, nd - 1))
        i = p.draw(st.integers(-shape[d], max(shape[d] - 1, -shape[d])))
        key = (slice(None),) * d + (i,) if p.draw(st.booleans()) else (Ellipsis, i) if d == nd - 1 else \
            (slice(None),) * d + (i,)
        f, desc = (lambda ns, t: t[key]), f"{x.name}[{key}]"
    elif kind == "none":
        f, desc = (lambda ns, t: t[None]), f"{x.name}[None]"
    elif kind == "ellipsis":
        f, desc = (lambda ns, t: t[..., None]), f"{x.name}[..., None]"
    elif kind == "flatten":
        if nd:
            s = p.draw(st.integers(-nd, nd - 1))
            e = p.draw(st.integers(-nd, nd - 1))
            if (s % nd) > (e % nd):
                s, e = e, s
        else:
            s, e = 0, -1
        f, desc = (lambda ns, t: t.flatten(s, e)), f"{x.name}.flatten({s}, {e})"
    elif kind == "contiguous":
        f, desc = (lambda ns, t: t.contiguous()), f"{x.name}.contiguous()"
    elif kind == "clone":
        f, desc = (lambda ns, t: t.clone()), f"{x.name}.clone()"
    else:  # gather: an integer tensor index on one dim
        if not nd or not shape[0]:
            raise Skip("no dim to gather")
        seed = p.draw(st.integers(0, 2 ** 31 - 1))
        k = p.draw(st.integers(1, 4))
        idx = torch.from_numpy(np.random.default_rng(seed).integers(-shape[0], shape[0], k))
        lidx = lf.tensor(idx.numpy())
        f = (lambda ns, t: t[idx] if ns is TORCH_NS else t[lidx])
        desc = f"{x.name}[{idx.tolist()}]"
    p.run(desc, f, [x], view=kind not in ("clone", "gather"))


INPLACE = ["add_", "sub_", "mul_", "div_", "copy_", "fill_", "zero_", "setitem", "add_alpha"]


def op_inplace(p: Program):
    target = p.pick(label="target")
    name = p.choice(INPLACE, "inplace")
    other = None
    if name in ("add_", "sub_", "mul_", "div_", "copy_", "add_alpha", "setitem"):
        other = p.other_operand(target)
    elif name == "fill_":
        other = p.scalar()
    key = None
    if name == "setitem":
        nd = target.T.ndim
        if not nd:
            key = ()
        else:
            d = p.draw(st.integers(0, nd - 1))
            n = target.T.shape[d]
            key = (slice(None),) * d + (slice(p.draw(st.integers(0, max(n - 1, 0))), None,
                                                p.draw(st.sampled_from([1, 2]))),)
    desc = f"{target.name}.{name}({getattr(other, 'name', other)}{', key=' + str(key) if key is not None else ''})"
    if isinstance(other, Val) and is_float_val(other) and not target.is_float and not exact(other):
        raise Skip("float -> int write of an inexact value")
    if isinstance(other, Val) and other.is_float and not target.is_float:
        if not bool(torch.isfinite(other.T).all()) or finite_max(other.T) >= 2 ** 31:
            raise Skip("float -> int of a non-finite value is undefined")
    if name == "div_" and (unreliable_near_zero(other) or (has_zero(other) and not exact(target))):
        raise Skip("unreliable divisor")
    if isinstance(other, float) and not target.is_float and not math.isfinite(other):
        raise Skip("nan into an int tensor")

    def apply(t, o, clone_alias):
        dest = t[key] if name == "setitem" else t
        if clone_alias and isinstance(o, torch.Tensor) and \
                o.untyped_storage().data_ptr() == t.untyped_storage().data_ptr() and \
                (o.shape, o.stride(), o.storage_offset()) != (dest.shape, dest.stride(), dest.storage_offset()):
            o = o.clone()   # torch refuses or is order-dependent here; lazyfuse reads the old value
        if name == "add_":
            return t.add_(o)
        if name == "add_alpha":
            return t.add_(o, alpha=2)
        if name == "sub_":
            return t.sub_(o)
        if name == "mul_":
            return t.mul_(o)
        if name == "div_":
            return t.div_(o)
        if name == "copy_":
            return t.copy_(o)
        if name == "fill_":
            return t.fill_(o)
        if name == "zero_":
            return t.zero_()
        t[key] = o
        return t

    o_t = other.T if isinstance(other, Val) else other
    o_l = other.L if isinstance(other, Val) else other
    written = target.T[key] if name == "setitem" else target.T   # torch checks the region written
    def refused(why):
        p.note(f"# {desc}: {why}")
        try:
            apply(target.L, o_l, False)
        except lf.LazyfuseError:
            return
        raise AssertionError(f"{desc}: {why}, but lazyfuse accepts it\n" + "\n".join(p.log))
    if overlapping(written):
        return refused("a write into an expanded view")
    try:
        trial = apply(target.T.clone(), o_t.clone() if isinstance(o_t, torch.Tensor) else o_t, False)
    except Exception as e:  # noqa: BLE001
        return refused(f"torch raises {type(e).__name__}({e})")
    if not trial.dtype.is_floating_point and trial.dtype is not torch.bool and trial.numel() and \
            int(trial.abs().max()) > INT_LIMIT:
        raise Skip("integer magnitude")
    apply(target.T, o_t, True)
    if not target.is_float:
        # an integer or bool value's float64 reference does not follow writes (its views' neither)
        for v in p.env:
            if not v.is_float:
                v.S = None
    if target.is_float:
        o_s = other.S if is_float_val(other) else (other.T.double() if isinstance(other, Val) else other)
        apply(target.S, o_s, True)
        m = target.meta
        m.scale = max(m.scale, finite_max(target.S), other.meta.scale if isinstance(other, Val) else 0.0)
        if is_float_val(other):
            m.rtol = max(m.rtol, other.meta.rtol)
        m.tainted |= name in ("div_",) or (is_float_val(other) and other.meta.tainted)
    try:
        ret = apply(target.L, o_l, False)
    except Exception as e:  # noqa: BLE001
        raise AssertionError(f"{desc}: lazyfuse raises {e!r} where torch does not\n" + "\n".join(p.log)) from e
    if name != "setitem":
        assert ret is target.L, f"{desc} must return the tensor it wrote"
    p.note(desc)


def op_cat(p: Program):
    first = p.pick()
    same = [v for v in p.env if tuple(v.T.shape) == tuple(first.T.shape)]
    k = p.draw(st.integers(1, 3))
    parts = [first] + [p.choice(same, "part") for _ in range(k - 1)]
    stack = p.draw(st.booleans(), "stack")
    nd = first.T.ndim + (1 if stack else 0)
    lo, hi = (-nd, nd - 1) if nd else (-1, 0)
    d = p.draw(st.integers(lo, hi), "dim")
    fn = "stack" if stack else "cat"
    p.run(f"{fn}([{', '.join(v.name for v in parts)}], {d})",
          lambda ns, *ts: getattr(ns, fn)(list(ts), d), parts)


def op_factory(p: Program):
    kind = p.choice(["full", "zeros", "ones", "arange", "arange_f"], "factory")
    dtype = p.choice(p.dtypes, "dtype")
    if kind == "arange":
        n = p.draw(st.integers(0, 6))
        f, desc = (lambda ns: ns.arange(n)), f"arange({n})"
    elif kind == "arange_f":
        start, stop, step = p.choice([(0, 3, 0.5), (-2.0, 2.0, 1), (1, 7, 2), (0.5, 2.5, 0.25)])
        f, desc = (lambda ns: ns.arange(start, stop, step)), f"arange({start}, {stop}, {step})"
    else:
        shape = p.new_shape()
        value = {"zeros": 0, "ones": 1}.get(kind) if kind != "full" else p.scalar()
        if isinstance(value, float) and not math.isfinite(value) and not dtype.is_floating_point:
            raise Skip("nan fill of an int tensor")
        if kind == "full":
            f = lambda ns: ns.full(shape, value, dtype=ns.dt(dtype))  # noqa: E731
        else:
            f = lambda ns: getattr(ns, kind)(shape, dtype=ns.dt(dtype))  # noqa: E731
        desc = f"{kind}({shape}, {value}, {dtype})"
    p.run(desc, f, [])


def op_drop(p: Program):
    if len(p.env) <= 1:
        raise Skip("keep one")
    v = p.pick(label="drop")
    p.env.remove(v)
    p.note(f"del {v.name}")


def op_sync(p: Program):
    lf.sync()
    p.note("lf.sync()")


def op_read(p: Program):
    v = p.pick(label="read")
    p.check(v, when="mid-program")
    p.note(f"read {v.name}")


OPS = {"unary": op_unary, "binary": op_binary, "where": op_where, "clamp": op_clamp, "cast": op_cast,
       "reduce": op_reduce, "view": op_view, "inplace": op_inplace, "cat": op_cat, "factory": op_factory,
       "drop": op_drop, "sync": op_sync, "read": op_read, "input": None}
WEIGHTS = {"unary": 4, "binary": 6, "where": 1, "clamp": 1, "cast": 2, "reduce": 3, "view": 5, "inplace": 4,
           "cat": 1, "factory": 1, "drop": 3, "sync": 1, "read": 1, "input": 1}


def run_program(data, dtypes, max_ops=30, weights=None):
    weights = weights or WEIGHTS
    p = Program(data, dtypes)
    nd = data.draw(st.integers(0, 4), "ndim")
    sizes = [1, 2, 3, 4] + ([0] if data.draw(st.integers(0, 19)) == 0 else [])
    p.universe = tuple(data.draw(st.sampled_from(sizes)) for _ in range(nd))
    for _ in range(data.draw(st.integers(1, 3), "inputs")):
        p.make_input()
    names = [n for n in OPS for _ in range(weights.get(n, 0))]
    n_ops = data.draw(st.integers(1, max_ops), "program length")
    done = 0
    tries = 0
    while done < n_ops and tries < 4 * n_ops:
        tries += 1
        name = p.choice(names, "op")
        try:
            if name == "input":
                p.make_input()
            else:
                OPS[name](p)
        except Skip:
            continue
        done += 1
    note("\n".join(p.log))
    for v in list(p.env):
        p.check(v)
    return p


# LF_DIFF_NO_SHRINK=1 reports the first failure as drawn (shrinking a program takes minutes)
PHASES = [Phase.explicit, Phase.reuse, Phase.generate] + ([] if os.environ.get("LF_DIFF_NO_SHRINK") else [Phase.shrink])
# LF_DIFF_SCALE=10 runs ten times the examples (a longer hunt than CI's budget allows)
SCALE = float(os.environ.get("LF_DIFF_SCALE", "1"))


def scaled(n: int) -> int:
    return max(1, int(n * SCALE))


COMMON = settings(deadline=None, phases=PHASES, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                         HealthCheck.filter_too_much], print_blob=True)
