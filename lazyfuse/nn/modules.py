"""``lf.nn.<Module>`` for torch's stateless modules: ``lf.nn.Softmax(dim=1)(x)``,
``lf.nn.CrossEntropyLoss(label_smoothing=0.1)(logits, target)``, ``lf.nn.ReLU()``.

Each is torch's own module class built with the caller's arguments (so the defaults, checks and
``repr`` are torch's), called on lazyfuse tensors through ``lf.nn.functional``'s function of the
same op: native, fused and differentiated as that function. Its arguments are the module's
attributes of the function's parameter names (``dim``, ``reduction``, ``ignore_index``...;
a ``weight`` buffer made a lazyfuse tensor once, at construction; ``Dropout``'s ``training`` is
the module's mode at each call, set by ``train()``/``eval()``). A module with parameters
(``Linear``, ``Conv2d``) has no such form: build torch's and ``lf.lazy`` it.
"""
from __future__ import annotations

import inspect

# torch.nn's module -> lf.nn.functional's function of it
FUNCTIONAL = {
    "Softmax": "softmax", "LogSoftmax": "log_softmax", "Softmin": "softmin",
    "CrossEntropyLoss": "cross_entropy", "NLLLoss": "nll_loss", "MSELoss": "mse_loss", "L1Loss": "l1_loss",
    "SmoothL1Loss": "smooth_l1_loss", "HuberLoss": "huber_loss", "BCELoss": "binary_cross_entropy",
    "BCEWithLogitsLoss": "binary_cross_entropy_with_logits", "KLDivLoss": "kl_div",
    "ReLU": "relu", "ReLU6": "relu6", "GELU": "gelu", "SiLU": "silu", "Sigmoid": "sigmoid", "Tanh": "tanh",
    "LeakyReLU": "leaky_relu", "ELU": "elu", "SELU": "selu", "CELU": "celu", "Softplus": "softplus",
    "LogSigmoid": "logsigmoid", "Hardtanh": "hardtanh", "Hardsigmoid": "hardsigmoid", "Hardswish": "hardswish",
    "Mish": "mish", "Softsign": "softsign", "Tanhshrink": "tanhshrink", "GLU": "glu",
    "Hardshrink": "hardshrink", "Softshrink": "softshrink", "PixelShuffle": "pixel_shuffle",
    "PixelUnshuffle": "pixel_unshuffle", "Dropout": "dropout",
}


class StatelessModule:
    """A torch module without parameters, run by its ``lf.nn.functional`` function (see the module doc)."""

    torch_class = None   # (set on each generated class)
    functional = None

    def __init__(self, *args, **kwargs):
        import torch
        from ..creation import tensor
        from ..tensor import Tensor
        # (torch's module takes torch tensors only: it gets copies; a lazyfuse tensor passed by
        # name is used as it is)
        self.torch_module = self.torch_class(*[a.torch() if isinstance(a, Tensor) else a for a in args],
                                             **{k: v.torch() if isinstance(v, Tensor) else v for k, v in kwargs.items()})
        fn = self._function()
        names = list(inspect.signature(fn).parameters)[1:]   # (the first is the input)
        self.arguments = {}
        for name in names:
            if isinstance(kwargs.get(name), Tensor):
                self.arguments[name] = kwargs[name]
            elif hasattr(self.torch_module, name):
                value = getattr(self.torch_module, name)
                self.arguments[name] = tensor(value.detach()) if isinstance(value, torch.Tensor) else value

    def _function(self):
        from . import functional
        return getattr(functional, self.functional)

    def __call__(self, *inputs):
        arguments = self.arguments
        if "training" in arguments:   # (Dropout: the module's mode now, as train() and eval() set it)
            arguments = {**arguments, "training": self.torch_module.training}
        return self._function()(*inputs, **arguments)

    forward = __call__

    @property
    def training(self) -> bool:
        return self.torch_module.training

    def train(self, mode: bool = True):
        """Training mode on (``mode``) or off, as torch's ``Module.train``; returns the module."""
        self.torch_module.train(mode)
        return self

    def eval(self):
        """``train(False)``."""
        return self.train(False)

    def __repr__(self):
        return repr(self.torch_module)


_made = {}


def module_class(name: str):
    """``lf.nn.<name>``: the class for torch's stateless module ``name``, else AttributeError."""
    if name in _made:
        return _made[name]
    import torch
    if name not in FUNCTIONAL:
        hint = ": build torch's module and lf.lazy(module) it" if isinstance(getattr(torch.nn, name, None), type) else ""
        raise AttributeError(f"lazyfuse has no lf.nn.{name}{hint}")
    torch_class = getattr(torch.nn, name)
    made = type(name, (StatelessModule,), {"torch_class": torch_class, "functional": FUNCTIONAL[name],
                                           "__doc__": f"torch.nn.{name} on lazyfuse tensors: "
                                                      f"``lf.nn.functional.{FUNCTIONAL[name]}`` with its arguments.",
                                           "__module__": __name__})
    _made[name] = made
    return made
