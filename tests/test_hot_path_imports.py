"""No steady-state op call or drain runs Python's import machinery. A relative import inside a
function (``from .tensor import Tensor``) calls into importlib's Python code on every call
(``ModuleSpec.parent``, ``_handle_fromlist``); with the caches cold, as they are after a 2^20
kernel, that was ~10 us of a single op's drain-alone time (README, where a drained op's time
above its kernel goes). Each call below is checked against torch too, so the check runs the op's
real path."""
import sys

import numpy as np
import pytest
import torch

import lazyfuse as lf
import lazyfuse.nn.functional as F

CALLS = {   # name -> f(lib, functional, x, y): the same call on lazyfuse and on torch
    "lf.exp": lambda m, f, x, y: m.exp(x),
    "lf.abs": lambda m, f, x, y: m.abs(x),
    "lf.add": lambda m, f, x, y: m.add(x, y),
    "lf.erf": lambda m, f, x, y: m.erf(x),
    "lf.floor": lambda m, f, x, y: m.floor(x),
    "lf.div trunc": lambda m, f, x, y: m.div(x, y, rounding_mode="trunc"),
    "lf.hypot": lambda m, f, x, y: m.hypot(x, y),
    "lf.atan2": lambda m, f, x, y: m.atan2(x, y),
    "lf.logaddexp": lambda m, f, x, y: m.logaddexp(x, y),
    "lf.roll": lambda m, f, x, y: m.roll(x, 3, 1),
    "lf.flip": lambda m, f, x, y: m.flip(x, (1,)),
    "lf.tril": lambda m, f, x, y: m.tril(x),
    "x.softmax": lambda m, f, x, y: x.softmax(-1),
    "x.log_softmax": lambda m, f, x, y: x.log_softmax(-1),
    "F.relu": lambda m, f, x, y: f.relu(x),
    "x[1:]": lambda m, f, x, y: x[1:] * 2.0,
}


def _importlib_calls(fn) -> list:
    """The importlib functions (Python-level) that ``fn()`` calls."""
    seen = []

    def profile(frame, event, arg):
        if event == "call" and "importlib" in frame.f_code.co_filename:
            seen.append(frame.f_code.co_name)
    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return seen


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_steady_call_and_its_drain_import_nothing(name):
    call = CALLS[name]
    rng = np.random.default_rng(0)
    x_np, y_np = rng.standard_normal((8, 16)).astype(np.float32), (rng.random((8, 16)) + 0.5).astype(np.float32)
    x, y = lf.tensor(x_np), lf.tensor(y_np)
    want = call(torch, torch.nn.functional, torch.from_numpy(x_np).double(), torch.from_numpy(y_np).double())
    for _ in range(2):   # (the build path and the first steady-state drain)
        out = call(lf, F, x, y)
        lf.sync()
    got = []
    assert _importlib_calls(lambda: got.append(call(lf, F, x, y)) or lf.sync()) == []
    np.testing.assert_allclose(got[0].numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
    del out


def test_recording_under_autograd_imports_nothing():
    # every op recorded with a tensor that requires grad saves its inputs' versions (autograd.graph)
    rng = np.random.default_rng(1)
    a_np, b_np = rng.standard_normal((8, 16)).astype(np.float32), rng.standard_normal((8, 16)).astype(np.float32)
    a, b = lf.tensor(a_np, requires_grad=True), lf.tensor(b_np)
    (a * b).exp().sum().backward()   # (a first time: nothing cached to count on)
    got = []
    assert _importlib_calls(lambda: got.append((a * b).exp())) == []
    want = (torch.from_numpy(a_np).double() * torch.from_numpy(b_np).double()).exp()
    np.testing.assert_allclose(got[0].detach().numpy(), want.numpy(), rtol=1e-5)
