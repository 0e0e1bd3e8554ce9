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
    """``(base // div) % mod`` (``mod`` None: no modulo)."""
    base: "Affine"
    div: int
    mod: int | None

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
    if a.min >= 0 and a.max < d:
        return Affine(0, ())
    if high and low_form.min >= 0:
        # (d*H + L) // d == H + L // d for integers: only the terms that are not multiples of
        # d stay under the division (a head split's ``(8192*b + 128*t + c) / 32 % 4`` becomes
        # ``c / 32``, whose modulo then goes too: a cheaper index, which gcc vectorises)
        return Affine(a.const // d, tuple(high)) + Affine(0, ((DivMod(low_form, d, None), 1),))
    return Affine(0, ((DivMod(a, d, None), 1),))


def mod(a: Affine, m: int) -> Affine:
    """``a % m`` for a non-negative affine form, simplified when the strides allow."""
    if m == 1:
        return Affine(0, ())
    kept = Affine(a.const % m, tuple((t, c) for t, c in a.terms if c % m != 0))
    if kept.min >= 0 and kept.max < m:
        return kept
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
    """``offset + sum(index_k * strides_k)``."""
    acc = Affine(offset, ())
    for i, st in zip(index, strides):
        if st:
            acc = acc + i.scale(st)
    return acc


def substitute(a: Affine, mapping: dict) -> Affine:
    """Replace Vars by affine forms (used when loops are merged or re-tiled)."""
    acc = Affine(a.const, ())
    for t, c in a.terms:
        if isinstance(t, Var):
            acc = acc + (mapping[t] if t in mapping else Affine(0, ((t, 1),))).scale(c)
        else:
            acc = acc + Affine(0, ((DivMod(substitute(t.base, mapping), t.div, t.mod), 1),)).scale(c)
    return acc


def wrapped_var(t, extents: dict):
    """The loop variable ``v`` (one of ``extents``) that the term ``t`` wraps around: ``t`` is
    ``(v + c) % n`` with ``n`` v's extent and the form below ``2 * n`` (a roll's index, v shifted
    cyclically by ``c - n``), else None. Such a term ranges over v's values, as v does."""
    if not (isinstance(t, DivMod) and t.div == 1 and t.mod is not None and 0 <= t.base.min and t.base.max < 2 * t.mod):
        return None
    return next((v for v, c in t.base.terms if c == 1 and v in extents and v.extent == t.mod), None)


def render(a: Affine, floordiv: str, extents=None, number=None) -> str:
    """``a`` as source text; ``floordiv`` is the language's integer division (C ``/``, Python ``//``:
    indices are never negative, so the two agree). ``extents`` (Var -> its runtime extent's name
    in the source; none: every size a literal) makes the sizes in the text runtime values: each
    row-major coefficient (``extent_strides``), a loop variable read backwards (a flip's
    ``n - 1 - v``) and one wrapped around its extent (a roll's); other div/mod constants stay
    literals, which compilers turn into multiplications. Value-preserving at this size: a
    printer that prints each size's source anew is right whatever another size's shares with it."""
    extents = extents or {}
    number = number or extent_strides(a, extents)
    const, parts = a.const, []
    for t, c in a.terms:
        wrapped = wrapped_var(t, extents)
        if wrapped is not None:
            # (v + c) % n with no division and n the runtime one, from the smaller offset of c and
            # c - n (a roll's shift, the same at every size above twice it): v + c - n, plus n
            # where that is negative, or v + c, less n where that reaches n
            n = extents[wrapped]
            if 2 * t.base.const >= t.mod:
                shifted = render(t.base + Affine(-t.mod, ()), floordiv, extents, number)
                term = f"({shifted} + {n}*({shifted} < 0))"
            else:
                shifted = render(t.base, floordiv, extents, number)
                term = f"({shifted} - {n}*({shifted} >= {n}))"
        elif isinstance(t, DivMod):
            base = render(t.base, floordiv, extents, number)
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
    return "(" + " + ".join(([str(const)] if const or not parts else []) + parts) + ")"


def extent_strides(a: Affine, extents: dict):
    """A ``number`` for ``render``: each coefficient of ``a`` that is the next smaller one times
    that loop's extent (a row-major stride: the row length of a matrix read row by row) as
    that product of the loops' runtime extents (``extents``: Var -> its name in the source);
    other coefficients stay literals. A loop read backwards (a negative coefficient) or wrapped
    around its extent (``wrapped_var``) is a loop of its extent here too."""
    ranges = [(abs(c), t) for t, c in a.terms if t in extents] + \
        [(abs(c), v) for v, c in ((wrapped_var(t, extents), c) for t, c in a.terms) if v is not None]
    names, prev = {}, None
    for c, v in sorted(ranges, key=lambda cv: cv[0]):
        if prev is not None and c == prev[0] * prev[1].extent:
            names[c] = extents[prev[1]] if prev[0] == 1 else f"{names.get(prev[0], prev[0])}*{extents[prev[1]]}"
        prev = (c, v)
    return lambda c: names.get(c, str(c))
