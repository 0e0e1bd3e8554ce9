"""``lf.nn``: the functional neural-network ops (``lf.nn.functional``), ``lf.nn.utils`` and
``lf.nn.init``."""
from . import functional, init, utils  # noqa: F401
