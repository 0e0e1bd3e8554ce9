"""Issue 7, item 3: aliasing and hazards (docs/semantics.md, Views and in-place writes), on ``cpu`` and ``interpreter``.

* A pending op reading a tensor that is later written in place sees the old value.
* A replay's output fed back as the next replay's input (``x.copy_(g.output)``).
* A view written in place while its base (or another view) is read.
* ``copy_`` from a tensor into an overlapping view of itself: torch refuses a partial overlap
  ("some elements ... refer to a single memory location"); lazyfuse reads the source in program
  order, *before* the write, so the result is always torch's ``dst.copy_(src.clone())`` — the rule
  is the same as for every other pending read, and the sizes here are large enough for the
  parallel C loops and several Triton blocks to run over the overlap.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lazyfuse as lf

DEVICES = ["cpu", "interpreter"]
N = 1 << 18          # past the C kernels' parallel threshold (a copy: 1 unit an element), several Triton blocks


def ref(n=N, seed=0):
    return torch.from_numpy(np.random.default_rng(seed).standard_normal(n).astype(np.float32))


def same(got, want):
    torch.testing.assert_close(got.torch(), want, rtol=2e-5, atol=2e-5, equal_nan=True)   # sums reassociate


@pytest.mark.parametrize("device", DEVICES)
def test_a_pending_op_sees_the_value_before_a_later_in_place_write(device):
    t = ref()
    x = lf.tensor(t, device=device)
    y = x * 2 + 1                  # pending, reads x
    s = x.sum()                    # pending reduction, reads x
    v = x[::3]                     # a view: sees the write
    x.mul_(-1)
    x[:100] = 7.0
    z = x + y                      # reads both versions
    want_x = -t
    want_x[:100] = 7.0
    same(y, t * 2 + 1)
    same(s, t.sum())
    same(v, want_x[::3])
    same(z, want_x + (t * 2 + 1))
    same(x, want_x)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shift", [1, 7, 1000])
def test_copy_into_an_overlapping_view_of_itself_reads_the_source_first(device, shift):
    t = ref()
    x = lf.tensor(t, device=device)
    x[shift:].copy_(x[:-shift])            # forward overlap: a naive in-place loop would smear x[0]
    want = t.clone()
    want[shift:].copy_(t[:-shift].clone())
    same(x, want)
    x[:-shift].copy_(x[shift:] * 1)       # backward overlap, through an op
    want[:-shift].copy_(want[shift:].clone())
    same(x, want)
    with pytest.raises(RuntimeError, match="single memory location"):
        t[shift:].copy_(t[:-shift])        # what torch does instead


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("live", ["sum", "none"])
def test_partial_writes_then_a_covering_write_of_the_same_tensor(device, live):
    """Two partial writes, then a ``copy_`` of the whole tensor from a value reading them, in one
    drain: the partial writes land in the tensor's own buffer (they were once computed into a
    temporary holding only their region: the rest of it was uninitialized memory)."""
    t = ref(4096)
    x = lf.tensor(t, device=device)
    lf.sync(device)
    x[3::4] = x[:1024] * 2
    x[3::4] = x[3::4] + 1          # the second write reads the first
    s = x + 4                      # reads the partial writes; kept live or dropped
    x.copy_(s if live == "sum" else x + 4)
    want = t.clone()
    want[3::4] = want[:1024] * 2
    want[3::4] += 1
    want_s = want + 4
    if live == "none":
        del s
    else:
        same(s, want_s)
    same(x, want_s)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(writes=st.lists(st.tuples(st.sampled_from(["fill", "add", "copy_all", "copy_view"]),
                                 st.integers(0, 3), st.integers(1, 4)), min_size=1, max_size=6),
       keep=st.booleans())
def test_random_chains_of_in_place_writes_to_one_tensor_match_torch(writes, keep):
    """Partial writes through strided views and covering writes, in any order, in one drain."""
    t = ref(64)
    x = lf.tensor(t, device="cpu")
    lf.sync("cpu")
    want = t.clone()
    kept = []
    for what, start, step in writes:
        for target in (x, want):
            view = target[start::step]
            if what == "fill":
                view.fill_(float(start - step))
            elif what == "add":
                view.add_(target[: view.shape[0]] * 0.5)
            elif what == "copy_all":
                target.copy_(target * 2 - 1)
            else:
                view.copy_(target[-view.shape[0]:] + 1)
        if keep:
            kept.append((x[::2] * 1, want[::2].clone()))
    same(x, want)
    for got, w in kept:
        same(got, w)


@pytest.mark.parametrize("device", DEVICES)
def test_copy_of_a_transpose_into_itself(device):
    t = ref(256 * 256).reshape(256, 256)
    x = lf.tensor(t, device=device)
    x.copy_(x.T)
    same(x, t.T.clone())
    x.add_(x.T)                            # in-place op reading a permuted view of its target
    same(x, t.T + t)
    x[:, ::2] = x[:, 1::2]                 # interleaved columns
    want = t.T + t
    want[:, ::2] = want[:, 1::2].clone()
    same(x, want)


@pytest.mark.parametrize("device", DEVICES)
def test_a_view_written_in_place_while_its_base_is_read(device):
    t = ref(64 * 512).reshape(64, 512)
    base = lf.tensor(t, device=device)
    row_sums = base.sum(1)                 # pending, reads the base
    view = base[:, 128:384]
    view.mul_(0.5)                         # written through the view
    col_max = base.amax(0)                 # reads the written base
    base.T[:10].add_(base.T[10:20])        # a view read and written in the same op
    want = t.clone()
    want[:, 128:384] *= 0.5
    want_colmax = want.amax(0)
    want.T[:10] += want.T[10:20].clone()
    same(row_sums, t.sum(1))
    same(col_max, want_colmax)
    same(view, want[:, 128:384])
    same(base, want)


def test_a_replay_output_fed_back_as_the_next_input():
    t = ref(4096, seed=3)
    state = lf.tensor(t)
    g = lf.capture("cpu", lambda: (state * 0.5 + 1).tanh())
    want = t.clone()
    for _ in range(20):
        out = g.replay()
        want = (want * 0.5 + 1).tanh()
        same(out, want)
        state.copy_(out)                   # the graph's own output buffer, written into its input
    assert g.output is out


def test_a_replay_reading_its_input_through_a_view_of_the_output():
    """The input refreshed from a shifted view of the previous output (overlap between the
    graph's output buffer and the copy's source, in a different layout)."""
    t = ref(1024, seed=4)
    state = lf.tensor(t)
    g = lf.capture("cpu", lambda: state * 2)
    want = t.clone()
    for _ in range(5):
        out = g.replay()
        same(out, want * 2)
        state[1:].copy_(out[:-1])
        want[1:] = (want * 2)[:-1]
    same(state, want)
