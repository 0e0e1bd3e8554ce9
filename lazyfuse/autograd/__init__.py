"""Reverse-mode autodiff on the lazy IR: ``requires_grad``, ``backward()``, ``.grad``, ``lf.no_grad()``,
``lf.autograd.grad`` (torch's: the gradients returned, no ``.grad`` written).

The ops call the recorders in ``rules`` only when grad mode is on and an input has a non-None
``_ag`` (one attribute check on the no-grad path); ``graph.backward`` sweeps the recorded
GradFns under ``no_grad``, so the backward pass is lazy IR that fuses like any program.
"""
from .graph import AutogradError, GradFn, Leaf, backward, grad, needs_grad, recording, set_requires_grad  # noqa: F401
from .mode import (enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled, no_grad,  # noqa: F401
                   set_grad_enabled)
from . import inplace, rules  # noqa: F401
