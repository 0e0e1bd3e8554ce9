"""lazyfuse's refusals begin with torch's own sentence for the same mistake (then say which
shapes and the fix), so a torch program's ``except`` and a torch test's ``assertRaisesRegex``
(which match torch's text) hold over lazyfuse; and the error is an instance of torch's type.
Each case runs on torch and on lazyfuse here, so torch's text is read, not copied."""
import gc

import pytest
import torch

import lazyfuse as lf


@pytest.fixture(autouse=True)
def collect_the_refused_calls():
    """A refusal's traceback holds the mistake's pending tensors in a reference cycle: collected
    after each test they are dead, so the next test's drain does not compute them."""
    yield
    gc.collect()

# name -> the mistake on module ``m`` (lf or torch)
MISTAKES = {
    "broadcast": lambda m: m.ones(2, 3) + m.ones(4),
    "broadcast_3d": lambda m: m.ones(5, 1, 3) * m.ones(2, 4, 1, 2),
    "matmul": lambda m: m.ones(2, 3) @ m.ones(4, 5),
    "mm": lambda m: m.mm(m.ones(2, 3), m.ones(4, 5)),
    "reshape": lambda m: m.ones(12).reshape(3, 5),
    "reshape_infer": lambda m: m.ones(12).reshape(5, -1),
    "view_strides": lambda m: m.ones(4, 3).t().view(12),
    "cat": lambda m: m.cat([m.ones(2, 2), m.ones(3, 3)], 1),
    "cat_dim0": lambda m: m.cat([m.ones(2, 2), m.ones(3, 2), m.ones(1, 3)], 0),
    "stack": lambda m: m.stack([m.ones(2), m.ones(2), m.ones(3)]),
    "dim": lambda m: m.ones(2, 3).sum(5),
    "dim_negative": lambda m: m.ones(2, 3).softmax(-3),
    "transpose_dim": lambda m: m.ones(2, 3).transpose(0, 4),
    "expand": lambda m: m.ones(2, 3).expand(4, 3),
    "item": lambda m: m.ones(2).item(),
    "int_requires_grad": lambda m: m.ones(2, dtype=m.int64).requires_grad_(),
    "backward_non_scalar": lambda m: (m.ones(2, requires_grad=True) * 2).backward(),
    "int_index": lambda m: m.ones(2, 6)[1, 9],
    "int_index_negative": lambda m: m.ones(6, 2)[-7],
    "int_index_after_none": lambda m: m.ones(2, 3, 4)[None, 1, ..., 4],
    "int_index_after_ellipsis": lambda m: m.ones(2, 3, 4, 5)[0, ..., 9],
    "slice_step": lambda m: m.ones(6)[::-1],
    "layer_norm": lambda m: m.nn.functional.layer_norm(m.ones(2, 3), (4,)),
    "narrow": lambda m: m.ones(4).narrow(0, 2, 5),
    "chunk": lambda m: m.ones(4).chunk(0),
    "flatten": lambda m: m.ones(2, 3).flatten(1, 0),
    "in_place_broadcast": lambda m: m.ones(1).add_(m.ones(3)),
    "in_place_cast": lambda m: m.ones(2, dtype=m.int64).add_(1.5),
    "in_place_cast_bool": lambda m: m.ones(2, dtype=m.bool).mul_(m.ones(2, dtype=m.int32)),
    "duplicate_dims": lambda m: m.ones(2, 3, 4).sum(dim=(1, 0, 1)),
    "float_index": lambda m: m.ones(4)[m.tensor([1.0])],
    "cross_entropy_batch": lambda m: m.nn.functional.cross_entropy(m.ones(2, 3), m.tensor([0, 1, 2])),
    "copy_shape": lambda m: m.ones(4).copy_(m.ones(3)),
    "leaf_in_place": lambda m: m.ones(2, requires_grad=True).add_(1),
    # the index writes' argument checks (0-d tensors included: torch reads a 0-d source as one slice)
    "index_add_0d_empty_index": lambda m: m.tensor(5.0).index_add(0, m.tensor([], dtype=m.int64), m.tensor(2.0)),
    "index_add_0d_two_indices": lambda m: m.tensor(5.0).index_add(0, m.tensor([0, 0]), m.tensor(2.0)),
    "index_add_indices": lambda m: m.zeros(3).index_add(0, m.tensor([0]), m.ones(3)),
    "index_add_0d_source": lambda m: m.zeros(3).index_add(0, m.tensor([0]), m.tensor(1.0)),
    "index_add_dtype": lambda m: m.zeros(3).index_add(0, m.tensor([0]), m.ones(1, dtype=m.float64)),
    "index_add_2d_index": lambda m: m.zeros(3).index_add(0, m.tensor([[0]]), m.ones(1)),
    "index_copy_0d_empty_index": lambda m: m.tensor(5.0).index_copy(0, m.tensor([], dtype=m.int64), m.tensor(2.0)),
    "index_copy_indices": lambda m: m.zeros(3).index_copy(0, m.tensor([0]), m.ones(3)),
    "index_copy_slices": lambda m: m.zeros(3, 4).index_copy(1, m.tensor([0]), m.ones(2, 1)),
    "index_copy_dims": lambda m: m.zeros(3, 4).index_copy(1, m.tensor([0]), m.ones(1)),
    "index_copy_dtype": lambda m: m.zeros(3).index_copy(0, m.tensor([0]), m.ones(1, dtype=m.float64)),
    "index_select_0d": lambda m: m.tensor(5.0).index_select(0, m.tensor([0, 0])),
    "scatter_add_0d_two_indices": lambda m: m.tensor(5.0).scatter_add(0, m.tensor([0, 0]), m.tensor(2.0)),
    "scatter_add_shape": lambda m: m.zeros(2, 2).scatter_add(0, m.tensor([[0, 0, 0]]), m.ones(3, 3)),
    "scatter_add_index_dims": lambda m: m.zeros(3).scatter_add(0, m.tensor([[0]]), m.ones(2)),
    "scatter_add_dtype": lambda m: m.zeros(3).scatter_add(0, m.tensor([0]), m.ones(1, dtype=m.float64)),
    # where's out= is its Tensor overload only (a number for input or other has no out form) and casts nothing
    "where_out_number_other": lambda m: m.where(m.tensor([True, False]), m.ones(2), 0.0, out=m.empty(2)),
    "where_out_number_input": lambda m: m.where(m.tensor([True, False]), 1, m.ones(2), out=m.empty(2)),
    "where_out_dtype": lambda m: m.where(m.tensor([True, False]), m.ones(2), m.zeros(2), out=m.empty(2, dtype=m.float64)),
    "where_condition_dtype": lambda m: m.where(m.ones(2), m.ones(2), m.zeros(2)),
    "where_condition_number": lambda m: m.where(True, m.ones(2), m.zeros(2)),
}


