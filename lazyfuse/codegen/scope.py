"""The emission scope both printers share: one local per Expr, in dependency order,
memoised within one block of generated code (a value used twice is computed once)."""
from __future__ import annotations

from .kernel import rounds_to_storage, walk


class Scope:
    def __init__(self, printer, indent: str):
        self.p = printer
        self.indent = indent
        self.names: dict = {}
        self.lines: list = []

    def value(self, e) -> str:
        """The local name holding ``e``, emitting it (and its sources) first if needed."""
        name = self.names.get(id(e))
        if name is not None:
            return name
        for x in walk([e], known=self.names):
            self.names[id(x)] = self._emit(x)
        return self.names[id(e)]

    def _emit(self, e) -> str:
        held = self.held(e)
        if held is not None and not rounds_to_storage(e):
            return held
        value = self.p.rhs(e, self) if held is None else held
        if rounds_to_storage(e):
            value = self.p.rounded(value, e.dtype)
        return self.local(value, e.dtype)

    def held(self, e) -> str | None:
        """The accumulator an ``Acc`` (or a matmul's product) is read from; None for values
        computed by an expression."""
        raise NotImplementedError

    def local(self, value: str, dtype) -> str:
        """Emit a new local holding ``value``; its name."""
        raise NotImplementedError
