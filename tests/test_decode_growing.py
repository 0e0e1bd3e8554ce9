"""The growing form of ``decode_step`` (``max_len=None``): the same step function over caches
that grow with the position, checked against numpy, with no compiler run once warm."""
import numpy as np
import pytest

import lazyfuse as lf

CPU = lf.device("cpu")
F = lf.nn.functional
D, VOCAB = 8, 10


def rnd(*shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_a_growing_cache_decodes_like_the_reference_and_never_recompiles():
    w, emb = lf.tensor(rnd(D, D, seed=1)), lf.tensor(rnd(VOCAB, D, seed=2))

    def step(state):   # the step of tests/test_capture.py's pinned decode, unchanged
        x = F.embedding(state.token, emb)[0]
        state.write("k", F.linear(x, w))
        scores = state.caches["k"] @ x + state.mask
        return F.softmax(scores, 0)

    decode = lf.graph.decode_step(step, caches={"k": (0, D)}, device=CPU)
    assert decode.state.capacity == 16
    tokens = np.random.default_rng(3).integers(0, VOCAB, 40)
    kc = []
    runs = []
    for pos, tok in enumerate(tokens):
        runs.append(lf.stats(CPU).compiler_runs)
        out = decode(int(tok), pos).numpy()
        x = rnd(VOCAB, D, seed=2)[tok]
        kc.append(rnd(D, D, seed=1) @ x)
        s = np.array(kc) @ x
        np.testing.assert_allclose(out, np.exp(s - s.max()) / np.exp(s - s.max()).sum(), rtol=1e-5, atol=1e-6)
    assert decode.state.capacity == 64   # grew twice (16 -> 32 -> 64), keeping the rows
    np.testing.assert_allclose(decode.state.caches["k"].numpy(), np.array(kc), rtol=1e-5, atol=1e-6)
    # compiled at most at lengths 1 and 2 (a size-1 dim), at the first cache that fills its buffer
    # (position 15: the whole buffer, no view) and the first doubling (16); every later length,
    # the second full buffer (31) and the second doubling (32) included, reuses those kernels
    runs.append(lf.stats(CPU).compiler_runs)
    compiled_at = {pos for pos in range(len(tokens)) if runs[pos + 1] > runs[pos]}
    assert compiled_at <= {0, 1, 15, 16}, sorted(compiled_at)
    # back to an earlier position: its row is overwritten, the rows after it forgotten
    np.testing.assert_allclose(decode(int(tokens[0]), 0).numpy(), [1.0])
    with pytest.raises(lf.ShapeError, match="would leave a gap"):
        decode(1, 5)
