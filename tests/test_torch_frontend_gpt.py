"""A GPT of nanoGPT's structure (tests/nanogpt_model.py), unchanged torch code, trained on the lazyfuse
frontend to torch eager's losses from the same initial weights, lazily and captured, and sampling the
same tokens. In the fast suite (about 15 s of CPU, cold cache included): 5 training steps, the
captured step, generate; the 30-step run is slow (``-m slow``)."""
import pytest
import torch

import lazyfuse as lf
from nanogpt_model import GPT, GPTConfig

CFG = GPTConfig(block_size=16, vocab_size=65, n_layer=2, n_head=4, n_embd=32, dropout=0.0)


def _model():
    torch.manual_seed(0)
    return GPT(CFG)


def _batches(n):
    gen = torch.Generator().manual_seed(5)
    data = [torch.randint(0, CFG.vocab_size, (4, CFG.block_size + 1), generator=gen) for _ in range(n)]
    return [(d[:, :-1].contiguous(), d[:, 1:].contiguous()) for d in data]


def train_step(model, opt, x, y):
    """One training step of ``model`` on (x, y) with ``opt``: its loss, not read."""
    _, loss = model(x, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


@pytest.mark.parametrize("steps", [5, pytest.param(30, marks=pytest.mark.slow)])
def test_gpt_trains_with_adamw_to_torch_eager_losses(steps):
    ref, lazy = _model(), lf.lazy(_model())
    assert lazy.lm_head.weight is lazy.transformer.wte.weight      # weight tying kept
    opt_r = torch.optim.AdamW(ref.parameters(), lr=1e-2)
    opt_l = torch.optim.AdamW(lazy.parameters(), lr=1e-2)
    want, got = [], []
    for x, y in _batches(steps):
        want.append(train_step(ref, opt_r, x, y).item())
        got.append(train_step(lazy, opt_l, lf.lazy(x), lf.lazy(y)).item())
    assert got == pytest.approx(want, rel=2e-4)
    n = CFG.n_embd
    for (name, a), b in zip(ref.state_dict().items(), lazy.state_dict().values()):
        b = lf.eager(b)
        if name.endswith("attn.c_attn.bias"):
            # the key bias's true gradient is 0 (it shifts each row of scores by a constant, which
            # softmax ignores): both sides get float noise there, which AdamW scales up to full
            # steps, so that third of the bias is noise on either side and is left out
            a, b = torch.cat([a[:n], a[2 * n:]]), torch.cat([b[:n], b[2 * n:]])
        torch.testing.assert_close(b, a, rtol=1e-3, atol=1e-4, msg=lambda m, name=name: f"{name}: {m}")


def test_gpt_generate_samples_the_same_tokens_as_torch_eager():
    ref, lazy = _model().eval(), lf.lazy(_model()).eval()
    idx = torch.zeros((2, 1), dtype=torch.long)
    torch.manual_seed(7)
    want = ref.generate(idx, 12, temperature=0.8, top_k=10)
    torch.manual_seed(7)
    got = lazy.generate(lf.lazy(idx), 12, temperature=0.8, top_k=10)
    assert torch.equal(lf.eager(got), want)


def test_a_captured_gpt_training_step_with_adamw_replays_torch_eager_losses():
    """torch.optim.AdamW's step count lives on the device (the frontend puts it on torch's fused path):
    each replay is one more eager step, bias corrections included."""
    batches = _batches(6)
    ref = _model()
    opt_r = torch.optim.AdamW(ref.parameters(), lr=1e-2)
    want = []
    for x, y in [batches[0]] * 4 + batches[1:]:
        want.append(train_step(ref, opt_r, x, y).item())
    lazy = lf.lazy(_model())
    opt = torch.optim.AdamW(lazy.parameters(), lr=1e-2)
    X, Y = lf.lazy(batches[0][0]), lf.lazy(batches[0][1])

    graph = lf.capture(lf.device("cpu"), lambda: train_step(lazy, opt, X, Y))
    got = [graph.output.item()]
    for x, y in batches[1:]:
        X.copy_(x)
        Y.copy_(y)
        got.append(graph.replay().item())
    assert got == pytest.approx(want[3:], rel=2e-4)
