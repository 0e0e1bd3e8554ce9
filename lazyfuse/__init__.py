"""lazyfuse: a lazy, fusing tensor runtime with graph capture. ``import lazyfuse as lf``.

Ops record IR instead of running; a drain (``lf.sync``, a host read) fuses the live pending
work into few kernels (C/OpenMP on the CPU, Triton on GPUs and in Triton's interpreter) and
launches them. ``lf.capture`` records a closure's steady-state launches for replay.
"""
from .errors import (AutogradError, CaptureAllocationError, CaptureError, CompileError, ConfigError,  # noqa: F401
                     DeviceError, DivisionByZeroError, DTypeError, IndexDTypeError, InvalidIndexError,
                     LazyfuseError, ShapeError, UnsupportedOpError)
from .ir.dtypes import DType, bfloat16, float16, float32, float64, int8, int16, int32, int64, uint8  # noqa: F401
from .ir.dtypes import bool_ as bool  # noqa: F401,A001
from .ir.dtypes import float16 as half, float32 as float, float64 as double, int16 as short, int32 as int, int64 as long  # noqa: F401,A001 (torch's aliases)
from .runtime.device import Device, device, get_default_device, set_default_device  # noqa: F401
from .tensor import Tensor  # noqa: F401
from .creation import (arange, empty, from_numpy, from_torch, full, full_like, manual_seed, ones, ones_like,  # noqa: F401
                       rand, randn, tensor, zeros, zeros_like)
from .creation import (Generator, default_generator, get_rng_state, initial_seed, seed,  # noqa: F401
                       set_rng_state)
from .functions import cat, matmul, maximum, minimum, reset_stats, stack, stats, sync, where  # noqa: F401
from .autograd import (enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled,  # noqa: F401
                       no_grad, set_grad_enabled)
from . import nn, optim, testing  # noqa: F401
from . import cuda, fft, linalg, signal, special  # noqa: F401
from .serialization import load, save  # noqa: F401
from .ir.dtypes import DType as dtype, finfo, iinfo  # noqa: F401 (torch's names)
from torch import Size  # noqa: F401 (lazyfuse's shapes are plain tuples, equal to torch.Size)
from .graph import Graph, capture, graphed  # noqa: F401
from . import graph  # noqa: F401
from .explain import explain, to_dot  # noqa: F401
from .interop import from_dlpack  # noqa: F401
from .version import __version__  # noqa: F401
from . import distributed  # noqa: F401
from .torch_frontend import eager, lazy  # noqa: F401
from . import torch_frontend  # noqa: F401
from .extern import extern  # noqa: F401
from .creation import empty_like, rand_like, randn_like  # noqa: F401
from . import torch_ops as _torch_ops

_torch_ops.install()
globals().update({k: v for k, v in _torch_ops.FUNCTIONS.items() if k not in globals()})


def __getattr__(name):
    """``lf.<torch name>`` lazyfuse does not define natively: torch's function, as an extern
    (``lazyfuse.surface``)."""
    import torch
    from .surface import namespace_function
    return namespace_function(torch, "lf.", name)
