"""``lf.signal.windows`` (torch.signal.windows' window functions): factories computed by torch at
the call and uploaded, so each equals torch's bit for bit, on every device, and torch's refusals
come as lazyfuse errors of the class a torch user catches (a ``ValueError``)."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import lazyfuse as lf

WINDOWS = {   # name -> keyword arguments a caller may pass besides sym, dtype, device
    "hann": {}, "hamming": {}, "bartlett": {}, "blackman": {}, "cosine": {}, "nuttall": {},
    "exponential": {"tau": st.floats(0.1, 10.0)}, "gaussian": {"std": st.floats(0.1, 10.0)},
    "kaiser": {"beta": st.floats(0.0, 20.0)}, "general_hamming": {"alpha": st.floats(0.0, 1.0)},
    "general_cosine": {"a": st.lists(st.floats(-1.0, 1.0), min_size=1, max_size=4)},
}


@pytest.mark.parametrize("name", sorted(WINDOWS))
@settings(max_examples=15, deadline=None)
@given(data=st.data(), m=st.integers(0, 40), sym=st.booleans(), dtype=st.sampled_from([lf.float32, lf.float64]),
       device=st.sampled_from(["cpu", "interpreter"]))
def test_windows_equal_torchs(name, data, m, sym, dtype, device):
    kwargs = {k: data.draw(s, label=k) for k, s in WINDOWS[name].items()}
    got = getattr(lf.signal.windows, name)(m, sym=sym, dtype=dtype, device=device, **kwargs)
    want = getattr(torch.signal.windows, name)(m, sym=sym, dtype=dtype.torch, **kwargs)
    assert isinstance(got, lf.Tensor) and got.device == lf.device(device) and got.dtype == dtype
    assert torch.equal(got.torch(), want)


@pytest.mark.parametrize("name, m, kwargs, words", [
    ("hann", -1, {}, "non-negative window length"),
    ("hann", 4, {"dtype": "int64"}, "float32 or float64"),
    ("gaussian", 4, {"std": 0.0}, "Standard deviation must be positive"),
    ("kaiser", 4, {"beta": -1.0}, "beta must be non-negative"),
    ("general_cosine", 4, {"a": []}, "Coefficients cannot be empty"),
])
def test_windows_refuse_what_torch_refuses(name, m, kwargs, words):
    def call(windows, dtypes):
        return getattr(windows, name)(m, **{k: getattr(dtypes, v) if k == "dtype" else v for k, v in kwargs.items()})
    with pytest.raises(ValueError, match=words):   # torch's class: torch code's handler catches ours too
        call(torch.signal.windows, torch)
    with pytest.raises(lf.LazyfuseError, match=words) as info:
        call(lf.signal.windows, lf)
    assert isinstance(info.value, ValueError), type(info.value)
    assert f"lf.signal.windows.{name}" in str(info.value)
