"""Grad mode: whether differentiable ops record backward nodes (per thread, as in torch)."""
from __future__ import annotations

import functools
import threading


class _Mode(threading.local):
    enabled = True
    inference = False   # inside an inference_mode() block (torch.is_inference_mode_enabled)


_mode = _Mode()


def is_grad_enabled() -> bool:
    """Whether ops record backward nodes in this thread (off under ``lf.no_grad()``)."""
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
            with self._again():
                return fn(*args, **kwargs)
        return wrapper

    def _again(self):
        """A fresh setter of the same mode, for each call of a decorated function."""
        return type(self)()


class no_grad(_GradModeSetter):
    """Ops inside record no backward nodes (optimizer updates, evaluation)."""

    enabled = False


class enable_grad(_GradModeSetter):
    """Re-enables recording inside a ``no_grad`` block."""

    enabled = True


class set_grad_enabled(_GradModeSetter):
    """torch's ``set_grad_enabled(mode)``: switches recording on or off at once (as a function
    call) and, used with ``with``, restores the previous mode on exit."""

    def __init__(self, mode: bool):
        if not isinstance(mode, bool):
            raise TypeError(f"set_grad_enabled(): argument 'mode' must be bool, not {type(mode).__name__}")
        self.enabled = mode
        self._prev = _mode.enabled
        _mode.enabled = mode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _mode.enabled = self._prev
        return False

    def __call__(self, fn):
        _mode.enabled = self._prev   # as a decorator, the mode applies inside the function only
        return super().__call__(fn)

    def _again(self):
        return set_grad_enabled(self.enabled)


class inference_mode(_GradModeSetter):
    """torch's ``inference_mode(mode=True)``: for lazyfuse's autograd the same as ``no_grad``
    (``mode=False``: recording stays as it is), as a context manager or a decorator."""

    def __init__(self, mode: bool = True):
        self.mode = mode

    def __enter__(self):
        self._prev = (_mode.enabled, _mode.inference)
        if self.mode:
            _mode.enabled, _mode.inference = False, True
        return self

    def __exit__(self, *exc):
        _mode.enabled, _mode.inference = self._prev
        return False

    def _again(self):
        return inference_mode(self.mode)


def is_inference_mode_enabled() -> bool:
    """Whether an ``inference_mode()`` block is open in this thread."""
    return _mode.inference
