"""Grad mode: whether differentiable ops record backward nodes (per thread, as in torch)."""
from __future__ import annotations

import functools
import threading


class _Mode(threading.local):
    enabled = True


_mode = _Mode()


def is_grad_enabled() -> bool:
    """Whether ops on this thread record gradients (False inside ``lf.no_grad()``)."""
    return _mode.enabled


class _GradModeSetter:
    """A context manager that is also a decorator (``@lf.no_grad()``)."""

    enabled = True

    def __enter__(self):
        self._prev = _mode.enabled
        _mode.enabled = self.enabled
        return self

    def __exit__(self, *exc):
        _mode.enabled = self._prev
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with type(self)():
                return fn(*args, **kwargs)
        return wrapper


class no_grad(_GradModeSetter):
    """Ops inside record no backward nodes (optimizer updates, evaluation)."""

    enabled = False


class enable_grad(_GradModeSetter):
    """Re-enables recording inside a ``no_grad`` block."""

    enabled = True
