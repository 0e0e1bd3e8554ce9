"""Symbolic index arithmetic: affine forms over loop variables, with floor-div/mod terms.

A kernel addresses every buffer with an ``Affine``: ``const + sum(coeff * term)``, each term a
loop ``Var`` or a ``DivMod`` of another affine form. Views that only permute, expand, slice,
squeeze or unsqueeze compose into plain affine forms; ``unravel`` simplifies the div/mod that
a reshape of a fused producer would need away whenever the strides line up, so the generated
inner loops stay free of divisions — and vectorisable.
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import config

# printers print sizes as runtime values (``extent_strides``); off: every size a literal
SHAPE_GENERIC = config.SHAPE_GENERIC.get()


@dataclass(frozen=True)
class Var:
    name: str
    extent: int

    @property
    def max(self) -> int:
        return self.extent - 1


@dataclass(frozen=True)
class DivMod:
    """``(base // div) % mod`` (``mod`` None: no modulo). ``clamp``: ``base`` clamped into
    ``[0, mod)`` instead (``clamped``), a read whose value matters only where ``base`` is in range."""
    base: "Affine"
    div: int
    mod: int | None
    clamp: bool = False

    @property
    def max(self) -> int:
        hi = self.base.max // self.div
        return min(hi, self.mod - 1) if self.mod is not None else hi


@dataclass(frozen=True)
class Affine:
    const: int
    terms: tuple  # ((term, coeff), ...), each term a Var or DivMod, coeff != 0

    @staticmethod
    def var(v: Var) -> "Affine":
        return Affine(0, ((v, 1),)) if v.extent > 1 else Affine(0, ())

    def __add__(self, other: "Affine") -> "Affine":
        coeffs = dict(self.terms)
        for t, c in other.terms:
            coeffs[t] = coeffs.get(t, 0) + c
        return Affine(self.const + other.const, tuple((t, c) for t, c in coeffs.items() if c))

    def scale(self, k: int) -> "Affine":
        if k == 0:
            return Affine(0, ())
        return Affine(self.const * k, tuple((t, c * k) for t, c in self.terms))

    @property
    def max(self) -> int:
        return self.const + sum(c * t.max for t, c in self.terms if c > 0)

    @property
    def min(self) -> int:
        return self.const + sum(c * t.max for t, c in self.terms if c < 0)

    def vars(self) -> set:
        out = set()
        for t, _ in self.terms:
            if isinstance(t, Var):
                out.add(t)
            else:
                out |= t.base.vars()
        return out

    def coeff(self, v: Var) -> int:
        for t, c in self.terms:
            if t == v:
                return c
        return 0


def floordiv(a: Affine, d: int) -> Affine:
    """``a // d`` for a non-negative affine form, simplified when the strides allow."""
    if d == 1:
        return a
    high = [(t, c // d) for t, c in a.terms if c % d == 0]
    low = [(t, c) for t, c in a.terms if c % d != 0]
    low_form = Affine(a.const % d, tuple(low))
    if low_form.min >= 0 and low_form.max < d:
        return Affine(a.const // d, tuple(high))
    quotient, rest = _split(a, d)
    if rest is not None:
        return quotient
    if a.min >= 0 and a.max < d:
        return Affine(0, ())
    if high and low_form.min >= 0:
        # (d*H + L) // d == H + L // d for integers: only the terms that are not multiples of
        # d stay under the division (a head split's ``(8192*b + 128*t + c) / 32 % 4`` becomes
        # ``c / 32``, whose modulo then goes too: a cheaper index, which gcc vectorises)
        return Affine(a.const // d, tuple(high)) + Affine(0, ((DivMod(low_form, d, None), 1),))
    return Affine(0, ((DivMod(a, d, None), 1),))


def _split(a: Affine, d: int) -> tuple:
    """``(a // d, a % d)`` from each coefficient's quotient and remainder by ``d`` where the
    remainders' form stays in ``[0, d)`` (else ``(None, None)``): a diagonal's ``(n + 2)*i`` read
    from rows of ``n + 1`` is row ``i``, column ``i``, with no division."""
    rest = Affine(a.const % d, tuple((t, c % d) for t, c in a.terms if c % d))
    if rest.min < 0 or rest.max >= d:
        return None, None
    return Affine(a.const // d, tuple((t, c // d) for t, c in a.terms if c // d)), rest


def mod(a: Affine, m: int) -> Affine:
    """``a % m`` for a non-negative affine form, simplified when the strides allow."""
    if m == 1:
        return Affine(0, ())
    kept = Affine(a.const % m, tuple((t, c) for t, c in a.terms if c % m != 0))
    if kept.min >= 0 and kept.max < m:
        return kept
    _, rest = _split(a, m)
    if rest is not None:
        return rest
    if len(kept.terms) == 1 and kept.const == 0 and isinstance(kept.terms[0][0], DivMod) and kept.terms[0][1] == 1:
        inner = kept.terms[0][0]
        if inner.mod is None:
            return Affine(0, ((DivMod(inner.base, inner.div, m), 1),))
    # (with a negative coefficient, a flip's, dropping the multiples of m can leave a form that is
    # negative at some index, where C's and Triton's % are not Python's: the whole form then)
    return Affine(0, ((DivMod(kept if kept.min >= 0 else a, 1, m), 1),))


def unravel(flat: Affine, shape) -> tuple:
    """The multi-index of ``shape`` (row-major) whose flat offset is ``flat``."""
    out, stride = [], 1
    strides = []
    for s in reversed(shape):
        strides.append(stride)
        stride *= max(s, 1)
    strides.reverse()
    for s, st in zip(shape, strides):
        # size 1: always 0; size 0: the shape is empty, so no index is ever evaluated
        out.append(Affine(0, ()) if s <= 1 else mod(floordiv(flat, st), s))
    return tuple(out)


def linear(index, strides, offset: int = 0) -> Affine:
    """``offset + sum(index_k * strides_k)``, each ``m*((b // k) // m) + (b // k) % m`` of it as
    ``b // k``: a reshape read back in the layout it unravelled (a roll of the flattened tensor
    reshaped to its shape reads its source at the rolled flat index, with no division)."""
    acc = Affine(offset, ())
    for i, st in zip(index, strides):
        if st:
            acc = acc + i.scale(st)
    return _recombined(acc)


def _recombined(a: Affine) -> Affine:
    coeffs = dict(a.terms)
    for t, c in a.terms:
        if not (isinstance(t, DivMod) and t.mod is not None and not t.clamp and t in coeffs):
            continue
        high = DivMod(t.base, t.div * t.mod, None)
        if coeffs.get(high) == c * t.mod:
            del coeffs[t], coeffs[high]
            whole = t.base if t.div == 1 else Affine(0, ((DivMod(t.base, t.div, None), 1),))
            return _recombined(Affine(a.const, tuple(coeffs.items())) + whole.scale(c))
    return a


def clamped(a: Affine, n: int) -> Affine:
    """``a`` where it is in ``[0, n)``; elsewhere some value in that range. A concatenation reads
    each piece at its own index for every output index (a kernel computes both operands of a
    select), so the reads of the pieces not selected must stay in bounds: a clamp, two compares,
    where the modulo by the piece's size would be a division per element by a runtime size."""
    if n <= 1:
        return Affine(0, ())
    if a.min >= 0 and a.max < n:
        return a
    return Affine(0, ((DivMod(a, 1, n, clamp=True), 1),))


def substitute(a: Affine, mapping: dict) -> Affine:
    """Replace Vars by affine forms (used when loops are merged or re-tiled)."""
    acc = Affine(a.const, ())
    for t, c in a.terms:
        if isinstance(t, Var):
            acc = acc + (mapping[t] if t in mapping else Affine(0, ((t, 1),))).scale(c)
        else:
            acc = acc + Affine(0, ((DivMod(substitute(t.base, mapping), t.div, t.mod, t.clamp), 1),)).scale(c)
    return acc


def wrapped_var(t, extents: dict):
    """The loop variable ``v`` (one of ``extents``) that the term ``t`` wraps around: ``t`` is
    ``(v + c) % n`` with ``n`` v's extent and the form below ``2 * n`` (a roll's index, v shifted
    cyclically by ``c - n``), else None. Such a term ranges over v's values, as v does."""
    if not (isinstance(t, DivMod) and t.div == 1 and t.mod is not None and not t.clamp and 0 <= t.base.min and
            t.base.max < 2 * t.mod):
        return None
    return next((v for v, c in t.base.terms if c == 1 and v in extents and v.extent == t.mod), None)


# a stride (coefficient) of at most this stays a literal: gcc loads a vectorised loop's elements 2, 3
# or 4 apart with permutes, where a runtime stride is a gather (and such strides are structure, a
# stride-2 slice, more often than sizes)
SMALL_STRIDE = 4
# a ``% m`` of a form below ``(QUOTIENTS + 1) * m`` prints as that many compares (``bounded_mod``)
QUOTIENTS = 4


def literal(k: int, stride: bool = False) -> str:
    """A number of an index as a literal (``render``'s default ``size``)."""
    return str(k)


def size_names(names: dict):
    """A ``size`` for ``render``: each number whose magnitude is in ``names`` (value -> its
    runtime name) as that name, with its sign; the others literals."""
    def size(k: int, stride: bool = False) -> str:
        name = names.get(abs(k))
        return str(k) if name is None else name if k > 0 else f"-{name}"
    return size


def render(a: Affine, floordiv: str, extents=None, number=None, size=literal) -> str:
    """``a`` as source text; ``floordiv`` is the language's integer division (C ``/``, Python ``//``:
    indices are never negative, so the two agree). ``extents`` (Var -> its runtime extent's name
    in the source; none: every size a literal) makes the sizes in the text runtime values: each
    row-major coefficient (``extent_strides``), a loop variable read backwards (a flip's
    ``n - 1 - v``) and one wrapped around its extent (a roll's). ``size`` prints every other
    number of the text that a size can be (constants, coefficients, a ``bounded_mod``'s modulus:
    ``kernel_sizes`` lists them, the printers print them as the kernel's runtime sizes); the
    divisors of a div/mod stay literals, which compilers turn into multiplications.
    Value-preserving at this size: a printer that prints each size's source anew is right
    whatever another size's shares with it."""
    extents = extents or {}
    number = number or extent_strides(a, extents, size)
    const, parts = a.const, []
    for t, c in a.terms:
        wrapped = wrapped_var(t, extents)
        if wrapped is not None:
            # (v + c) % n with no division and n the runtime one, from the smaller offset of c and
            # c - n (a roll's shift, the same at every size above twice it): v + c - n, plus n
            # where that is negative, or v + c, less n where that reaches n
            n = extents[wrapped]
            if 2 * t.base.const >= t.mod:
                shifted = render(t.base + Affine(-t.mod, ()), floordiv, extents, number, size)
                term = f"({shifted} + {n}*({shifted} < 0))"
            else:
                shifted = render(t.base, floordiv, extents, number, size)
                term = f"({shifted} - {n}*({shifted} >= {n}))"
        elif isinstance(t, DivMod) and t.clamp:
            term = _clamp(t, render(t.base, floordiv, extents, number, size), size(t.mod))
        elif bounded_mod(t):
            term = _compared_mod(t, render(t.base, floordiv, extents, number, size), size(t.mod))
        elif isinstance(t, DivMod):
            base = render(t.base, floordiv, extents, number, size)
            term = f"({base} {floordiv} {t.div})" if t.div != 1 else base
            term = f"({term} % {t.mod})" if t.mod is not None else term
        else:
            term = t.name
        if c < 0 and (t in extents or wrapped is not None):
            # a loop (or a rolled one) read backwards, a flip's -k*v, as k*(n - 1 - v) - k*(n - 1):
            # the offset from the runtime extent, not a literal
            const += c * t.max
            c, term = -c, f"({extents[wrapped or t]} - 1 - {term})"
        parts.append(term if c == 1 else f"{number(c)}*{term}")
    return "(" + " + ".join(([size(const)] if const or not parts else []) + parts) + ")"


def bounded_mod(t) -> bool:
    """Whether ``t`` is a ``b % m`` whose ``b`` is below ``(QUOTIENTS + 1) * m`` (a repeat's read of
    its source, a concatenated piece's, a roll of the flattened tensor): ``_compared_mod``
    prints it without a division, so ``m`` can be a runtime size."""
    return isinstance(t, DivMod) and t.div == 1 and t.mod is not None and not t.clamp and t.base.min >= 0 and \
        t.base.max // t.mod <= QUOTIENTS


def _compared_mod(t: DivMod, base: str, m: str) -> str:
    """``base % m`` as ``base - m*(base >= m) - m*(base >= 2*m) ...``, one compare for each
    quotient it can have: compares and multiplies, which vectorise, where a ``%`` by a runtime
    value would be a division per element (int*bool, never bool + bool: Triton adds two
    booleans as booleans)."""
    steps = " + ".join(f"{m}*({base} >= {m if q == 1 else f'{q}*{m}'})" for q in range(1, t.base.max // t.mod + 1))
    return f"({base} - ({steps}))" if steps else base


def _clamp(t: DivMod, base: str, n: str) -> str:
    """``clamped``'s term: ``base`` raised to 0 where negative, lowered to ``n - 1`` where it
    reaches ``n`` (int*bool again), each part only where ``base`` can leave the range."""
    low = f"({base} - {base}*({base} < 0))" if t.base.min < 0 else base
    return f"({low} - ({low} - {n} + 1)*({low} >= {n}))" if t.base.max >= t.mod else low


def kernel_sizes(affines, vars_) -> tuple:
    """The numbers ``render`` prints through its ``size`` in ``affines`` (with every loop of
    ``vars_`` a runtime extent, as the printers print them), by magnitude, each once, in order of
    appearance: the kernel's runtime sizes (``Kernel.sizes``). 0 and 1 stay literals (as a plan's
    structure keeps them: runtime.structure), and so does a small stride of a loop (``SMALL_STRIDE``)."""
    seen: dict = {}

    def size(k: int, stride: bool = False) -> str:
        if abs(k) >= 2 and not (stride and abs(k) <= SMALL_STRIDE):
            seen.setdefault(abs(k), None)
        return str(k)
    extents = {v: v.name for v in vars_}
    for a in affines:
        render(a, "/", extents, None, size)
    return tuple(seen)


def extent_strides(a: Affine, extents: dict, size=literal):
    """A ``number`` for ``render``: each coefficient of ``a`` that is the next smaller one times
    that loop's extent (a row-major stride: the row length of a matrix read row by row) as
    that product of the loops' runtime extents (``extents``: Var -> its name in the source);
    other coefficients through ``size`` (a stride). A loop read backwards (a negative
    coefficient) or wrapped around its extent (``wrapped_var``) is a loop of its extent here too."""
    ranges = [(abs(c), t) for t, c in a.terms if t in extents] + \
        [(abs(c), v) for v, c in ((wrapped_var(t, extents), c) for t, c in a.terms) if v is not None]
    names, prev = {}, None
    for c, v in sorted(ranges, key=lambda cv: cv[0]):
        if prev is not None and c == prev[0] * prev[1].extent:
            names[c] = extents[prev[1]] if prev[0] == 1 else f"{names.get(prev[0]) or size(prev[0], True)}*{extents[prev[1]]}"
        prev = (c, v)

    def number(c: int) -> str:
        name = names.get(abs(c))
        if name is None:
            return size(c, True)
        return name if c > 0 else f"-{name}"
    return number
