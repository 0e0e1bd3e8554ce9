"""An in-place write that fails at the drain (docs/semantics.md, Errors): torch refuses a bad
index at the call, so the tensor keeps the value it had before; lazyfuse finds the bad index at
the drain and gives the storage back its version before that write (``execute.undo_last_write``),
which the next read computes. Where that version can no longer be computed as recorded (the
failing kernel wrote into the buffer it reads, or a later write was recorded on top of the failed
one), the tensor is poisoned: every read raises the original error, never a wrong value."""
import numpy as np
import pytest
import torch

import lazyfuse as lf
from lazyfuse.errors import InvalidIndexError

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
SIZE = 6

# name -> the failing in-place write on ``x`` (SIZE float32 elements) of module ``m``, index ``i``
WRITES = {
    "index_add_": lambda m, x, i, kw: x.index_add_(0, i, m.ones(len(i), **kw)),
    "index_copy_": lambda m, x, i, kw: x.index_copy_(0, i, m.ones(len(i), **kw)),
    "index_fill_": lambda m, x, i, kw: x.index_fill_(0, i, 2.0),
    "scatter_add_": lambda m, x, i, kw: x.scatter_add_(0, i, m.ones(len(i), **kw)),
    "scatter_": lambda m, x, i, kw: x.scatter_(0, i, m.ones(len(i), **kw)),
    "setitem": lambda m, x, i, kw: x.__setitem__(i, 3.0),
    "index_put_": lambda m, x, i, kw: x.index_put_((i,), m.ones(len(i), **kw)),
    "put_": lambda m, x, i, kw: x.put_(i, m.ones(len(i), **kw)),
}
# the bad index first: torch's CPU kernels stop at it, so torch's tensor is as it was before the call
BAD = [9, 0]


def _start(m, kw, prior):
    x = m.tensor(np.arange(SIZE, dtype=np.float32), **kw)
    if m is lf:
        x.numpy()   # realized: the writes below are in place on its buffer
    if prior:
        x.add_(1)   # a write still pending when the failing one is recorded
    return x


def _torch_after_failure(name, prior):
    x = _start(torch, {}, prior)
    with pytest.raises(Exception):
        WRITES[name](torch, x, torch.tensor(BAD), {})
    return x.numpy()


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
@pytest.mark.parametrize("name", sorted(WRITES))
def test_a_failed_write_leaves_the_tensor_as_torch_does(name, device):
    _check_failed_write(name, device, prior=False)


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
@pytest.mark.parametrize("name", sorted(WRITES))
def test_a_failed_write_after_a_pending_one_is_undone_or_refused_never_wrong(name, device):
    # where the pending write and the failing one fuse into one kernel that checks its indices
    # itself (the error flag), that kernel has written the storage's own buffer by the time the
    # flag is read: the version before cannot be read back, and the tensor refuses every read
    x = _start(lf, {"device": device}, prior=True)
    WRITES[name](lf, x, lf.tensor(np.array(BAD), device=device), {"device": device})
    with pytest.raises(RuntimeError, match="9"):
        x.numpy()
    try:
        got = x.numpy()
    except InvalidIndexError as refused:
        assert "could not be computed" in str(refused)
        with pytest.raises(InvalidIndexError):
            x.numpy()
        return
    np.testing.assert_array_equal(got, _torch_after_failure(name, prior=True))


def _check_failed_write(name, device, prior):
    kw = {"device": device}
    x = _start(lf, kw, prior)
    version = x._storage.version
    view = x[2:]
    WRITES[name](lf, x, lf.tensor(np.array(BAD), device=device), kw)
    with pytest.raises(RuntimeError, match="9"):
        x.numpy()
    expect = _torch_after_failure(name, prior)
    np.testing.assert_array_equal(x.numpy(), expect)
    np.testing.assert_array_equal(view.numpy(), expect[2:])
    assert x._storage.version == version   # the failed write is not counted, as in torch
    # the engine goes on: a good write of the same op lands on the restored value
    good = [5, 0]
    WRITES[name](lf, x, lf.tensor(np.array(good), device=device), kw)
    ref = torch.from_numpy(expect.copy())
    WRITES[name](torch, ref, torch.tensor(good), {})
    np.testing.assert_array_equal(x.numpy(), ref.numpy())


@pytest.mark.parametrize("name", ["index_copy_", "put_"])
def test_a_failed_write_after_a_pending_one_keeps_both_parts_of_torchs_order(name):
    # (writes whose indices are checked before the writing kernel: the version before is undone to)
    _check_failed_write(name, "cpu", prior=True)


def test_a_value_read_from_the_failed_write_stays_refused():
    x = _start(lf, {}, prior=False)
    x.index_add_(0, lf.tensor(np.array(BAD)), lf.ones(2))
    y = x * 2   # reads the failed version: it has no earlier one to fall back to
    with pytest.raises(InvalidIndexError):
        y.numpy()
    with pytest.raises(InvalidIndexError, match="could not be computed"):
        y.numpy()
    np.testing.assert_array_equal(x.numpy(), np.arange(SIZE))


def test_a_write_recorded_after_the_failed_one_poisons_the_tensor():
    # torch would have raised before the later write ran; undoing only the failed write would
    # keep the later one on the wrong base, so the tensor refuses every read instead
    x = _start(lf, {}, prior=True)
    x.index_add_(0, lf.tensor(np.array(BAD)), lf.ones(2))
    x.mul_(2)
    for _ in range(2):
        with pytest.raises(InvalidIndexError, match="index 9 is out of bounds for dimension 0"):
            x.numpy()
    np.testing.assert_array_equal((lf.arange(3.0) + 1).numpy(), [1, 2, 3])   # the engine still works


def test_a_flagged_kernel_that_wrote_in_place_poisons_rather_than_guess():
    # the integer division's error flag is read after its kernel ran, and that kernel wrote the
    # quotient into a's own buffer: the version before (a + 1) can no longer be read from it
    a = lf.tensor(np.array([4, 6, 8]))
    a.numpy()
    a.add_(1)
    a //= lf.tensor(np.array([1, 0, 2]))
    for _ in range(2):
        with pytest.raises(lf.DivisionByZeroError):
            a.numpy()
    kept = lf.tensor(np.array([4, 6, 8])) // 2
    np.testing.assert_array_equal(kept.numpy(), [2, 3, 4])