def _raised(call):
    with pytest.raises(Exception) as raised:
        call()
    return raised.value


@pytest.mark.parametrize("name", sorted(MISTAKES))
def test_a_refusal_starts_with_torchs_sentence_and_is_torchs_type(name):
    theirs = _raised(lambda: MISTAKES[name](torch))
    ours = _raised(lambda: MISTAKES[name](lf))
    assert isinstance(ours, lf.LazyfuseError)
    assert isinstance(ours, type(theirs)), (type(ours).__mro__, type(theirs))
    sentence = str(theirs).splitlines()[0].rstrip(".")
    assert str(ours).startswith(sentence), (str(ours), sentence)


def test_mixing_devices_is_refused_with_torchs_sentence():
    # (torch says it for cuda and cpu tensors, which this machine cannot make: the text is torch's
    # TensorIterator check, "Expected all tensors to be on the same device, but found at least two
    # devices, cuda:0 and cpu!", with lazyfuse's device names)
    with pytest.raises(RuntimeError, match="^Expected all tensors to be on the same device, but found at least two "
                                           "devices, cpu and interpreter!") as raised:
        lf.ones(2) + lf.ones(2, device="interpreter")
    assert isinstance(raised.value, lf.DeviceError)


# refusals that need the data (raised at the drain that reads them: ``.numpy()`` here)
_BAD = [0, 9]
DATA_MISTAKES = {
    "gather": lambda m: m.ones(6).gather(0, m.tensor(_BAD)),
    "gather_dim1": lambda m: m.ones(3, 6).gather(1, m.tensor([[0, 9]])),
    "gather_negative": lambda m: m.ones(3, 6).gather(1, m.tensor([[0, -7]])),
    "tensor_index": lambda m: m.ones(6)[m.tensor(_BAD)],
    "one_hot": lambda m: m.nn.functional.one_hot(m.tensor(_BAD), 6),
    "one_hot_negative": lambda m: m.nn.functional.one_hot(m.tensor([0, -1]), 6),
    "cross_entropy_target": lambda m: m.nn.functional.cross_entropy(m.zeros(2, 6), m.tensor(_BAD)),
    "nll_loss_target": lambda m: m.nn.functional.nll_loss(m.zeros(2, 6), m.tensor(_BAD)),
    "index_copy": lambda m: m.zeros(6).index_copy(0, m.tensor(_BAD), m.ones(2)),
    "index_add": lambda m: m.zeros(6).index_add(0, m.tensor(_BAD), m.ones(2)),
    "scatter_add": lambda m: m.zeros(6).scatter_add(0, m.tensor(_BAD), m.ones(2)),
    "index_fill": lambda m: m.zeros(6).index_fill(0, m.tensor(_BAD), 1.0),
}


def _drained(m, name):
    out = DATA_MISTAKES[name](m)
    return out.numpy() if m is lf else out


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
@pytest.mark.parametrize("name", sorted(DATA_MISTAKES))
def test_a_refusal_from_the_data_starts_with_torchs_sentence(name, device):
    theirs = _raised(lambda: _drained(torch, name))
    with lf.device(device):
        ours = _raised(lambda: _drained(lf, name))
    assert isinstance(ours, lf.InvalidIndexError) and isinstance(ours, type(theirs))
    assert str(ours).startswith(str(theirs).splitlines()[0]), (str(ours), str(theirs))
