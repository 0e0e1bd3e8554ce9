"""conv1d/conv2d on ``cpu``: torch's own convolution as an extern (what lazyfuse runs) against an
im2col lowering on lazyfuse's native ops (pad, an ``as_strided`` window view, one gather copy
into the column matrix, the matmul path with the bias as its epilogue, a permuting view back),
and torch eager, on a few typical shapes:

    python -m bench.conv [--smoke]

Each is timed as one drained call (``lf.sync``), interleaved, medians of wall and process CPU
time (all threads: torch's convolution and the C kernels use both cores). The faster of the two
lazyfuse forms is what ``lf.nn.functional.conv1d/conv2d`` run (README, Every torch op). Timings on
a shared machine are noisy.
"""
import argparse
import statistics
import time

import torch

import lazyfuse as lf

F = lf.nn.functional
# (name, input shape, weight shape, stride, padding): a CIFAR stem, a ResNet block, a wide early
# layer, a 1-d audio/text layer
SHAPES = [("conv2d cifar stem", (8, 3, 32, 32), (16, 3, 3, 3), 1, 1),
          ("conv2d resnet 3x3", (8, 64, 16, 16), (64, 64, 3, 3), 1, 1),
          ("conv2d early 56x56", (1, 64, 56, 56), (64, 64, 3, 3), 1, 1),
          ("conv2d strided 7x7", (4, 3, 64, 64), (32, 3, 7, 7), 2, 3),
          ("conv1d k5", (8, 64, 256), (64, 64, 5), 1, 2)]
SMOKE = [("conv2d small", (2, 3, 8, 8), (4, 3, 3, 3), 1, 1), ("conv1d small", (2, 4, 16), (4, 4, 3), 1, 1)]


def im2col_conv(x, w, b, stride: int, padding: int):
    """conv1d/conv2d (groups 1, dilation 1) as views plus the matmul path."""
    spatial = x.ndim - 2
    if padding:
        x = F.pad(x, (padding,) * (2 * spatial))
    x = x.contiguous()
    n, c, *size = x.shape
    oc, _, *kernel = w.shape
    out = [(s - k) // stride + 1 for s, k in zip(size, kernel)]
    strides = [1]
    for s in reversed(size[1:]):
        strides.insert(0, strides[0] * s)
    plane = strides[0] * size[0]
    # (n, *out, c, *kernel): each output position's receptive field, a view of the padded input
    cols = x.as_strided((n, *out, c, *kernel), (c * plane, *[s * stride for s in strides], plane, *strides))
    cols = cols.reshape(n * _prod(out), c * _prod(kernel))
    y = cols @ w.reshape(oc, -1).T + b
    return y.reshape(n, *out, oc).permute(0, spatial + 1, *range(1, spatial + 1))


def _prod(xs):
    p = 1
    for v in xs:
        p *= v
    return p


def _times(fns: dict, reps: int) -> dict:
    for fn in fns.values():
        fn()
        fn()
    wall = {k: [] for k in fns}
    cpu = {k: [] for k in fns}
    for _ in range(reps):
        for k, fn in fns.items():
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            wall[k].append(time.perf_counter() - t0)
            cpu[k].append(time.process_time() - c0)
    return {k: (statistics.median(wall[k]) * 1e6, statistics.median(cpu[k]) * 1e6) for k in fns}


def main(smoke=False):
    dev = lf.device("cpu")
    rows = []
    for name, xs, ws, stride, padding in SMOKE if smoke else SHAPES:
        g = torch.Generator().manual_seed(0)
        xt, wt, bt = torch.randn(*xs, generator=g), torch.randn(*ws, generator=g), torch.randn(ws[0], generator=g)
        x, w, b = (lf.tensor(t, device=dev) for t in (xt, wt, bt))
        conv = F.conv2d if len(xs) == 4 else F.conv1d
        tconv = torch.nn.functional.conv2d if len(xs) == 4 else torch.nn.functional.conv1d
        want = tconv(xt, wt, bt, stride=stride, padding=padding)
        for form in (conv, im2col_conv):
            got = (form(x, w, b, stride=stride, padding=padding) if form is conv else form(x, w, b, stride, padding))
            torch.testing.assert_close(got.torch(), want, rtol=1e-4, atol=1e-4)

        def run(form):
            def call():
                y = form(x, w, b, stride=stride, padding=padding) if form is conv else form(x, w, b, stride, padding)
                lf.sync(dev)
                return y
            return call
        t = _times({"extern": run(conv), "im2col": run(im2col_conv),
                    "torch": lambda: tconv(xt, wt, bt, stride=stride, padding=padding)}, 3 if smoke else 30)
        rows.append((name, t))
    print(f"{'shape':22s} {'torch eager':>18s} {'extern (lazyfuse)':>20s} {'im2col (lazyfuse)':>20s}   (us, wall / cpu)")
    for name, t in rows:
        print(f"{name:22s} " + " ".join(f"{t[k][0]:9.0f} / {t[k][1]:7.0f}" for k in ("torch", "extern", "im2col")))
    return rows


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--smoke", action="store_true")
    main(p.parse_args().smoke)
