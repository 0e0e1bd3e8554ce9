"""Accounting of what torch code made the frontend do: drains it forced (with the Python line that
forced each, so a user can remove them) and, per aten op, whether it was recorded natively,
through a decomposition, as an extern node, or eagerly in the fallback (a drain). ``lf.torch_frontend.report()`` prints it.
"""
from __future__ import annotations

import collections
import dataclasses
import os
import sys

import torch

_SKIP = (os.path.dirname(torch.__file__), os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclasses.dataclass
class FrontendCounters:
    drains: collections.Counter = dataclasses.field(default_factory=collections.Counter)   # (reason, line) -> n
    native: collections.Counter = dataclasses.field(default_factory=collections.Counter)   # aten op -> n
    decomposed: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    extern: collections.Counter = dataclasses.field(default_factory=collections.Counter)    # lazy extern nodes
    fallback: collections.Counter = dataclasses.field(default_factory=collections.Counter)


counters = FrontendCounters()


def user_line() -> str:
    """``file:line`` of the innermost frame outside torch and lazyfuse: the code that asked."""
    f = sys._getframe(1)
    while f is not None:
        path = f.f_code.co_filename
        if not path.startswith(_SKIP) and not path.startswith("<"):
            return f"{path}:{f.f_lineno}"
        f = f.f_back
    return "<unknown>"


def note(reason: str) -> None:
    """A host read forced by torch code (``.item()``, printing, ``.numpy()``, a fallback op)."""
    counters.drains[(reason, user_line())] += 1


def reset() -> None:
    """Forget every count (``lf.reset_stats`` does not touch these)."""
    for field in dataclasses.fields(counters):
        getattr(counters, field.name).clear()


def used() -> bool:
    """Whether torch code ran on frontend tensors since the last ``reset()``."""
    return any(getattr(counters, f.name) for f in dataclasses.fields(counters))


def report() -> str:
    """The drains torch code forced, by line, and how each aten op was run."""
    lines = [f"torch frontend: {sum(counters.drains.values())} drains forced by torch code"]
    for (reason, where), n in counters.drains.most_common():
        lines.append(f"  {n:5d} x {reason:<28} at {where}")
    for title, c in (("recorded natively", counters.native), ("recorded through torch's decompositions",
                                                              counters.decomposed),
                     ("recorded as extern nodes (torch's kernel, lazily: a fusion boundary each)",
                      counters.extern),
                     ("ran eagerly (fallback: a drain each)", counters.fallback)):
        if c:
            lines.append(f"aten ops {title}:")
            lines.extend(f"  {n:6d} x {op}" for op, n in c.most_common())
    return "\n".join(lines)
