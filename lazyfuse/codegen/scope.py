"""The emission scope both printers share: one local per Expr, in dependency order,
memoised within one block of generated code (a value used twice is computed once)."""
from __future__ import annotations

from .kernel import walk


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
        for x in walk([e]):
            if id(x) not in self.names:
                self.names[id(x)] = self._emit(x)
        return self.names[id(e)]

    def _emit(self, e) -> str:
        raise NotImplementedError
