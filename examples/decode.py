"""Greedy decoding with a preallocated KV cache written in place each step, captured once and
replayed per token; checked against the same loop in torch."""
import numpy as np
import torch

import lazyfuse as lf

F = lf.nn.functional


def main(vocab=50, d=32, max_len=24, steps=12, device=None) -> int:
    dev = lf.device(device)
    g = torch.Generator().manual_seed(0)
    emb, wq, wk, wv, wo = (torch.randn(*s, generator=g) / s[-1] ** 0.5
                           for s in ((vocab, d), (d, d), (d, d), (d, d), (vocab, d)))

    # torch reference: the same loop, eager
    ref_tokens, kc, vc, tok = [], torch.zeros(max_len, d, dtype=torch.float64), \
        torch.zeros(max_len, d, dtype=torch.float64), 1
    for pos in range(steps):
        x = emb.double()[tok]
        kc[pos], vc[pos] = x @ wk.double().T, x @ wv.double().T
        q = x @ wq.double().T
        s = (kc @ q) / d ** 0.5
        s[pos + 1:] = float("-inf")
        h = x + torch.softmax(s, 0) @ vc
        tok = int((h @ wo.double().T).argmax())
        ref_tokens.append(tok)

    E, Wq, Wk, Wv, Wo = (lf.tensor(t, device=dev) for t in (emb, wq, wk, wv, wo))
    k_cache, v_cache = lf.zeros(max_len, d, device=dev), lf.zeros(max_len, d, device=dev)
    token = lf.tensor([1], device=dev)                      # pinned input buffers
    pos_onehot = lf.zeros(max_len, device=dev)
    mask = lf.zeros(max_len, device=dev)
    lf.sync(dev)

    def step():
        x = F.embedding(token, E)[0]                         # (d,)
        sel = pos_onehot.reshape(max_len, 1)
        k_cache.copy_(k_cache * (1 - sel) + sel * F.linear(x, Wk))   # write row `pos` in place
        v_cache.copy_(v_cache * (1 - sel) + sel * F.linear(x, Wv))
        s = (k_cache @ F.linear(x, Wq)) * (1.0 / d ** 0.5) + mask
        h = x + F.softmax(s, 0) @ v_cache
        return F.linear(h, Wo).argmax()

    def set_position(pos):
        onehot = np.zeros(max_len, np.float32)
        onehot[pos] = 1
        pos_onehot.copy_(onehot)
        m = np.zeros(max_len, np.float32)
        m[pos + 1:] = -np.inf
        mask.copy_(m)

    set_position(0)
    saved = (k_cache.numpy().copy(), v_cache.numpy().copy())
    graph = lf.capture(dev, step)                            # the warmup ran the step: reset state
    k_cache.copy_(saved[0])
    v_cache.copy_(saved[1])
    token.copy_(np.array([1]))
    tokens = []
    for pos in range(steps):
        set_position(pos)
        nxt = graph.replay().item()
        tokens.append(nxt)
        token.copy_(np.array([nxt]))
    assert tokens == ref_tokens, (tokens, ref_tokens)
    return len(tokens)


if __name__ == "__main__":
    print(f"decode: {main()} tokens, identical to torch")
