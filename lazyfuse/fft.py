"""``lf.fft``: torch.fft's names on lazyfuse tensors, as externs (``lazyfuse.surface``).

lazyfuse's dtypes are real, so a transform with a complex result (``fft``, ``rfft``...) is
refused with a ``DTypeError`` naming it; the real-valued ones (``fftfreq``, ``rfftfreq``,
``fftshift``, ``ifftshift``, ``irfft`` of a real spectrum's...) run as torch's.
"""
from __future__ import annotations

import torch

from .surface import torch_submodule

__getattr__ = torch_submodule(torch.fft, "lf.fft.")
