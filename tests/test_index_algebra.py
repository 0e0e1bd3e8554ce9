"""The kernel index algebra (``lazyfuse/codegen/index.py``): ``floordiv`` and ``mod`` of affine
forms simplify, and every simplified form equals Python's ``//`` and ``%`` at every point."""
from __future__ import annotations

import itertools
import random

import pytest

from lazyfuse.codegen.index import Affine, DivMod, Var, floordiv, mod


def evaluate(a: Affine, point: dict) -> int:
    total = a.const
    for t, c in a.terms:
        if isinstance(t, Var):
            total += c * point[t]
        else:
            q = evaluate(t.base, point) // t.div
            total += c * (q % t.mod if t.mod is not None else q)
    return total


def test_the_multiples_of_the_divisor_leave_the_division():
    b, t, c = Var("b", 8), Var("t", 64), Var("c", 128)
    flat = Affine(0, ((b, 8192), (t, 128), (c, 1)))
    head = mod(floordiv(flat, 32), 4)
    assert head == Affine(0, ((DivMod(Affine.var(c), 32, None), 1),))   # c // 32 alone
    assert floordiv(flat, 32) == Affine(0, ((b, 256), (t, 4), (DivMod(Affine.var(c), 32, None), 1)))


@pytest.mark.parametrize("seed", range(40))
def test_floordiv_and_mod_agree_with_python_everywhere(seed):
    rng = random.Random(seed)
    vs = [Var(f"v{i}", rng.choice([1, 2, 3, 4, 5, 8, 16])) for i in range(rng.randint(1, 3))]
    a = Affine(rng.randint(0, 70), tuple((v, rng.choice([1, 2, 3, 4, 6, 8, 12, 32, 96])) for v in vs))
    d, m = rng.choice([2, 3, 4, 8, 16, 32]), rng.choice([2, 3, 4, 5, 8])
    q, r, qm = floordiv(a, d), mod(a, m), mod(floordiv(a, d), m)
    for values in itertools.product(*(range(v.extent) for v in vs)):
        point = dict(zip(vs, values))
        x = evaluate(a, point)
        assert evaluate(q, point) == x // d
        assert evaluate(r, point) == x % m
        assert evaluate(qm, point) == (x // d) % m
