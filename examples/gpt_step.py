"""A small GPT training step (nanoGPT's shape): token and position embeddings, ``layers`` pre-norm
blocks of causal self-attention + MLP with layer_norm, a tied language-model head, cross-entropy
through log_softmax, backward and AdamW; checked against the same step in torch.

The model is written once against a library namespace (``lazyfuse`` or ``torch``), as the
program cases of the tests are. Cross-entropy is ``-(log_softmax(logits) * one_hot).sum(-1)``
averaged: the one-hot targets are an input, so no op beyond the SPEC's is needed.
"""
import numpy as np
import torch

import lazyfuse as lf


def init_params(vocab, block, width, layers, seed=0):
    """name -> float32 array, nanoGPT's initialisation (normal 0.02, zero biases, unit norms)."""
    rng = np.random.default_rng(seed)
    normal = lambda *s: (rng.standard_normal(s) * 0.02).astype(np.float32)  # noqa: E731
    ones, zeros = (lambda n: np.ones(n, np.float32)), (lambda n: np.zeros(n, np.float32))
    p = {"wte": normal(vocab, width), "wpe": normal(block, width), "lnf_w": ones(width), "lnf_b": zeros(width)}
    for k in range(layers):
        p.update({f"h{k}.ln1_w": ones(width), f"h{k}.ln1_b": zeros(width),
                  f"h{k}.attn_w": normal(3 * width, width), f"h{k}.attn_b": zeros(3 * width),
                  f"h{k}.proj_w": normal(width, width), f"h{k}.proj_b": zeros(width),
                  f"h{k}.ln2_w": ones(width), f"h{k}.ln2_b": zeros(width),
                  f"h{k}.fc_w": normal(4 * width, width), f"h{k}.fc_b": zeros(4 * width),
                  f"h{k}.out_w": normal(width, 4 * width), f"h{k}.out_b": zeros(width)})
    return p


def loss_of(lib, p, idx, one_hot, layers, heads):
    """Mean cross-entropy of the next-token logits of ``idx`` (batch, tokens) against ``one_hot``."""
    fn = lib.nn.functional
    b, t = idx.shape
    c = p["wte"].shape[1]
    x = fn.embedding(idx, p["wte"]) + p["wpe"][:t]
    for k in range(layers):
        h = fn.layer_norm(x, (c,), p[f"h{k}.ln1_w"], p[f"h{k}.ln1_b"])
        qkv = fn.linear(h, p[f"h{k}.attn_w"], p[f"h{k}.attn_b"])
        q, kk, v = (qkv[..., j * c:(j + 1) * c].reshape(b, t, heads, c // heads).transpose(1, 2) for j in range(3))
        a = fn.scaled_dot_product_attention(q, kk, v, is_causal=True).transpose(1, 2).reshape(b, t, c)
        x = x + fn.linear(a, p[f"h{k}.proj_w"], p[f"h{k}.proj_b"])
        h = fn.layer_norm(x, (c,), p[f"h{k}.ln2_w"], p[f"h{k}.ln2_b"])
        x = x + fn.linear(fn.gelu(fn.linear(h, p[f"h{k}.fc_w"], p[f"h{k}.fc_b"])), p[f"h{k}.out_w"], p[f"h{k}.out_b"])
    logits = fn.linear(fn.layer_norm(x, (c,), p["lnf_w"], p["lnf_b"]), p["wte"])
    return -(fn.log_softmax(logits, -1) * one_hot).sum(-1).mean()


def make_batch(vocab, batch, tokens, seed=1):
    """(idx, one-hot next tokens) of a random token stream."""
    rng = np.random.default_rng(seed)
    stream = rng.integers(0, vocab, (batch, tokens + 1))
    return stream[:, :-1], np.eye(vocab, dtype=np.float32)[stream[:, 1:]]


def lf_trainer(vocab=11, block=8, width=16, layers=2, heads=2, batch=2, device=None, lr=1e-3):
    """(params, step): ``step()`` runs one training step of the GPT on a fixed batch, returns the loss."""
    dev = lf.device(device)
    params = {n: lf.tensor(a, device=dev, requires_grad=True) for n, a in init_params(vocab, block, width, layers).items()}
    opt = lf.optim.AdamW(list(params.values()), lr=lr, weight_decay=0.1)
    idx, one_hot = make_batch(vocab, batch, block)
    idx, one_hot = lf.tensor(idx, device=dev), lf.tensor(one_hot, device=dev)

    def step():
        opt.zero_grad(set_to_none=False)
        loss = loss_of(lf, params, idx, one_hot, layers, heads)
        loss.backward()
        opt.step()
        return loss
    return params, step


def main(steps=2, device=None, **shape) -> float:
    """Train ``steps`` steps lazily and in torch; the largest parameter difference."""
    shape = {"vocab": 11, "block": 8, "width": 16, "layers": 2, "heads": 2, "batch": 2, **shape}
    params, step = lf_trainer(device=device, **shape)
    tp = {n: torch.tensor(a, requires_grad=True) for n, a in
          init_params(shape["vocab"], shape["block"], shape["width"], shape["layers"]).items()}
    opt = torch.optim.AdamW(list(tp.values()), lr=1e-3, weight_decay=0.1)
    idx, one_hot = make_batch(shape["vocab"], shape["batch"], shape["block"])
    for _ in range(steps):
        got = step().item()
        opt.zero_grad()
        loss = loss_of(torch, tp, torch.tensor(idx), torch.tensor(one_hot), shape["layers"], shape["heads"])
        loss.backward()
        opt.step()
        assert abs(got - loss.item()) < 1e-5, (got, loss.item())
    err = max(float(np.abs(params[n].numpy() - tp[n].detach().numpy()).max()) for n in tp)
    assert err < 1e-5, err
    return err


if __name__ == "__main__":
    print(f"GPT training step: largest parameter difference vs torch {main():.2e}")
