"""The error hierarchy (docs/semantics.md, Errors): every error lazyfuse raises is a ``LazyfuseError``.

Each subclass also derives from the builtin a Python user would catch for the same
mistake (a bad shape is a ``ValueError``, a bad dtype a ``TypeError``), so code
written against torch's exceptions keeps working. Shape and dtype errors are also
``RuntimeError``s: torch raises one for both (``The size of tensor a (3) must match``,
``expected scalar type Float but found Half``), and that is what torch code catches.
"""
import re


class LazyfuseError(Exception):
    """Base class of every error lazyfuse raises."""


class ShapeError(LazyfuseError, ValueError, RuntimeError):
    """Shapes that do not broadcast, a dim out of range, a reshape that changes numel."""


class InvalidIndexError(ShapeError, IndexError):
    """An index past a dim's size, more indices than dims, or a dim out of range: also an
    ``IndexError``, as torch's (and Python's sequence protocol)."""


class DivisionByZeroError(LazyfuseError, RuntimeError, ZeroDivisionError):
    """An integer ``//``, ``%``, ``fmod`` or ``div(rounding_mode=...)`` by zero, found by the fused
    kernel (its error flag) at the drain: torch's CPU raises ``RuntimeError: ZeroDivisionError``;
    also Python's ``ZeroDivisionError``."""


class DTypeError(LazyfuseError, TypeError, ValueError, RuntimeError):
    """A dtype an op does not accept, or data lazyfuse cannot represent. Also a ``ValueError``:
    torch raises that for a dtype some functions refuse (``torch.signal.windows.hann(4,
    dtype=torch.int64)``: ``expects float32 or float64 dtypes``), a ``TypeError`` elsewhere."""


class IndexDTypeError(DTypeError, IndexError):
    """An index tensor that is neither integer nor bool: a ``DTypeError``, and an ``IndexError``
    as torch's."""


class DeviceError(LazyfuseError, RuntimeError):
    """An unknown device, or tensors of two devices mixed in one op."""


class CaptureError(LazyfuseError, RuntimeError):
    """Misuse of graph capture: a host read or sync inside a capture, nesting, a concurrent replay."""


class CaptureAllocationError(CaptureError):
    """The memory pool could not serve a request from its kept blocks while a capture was open."""


class CompileError(LazyfuseError, RuntimeError):
    """A generated kernel failed to compile or load (every candidate, when autotuning)."""


class UnsupportedOpError(LazyfuseError, NotImplementedError):
    """A torch op lazyfuse cannot run at all (complex, sparse, quantized, storage surgery)."""


class AutogradError(LazyfuseError, RuntimeError):
    """Misuse of autodiff: an in-place write to a tensor that requires grad, a second backward."""


class ConfigError(LazyfuseError, ValueError):
    """A ``LAZYFUSE_*`` environment variable with a value its knob does not accept (lazyfuse/config.py)."""


class CollectiveError(DeviceError):
    """A collective could not run: no process group, a bad argument, or a failure or timeout inside
    torch.distributed (another rank failed or never reached it). Also a ``RuntimeError``."""


# torch's words for an index out of range, whatever the exception class it raises
_OUT_OF_RANGE = re.compile(r"index -?\d+ is out of bounds for dimension|index out of range in self")


def torch_refusal(name: str, e: Exception) -> LazyfuseError:
    """The error for torch refusing a call lazyfuse made for ``name`` (an extern, checked on the
    meta device or at its launch), of the class a torch user would catch for it."""
    text = f"{name}: torch refuses these arguments: {e}"
    if isinstance(e, NotImplementedError):   # (an unknown mode, as pad's "Unrecognised padding mode")
        return UnsupportedOpError(text)
    if isinstance(e, IndexError) or _OUT_OF_RANGE.search(str(e)):
        # torch's sentence first (scatter's "index 3 is out of bounds for dimension 0 with size 3",
        # a RuntimeError): what a torch test's assertRaisesRegex matches
        return InvalidIndexError(f"{e} ({name}: torch refuses the index): fix the indices and recompute")
    if isinstance(e, TypeError) or "dtype" in str(e) or "not implemented for" in str(e):
        return DTypeError(text)
    return ShapeError(text)
