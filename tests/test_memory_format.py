"""``memory_format=`` of the copies and factories (``clone``, ``.to``, ``.contiguous``, the ``*_like``
factories): the result has torch's strides (``stride()``, ``is_contiguous(memory_format=...)``) and
values, natively and through the torch frontend, for ``preserve_format``, ``contiguous_format``,
``channels_last`` and ``channels_last_3d``; ``.to`` aliases exactly where torch's does (its
``suggest_memory_format``); a channels-last format at another rank is refused as torch refuses it."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import lazyfuse as lf

FORMATS = [torch.preserve_format, torch.contiguous_format, torch.channels_last, torch.channels_last_3d]
CHECKED = [torch.contiguous_format, torch.channels_last, torch.channels_last_3d]   # (is_contiguous's)

# name -> (f(namespace, x, memory_format), whether its values are deterministic)
COPIES = {
    "zeros_like": (lambda m, x, f: m.zeros_like(x, memory_format=f), True),
    "ones_like": (lambda m, x, f: m.ones_like(x, memory_format=f), True),
    "full_like": (lambda m, x, f: m.full_like(x, 7, memory_format=f), True),
    "empty_like": (lambda m, x, f: m.empty_like(x, memory_format=f), False),
    "rand_like": (lambda m, x, f: m.rand_like(x, memory_format=f), False),
    "randn_like": (lambda m, x, f: m.randn_like(x, memory_format=f), False),
    "clone": (lambda m, x, f: x.clone(memory_format=f), True),
    "to": (lambda m, x, f: x.to(memory_format=f), True),
    "to(float64)": (lambda m, x, f: x.to(torch.float64, memory_format=f), True),
    "contiguous": (lambda m, x, f: x.contiguous(memory_format=f), True),
}


@st.composite
def sources(draw):
    """A torch tensor of rank 2 to 5 (the channels-last formats' ranks and others), some dims of
    size 0 or 1, read through a permutation and maybe a step slice of a row-major base: the base,
    and the function making that view of it (or of a lazyfuse copy of it)."""
    shape = tuple(draw(st.lists(st.sampled_from([1, 2, 3, 4]), min_size=2, max_size=5)))
    if draw(st.integers(0, 7)) == 0:
        shape = shape[:-1] + (0,)
    perm = draw(st.permutations(range(len(shape))))
    sliced = draw(st.booleans()) and shape[perm[-1]] > 1
    base = torch.randn(shape, generator=torch.Generator().manual_seed(draw(st.integers(0, 2 ** 16))))

    def view(t):
        t = t.permute(perm)
        return t[..., ::2] if sliced else t
    return base, view


def _check(got, want, what, values):
    assert tuple(got.shape) == tuple(want.shape), what
    assert got.stride() == want.stride(), what
    for f in CHECKED:
        assert got.is_contiguous(memory_format=f) == want.is_contiguous(memory_format=f), (what, f)
    if values:
        torch.testing.assert_close(got.torch() if isinstance(got, lf.Tensor) else lf.eager(got), want, msg=what)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), source=sources(), name=st.sampled_from(sorted(COPIES)), frontend=st.booleans())
def test_copies_and_factories_take_torchs_strides_in_every_memory_format(data, source, name, frontend):
    base, view = source
    # (contiguous refuses preserve_format: test_tensor_protocols)
    fmt = data.draw(st.sampled_from(FORMATS[1:] if name == "contiguous" else FORMATS))
    fn, values = COPIES[name]
    want_x = view(base)
    x = view(lf.lazy(base) if frontend else lf.tensor(base))
    what = f"{name}(memory_format={fmt}) of a {tuple(want_x.shape)} view with strides {want_x.stride()}"
    try:
        want = fn(torch, want_x, fmt)
    except RuntimeError as e:
        refused = (lf.LazyfuseError, RuntimeError) if frontend else lf.LazyfuseError
        with pytest.raises(refused, match="required rank"):
            fn(torch if frontend else lf, x, fmt)
        assert "required rank" in str(e), what
        return
    got = fn(torch if frontend else lf, x, fmt)
    _check(got, want, what, values)
    if name in ("to", "contiguous"):   # itself where torch's is itself (then a later write reaches the source)
        assert (got is x) == (want is want_x), what


@pytest.mark.parametrize("frontend", [False, True])
@pytest.mark.parametrize("shape,fmt", [((2, 3, 4, 5), torch.channels_last), ((2, 1, 4, 5), torch.channels_last),
                                       ((2, 3, 1, 1), torch.channels_last), ((2, 0, 4, 5), torch.channels_last),
                                       ((2, 1, 1, 1), torch.channels_last), ((2, 3, 2, 4, 5), torch.channels_last_3d)])
def test_to_aliases_where_torchs_does_and_copies_elsewhere(shape, fmt, frontend):
    # ambiguous strides (a size-1 channel dim, an N111 tensor) suggest contiguous_format to torch:
    # .to(memory_format=channels_last) copies such a tensor even where it is channels-last contiguous
    base = torch.randn(shape)
    lazy = lf.lazy(base) if frontend else lf.tensor(base)
    for src, x in ((base, lazy), (base.contiguous(memory_format=fmt), lazy.contiguous(memory_format=fmt))):
        for f in (fmt, torch.contiguous_format):
            want = src.to(memory_format=f)
            got = x.to(memory_format=f)
            what = f".to(memory_format={f}) of {shape} with strides {src.stride()}"
            _check(got, want, what, True)
            assert (got is x) == (want is src), what
        # an empty_like in the format, filled: the values land where torch's do
        want = torch.empty_like(src, memory_format=fmt).copy_(src) * 2
        got = (torch if frontend else lf).empty_like(x, memory_format=fmt).copy_(x) * 2
        _check(got, want, f"empty_like(memory_format={fmt}).copy_(x) * 2 of {shape}", True)


@pytest.mark.parametrize("fmt,rank,shape", [
    (torch.channels_last, 4, (3, 4)), (torch.channels_last, 4, (2, 3, 4, 5, 6)),
    (torch.channels_last_3d, 5, (2, 3, 4, 5)), (torch.channels_last_3d, 5, (3,))])
def test_a_channels_last_format_at_another_rank_is_refused(fmt, rank, shape):
    x = lf.randn(*shape)
    for call in (lambda: lf.zeros_like(x, memory_format=fmt), lambda: lf.empty_like(x, memory_format=fmt),
                 lambda: lf.rand_like(x, memory_format=fmt), lambda: x.clone(memory_format=fmt),
                 lambda: x.to(memory_format=fmt), lambda: x.to(lf.float64, memory_format=fmt),
                 lambda: x.contiguous(memory_format=fmt)):
        with pytest.raises(lf.ShapeError, match=f"required rank {rank} tensor to use"):
            call()
    assert not x.is_contiguous(memory_format=fmt)   # (a question, not a refusal: False, as torch's)
    torch.testing.assert_close((x + 1).torch(), x.torch() + 1)   # (the engine still works)
