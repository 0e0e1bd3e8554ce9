"""A GPT in the structure of nanoGPT's ``model.py``, written once against torch's API and run on
lazyfuse and on torch eager from the same weights: causal attention with ``masked_fill`` over a
``tril`` mask, ``cross_entropy``, weight tying (the token embedding is the output head), and
``generate`` with ``topk`` and ``multinomial``. Trained with ``lf.optim.AdamW`` against
``torch.optim.AdamW``, the losses agree to float32 rounding; then it samples text.

The model code takes its ops from ``B`` (the ``torch`` or the ``lazyfuse`` module) and
``F`` (their ``nn.functional``): lazyfuse answers to torch's names, signatures and keyword
arguments (``x.view``, ``split(n, dim=2)``, ``masked_fill``, ``dtype=B.long``, ``ignore_index``...),
so nothing in it is written for one or the other. Its modules are plain classes holding the
parameters (running a torch ``nn.Module`` unchanged is the business of ``lf.lazy``).

    python examples/gpt.py
"""
import math
from dataclasses import dataclass

import numpy as np
import torch

import lazyfuse as lf

TEXT = ("the lazy engine records every op and runs nothing until a drain; then it fuses the live "
        "work into few kernels, and a result dropped before the drain is never computed. ") * 4


@dataclass
class GPTConfig:
    block_size: int = 16
    vocab_size: int = 32
    n_layer: int = 2
    n_head: int = 2
    n_embd: int = 32


def init_weights(cfg: GPTConfig, seed=0) -> dict:
    """nanoGPT's initialisation (normal(0, 0.02), residual projections scaled by 1/sqrt(2 n_layer)),
    as numpy arrays both runs load."""
    rng = np.random.default_rng(seed)
    normal = lambda *shape, std=0.02: (rng.standard_normal(shape) * std).astype(np.float32)  # noqa: E731
    e, proj_std = cfg.n_embd, 0.02 / math.sqrt(2 * cfg.n_layer)
    w = {"wte": normal(cfg.vocab_size, e), "wpe": normal(cfg.block_size, e),
         "ln_f.w": np.ones(e, np.float32), "ln_f.b": np.zeros(e, np.float32)}
    for i in range(cfg.n_layer):
        p = f"h{i}."
        w.update({p + "ln_1.w": np.ones(e, np.float32), p + "ln_1.b": np.zeros(e, np.float32),
                  p + "attn.c_attn.w": normal(3 * e, e), p + "attn.c_attn.b": np.zeros(3 * e, np.float32),
                  p + "attn.c_proj.w": normal(e, e, std=proj_std), p + "attn.c_proj.b": np.zeros(e, np.float32),
                  p + "ln_2.w": np.ones(e, np.float32), p + "ln_2.b": np.zeros(e, np.float32),
                  p + "mlp.c_fc.w": normal(4 * e, e), p + "mlp.c_fc.b": np.zeros(4 * e, np.float32),
                  p + "mlp.c_proj.w": normal(e, 4 * e, std=proj_std), p + "mlp.c_proj.b": np.zeros(e, np.float32)})
    return w


class Linear:
    def __init__(self, P, name, F):
        self.w, self.b, self.F = P[name + ".w"], P[name + ".b"], F

    def __call__(self, x):
        return self.F.linear(x, self.w, self.b)


class LayerNorm:
    def __init__(self, P, name, F):
        self.w, self.b, self.F = P[name + ".w"], P[name + ".b"], F

    def __call__(self, x):
        return self.F.layer_norm(x, self.w.shape, self.w, self.b, 1e-5)


class CausalSelfAttention:
    def __init__(self, cfg, P, name, B, F):
        self.c_attn, self.c_proj = Linear(P, name + ".c_attn", F), Linear(P, name + ".c_proj", F)
        self.n_head, self.n_embd, self.F = cfg.n_head, cfg.n_embd, F
        # nanoGPT's causal mask buffer
        self.bias = B.tril(B.ones(cfg.block_size, cfg.block_size)).view(1, 1, cfg.block_size, cfg.block_size)

    def __call__(self, x):
        b, t, c = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
        q = q.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
        v = v.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
        att = self.F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.c_proj(y)


class MLP:
    def __init__(self, P, name, F):
        self.c_fc, self.c_proj, self.F = Linear(P, name + ".c_fc", F), Linear(P, name + ".c_proj", F), F

    def __call__(self, x):
        return self.c_proj(self.F.gelu(self.c_fc(x)))


