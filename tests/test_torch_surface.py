"""torch's names, signatures and keyword arguments on lazyfuse, held to torch eager; the native
ones fuse (kernel counts), the rest run as externs or are refused with a clear error."""
import warnings

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


def test_a_torch_dtype_lazyfuse_lacks_is_named_as_a_dtype():
    # tinygrad's test_arange built int8 ranges before lazyfuse had int8: "lf.int8 (nor has torch)"
    # was wrong, torch has one; uint16 lazyfuse still lacks
    assert hasattr(torch, "uint16") and not hasattr(lf, "uint16") and hasattr(lf, "int8")
    with pytest.raises(AttributeError, match=r"lf.uint16: torch's torch.uint16 is a dtype lazyfuse cannot hold; use one "
                                             r"of lf.bool, lf.uint8, lf.int8, lf.int16, lf.int32"):
        lf.arange(128, dtype=lf.uint16)
    with pytest.raises(AttributeError, match=r"nor has torch"):
        lf.not_a_torch_name


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


def _in_place_cases():
    """(namespace label, name, extra args) for every torch in-place function that takes a float
    tensor first: ``lf.<name>`` / ``lf.nn.functional.<name>`` must write that tensor and return it."""
    extra = {"clamp_": (-0.2, 0.3), "clamp_max_": (0.3,), "clamp_min_": (0.3,), "clip_": (0.1, 0.5), "fill_": (2.5,),
             "threshold_": (0.5, -1.0), "ldexp_": (torch.tensor([2.0]),), "xlogy_": (torch.tensor([2.0]),),
             "index_put_": ((torch.tensor([0, 1]),), torch.tensor(9.0)), "rrelu_": (0.1, 0.1),
             **{n: (0.0, True) for n in ("dropout_", "alpha_dropout_", "feature_alpha_dropout_", "feature_dropout_")}}
    skip = {"addmv_", "gcd_", "lcm_", "embedding_renorm_", "resize_as_", "resize_as_sparse_", "as_strided_",
            "detach_"}   # not of a float tensor alone, storage surgery, or metadata (tested below)
    for label, ns in (("lf", torch), ("F", TF)):
        for name in sorted(n for n in dir(ns) if n.endswith("_") and not n.startswith("_")):
            if name not in skip and callable(getattr(ns, name)):
                yield label, name, extra.get(name, ())


@pytest.mark.parametrize("label, name, extra", list(_in_place_cases()), ids=lambda v: v if isinstance(v, str) else "")
def test_in_place_functions_write_their_input_and_return_it(label, name, extra):
    # lf.relu_(x) used to run torch.relu_ as an extern: x kept its old value (a silent wrong value)
    base = torch.rand(2, 3, generator=G) * 0.8 + 0.1
    want = base.clone()
    getattr(torch if label == "lf" else TF, name)(want, *extra)
    x = lf.tensor(base)
    lf_ns = lf if label == "lf" else F
    args = tuple(tuple(L(a) for a in e) if isinstance(e, tuple) else L(e) if isinstance(e, torch.Tensor) else e
                 for e in extra)
    assert getattr(lf_ns, name)(x, *args) is x
    same(x, want)


@pytest.mark.parametrize("name", ["reshape", "permute", "transpose", "squeeze", "unsqueeze", "flatten", "detach",
                                  "narrow", "select", "movedim", "diagonal", "t"])
def test_view_functions_alias_their_input_as_torch(name):
    args = {"reshape": ((3, 2),), "permute": ((1, 0),), "transpose": (0, 1), "squeeze": (), "unsqueeze": (0,),
            "flatten": (), "detach": (), "narrow": (1, 0, 2), "select": (0, 1), "movedim": (0, 1), "diagonal": (),
            "t": ()}[name]
    xt, x = torch.zeros(2, 3), lf.zeros(2, 3)
    getattr(torch, name)(xt, *args).add_(1)
    before = lf.stats().extern_launches
    getattr(lf, name)(x, *args).add_(1)
    same(x, xt)
    assert lf.stats().extern_launches == before   # lazyfuse's own view, not torch's function as an extern


