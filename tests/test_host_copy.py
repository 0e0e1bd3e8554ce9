"""``x.copy_(host_data)`` of the storage's own shape and dtype writes straight into a realized
buffer when nothing pending reads it (a replayed step's input refresh: no upload, no drain),
and is recorded as before everywhere else: a pending reader still sees the old value
(docs/semantics.md, Views and in-place writes), and inside a capture the copy is a launch the replay repeats."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import lazyfuse as lf
from lazyfuse.testing import stats_delta

CPU = lf.device("cpu")


@pytest.mark.parametrize("make", [np.asarray, torch.tensor], ids=["numpy", "torch"])
def test_a_refresh_with_nothing_pending_writes_at_once(make):
    x = lf.tensor(np.zeros((3, 4), dtype=np.float32))
    lf.sync(CPU)
    new = np.arange(12, dtype=np.float32).reshape(3, 4)
    with stats_delta(CPU) as d:
        assert x.copy_(make(new)) is x
    assert d.ops_recorded == 0 and d.kernels_launched == 0 and d.fresh_allocations == 0
    np.testing.assert_array_equal(x.numpy(), new)
    new[0, 0] = 99.0                       # a copy, not an alias of the caller's array
    assert x.numpy()[0, 0] == 0.0


def test_a_pending_reader_sees_the_old_value():
    x = lf.tensor(np.ones(5))
    lf.sync(CPU)
    y = x * 2                              # pending, reads x's buffer
    with stats_delta(CPU) as d:
        x.copy_(np.full(5, 7.0))
    assert d.ops_recorded == 1             # recorded after the reader, as before
    np.testing.assert_array_equal(y.numpy(), np.full(5, 2.0))
    np.testing.assert_array_equal(x.numpy(), np.full(5, 7.0))


def test_a_pending_write_to_the_target_is_overwritten_in_order():
    x = lf.tensor(np.ones(4))
    lf.sync(CPU)
    x.add_(5)
    x.copy_(np.arange(4.0))
    x.add_(1)
    np.testing.assert_array_equal(x.numpy(), np.arange(4.0) + 1)


@pytest.mark.parametrize("src", [np.arange(6.0), np.arange(6, dtype=np.int64), np.arange(3.0)],
                         ids=["other-dtype", "int", "broadcast"])
def test_other_dtypes_shapes_and_views_take_the_recorded_path(src):
    x = lf.tensor(np.zeros((2, 6), dtype=np.float32))
    lf.sync(CPU)
    target = x if src.size == 6 else x[:, :3]
    target.copy_(src)
    expected = np.zeros((2, 6), dtype=np.float32)
    (expected if src.size == 6 else expected[:, :3])[...] = src
    np.testing.assert_array_equal(x.numpy(), expected)


def test_inside_a_capture_the_copy_is_recorded_and_replayed():
    """A copy_ of host data in the captured closure is part of the graph: every replay writes
    the captured data again, over whatever was copied in between."""
    x = lf.tensor(np.zeros(4, dtype=np.float32))
    captured = np.full(4, 3.0, dtype=np.float32)

    def step():
        x.copy_(captured)
        return x + 1
    graph = lf.capture(CPU, step)
    x.copy_(np.full(4, -5.0, dtype=np.float32))           # outside: written at once
    np.testing.assert_array_equal(x.numpy(), np.full(4, -5.0))
    graph.replay()
    np.testing.assert_array_equal(graph.output.numpy(), np.full(4, 4.0))
    np.testing.assert_array_equal(x.numpy(), captured)


def test_a_refreshed_input_feeds_the_next_replay():
    x = lf.tensor(np.zeros(3, dtype=np.float32))
    graph = lf.capture(CPU, lambda: x * 2)
    for k in range(3):
        x.copy_(np.full(3, k, dtype=np.float32))
        graph.replay()
        np.testing.assert_array_equal(graph.output.numpy(), np.full(3, 2.0 * k))
