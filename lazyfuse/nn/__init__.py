"""``lf.nn``: the functional neural-network ops (``lf.nn.functional``) and ``lf.nn.utils``."""
from . import functional, utils  # noqa: F401
