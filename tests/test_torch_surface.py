"""torch's names, signatures and keyword arguments on lazyfuse, held to torch eager; the native
ones fuse (kernel counts), the rest run as externs or are refused with a clear error."""
import pytest
import torch
import torch.nn.functional as TF

import lazyfuse as lf
import lazyfuse.nn.functional as F
from lazyfuse.surface import classify

CPU = lf.device("cpu")
G = torch.Generator().manual_seed(0)
XT = torch.randn(4, 5, generator=G)
YT = torch.randn(4, 5, generator=G)
PT = torch.softmax(torch.randn(4, 5, generator=G), -1)
TT = torch.tensor([3, -100, 0, 4])
WT = torch.rand(5, generator=G)


def same(got, want):
    got = got.torch() if isinstance(got, lf.Tensor) else got
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5, equal_nan=True)


L = lf.tensor
CASES = {
    # name: (lazyfuse call, torch call), each on (x, y) as lazyfuse / torch tensors
    "masked_fill": lambda m, x, y: x.masked_fill(x > 0, -1.5),
    "masked_fill_tensor_value": lambda m, x, y: x.masked_fill(y > 0, (y * 0 + 2)[0, 0]),
    "tril": lambda m, x, y: x.tril(), "triu_1": lambda m, x, y: x.triu(1), "tril_neg": lambda m, x, y: m.tril(x, -1),
    "tril_bool": lambda m, x, y: (x > 0).tril(),
    "where_scalars": lambda m, x, y: m.where(x > 0, x, 0.0),
    "logsumexp": lambda m, x, y: x.logsumexp(1), "any": lambda m, x, y: (x > 1).any(1), "all": lambda m, x, y: x.all(),
    "var_positional_unbiased": lambda m, x, y: x.var(1, False), "std_unbiased": lambda m, x, y: x.std(True),
    "sum_axis": lambda m, x, y: x.sum(axis=1), "mean_dtype": lambda m, x, y: x.mean(dim=0, dtype=m.float64),
    "t": lambda m, x, y: x.t(), "new_zeros": lambda m, x, y: x.new_zeros(2, 3), "new_full": lambda m, x, y: x.new_full((2,), 7),
    "type_as": lambda m, x, y: (x > 0).type_as(y), "to_device": lambda m, x, y: x.to("cpu"),
    "to_device_dtype": lambda m, x, y: x.to("cpu", m.float64), "to_other": lambda m, x, y: x.to((y > 0).long()),
    "float_memory_format": lambda m, x, y: x.long().float(memory_format=torch.contiguous_format),
    "zeros_like_device": lambda m, x, y: m.zeros_like(x, device="cpu"),
    "roll": lambda m, x, y: x.roll(2, 1), "roll_flat": lambda m, x, y: x.roll(3), "repeat": lambda m, x, y: x.repeat(2, 1, 3),
    "tile": lambda m, x, y: x.tile((2,)), "diagonal": lambda m, x, y: x.diagonal(1), "diagonal_neg": lambda m, x, y: x.diagonal(-2),
    "movedim": lambda m, x, y: x.movedim(0, 1), "unflatten": lambda m, x, y: x.unflatten(1, (5, 1)),
    "narrow": lambda m, x, y: x.narrow(1, 1, 3), "select": lambda m, x, y: x.select(1, -1),
    "sign": lambda m, x, y: x.sign(), "log2": lambda m, x, y: x.abs().log2(), "lerp": lambda m, x, y: x.lerp(y, 0.3),
    "addcmul": lambda m, x, y: x.addcmul(y, y, value=2), "isfinite": lambda m, x, y: (x / (y > 0)).isfinite(),
    "nan_to_num": lambda m, x, y: (x / 0).nan_to_num(), "square": lambda m, x, y: x.square(),
    "add_alpha": lambda m, x, y: x.add(y, alpha=2), "div_floor": lambda m, x, y: x.div(y, rounding_mode="floor"),
    # externs (no native lowering), through the same names
    "cumsum": lambda m, x, y: x.cumsum(1), "flip": lambda m, x, y: x.flip(0), "sort_values": lambda m, x, y: x.sort(1).values,
    "topk_indices": lambda m, x, y: x.topk(2).indices, "prod": lambda m, x, y: x.prod(1),
    "einsum": lambda m, x, y: m.einsum("ij,kj->ik", x, y), "gather": lambda m, x, y: x.gather(1, (y > 0).long()),
    "cumsum_": lambda m, x, y: x.clone().cumsum_(0),
    # native einsum (views + batched matmul) and pad
    "einsum_chain": lambda m, x, y: m.einsum("ij,kj,kl->il", x, y, y[:, :3]),
    "einsum_implicit_outer": lambda m, x, y: m.einsum("i,j", x[0], y[1]),
    "einsum_diagonal_extern": lambda m, x, y: m.einsum("ii->i", x[:, :4]),
    "pad_constant": lambda m, x, y: m.nn.functional.pad(x, (1, 2, -1, 1), value=0.5),
    "pad_reflect": lambda m, x, y: m.nn.functional.pad(x[None], (2, 1), mode="reflect"),
}
FUNCTIONAL = {
    "leaky_relu": {}, "elu": {}, "selu": {}, "celu": {"alpha": 0.5}, "softplus": {"beta": 2.0}, "logsigmoid": {},
    "hardtanh": {}, "relu6": {}, "hardsigmoid": {}, "hardswish": {}, "mish": {}, "softsign": {}, "tanhshrink": {},
    "normalize": {"dim": 0}, "softmin": {"dim": 1},
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_torch_names_match_torch(name):
    fn = CASES[name]
    same(fn(lf, L(XT), L(YT)), fn(torch, XT.clone(), YT.clone()))


@pytest.mark.parametrize("name", sorted(FUNCTIONAL))
def test_activations_match_torch(name):
    same(getattr(F, name)(L(XT), **FUNCTIONAL[name]), getattr(TF, name)(XT, **FUNCTIONAL[name]))


def test_split_chunk_unbind_are_views_matching_torch():
    x = L(XT)
    for got, want in ((x.split(2, 1), XT.split(2, 1)), (x.split([1, 4], 1), XT.split([1, 4], 1)),
                      (x.chunk(3, 1), XT.chunk(3, 1)), (x.unbind(0), XT.unbind(0)),
                      (x.tensor_split(3, 1), XT.tensor_split(3, 1))):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            same(g, w)
    piece = x.split(2, 1)[0]
    x.add_(1.0)   # a view sees a later in-place write to its base (docs/semantics.md, Views and in-place writes)
    same(piece, XT[:, :2] + 1)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_with_ignore_index_label_smoothing_and_weights(reduction, label_smoothing, weighted):
    w = WT if weighted else None
    got = F.cross_entropy(L(XT), L(TT), weight=None if w is None else L(w), reduction=reduction,
                          label_smoothing=label_smoothing)
    same(got, TF.cross_entropy(XT, TT, weight=w, reduction=reduction, label_smoothing=label_smoothing))


def test_cross_entropy_probability_targets_and_gradient():
    same(F.cross_entropy(L(XT), L(PT), label_smoothing=0.2), TF.cross_entropy(XT, PT, label_smoothing=0.2))
    x64 = XT.double()
    x = L(x64).requires_grad_()
    F.cross_entropy(x, L(TT), label_smoothing=0.1).backward()
    xr = x64.clone().requires_grad_()
    TF.cross_entropy(xr, TT, label_smoothing=0.1).backward()
    torch.testing.assert_close(x.grad.torch(), xr.grad)


@pytest.mark.parametrize("name, args", [
    ("mse_loss", ("x", "y")), ("l1_loss", ("x", "y")), ("smooth_l1_loss", ("x", "y")), ("huber_loss", ("x", "y")),
    ("binary_cross_entropy", ("p", "b")), ("binary_cross_entropy_with_logits", ("x", "b")),
    ("kl_div", ("logp", "p")), ("nll_loss", ("logp", "t")),
])
def test_losses_match_torch(name, args):
    values = {"x": XT, "y": YT, "p": PT, "b": (YT > 0).float(), "logp": XT.log_softmax(1), "t": TT}
    kwargs = {"reduction": "batchmean"} if name == "kl_div" else {}
    same(getattr(F, name)(*(L(values[a]) for a in args), **kwargs), getattr(TF, name)(*(values[a] for a in args), **kwargs))


def test_one_hot_and_embedding_padding_idx_gradient():
    same(F.one_hot(L(TT.clamp(0)), 6), TF.one_hot(TT.clamp(0), 6))
    wt = torch.randn(6, 3, generator=G, dtype=torch.float64)
    ids = torch.tensor([[0, 2, 2], [1, 0, 5]])
    w = L(wt).requires_grad_()
    out = F.embedding(L(ids), w, padding_idx=2)
    (out * out).sum().backward()
    wr = wt.clone().requires_grad_()
    ref = TF.embedding(ids, wr, padding_idx=2)
    (ref * ref).sum().backward()
    same(out.detach(), ref.detach())
    same(w.grad, wr.grad)


@pytest.mark.parametrize("batch, kernels", [((), 1), ((2,), 2)])
def test_masked_fill_over_a_tril_mask_and_softmax_fuse(batch, kernels):
    """One row-wise kernel; read broadcast over a batch, the mask is computed once in a kernel of its own."""
    scores = L(torch.randn(*batch, 6, 6, generator=G))
    lf.sync(CPU)
    mask = lf.ones(6, 6).tril() == 0
    att = F.softmax(scores.masked_fill(mask, float("-inf")), -1)
    del mask   # (a live mask would be a result of its own)
    lf.reset_stats(CPU)
    got = att.torch()
    assert lf.stats(CPU).kernels_launched == kernels and lf.stats(CPU).extern_launches == 0
    ref = torch.softmax(scores.torch().masked_fill(torch.ones(6, 6).tril() == 0, float("-inf")), -1)
    same(got, ref)


def test_native_einsum_is_matmuls_not_an_extern():
    x, y = L(XT), L(YT)
    lf.sync(CPU)
    lf.reset_stats(CPU)
    got = lf.einsum("ij,kj->ik", x, y).torch()
    assert lf.stats(CPU).extern_launches == 0
    same(got, torch.einsum("ij,kj->ik", XT, YT))


def test_classify_native_extern_refused():
    assert classify("masked_fill") == "native" and classify("exp") == "native"
    assert classify("sort") == "extern" and classify("to_sparse") == "refused"
    assert classify("cross_entropy", "functional") == "native" and classify("grid_sample", "functional") == "extern"
    assert classify("tril", "torch") == "native"


def test_refused_ops_name_the_op_and_why():
    x = L(XT)
    with pytest.raises(lf.UnsupportedOpError, match="Tensor.to_sparse.*sparse"):
        x.to_sparse()
    with pytest.raises(lf.UnsupportedOpError, match="lf.view_as_complex.*complex"):
        lf.view_as_complex(x)
    with pytest.raises(AttributeError):
        x.not_a_torch_method()
    assert not hasattr(x, "not_a_torch_method")
    with pytest.raises(lf.UnsupportedOpError, match="max_norm"):
        F.embedding(L(TT.clamp(0)), x, max_norm=1.0)


EDGES = torch.tensor([-2.5, -1.5, -0.5, 0.49999997, 0.5, 1.5, 2.5, 3.7, -3.7, float("nan"), float("inf"), 1e8 + 1, -0.0])


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
def test_native_rounding_and_erf_match_torch_and_fuse(device, dtype):
    dev = lf.device(device)
    xt = EDGES.to(dtype)
    x = lf.tensor(xt, device=dev)
    outs = {name: getattr(x * 1, name)() for name in ("floor", "ceil", "trunc", "round", "frac", "erf")}
    lf.sync(dev)
    lf.reset_stats(dev)
    fused = (x.floor() + x.round() * x.erf()).torch()
    assert lf.stats(dev).kernels_launched == 1 and lf.stats(dev).extern_launches == 0
    for name, got in outs.items():
        same(got, getattr(xt, name)())
    same(fused, xt.floor() + xt.round() * xt.erf())


def test_rounding_of_integers_and_erf_gradient():
    assert lf.tensor([1, -2]).floor().tolist() == [1, -2] and lf.tensor([1]).erf().dtype is lf.float32
    xt = torch.randn(6, dtype=torch.float64, generator=G)
    x = L(xt).requires_grad_()
    (x.erf() * x.floor()).sum().backward()
    xr = xt.clone().requires_grad_()
    (xr.erf() * xr.floor()).sum().backward()
    torch.testing.assert_close(x.grad.torch(), xr.grad)
