"""``nn.LSTM`` over frontend tensors: torch's oneDNN layer op and its backward, recorded natively.

On a ``cpu`` tensor torch's LSTM runs one ``aten::mkldnn_rnn_layer`` per layer and direction (its
choice is made in C++ from the tensor's reported device, which a frontend tensor's is), and autograd
saves the op's oneDNN *workspace*, a ``uint8`` buffer lazyfuse has no dtype for, for
``aten::mkldnn_rnn_layer_backward``. So both ops are recorded here from torch's LSTM formulas (gates
``i, f, g, o`` in that order, as torch's weights hold them): the forward unrolled over time, the
backward as backpropagation through time over the forward recomputed from the same inputs (the
workspace torch hands back is an empty plain tensor of ours, never read). A packed sequence takes
torch's other LSTM path (``aten::lstm.data``: per-step aten ops, recorded as any), once its
``_pack_padded_sequence`` is recorded here with ``batch_sizes`` kept a plain CPU tensor.
"""
from __future__ import annotations

import torch

from ..functions import cat, stack
from . import fallback
from .aten_table import _fallback, _unwrap, raw
from .tensor import LazyTensor, from_lf, lf_device_of

_LSTM = 2   # the ``mode`` torch passes for an LSTM (oneDNN's rnn kind)


def _steps(x, w_ih, w_hh, bias, h, c, reverse):
    """The layer's forward over ``x`` (T, B, I) from ``h``, ``c`` (B, H): per time step, in the order
    processed, ``(t, h_prev, c_prev, i, f, g, o, tanh(c))``, and the last ``h`` and ``c``."""
    T, B, _ = x.shape
    H = w_hh.shape[1]
    projected = (x.reshape(T * B, x.shape[2]) @ w_ih.T).reshape(T, B, 4 * H)
    if bias is not None:
        projected = projected + bias
    steps = []
    for t in (range(T - 1, -1, -1) if reverse else range(T)):
        gates = projected[t] + h @ w_hh.T
        i, f = gates[:, :H].sigmoid(), gates[:, H:2 * H].sigmoid()
        g, o = gates[:, 2 * H:3 * H].tanh(), gates[:, 3 * H:].sigmoid()
        c_next = f * c + i * g
        tanh_c = c_next.tanh()
        steps.append((t, h, c, i, f, g, o, tanh_c))
        h, c = o * tanh_c, c_next
    return steps, h, c


def _unsupported(mode, batch_sizes) -> bool:
    return mode != _LSTM or len(batch_sizes) > 0


def _lazyfuse_args(func, args) -> list:
    """The lazyfuse Tensors of the op's arguments (torch's LSTM makes its default zero ``h0``/``c0`` as
    plain tensors on the input's reported device: those are uploaded)."""
    device = lf_device_of(args)
    return [_unwrap(a, device, func) for a in args]


@raw("mkldnn_rnn_layer")
def _lstm_layer(func, args, kwargs):
    if _unsupported(args[9], args[8]) or kwargs:
        return _fallback(func, args, kwargs)
    x, w_ih, w_hh, b_ih, b_hh, hx, cx, reverse, _batch_sizes, _mode, _hidden, _layers, has_biases = \
        _lazyfuse_args(func, args[:13])
    steps, h, c = _steps(x, w_ih, w_hh, b_ih + b_hh if has_biases else None, hx, cx, reverse)
    outputs = [None] * len(steps)
    for t, *_, o, tanh_c in steps:
        outputs[t] = o * tanh_c
    workspace = torch.empty(0, dtype=torch.uint8)   # (read by no one: the backward below recomputes)
    return from_lf(stack(outputs, 0)), from_lf(h), from_lf(c), workspace


@raw("mkldnn_rnn_layer_backward")
def _lstm_layer_backward(func, args, kwargs):
    if _unsupported(args[14], args[20]) or kwargs:
        return _fallback(func, args, kwargs)
    (x, w_ih, w_hh, b_ih, b_hh, hx, cx, _out, _hy, _cy, grad_out, grad_hy, grad_cy, reverse, _mode, _hidden,
     _layers, has_biases) = _lazyfuse_args(func, args[:18])
    steps, _, _ = _steps(x, w_ih, w_hh, b_ih + b_hh if has_biases else None, hx, cx, reverse)
    zeros = hx * 0.0
    dh = grad_hy if grad_hy is not None else zeros
    dc = grad_cy if grad_cy is not None else zeros
    dx, dgates_per_t = [None] * len(steps), [None] * len(steps)
    dw_hh = None
    for t, h_prev, c_prev, i, f, g, o, tanh_c in reversed(steps):
        if grad_out is not None:
            dh = dh + grad_out[t]
        dc = dc + dh * o * (1 - tanh_c * tanh_c)
        dgates = cat([dc * g * i * (1 - i), dc * c_prev * f * (1 - f), dc * i * (1 - g * g),
                      dh * tanh_c * o * (1 - o)], 1)
        dgates_per_t[t] = dgates
        dx[t] = dgates @ w_ih
        step_dw_hh = dgates.T @ h_prev
        dw_hh = step_dw_hh if dw_hh is None else dw_hh + step_dw_hh
        dh, dc = dgates @ w_hh, dc * f
    T, B, I = x.shape
    dgates_all = stack(dgates_per_t, 0).reshape(T * B, dgates_per_t[0].shape[1])
    dw_ih = dgates_all.T @ x.reshape(T * B, I)
    db = dgates_all.sum(0)
    return (from_lf(stack(dx, 0)), from_lf(dw_ih), from_lf(dw_hh), from_lf(db), from_lf(db.clone()), from_lf(dh),
            from_lf(dc))


@raw("_pack_padded_sequence")
def _pack_padded_sequence(func, args, kwargs):
    """``pack_padded_sequence``'s op, lazily: the packed rows are the first ``batch_sizes[t]`` sequences
    at each time ``t``; ``batch_sizes`` (from the lengths, a plain tensor) stays a plain CPU tensor, as
    torch's always is: its RNN kernels read it on the host."""
    x, lengths, batch_first = args[0], args[1], args[2] if len(args) > 2 else kwargs.get("batch_first", False)
    if type(lengths) is LazyTensor:
        lengths = lengths.cpu()
    lengths = lengths.tolist()
    if type(x) is not LazyTensor or kwargs or not lengths or lengths != sorted(lengths, reverse=True) \
            or lengths[-1] <= 0:
        return fallback.run_eagerly(func, args, kwargs, x._lf.device)   # (torch's own checks and errors)
    x = x._lf.transpose(0, 1) if batch_first else x._lf
    batch_sizes = [sum(1 for n in lengths if n > t) for t in range(lengths[0])]
    data = cat([x[t, :b] for t, b in enumerate(batch_sizes)], 0)
    return from_lf(data), torch.tensor(batch_sizes, dtype=torch.int64)
