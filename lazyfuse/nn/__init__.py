"""``lf.nn``: the functional neural-network ops (``lf.nn.functional``)."""
from . import functional  # noqa: F401
