"""``lf.signal``: torch.signal's names (its ``windows``) on lazyfuse."""
from . import windows  # noqa: F401