def test_every_native_method_is_also_native_as_a_function():
    # lf.<name>(x) for a method tensor.py defines must be that method, not torch's function as an extern
    import lazyfuse
    missing = [n for n in vars(lf.Tensor) if not n.startswith("_") and callable(getattr(lf.Tensor, n))
               and callable(getattr(torch, n, None)) and not n.endswith("_") and n not in vars(lazyfuse)]
    assert missing == []


@pytest.mark.parametrize("name, args", [("t_", ()), ("transpose_", (0, 1)), ("swapdims_", (1, 0)),
                                        ("swapaxes_", (0, 1)), ("unsqueeze_", (1,)), ("squeeze_", ()),
                                        ("as_strided_", ((3,), (2,), 1))])
def test_view_methods_in_place_change_the_tensor_itself(name, args):
    # x.t_() used to run t() as an extern and copy_ the (3, 2) result into the (2, 3) x: ShapeError
    base = torch.arange(6.0).reshape(2, 3)
    xt, x = base.clone(), lf.tensor(base)
    if name == "squeeze_":
        xt, x = xt.unsqueeze(0), x.unsqueeze(0)
    assert getattr(x, name)(*args) is x
    getattr(xt, name)(*args)
    assert x.shape == tuple(xt.shape) and x.stride() == xt.stride()
    same(x, xt)
    x.mul_(10)   # still a view of the same storage: the base sees the write, as in torch
    xt.mul_(10)
    same(x, xt)


def test_view_in_place_on_autograd_tensors_as_torch():
    leaf = lf.rand(2, 3, requires_grad=True)
    with pytest.raises(lf.AutogradError, match="in-place"):
        leaf.t_()
    w = torch.arange(2.0)
    y = leaf * 2
    y.t_()
    (y * L(w)).sum().backward()
    lt = leaf.torch().clone().requires_grad_()
    yt = lt * 2
    yt.t_()
    (yt * w).sum().backward()
    same(leaf.grad, lt.grad)


def test_conjugate_transposes_of_real_tensors():
    xt = torch.randn(2, 3, 4, generator=G)
    x = L(xt)
    same(x.mH, xt.mH)
    same(x[0].H, xt[0].H)
    with pytest.raises(lf.ShapeError, match="2-D"):
        x.H


def _native_in_place_methods():
    """torch's in-place Tensor methods whose out-of-place form lazyfuse lowers itself, each with
    the first argument list torch accepts on a (2, 3) float tensor."""
    yt = torch.rand(2, 3, generator=G) + 0.5
    candidates = [(), (yt,), (0.5,), (1,), (yt, yt), (0.2, 0.6), (1, torch.tensor([0, 1, 1]), yt)]
    for name in sorted(n for n in dir(torch.Tensor) if n.endswith("_") and not n.startswith("_")):
        if name in ("detach_", "requires_grad_", "share_memory_") or classify(name, "Tensor") != "native" \
                or name in vars(lf.Tensor) or classify(name[:-1], "Tensor") != "native":
            continue   # only the ones surface._in_place writes back
        for args in candidates:
            try:
                with warnings.catch_warnings():   # addbmm_(beta, b1, b2): a deprecated overload
                    warnings.simplefilter("ignore")
                    getattr(torch.rand(2, 3) + 0.5, name)(*args)
            except Exception:  # noqa: BLE001 (torch refuses this argument list: try the next)
                continue
            yield name, args
            break


