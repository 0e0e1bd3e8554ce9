"""An MLP forward pass on the default device, checked against the same program in torch."""
import numpy as np
import torch

import lazyfuse as lf

F = lf.nn.functional


def main(batch=32, sizes=(64, 128, 128, 10), device=None) -> float:
    torch.manual_seed(0)
    dev = lf.device(device)
    params = [(torch.randn(o, i) / i ** 0.5, torch.randn(o) * 0.1) for i, o in zip(sizes, sizes[1:])]
    x = torch.randn(batch, sizes[0])
    h = lf.tensor(x, device=dev)
    for k, (w, b) in enumerate(params):
        h = F.linear(h, lf.tensor(w, device=dev), lf.tensor(b, device=dev))
        h = F.gelu(h) if k < len(params) - 1 else F.log_softmax(h, -1)
    ref = x.double()
    for k, (w, b) in enumerate(params):
        ref = torch.nn.functional.linear(ref, w.double(), b.double())
        ref = torch.nn.functional.gelu(ref) if k < len(params) - 1 else torch.log_softmax(ref, -1)
    err = float(np.abs(h.numpy() - ref.numpy()).max())
    assert err < 1e-4, err
    return err


if __name__ == "__main__":
    print(f"mlp: max error vs torch {main():.2e}")
