"""``lf.signal.windows``: torch.signal.windows' window functions (``hann``, ``kaiser``,
``general_cosine``...). Each is a factory (no tensor argument): it runs torch's at once and
uploads the result to ``device=`` (``lazyfuse.surface``), as ``lf.hann_window`` does; torch's
refusals (a negative ``M``, an integer ``dtype``, ``std <= 0``) come as lazyfuse errors naming
the function."""
from __future__ import annotations

import torch

from ..surface import torch_submodule

__getattr__ = torch_submodule(torch.signal.windows, "lf.signal.windows.")
