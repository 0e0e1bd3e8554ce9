"""``lf.nn``: the functional neural-network ops (``lf.nn.functional``), ``lf.nn.utils``, ``lf.nn.init``
and torch's stateless modules (``lf.nn.Softmax(dim=1)``, ``lf.nn.CrossEntropyLoss()``:
``lazyfuse.nn.modules``)."""
from . import functional, init, utils  # noqa: F401


def __getattr__(name):
    """``lf.nn.<Module>``: torch's stateless module of that name run by ``lf.nn.functional``."""
    from .modules import module_class
    return module_class(name)
