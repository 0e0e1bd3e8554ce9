"""Run torch programs unchanged over lazyfuse: ``lf.lazy(obj)`` / ``lf.eager(obj)``.

``lf.lazy(model)`` backs a module's parameters and buffers with lazyfuse tensors (in place);
``lf.lazy(t)`` makes a new torch tensor so backed. Torch code on them (``nn.Module``, autograd,
``torch.optim``) records lazily, fuses, elides and captures with ``lf.capture`` like native
code; ``report()`` tells which aten ops were recorded natively, which as extern nodes, which ran
eagerly, and which lines of torch code forced a drain; ``lf.explain`` which aten ops each kernel
computes (``trace_origins()``).
"""
from . import operators, optimizers, rnn  # noqa: F401  (LazyTensor's operators; torch's Adam on the device; LSTM)
from .aten_table import MixedTensorError  # noqa: F401
from .convert import eager, lazy  # noqa: F401
from .drains import counters, report, reset  # noqa: F401
from .origins import trace_origins  # noqa: F401
from .tensor import LazyTensor  # noqa: F401

__all__ = ["lazy", "eager", "LazyTensor", "MixedTensorError", "report", "reset", "counters", "trace_origins"]
