"""Greedy decoding with a pinned KV cache: ``lf.graph.decode_step`` captures the step once and
replays it per token, the cache row written in place; checked against the same loop in torch."""
import torch

import lazyfuse as lf

F = lf.nn.functional


def main(vocab=50, d=32, max_len=24, steps=12, device=None) -> int:
    g = torch.Generator().manual_seed(0)
    emb, wq, wk, wv, wo = (torch.randn(*s, generator=g) / s[-1] ** 0.5
                           for s in ((vocab, d), (d, d), (d, d), (d, d), (vocab, d)))

    # torch reference: the same loop, eager
    ref_tokens, kc, vc, tok = [], torch.zeros(max_len, d, dtype=torch.float64), \
        torch.zeros(max_len, d, dtype=torch.float64), 1
    for pos in range(steps):
        x = emb.double()[tok]
        kc[pos], vc[pos] = x @ wk.double().T, x @ wv.double().T
        s = (kc @ (x @ wq.double().T)) / d ** 0.5
        s[pos + 1:] = float("-inf")
        tok = int(((x + torch.softmax(s, 0) @ vc) @ wo.double().T).argmax())
        ref_tokens.append(tok)

    dev = lf.device(device)
    E, Wq, Wk, Wv, Wo = (lf.tensor(t, device=dev) for t in (emb, wq, wk, wv, wo))

    def step(state):
        x = F.embedding(state.token, E)[0]
        state.write("k", F.linear(x, Wk))
        state.write("v", F.linear(x, Wv))
        s = (state.caches["k"] @ F.linear(x, Wq)) * (1.0 / d ** 0.5) + state.mask
        h = x + F.softmax(s, 0) @ state.caches["v"]
        return F.linear(h, Wo).argmax()

    decode = lf.graph.decode_step(step, max_len=max_len, caches={"k": (max_len, d), "v": (max_len, d)}, device=dev)
    tokens, tok = [], 1
    for pos in range(steps):
        tok = decode(tok, pos).item()
        tokens.append(tok)
    assert tokens == ref_tokens, (tokens, ref_tokens)
    return len(tokens)


if __name__ == "__main__":
    print(f"decode: {main()} tokens, identical to torch")