@pytest.mark.parametrize("name, args", list(_native_in_place_methods()), ids=lambda v: v if isinstance(v, str) else "")
def test_in_place_methods_of_native_ops_fuse_and_match_torch(name, args):
    # x.exp_() used to run torch's exp as an extern (a fusion boundary) and copy the result back
    base = torch.rand(2, 3, generator=G) + 0.5
    xt, x = base.clone(), lf.tensor(base)
    getattr(xt, name)(*args)
    before = lf.stats()
    assert getattr(x, name)(*(L(a) if isinstance(a, torch.Tensor) else a for a in args)) is x
    (x * 2).sum()   # a neighbour op: the in-place write fuses with it
    same(x, xt)
    after = lf.stats()
    assert after.extern_launches == before.extern_launches


def test_in_place_method_refuses_a_result_its_dtype_cannot_hold():
    x = lf.arange(4)
    with pytest.raises(lf.DTypeError, match="exp_"):
        x.exp_()
    assert x.tolist() == [0, 1, 2, 3]   # unchanged, and the engine still works


def test_detach_in_place_makes_a_leaf():
    x = lf.rand(3, requires_grad=True)
    y = x * 2
    assert y.detach_() is y and not y.requires_grad and y.is_leaf
    same(y, x.torch().detach() * 2)


@pytest.mark.parametrize("name, args", [("clamp_", (-0.5, 0.5)), ("sigmoid_", ()), ("pow_", (3,))])
def test_in_place_method_on_a_non_leaf_back_propagates_as_torch(name, args):
    # the native op's gradient saves its input; the write back must not make that input newer
    xt = torch.randn(3, 4, generator=G, requires_grad=True)
    x = L(xt.detach()).requires_grad_()
    getattr(xt * 1, name)(*args).sum().backward()
    getattr(x * 1, name)(*args).sum().backward()
    same(x.grad, xt.grad)


@pytest.mark.parametrize("name", ["relu", "silu"])
def test_functional_inplace_on_a_non_leaf_back_propagates_as_torch(name):
    # F.relu(y, inplace=True) wrote y.copy_(y.relu()): relu's gradient saw the written y (AutogradError)
    xt = torch.randn(3, 4, generator=G, requires_grad=True)
    x = L(xt.detach()).requires_grad_()
    y = x * 1
    assert getattr(F, name)(y, inplace=True) is y
    y.sum().backward()
    getattr(TF, name)(xt * 1, inplace=True).sum().backward()
    same(x.grad, xt.grad)


AXIS_CASES = {
    # torch's argument parser takes numpy's ``axis`` for ``dim`` on every op it binds
    "max": lambda m, x: x.max(axis=1).values, "min_indices": lambda m, x: x.min(axis=0).indices,
    "max_function": lambda m, x: m.max(x, axis=1).values, "argmax": lambda m, x: x.argmax(axis=1),
    "argmin_function": lambda m, x: m.argmin(x, axis=0), "softmax": lambda m, x: x.softmax(axis=0),
    "log_softmax": lambda m, x: x.log_softmax(axis=1), "std_mean": lambda m, x: m.std_mean(x, axis=1)[0],
    "var_mean": lambda m, x: m.var_mean(x, axis=0, keepdim=True)[1], "cat": lambda m, x: m.cat([x, x], axis=1),
    "stack": lambda m, x: m.stack([x, x], axis=1), "cumsum": lambda m, x: x.cumsum(axis=1),
    "logsumexp": lambda m, x: m.logsumexp(x, axis=0), "unsqueeze": lambda m, x: x.unsqueeze(axis=1),
    "squeeze": lambda m, x: x[:1].squeeze(axis=0), "narrow": lambda m, x: x.narrow(axis=1, start=1, length=2),
    "index_select": lambda m, x: x.index_select(axis=1, index=m.tensor([2, 0])),
    "gather": lambda m, x: x.gather(axis=1, index=m.tensor([[1], [0], [4], [2]])),
}


@pytest.mark.parametrize("name", sorted(AXIS_CASES))
def test_axis_is_torchs_alias_of_dim(name):
    fn = AXIS_CASES[name]
    same(fn(lf, L(XT)), fn(torch, XT.clone()))


