"""Helpers for writing tests of fusion, elision and capture (deterministic warmup bugs included).

    with lf.testing.stats_delta(dev) as d:
        y = (x * 2).exp(); y.numpy()
    assert d.kernels_launched == 1

    with lf.testing.no_fresh_allocations(dev):
        graph.replay()
"""
from __future__ import annotations

from contextlib import contextmanager

from .runtime.device import device as get_device
from .runtime.stats import Stats


class StatsDelta(Stats):
    """The counters' change over a ``with`` block (filled in when the block exits)."""


@contextmanager
def stats_delta(device=None):
    """Yield a ``Stats`` filled, when the block exits, with how much each counter changed."""
    dev = get_device(device)
    before = dev.stats.snapshot()
    delta = StatsDelta()
    try:
        yield delta
    finally:
        for k, v in (dev.stats.snapshot() - before).as_dict().items():
            setattr(delta, k, v)


@contextmanager
def no_fresh_allocations(device=None):
    """Assert the block allocated no new memory (every request served from kept blocks)."""
    with stats_delta(device) as d:
        yield d
    if d.fresh_allocations:
        raise AssertionError(f"{d.fresh_allocations} fresh allocation(s) inside a block that must allocate none")


@contextmanager
def count_launches(device=None):
    """Yield a delta whose ``kernels_launched`` / ``graph_replays`` count what the block launched."""
    with stats_delta(device) as d:
        yield d


def pool_info(device=None) -> dict:
    """The device pool's statistics: ``live_bytes`` (handed out now), ``cached_bytes`` (kept for
    reuse), ``peak_live_bytes`` (high-water mark), ``persistent`` (prepared for a capture) and
    ``capturing`` (a capture is open: fresh allocations raise CaptureAllocationError)."""
    return get_device(device).pool.info()
