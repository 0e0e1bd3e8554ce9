"""Why a drain missed the plan cache: what differs from the nearest cached plan.

A plan key is the drain's node descriptors (op, dtype, shape, attribute, source positions,
one per node on the tape) plus the live roots. On a miss the engine keeps the key and the keys
cached at that moment (references, no copies); ``describe`` compares them only when someone
asks (``LAZYFUSE_DEBUG``, ``lf.explain``), so a miss costs nothing extra. The nearest plan is
the one with the fewest differing descriptors; the report names each difference: a new op, a
dtype, a shape, a stride pattern (a view's strides), the sources, or which results are live.
"""
from __future__ import annotations

import difflib
from collections import deque

from ..ir.node import Op
from ..ir.view import View

KEPT = 16          # misses remembered per device
COMPARED = 64      # most recently used plans a miss is compared with
SHOWN = 4          # differences named per miss


class Miss:
    __slots__ = ("device", "key", "cached", "_text")

    def __init__(self, device_name: str, key, cached: list):
        self.device = device_name
        self.key = key
        self.cached = cached
        self._text = None

    def __str__(self) -> str:
        if self._text is None:
            self._text = describe(self.key, self.cached, self.device)
        return self._text


class MissLog:
    """The last ``KEPT`` plan-cache misses of one engine."""

    def __init__(self):
        self.misses: deque = deque(maxlen=KEPT)

    def add(self, device_name: str, key, plans) -> Miss:
        cached = list(plans.keys())[-COMPARED:] if plans else []
        miss = Miss(device_name, key, cached)
        self.misses.append(miss)
        return miss

    def reports(self) -> list:
        return [str(m) for m in self.misses]


def describe(key, cached: list, device_name: str = "") -> str:
    where = f" on {device_name}" if device_name else ""
    descs, live = key.parts
    if not cached:
        return f"plan-cache miss{where}: no cached plan to compare with (the first drain of this program)"
    best = min(cached, key=lambda k: _distance(descs, live, *k.parts))
    diffs = differences(descs, live, *best.parts)
    shown = "; ".join(diffs[:SHOWN]) + (f"; and {len(diffs) - SHOWN} more" if len(diffs) > SHOWN else "")
    return f"plan-cache miss{where} ({len(descs)} nodes): the nearest of {len(cached)} cached plan(s) differs in " \
           f"{shown or 'nothing structural'}"


def _distance(descs, live, other_descs, other_live) -> int:
    n = abs(len(descs) - len(other_descs)) + (live != other_live)
    for a, b in zip(descs, other_descs):
        if a != b:
            n += 1
    return n


def differences(descs, live, other_descs, other_live) -> list:
    """Each way ``descs``/``live`` (this drain) differs from the cached plan's, as text: the op
    sequences aligned (an inserted op shifts every position after it), then each change of
    the aligned nodes, nodes with the same change named together."""
    ops = [d[0].label for d in descs]
    matcher = difflib.SequenceMatcher(None, ops, [d[0].label for d in other_descs], autojunk=False)
    out, changes = [], {}
    shifted = False   # after an inserted or removed node, source positions differ by the shift
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            for i, j in zip(range(i1, i2), range(j1, j2)):
                if descs[i] != other_descs[j]:
                    change = _change(descs[i], other_descs[j], shifted)
                    if change:
                        changes.setdefault(change, []).append(f"%{i} {ops[i]}")
            continue
        shifted = True
        new = ", ".join(dict.fromkeys(ops[i1:i2]))
        old = ", ".join(dict.fromkeys(d[0].label for d in other_descs[j1:j2]))
        if tag == "insert":
            out.append(f"removed op(s) {old} (the cached plan has them)")
        elif tag == "delete":
            out.append(f"new op(s) {new} at %{i1}")
        else:
            out.append(f"op(s) {new} at %{i1} where the cached plan has {old}")
    for change, where in changes.items():
        more = f" (+{len(where) - 3} more)" if len(where) > 3 else ""
        out.append(f"{change} at {', '.join(where[:3])}{more}")
    if len(live) != len(other_live) or (live != other_live and not shifted):
        out.append(f"which results are live or overwritten ({len(live)} vs {len(other_live)} live)")
    return out


def _change(a: tuple, b: tuple, shifted: bool) -> str:
    """How node descriptor ``a`` differs from ``b`` of the same op ('' for a shifted source only)."""
    if a[1] != b[1]:
        return f"dtype {a[1].name} vs {b[1].name} cached"
    if a[0] is Op.SCALAR:
        return ""   # only a dtype is part of a scalar's key
    if a[2] != b[2]:
        return f"shape {tuple(a[2])} vs {tuple(b[2])} cached"
    if len(a) > 3 and a[3] != b[3]:
        if isinstance(a[3], View) and isinstance(b[3], View):
            return f"strides {a[3].strides} offset {a[3].offset} vs {b[3].strides} offset {b[3].offset} cached " \
                   "(a stride pattern)"
        if a[0] is Op.BUFFER:
            return "" if shifted else "aliasing (which inputs share a buffer)"
        return f"attribute {a[3]!r} vs {b[3]!r} cached"
    return "" if shifted else "its sources (how the nodes connect)"
