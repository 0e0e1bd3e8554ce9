"""Graph capture (``lf.capture``, ``Graph``) and structured APIs on top of it."""
from .capture import Graph, capture  # noqa: F401
from .graphed import graphed  # noqa: F401
from .decode import DecodeGraph, DecodeState, decode_step  # noqa: F401