class Block:
    def __init__(self, cfg, P, name, B, F):
        self.ln_1, self.ln_2 = LayerNorm(P, name + "ln_1", F), LayerNorm(P, name + "ln_2", F)
        self.attn = CausalSelfAttention(cfg, P, name + "attn", B, F)
        self.mlp = MLP(P, name + "mlp", F)

    def __call__(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT:
    """nanoGPT's GPT: ``B`` is ``torch`` or ``lazyfuse``, ``F`` its functional module."""

    def __init__(self, cfg, weights: dict, B, F, device=None):
        self.cfg, self.B, self.F = cfg, B, F
        make = (lambda a: torch.tensor(a, requires_grad=True)) if B is torch else \
            (lambda a: lf.tensor(a, device=device, requires_grad=True))
        self.P = {k: make(v) for k, v in weights.items()}
        self.blocks = [Block(cfg, self.P, f"h{i}.", B, F) for i in range(cfg.n_layer)]
        self.ln_f = LayerNorm(self.P, "ln_f", F)
        self.lm_head = self.P["wte"]   # weight tying: the output head is the token embedding

    def parameters(self):
        return list(self.P.values())

    def __call__(self, idx, targets=None):
        B, F = self.B, self.F
        b, t = idx.size()
        pos = B.arange(0, t, dtype=B.long, device=idx.device)
        x = F.embedding(idx, self.P["wte"]) + F.embedding(pos, self.P["wpe"])
        for block in self.blocks:
            x = block(x)
        x = self.ln_f(x)
        if targets is not None:
            logits = F.linear(x, self.lm_head)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
            return logits, loss
        return F.linear(x[:, [-1], :], self.lm_head), None

    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
        with self.B.no_grad():
            return self._generate(idx, max_new_tokens, temperature, top_k)

    def _generate(self, idx, max_new_tokens, temperature, top_k):
        B, F = self.B, self.F
        for _ in range(max_new_tokens):
            idx_cond = idx if idx.size(1) <= self.cfg.block_size else idx[:, -self.cfg.block_size:]
            logits, _ = self(idx_cond)
            logits = logits[:, -1, :] / temperature
            if top_k is not None:
                v, _ = B.topk(logits, min(top_k, logits.size(-1)))
                logits[logits < v[:, [-1]]] = -float("Inf")
            probs = F.softmax(logits, dim=-1)
            idx_next = B.multinomial(probs, num_samples=1)
            idx = B.cat((idx, idx_next), dim=1)
        return idx


def batches(cfg, steps, batch, seed=0):
    chars = sorted(set(TEXT))
    assert len(chars) <= cfg.vocab_size
    data = np.array([chars.index(c) for c in TEXT], dtype=np.int64)
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, len(data) - cfg.block_size - 1, (steps, batch))
    xs = np.stack([[data[s:s + cfg.block_size] for s in row] for row in starts])
    ys = np.stack([[data[s + 1:s + 1 + cfg.block_size] for s in row] for row in starts])
    return chars, xs, ys


def train(B, F, cfg, weights, xs, ys, device=None, lr=3e-3):
    model = GPT(cfg, weights, B, F, device)
    opt = (torch.optim.AdamW if B is torch else lf.optim.AdamW)(model.parameters(), lr=lr, weight_decay=0.1)
    to = (lambda a: torch.tensor(a)) if B is torch else (lambda a: lf.tensor(a, device=device))
    losses = []
    for x, y in zip(xs, ys):
        opt.zero_grad()
        _, loss = model(to(x), to(y))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return model, losses


def main(device="cpu", steps=6, batch=4, tokens=24, verbose=True):
    cfg = GPTConfig()
    weights = init_weights(cfg)
    chars, xs, ys = batches(cfg, steps, batch)
    model, lazy_losses = train(lf, lf.nn.functional, cfg, weights, xs, ys, device=device)
    _, torch_losses = train(torch, torch.nn.functional, cfg, weights, xs, ys)
    worst = max(abs(a - b) / abs(b) for a, b in zip(lazy_losses, torch_losses))
    lf.manual_seed(0)
    start = lf.tensor([[chars.index("t")]], device=device)
    sample = model.generate(start, tokens, temperature=0.8, top_k=5).tolist()[0]
    text = "".join(chars[i] for i in sample)
    if verbose:
        print("lazyfuse losses:", " ".join(f"{v:.5f}" for v in lazy_losses))
        print("torch losses:   ", " ".join(f"{v:.5f}" for v in torch_losses))
        print(f"largest relative difference {worst:.2e}; sample: {text!r}")
    return worst < 1e-4 and len(sample) == tokens + 1 and all(0 <= i < len(chars) for i in sample)


if __name__ == "__main__":
    assert main()
