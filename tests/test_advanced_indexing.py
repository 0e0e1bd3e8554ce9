"""Boolean masks, integer lists and several index tensors, as torch; data-dependent sizes drain
(and are refused inside a capture), ``x[mask] = scalar`` is a recorded where."""
import numpy as np
import pytest
import torch

import lazyfuse as lf

CPU = lf.device("cpu")
XT = torch.randn(4, 5, generator=torch.Generator().manual_seed(0))


def test_getitem_with_masks_lists_and_several_tensors_matches_torch():
    x = lf.tensor(XT)
    i, j = torch.tensor([0, 2, 3]), torch.tensor([1, 1, 4])
    for got, want in ((x[x > 0], XT[XT > 0]), (x[[1, 2]], XT[[1, 2]]), (x[[0, 3], [1, 4]], XT[[0, 3], [1, 4]]),
                      (x[lf.tensor(i), lf.tensor(j)], XT[i, j]), (x[:, [4, 0]], XT[:, [4, 0]]),
                      (x[x[:, 0] > 0], XT[XT[:, 0] > 0]), (x.nonzero(), XT.nonzero()),
                      (x.masked_select(x > 0), XT.masked_select(XT > 0))):
        assert torch.equal(got.torch(), want)


def test_masked_assignment_of_a_scalar_is_a_where_without_a_drain():
    x = lf.tensor(XT)
    y = x.clone()
    lf.sync(CPU)
    lf.reset_stats(CPU)
    y[y > 0] = 0
    y[x[:, 1] < 0] = lf.tensor(2.5)
    assert lf.stats(CPU).kernels_launched == 0
    want = XT.clone()
    want[want > 0] = 0
    want[XT[:, 1] < 0] = 2.5
    assert torch.equal(y.torch(), want)


def test_indexed_assignment_writes_through_to_the_tensor():
    for key, value in (([1, 3], 7.0), ((torch.tensor([0, 2]), torch.tensor([4, 4])), -1.0), ("mask", "values")):
        x, want = lf.tensor(XT), XT.clone()
        if key == "mask":
            x[x > 0] = x[x > 0] * 2
            want[want > 0] = want[want > 0] * 2
        else:
            lkey = tuple(lf.tensor(k) for k in key) if isinstance(key, tuple) else key
            x[lkey] = value
            want[key] = value
        assert torch.equal(x.torch(), want)


def test_data_dependent_indexing_inside_a_capture_raises_with_a_hint():
    x = lf.tensor(XT)
    for closure in (lambda: x[x > 0], lambda: x.nonzero(), lambda: x.masked_select(x > 0)):
        with pytest.raises(lf.CaptureError, match="where"):
            lf.capture(CPU, closure)
    graph = lf.capture(CPU, lambda: x.masked_fill(x > 0, 0.0) * 2)   # the static-shape way works
    torch.testing.assert_close(graph.replay().torch(), XT.masked_fill(XT > 0, 0.0) * 2)


def test_integer_list_indexing_is_lazy_and_differentiable():
    xt = XT.double()
    x = lf.tensor(xt).requires_grad_()
    lf.sync(CPU)
    lf.reset_stats(CPU)
    y = x[[0, 0, 3]]
    assert lf.stats(CPU).kernels_launched == 0 and y.shape == (3, 5)
    (y * y).sum().backward()
    xr = xt.clone().requires_grad_()
    (xr[[0, 0, 3]] ** 2).sum().backward()
    torch.testing.assert_close(x.grad.torch(), xr.grad)


# keys a torch program indexes with that are not lazyfuse tensors: torch tensors, numpy arrays,
# Python bools (a 0-d mask: x[True] is x[None], x[False] empty; never the int 1)
FOREIGN_KEYS = {
    "true": lambda: True,
    "false": lambda: False,
    "int_then_true": lambda: (0, True),
    "torch_ints": lambda: torch.tensor([1, 0]),
    "numpy_ints": lambda: np.array([1, 0]),
    "torch_0d": lambda: torch.tensor(1),
    "numpy_int": lambda: np.int64(1),
    "torch_and_numpy": lambda: (torch.tensor([0, 1]), np.array([2, 0])),
    "torch_mask": lambda: torch.tensor([True, False]),
    "slice_then_torch": lambda: (slice(None), torch.tensor([2])),
}


@pytest.mark.parametrize("name", sorted(FOREIGN_KEYS))
def test_torch_tensors_numpy_arrays_and_bools_index_as_in_torch(name):
    key = FOREIGN_KEYS[name]
    x, xt = lf.arange(6.0).reshape(2, 3), torch.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(x[key()].numpy(), xt[key()].numpy())
    y, yt = lf.arange(6.0).reshape(2, 3), torch.arange(6.0).reshape(2, 3)
    y[key()] = -1.0
    yt[key()] = -1.0
    np.testing.assert_array_equal(y.numpy(), yt.numpy())
