"""torch's in-place draws on a tensor, natively: ``x.uniform_()``, ``normal_``, ``bernoulli_``
(a number ``p``), ``exponential_``, ``cauchy_``, ``log_normal_`` and ``geometric_`` are each a
transform of lazyfuse's counter-based ``rand``/``randn`` (``generator=`` as there) written into
``x`` with ``copy_``, so they record lazily and fuse with what reads them (an extern ran torch's
draw on a copy). The draws are torch's distributions, not torch's numbers (lazyfuse's generator is
its own). Each first checks its arguments with torch's own method on a one-element tensor of
``x``'s dtype, so it refuses exactly what torch refuses (``from > to``, ``std < 0``, ``p``
outside [0, 1], an integer tensor for a continuous distribution), with torch's words.
"""
from __future__ import annotations

import math

import torch

from .creation import rand, randn, tensor
from .errors import torch_refusal
from .ir import dtypes as dt


def _check(x, name: str, args: tuple) -> None:
    try:
        getattr(torch.empty(1, dtype=x.dtype.torch), name)(*args)
    except Exception as e:  # noqa: BLE001 (torch's refusal, as one naming the method)
        raise torch_refusal(f"Tensor.{name}", e) from None


def _draw(x, source, generator):
    """``source`` (``rand`` or ``randn``) in ``x``'s shape and device: in ``x``'s dtype where it is
    a float, float32 for an integer or bool tensor (``bernoulli_``, ``geometric_``)."""
    return source(x.shape, generator=generator, dtype=x.dtype if x.dtype.is_float else dt.float32,
                  device=x.device)


def uniform_(x, from_=0.0, to=1.0, *, generator=None, **kwargs):
    """Uniform values in [from, to) (torch's keyword ``from`` is accepted too)."""
    from_ = kwargs.pop("from", from_)
    if kwargs:
        raise TypeError(f"uniform_() got an unexpected keyword argument {next(iter(kwargs))!r}")
    _check(x, "uniform_", (from_, to))
    return x.copy_(_draw(x, rand, generator) * (to - from_) + from_)


def normal_(x, mean=0.0, std=1.0, *, generator=None):
    """Normal values of ``mean`` and ``std``."""
    _check(x, "normal_", (mean, std))
    return x.copy_(_draw(x, randn, generator) * std + mean)


def bernoulli_(x, p=0.5, *, generator=None):
    """1 with probability ``p``, else 0, in ``x``'s dtype. A tensor ``p`` (a probability per
    element, broadcast to ``x``, which torch checks as it draws) is torch's ``bernoulli`` of it,
    an extern."""
    if not isinstance(p, (int, float)):
        from .surface import namespace_function
        from .tensor import Tensor
        probabilities = (p if isinstance(p, Tensor) else tensor(p, device=x.device)).expand(x.shape)
        return x.copy_(namespace_function(torch, "lf.", "bernoulli")(probabilities, generator=generator))
    _check(x, "bernoulli_", (p,))
    return x.copy_(_draw(x, rand, generator) < p)


def exponential_(x, lambd=1.0, *, generator=None):
    """Exponential values of rate ``lambd``: -log(1 - u) / lambd."""
    _check(x, "exponential_", (lambd,))
    return x.copy_((-_draw(x, rand, generator)).log1p() * (-1.0 / lambd))


def cauchy_(x, median=0.0, sigma=1.0, *, generator=None):
    """Cauchy values: median + sigma tan(pi (u - 1/2))."""
    _check(x, "cauchy_", (median, sigma))
    return x.copy_(((_draw(x, rand, generator) - 0.5) * math.pi).tan() * sigma + median)


def log_normal_(x, mean=1.0, std=2.0, *, generator=None):
    """exp of normal values of ``mean`` and ``std`` (torch's defaults: 1 and 2)."""
    _check(x, "log_normal_", (mean, std))
    return x.copy_((_draw(x, randn, generator) * std + mean).exp())


def geometric_(x, p, *, generator=None):
    """The number of Bernoulli(``p``) trials up to the first success: ceil(log(1 - u) / log(1 - p)),
    at least 1 (u = 0 would give 0)."""
    _check(x, "geometric_", (p,))
    trials = ((-_draw(x, rand, generator)).log1p() * (1.0 / math.log1p(-p))).ceil()
    return x.copy_(trials.clamp_min(1.0))


METHODS = {f.__name__: f for f in (uniform_, normal_, bernoulli_, exponential_, cauchy_, log_normal_, geometric_)}