def test_axis_and_dim_together_raise_a_type_error():
    with pytest.raises(TypeError):
        XT.max(dim=1, axis=1)
    with pytest.raises(TypeError, match="'dim' and its alias 'axis'"):
        L(XT).max(dim=1, axis=1)


def test_an_argument_torch_does_not_implement_is_a_not_implemented_error():
    # torch raises NotImplementedError for an unknown pad mode; lazyfuse raised a ShapeError
    for pad in (TF.pad, F.pad):
        x = XT if pad is TF.pad else L(XT)
        with pytest.raises(NotImplementedError, match="Unrecognised padding mode typo"):
            pad(x[None], (1, 1), mode="typo")
    with pytest.raises(lf.UnsupportedOpError, match="pad"):
        F.pad(L(XT)[None], (1, 1), mode="typo")


STATELESS_MODULES = [
    # (torch.nn module, its arguments, inputs as (x, target) -> the module's inputs)
    ("Softmax", {"dim": 1}, lambda m, x, t: (x,)), ("LogSoftmax", {"dim": 0}, lambda m, x, t: (x,)),
    ("Softmin", {"dim": -1}, lambda m, x, t: (x,)), ("ReLU", {}, lambda m, x, t: (x,)),
    ("LeakyReLU", {"negative_slope": 0.2}, lambda m, x, t: (x,)), ("GELU", {"approximate": "tanh"}, lambda m, x, t: (x,)),
    ("CrossEntropyLoss", {"ignore_index": 0, "label_smoothing": 0.2}, lambda m, x, t: (x, t)),
    ("CrossEntropyLoss", {"weight": WT, "reduction": "sum"}, lambda m, x, t: (x, t)),
    ("NLLLoss", {"reduction": "none"}, lambda m, x, t: (x.log_softmax(1), t)),
    ("MSELoss", {"reduction": "sum"}, lambda m, x, t: (x, x * 0.5)),
]


@pytest.mark.parametrize("name,kwargs,inputs", STATELESS_MODULES, ids=[c[0] + str(i) for i, c in enumerate(STATELESS_MODULES)])
def test_stateless_nn_modules_run_their_functional_natively_as_torch(name, kwargs, inputs):
    target = torch.tensor([3, 0, 1, 4])
    lkw = {k: lf.tensor(v) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
    x = L(XT).requires_grad_()
    xt = XT.clone().requires_grad_()
    with lf.testing.count_launches() as launches:
        got = getattr(lf.nn, name)(**lkw)(*inputs(lf, x, L(target)))
        got.sum().backward()
        x.grad.numpy()
    want = getattr(torch.nn, name)(**kwargs)(*inputs(torch, xt, target))
    want.sum().backward()
    same(got, want)
    same(x.grad, xt.grad)
    assert launches.extern_launches == 0
    assert repr(getattr(lf.nn, name)(**kwargs)) == repr(getattr(torch.nn, name)(**kwargs))


def test_nn_modules_with_parameters_point_to_lazy():
    with pytest.raises(AttributeError, match=r"lf.nn.Linear: build torch's module and lf.lazy\(module\) it"):
        lf.nn.Linear
    with pytest.raises(AttributeError, match="lazyfuse has no lf.nn.NoSuchThing$"):
        lf.nn.NoSuchThing


def test_a_torch_name_that_is_no_function_says_what_torch_has():
    # lf.uint8 said "nor has torch", which has it (a dtype lazyfuse lacked; uint32 it still lacks)
    with pytest.raises(AttributeError, match="lf.uint32: torch's torch.uint32 is a dtype lazyfuse cannot hold"):
        lf.uint32
    with pytest.raises(AttributeError, match=r"lf.autocast: torch\.autocast is a class"):
        lf.autocast
    with pytest.raises(AttributeError, match=r"lf.no_such_name \(nor has torch\)"):
        lf.no_such_name
