"""torch's sub-namespaces and small top-level names on lazyfuse: ``lf.linalg``, ``lf.special``,
``lf.fft``, ``lf.cuda``, ``lf.Generator`` (and ``generator=``), the grad-mode switches,
``lf.finfo``/``lf.iinfo``, and ``div_(rounding_mode=)`` — each against torch eager."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import lazyfuse as lf


def _torch(t):
    return torch.from_numpy(np.asarray(t.numpy()))


def _close(lazy, ref, **kw):
    kw.setdefault("equal_nan", True)
    torch.testing.assert_close(_torch(lazy).to(ref.dtype), ref.detach(), **kw)


# --- lf.linalg -------------------------------------------------------------------------------

ORDS = (2, 1, 3, 0.5, 1.5, 0, math.inf, -math.inf)
DIMS = (None, 0, 1, (0, 1), (-1,))


@pytest.mark.parametrize("ord", ORDS)
@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("keepdim", (False, True))
def test_vector_norm_values_and_gradients_are_torchs(ord, dim, keepdim):
    # a zero row: torch's gradient there is 0 (the root's derivative is infinite at 0)
    data = np.array([[0.0, 0.0, 0.0], [1.0, -2.0, 3.0], [0.5, 0.0, -4.0]])
    x = torch.tensor(data, requires_grad=True)
    ref = torch.linalg.vector_norm(x, ord, dim, keepdim)
    lx = lf.tensor(data, requires_grad=True)
    out = lf.linalg.vector_norm(lx, ord, dim, keepdim)
    _close(out, ref)
    if ord != 0:
        ref.sum().backward()
        out.sum().backward()
        _close(lx.grad, x.grad)


def test_vector_norm_is_native_and_fuses_with_its_producer():
    x = lf.tensor(np.random.default_rng(0).standard_normal((64, 32)).astype(np.float32))
    lf.sync()
    before = lf.stats()
    y = lf.linalg.vector_norm(x * 2 + 1, dim=1)
    y.numpy()
    after = lf.stats()
    assert after.extern_launches == before.extern_launches
    assert after.kernels_launched - before.kernels_launched == 1
    _close(y, torch.linalg.vector_norm(x.torch() * 2 + 1, dim=1))


def test_vector_norm_of_float16_does_not_overflow_and_rounds_once():
    data = np.full(3, 300.0, dtype=np.float16)
    out = lf.linalg.vector_norm(lf.tensor(data))
    ref = torch.linalg.vector_norm(torch.tensor(data))
    assert out.dtype is lf.float16
    _close(out, ref)


def test_vector_norm_refuses_integers_and_empty_inf_norms_as_torch():
    with pytest.raises(lf.DTypeError, match="Expected a floating point or complex tensor as input"):
        lf.linalg.vector_norm(lf.arange(4))
    with pytest.raises(RuntimeError):
        torch.linalg.vector_norm(torch.zeros(0), math.inf)
    with pytest.raises(lf.ShapeError, match="does not have an identity"):
        lf.linalg.vector_norm(lf.zeros(0), math.inf)
    with pytest.raises(RuntimeError, match="Expected a floating point"):
        torch.linalg.vector_norm(torch.arange(4), dtype=torch.float64)
    with pytest.raises(lf.DTypeError, match="Expected a floating point"):
        lf.linalg.vector_norm(lf.arange(4), dtype=lf.float64)
    # dtype= computes in that dtype, as torch's
    out = lf.linalg.vector_norm(lf.arange(4.0), dtype=lf.float64)
    assert out.dtype is lf.float64
    _close(out, torch.linalg.vector_norm(torch.arange(4.0), dtype=torch.float64))


@pytest.mark.parametrize("args", [dict(), dict(ord="fro"), dict(ord="nuc"), dict(ord=2), dict(ord=-1),
                                  dict(ord=math.inf), dict(dim=1), dict(ord=1, dim=0), dict(dim=(0, 1)),
                                  dict(ord="fro", dim=(1, 0), keepdim=True)])
def test_norm_and_matrix_norm_are_torchs(args):
    data = np.arange(12.0).reshape(3, 4) - 5
    ref = torch.linalg.norm(torch.tensor(data), **args)
    _close(lf.linalg.norm(lf.tensor(data), **args), ref)
    if "dim" not in args or isinstance(args.get("dim"), tuple):
        margs = {k: v for k, v in args.items() if k != "ord" or v is not None}
        margs.setdefault("ord", "fro")
        if margs["ord"] in ("fro", "nuc", 2, -1, math.inf):
            _close(lf.linalg.matrix_norm(lf.tensor(data), **margs), torch.linalg.matrix_norm(torch.tensor(data), **margs))


def test_other_linalg_functions_run_as_torchs_externs():
    a = np.array([[3.0, 1.0], [1.0, 2.0]])
    b = np.array([9.0, 8.0])
    before = lf.stats().extern_launches
    out = lf.linalg.solve(lf.tensor(a), lf.tensor(b))
    _close(out, torch.linalg.solve(torch.tensor(a), torch.tensor(b)))
    assert lf.stats().extern_launches > before
    _close(lf.linalg.inv(lf.tensor(a)), torch.linalg.inv(torch.tensor(a)))
    with pytest.raises(lf.DTypeError, match="complex results are not supported"):
        lf.linalg.eig(lf.tensor(a))
    with pytest.raises(AttributeError, match=r"lf\.linalg\.no_such_fn \(nor has torch\.linalg\)"):
        lf.linalg.no_such_fn


# --- lf.special, lf.fft ----------------------------------------------------------------------

SPECIAL_X = np.array([-6.0, -3.0, -0.5, 0.0, 0.25, 1.0, 5.0, 20.0])


@pytest.mark.parametrize("name", ["expit", "ndtr", "erf", "erfc", "erfinv", "expm1", "log1p", "exp2", "logit",
                                  "gammaln", "psi", "digamma", "i0", "sinc", "round", "erfcx", "log_ndtr", "i0e",
                                  "entr", "bessel_j0"])
def test_special_functions_are_torchs(name):
    x = SPECIAL_X / 21 if name in ("erfinv", "logit") else SPECIAL_X
    ref = getattr(torch.special, name)(torch.tensor(x, dtype=torch.float32))
    _close(getattr(lf.special, name)(lf.tensor(x, dtype=lf.float32)), ref, rtol=2e-6, atol=1e-6)


def test_special_ndtr_keeps_the_lower_tail_and_fuses():
    # against Python's erfc in float64: torch's own float64 ndtr cancels there (0 at -12, 2% off at -8)
    points = [-12.0, -8.0, -1.0, 0.5, 3.0]
    x = lf.tensor(points, dtype=lf.float64)
    lf.sync()
    before = lf.stats()
    out = lf.special.ndtr(x)
    ref = torch.tensor([0.5 * math.erfc(-p / math.sqrt(2)) for p in points], dtype=torch.float64)
    _close(out, ref, rtol=1e-13, atol=0)
    assert lf.stats().extern_launches == before.extern_launches


def test_special_two_argument_functions_and_softmax():
    x, y = np.array([0.0, 1.0, 2.0]), np.array([0.5, 0.0, 3.0])
    _close(lf.special.xlogy(lf.tensor(x), lf.tensor(y)), torch.special.xlogy(torch.tensor(x), torch.tensor(y)))
    _close(lf.special.xlog1py(lf.tensor(x), lf.tensor(y)), torch.special.xlog1py(torch.tensor(x), torch.tensor(y)))
    _close(lf.special.softmax(lf.tensor(x), 0), torch.special.softmax(torch.tensor(x), 0))
    _close(lf.special.logsumexp(lf.tensor(x), 0), torch.special.logsumexp(torch.tensor(x), 0))


def test_fft_real_valued_functions_run_and_complex_results_are_refused():
    _close(lf.fft.fftfreq(6), torch.fft.fftfreq(6))
    _close(lf.fft.fftshift(lf.arange(5.0)), torch.fft.fftshift(torch.arange(5.0)))
    with pytest.raises(lf.DTypeError, match="complex results are not supported"):
        lf.fft.rfft(lf.ones(8))


def test_torch_names_that_are_not_functions_say_what_they_are():
    with pytest.raises(AttributeError, match=r"torch\.autocast is a class"):
        lf.autocast
    with pytest.raises(AttributeError, match=r"nor has torch\)"):
        lf.no_such_function_anywhere


# --- lf.cuda --------------------------------------------------------------------------------

def test_cuda_questions_are_torchs():
    assert lf.cuda.is_available() == torch.cuda.is_available()
    assert lf.cuda.device_count() == torch.cuda.device_count()
    if not torch.cuda.is_available():
        assert lf.cuda.is_bf16_supported() is False
        with pytest.raises(AssertionError, match="Torch not compiled with CUDA enabled"):
            lf.cuda.synchronize()


# --- generators -----------------------------------------------------------------------------

def test_a_generator_repeats_its_stream_after_manual_seed_and_leaves_the_default_alone():
    lf.manual_seed(11)
    expected_default = lf.rand(6).numpy()
    lf.manual_seed(11)
    g = lf.Generator().manual_seed(5)
    a = lf.rand(6, generator=g).numpy()
    b = lf.randn(6, generator=g).numpy()
    assert np.array_equal(lf.rand(6).numpy(), expected_default)   # the default stream did not move
    g.manual_seed(5)
    assert np.array_equal(lf.rand(6, generator=g).numpy(), a)
    assert np.array_equal(lf.randn(6, generator=g).numpy(), b)
    assert not np.array_equal(a, expected_default)
    assert g.initial_seed() == 5


@pytest.mark.parametrize("draw", [
    lambda g: lf.multinomial(lf.ones(3, 10), 4, generator=g),
    lambda g: lf.randint(0, 100, (8,), generator=g),
    lambda g: lf.zeros(8).normal_(generator=g),
    lambda g: lf.zeros(8).uniform_(-1, 1, generator=g),
    lambda g: lf.bernoulli(lf.full((8,), 0.5), generator=g),
    lambda g: lf.rand_like(lf.zeros(8), generator=g),
    lambda g: lf.randperm(8, generator=g),
], ids=["multinomial", "randint", "normal_", "uniform_", "bernoulli", "rand_like", "randperm"])
def test_generator_argument_of_random_torch_ops_is_lazyfuses_stream(draw):
    g = lf.Generator()
    first = draw(g.manual_seed(3)).numpy()
    again = draw(g.manual_seed(3)).numpy()
    other = draw(g.manual_seed(4)).numpy()
    assert np.array_equal(first, again)
    assert not np.array_equal(first, other)


def test_generator_state_round_trips_for_a_generator_and_the_default():
    g = lf.Generator().manual_seed(9)
    lf.rand(3, generator=g)
    state = g.get_state()
    assert state.dtype == torch.uint8
    x1 = lf.randn(5, generator=g).numpy()
    g.set_state(state)
    assert np.array_equal(lf.randn(5, generator=g).numpy(), x1)
    saved = lf.get_rng_state()
    y1 = lf.rand(4).numpy()
    lf.set_rng_state(saved)
    assert np.array_equal(lf.rand(4).numpy(), y1)
    with pytest.raises(lf.DTypeError, match="state must be the uint8 tensor"):
        g.set_state(torch.zeros(3))


def test_manual_seed_returns_the_default_generator_and_seed_reseeds_it():
    assert lf.manual_seed(7) is lf.default_generator
    assert lf.initial_seed() == 7
    s = lf.seed()
    assert lf.initial_seed() == s and 0 <= s < 2 ** 63


def test_a_torch_generator_seeds_repeatable_lazyfuse_draws():
    g = torch.Generator().manual_seed(0)
    a, b = lf.rand(4, generator=g).numpy(), lf.rand(4, generator=g).numpy()
    g.manual_seed(0)
    assert np.array_equal(lf.rand(4, generator=g).numpy(), a)
    assert not np.array_equal(a, b)


def test_generator_argument_is_refused_inside_a_capture_and_checked():
    g = lf.Generator().manual_seed(1)
    x = lf.ones(4)
    with pytest.raises(lf.CaptureError, match="advances only lazyfuse's default generator"):
        lf.capture("cpu", lambda: x + lf.rand(4, generator=g))
    graph = lf.capture("cpu", lambda: x + lf.rand(4))   # the engine is fine afterwards
    assert graph.replay().shape == (4,)
    with pytest.raises(lf.DTypeError, match="generator= must be an lf.Generator or a torch.Generator"):
        lf.rand(2, generator=3)


# --- grad modes, dtype info, div_ -------------------------------------------------------------

def test_set_grad_enabled_as_call_context_and_decorator():
    x = lf.ones(2, requires_grad=True)
    with lf.set_grad_enabled(False):
        assert not lf.is_grad_enabled()
        assert not (x * 2).requires_grad
    assert lf.is_grad_enabled()
    lf.set_grad_enabled(False)
    try:
        assert not lf.is_grad_enabled()
    finally:
        lf.set_grad_enabled(True)

    @lf.set_grad_enabled(False)
    def inner():
        return lf.is_grad_enabled()
    assert inner() is False and lf.is_grad_enabled()
    with pytest.raises(TypeError):
        lf.set_grad_enabled("no")


def test_inference_mode_is_no_grad_and_says_so():
    x = lf.ones(2, requires_grad=True)
    with lf.inference_mode():
        assert lf.is_inference_mode_enabled() and not lf.is_grad_enabled()
        assert not (x * 2).requires_grad
    assert not lf.is_inference_mode_enabled() and lf.is_grad_enabled()
    with lf.inference_mode(False):
        assert (x * 2).requires_grad

    @lf.inference_mode()
    def infer():
        return (x * 2).requires_grad
    assert infer() is False
    with lf.no_grad():
        assert not lf.is_inference_mode_enabled()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_finfo_is_torchs(dtype):
    ours, ref = lf.finfo(getattr(lf, dtype)), torch.finfo(getattr(torch, dtype))
    assert (ours.eps, ours.max, ours.min, ours.tiny, ours.bits) == (ref.eps, ref.max, ref.min, ref.tiny, ref.bits)
    assert lf.finfo().eps == torch.finfo().eps


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_iinfo_is_torchs(dtype):
    ours, ref = lf.iinfo(getattr(lf, dtype)), torch.iinfo(getattr(torch, dtype))
    assert (ours.max, ours.min, ours.bits) == (ref.max, ref.min, ref.bits)
    with pytest.raises(lf.DTypeError, match="not supported by torch.iinfo"):
        lf.iinfo(lf.bool)
    with pytest.raises(lf.DTypeError, match="not a floating point dtype"):
        lf.finfo(lf.int32)


def test_dtype_and_size_names():
    assert isinstance(lf.ones(2).dtype, lf.dtype)
    assert lf.ones(2, 3).shape == lf.Size([2, 3])


@pytest.mark.parametrize("mode", ["floor", "trunc"])
@pytest.mark.parametrize("data", [[-7.0, 7.0, 5.5, -0.5], [-7, 7, 5, -1]])
def test_div_in_place_with_rounding_mode_is_torchs(mode, data):
    ref = torch.tensor(data)
    ref.div_(3, rounding_mode=mode)
    x = lf.tensor(data)
    assert x.div_(3, rounding_mode=mode) is x
    _close(x, ref)
    assert x.dtype.torch == ref.dtype
