"""A pre-norm transformer block (causal attention + MLP), checked against torch."""
import numpy as np
import torch

import lazyfuse as lf

F = lf.nn.functional


def make_weights(d, seed=0):
    g = torch.Generator().manual_seed(seed)
    w = lambda *s: torch.randn(*s, generator=g) / s[-1] ** 0.5  # noqa: E731
    return {"wq": w(d, d), "wk": w(d, d), "wv": w(d, d), "wo": w(d, d), "w1": w(4 * d, d), "w2": w(d, 4 * d),
            "g1": torch.ones(d), "g2": torch.ones(d)}


def block_lf(x, p, heads):
    b, t, d = x.shape
    h = F.layer_norm(x, (d,), p["g1"])
    q, k, v = (F.linear(h, p[n]).reshape(b, t, heads, d // heads).transpose(1, 2) for n in ("wq", "wk", "wv"))
    a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
    x = x + F.linear(a, p["wo"])
    return x + F.linear(F.gelu(F.linear(F.layer_norm(x, (d,), p["g2"]), p["w1"])), p["w2"])


def block_torch(x, p, heads):
    tf = torch.nn.functional
    b, t, d = x.shape
    h = tf.layer_norm(x, (d,), p["g1"])
    q, k, v = (tf.linear(h, p[n]).reshape(b, t, heads, d // heads).transpose(1, 2) for n in ("wq", "wk", "wv"))
    a = tf.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
    x = x + tf.linear(a, p["wo"])
    return x + tf.linear(tf.gelu(tf.linear(tf.layer_norm(x, (d,), p["g2"]), p["w1"])), p["w2"])


def main(batch=2, tokens=16, d=32, heads=4, device=None) -> float:
    dev = lf.device(device)
    p = make_weights(d)
    x = torch.randn(batch, tokens, d, generator=torch.Generator().manual_seed(1))
    out = block_lf(lf.tensor(x, device=dev), {k: lf.tensor(v, device=dev) for k, v in p.items()}, heads)
    ref = block_torch(x.double(), {k: v.double() for k, v in p.items()}, heads)
    err = float(np.abs(out.numpy() - ref.numpy()).max())
    assert err < 1e-4, err
    return err


if __name__ == "__main__":
    print(f"transformer block: max error vs torch {main():.2e}")
