"""``lf.special``: torch.special's names on lazyfuse tensors.

A function torch also has under another name (``expit`` is ``sigmoid``, ``gammaln`` is ``lgamma``,
``psi`` is ``digamma``) or under the same one in ``torch`` (``erf``, ``logit``, ``xlogy``,
``logsumexp``...) is lazyfuse's ``lf.<name>``: native where lazyfuse lowers it, so it fuses.
``ndtr`` is written with lazyfuse's ``erfc``. Every other torch.special function (the Bessel
functions, orthogonal polynomials, ``zeta``...) runs as an extern (``lazyfuse.surface``).
"""
from __future__ import annotations

import math

import torch

from .surface import torch_submodule

_torch_special = torch_submodule(torch.special, "lf.special.")

# torch.special's name -> lazyfuse's (lf.<name>)
RENAMED = {"expit": "sigmoid", "gammaln": "lgamma", "psi": "digamma"}
SAME_AS_TORCH = frozenset({"erf", "erfc", "erfinv", "exp2", "expm1", "log1p", "logit", "logsumexp", "round",
                           "sinc", "xlogy", "i0", "digamma", "polygamma", "softmax", "log_softmax",
                           "multigammaln"})


def __getattr__(name):
    if name in RENAMED or name in SAME_AS_TORCH:
        import lazyfuse
        return getattr(lazyfuse, RENAMED.get(name, name))
    return _torch_special(name)


def ndtr(x):
    """The standard normal CDF, ``erfc(-x / sqrt(2)) / 2`` (accurate in the lower tail, where
    ``(1 + erf(x / sqrt(2))) / 2`` would cancel)."""
    import lazyfuse
    return lazyfuse.erfc(x * -math.sqrt(0.5)) * 0.5


__all__ = ["ndtr"]
