"""Issue 19's numbers: the torch frontend's cost (lf.lazy / lf.eager).

    python -m bench.torch_frontend [--quick]

1. Recording cost per op: the same chain of small elementwise ops recorded through lazyfuse's own
   API and through the frontend -- its operators (``x * c`` with no autograd to record skips torch's
   dispatcher) and torch functions (``torch.mul``: an aten op through ``__torch_dispatch__``, as
   every op takes when autograd records) --, without the drain (the same for all: the same IR);
   and the floor of the dispatcher's route, torch's own cost into an empty Python handler.
2. One nanoGPT training step (forward, backward, torch.optim.AdamW) at n_layer=2, n_head=4,
   n_embd=128, block 64, vocab 65, batch 8: torch eager, warm torch.compile, the frontend lazily
   (recorded and drained each step) and captured (``lf.capture``, replayed); the cold first step
   (build path: code generation and compiles) of the frontend and of torch.compile.
   The lazy step with the cpu device's asynchronous stream on (``LAZYFUSE_ASYNC=1``) and off, and
   torch eager, timed in interleaved blocks of steps.
3. The same step's CPU time at one thread (torch's and lazyfuse's: ``time.thread_time`` then counts
   all of it), torch eager and the frontend interleaved step by step, the frontend's split into
   recording (forward, backward, optimizer) and its drain: far less sensitive to a busy machine
   than wall time.
Numbers from a shared machine are noisy; --quick is a smoke run (small sizes, no torch.compile).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch

import lazyfuse as lf
from bench.common import compiled, configure, timeit, timeit_interleaved

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from nanogpt_model import GPT, GPTConfig  # noqa: E402

CHAIN = 200


def record_chain(x):
    for _ in range(CHAIN // 2):
        x = x * 1.0001 + 0.5
    return x


def record_chain_dispatched(x):
    """The same chain as torch functions: they always go through torch's dispatcher (as any op does
    when autograd has something to record), never the frontend's operators."""
    for _ in range(CHAIN // 2):
        x = torch.add(torch.mul(x, 1.0001), 0.5)
    return x


class _EmptyHandler(torch.Tensor):
    """A wrapper subclass whose ``__torch_dispatch__`` does nothing but return a tensor made in
    advance: what torch's own route from an operator to a Python handler costs."""
    __torch_function__ = torch._C._disabled_torch_function_impl

    @staticmethod
    def __new__(cls):
        return torch.Tensor._make_wrapper_subclass(cls, (16,), dtype=torch.float32)

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return args[0]


class _WrapperOnly(_EmptyHandler):
    """As ``_EmptyHandler``, plus the wrapper tensor torch needs for each result (one per op)."""
    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return torch.Tensor._make_wrapper_subclass(cls, (16,), (1,), 0, None, torch.float32, torch.strided,
                                                   torch.device("cpu"), False, False)


def per_op_record_cost(dev, rounds: int = 15) -> dict:
    """Microseconds of CPU time (``time.process_time``: a busy shared machine's descheduling is
    not counted) per recorded op, median over rounds that alternate the cases: lazyfuse's own API,
    the frontend's operators (no autograd to record: the dispatcher is skipped), the frontend
    through torch's dispatcher, and the floor of that route (torch's dispatch into an empty Python
    handler, and that plus the wrapper tensor each result needs)."""
    cases = {"lazyfuse native": (record_chain, lf.randn(16, device=dev)),
             "torch frontend, operators": (record_chain, lf.lazy(torch.randn(16), device=dev)),
             "torch frontend, through torch's dispatcher": (record_chain_dispatched,
                                                           lf.lazy(torch.randn(16), device=dev)),
             "torch's dispatch into an empty Python handler": (record_chain_dispatched, _EmptyHandler()),
             "  ... plus the wrapper tensor per result": (record_chain_dispatched, _WrapperOnly())}
    times = {name: [] for name in cases}
    for _ in range(rounds):
        for name, (chain, x) in cases.items():
            t0 = time.process_time()
            for _ in range(5):
                chain(x)
            times[name].append((time.process_time() - t0) / (5 * CHAIN) * 1e6)
            lf.sync(dev)      # nothing live: the chains are elided; this only resets the queue
    return {name: sorted(t)[len(t) // 2] for name, t in times.items()}


def gpt_setup(quick: bool):
    """The issue's nanoGPT configuration (a small one for --quick) and one batch."""
    cfg = GPTConfig(block_size=64, vocab_size=65, n_layer=2, n_head=4, n_embd=128, dropout=0.0)
    batch = 8
    if quick:
        cfg = GPTConfig(block_size=16, vocab_size=65, n_layer=1, n_head=2, n_embd=32, dropout=0.0)
        batch = 2
    gen = torch.Generator().manual_seed(0)
    x = torch.randint(0, cfg.vocab_size, (batch, cfg.block_size), generator=gen)
    y = torch.randint(0, cfg.vocab_size, (batch, cfg.block_size), generator=gen)
    return cfg, x, y


def trainer(model, x, y):
    """One AdamW training step of ``model`` on (x, y), as a closure returning the loss."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step():
        _, loss = model(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return step


def gpt_step_times(dev, quick: bool) -> tuple:
    """Wall-clock milliseconds per step of each way to run it, and the warm torch.compile step (None where
    inductor cannot run, or in a smoke run)."""
    cfg, x, y = gpt_setup(quick)
    torch.manual_seed(0)
    results = {"torch eager": timeit(trainer(GPT(cfg), x, y), reps=10, warmup=2) * 1e3}
    torch.manual_seed(0)
    model = GPT(cfg)
    step_c = compiled(trainer(model, x, y))
    if step_c is not None:
        t0 = time.perf_counter()
        step_c()
        results["torch.compile cold first step"] = (time.perf_counter() - t0) * 1e3
        results["torch.compile"] = timeit(step_c, reps=10, warmup=2) * 1e3
    torch.manual_seed(0)
    lazy_step = trainer(lf.lazy(GPT(cfg), device=dev), lf.lazy(x, device=dev), lf.lazy(y, device=dev))
    t0 = time.perf_counter()
    lazy_step().item()
    results["frontend cold first step"] = (time.perf_counter() - t0) * 1e3
    results["frontend lazy"] = timeit(lambda: lazy_step().item(), reps=10, warmup=2) * 1e3
    results.update(async_stream_times(dev, trainer(GPT(cfg), x, y), lazy_step))
    torch.manual_seed(0)
    graph = lf.capture(dev, trainer(lf.lazy(GPT(cfg), device=dev), lf.lazy(x, device=dev),
                                    lf.lazy(y, device=dev)))
    results["frontend captured"] = timeit(lambda: graph.replay().item(), reps=10, warmup=2) * 1e3
    results["captured launches"] = graph.num_launches
    return results, step_c


STREAM_BLOCK = 4   # steps per timed block of ``async_stream_times``


def async_stream_times(dev, eager_step, lazy_step) -> dict:
    """Wall-clock milliseconds per step of the frontend's lazy step with the cpu device's
    asynchronous stream on (``LAZYFUSE_ASYNC=1``: a step's backward and optimizer kernels run
    while the host records the next step) and off, and of torch eager, interleaved block by
    block: a block is ``STREAM_BLOCK`` steps, each reading its loss, then ``lf.sync`` (so the
    last step's queued launches are timed too)."""
    def block(run, stream: bool):
        def steps():
            os.environ["LAZYFUSE_ASYNC"] = "1" if stream else "0"
            for _ in range(STREAM_BLOCK):
                run().item()
            lf.sync(dev)
            if stream:
                # the stream's worker (and its OpenMP team) ends here, so the other blocks run
                # as they would alone (a live team slows every other OpenMP region: stream.py)
                os.environ["LAZYFUSE_ASYNC"] = "0"
                (lf.zeros(1, device=dev) + 1).numpy()   # (the knob is read at a drain)
        return steps

    saved = os.environ.get("LAZYFUSE_ASYNC")
    try:
        times = timeit_interleaved({"torch eager (blocks)": block(eager_step, False),
                                    "frontend lazy (blocks, stream off)": block(lazy_step, False),
                                    "frontend lazy, async stream (blocks)": block(lazy_step, True)},
                                   reps=8, warmup=1)
    finally:
        if saved is None:
            os.environ.pop("LAZYFUSE_ASYNC", None)
        else:
            os.environ["LAZYFUSE_ASYNC"] = saved
    return {name: t / STREAM_BLOCK * 1e3 for name, t in times.items()}


class _OneThread:
    """torch and lazyfuse at one thread each within the block (they share OpenMP's runtime)."""

    def __enter__(self):
        self.saved = torch.get_num_threads(), os.environ.get("LAZYFUSE_THREADS")
        os.environ["LAZYFUSE_THREADS"] = "1"
        torch.set_num_threads(1)
        time.sleep(0.15)   # lazyfuse re-reads its thread count every 0.1 s
        return self

    def __exit__(self, *exc):
        threads, knob = self.saved
        torch.set_num_threads(threads)
        if knob is None:
            os.environ.pop("LAZYFUSE_THREADS", None)
        else:
            os.environ["LAZYFUSE_THREADS"] = knob


def gpt_step_cpu_times(dev, quick: bool, compiled_step=None, rounds: int = 15) -> dict:
    """Milliseconds of CPU time (``time.thread_time``: at one thread it counts torch's and the kernels'
    work, and not the time the machine gives to others) per nanoGPT training step: torch eager and the
    frontend's lazy step (recorded and drained), interleaved round by round; the frontend's step split
    into recording (forward, backward, optimizer) and the drain; the captured step's replay; and
    ``compiled_step`` (a warm torch.compile step) where given. Medians."""
    cfg, x, y = gpt_setup(quick)
    torch.manual_seed(0)
    eager = trainer(GPT(cfg), x, y)
    torch.manual_seed(0)
    model = lf.lazy(GPT(cfg), device=dev)
    X, Y = lf.lazy(x, device=dev), lf.lazy(y, device=dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    torch.manual_seed(0)
    graph = lf.capture(dev, trainer(lf.lazy(GPT(cfg), device=dev), lf.lazy(x, device=dev), lf.lazy(y, device=dev)))
    parts = {name: [] for name in ("torch eager", "frontend lazy", "  forward", "  backward", "  optimizer",
                                   "  drain", "frontend captured (replay)")}
    if compiled_step is not None:
        parts["torch.compile"] = []

    def lazy_step():
        t0 = time.thread_time()
        _, loss = model(X, Y)
        t1 = time.thread_time()
        opt.zero_grad()
        loss.backward()
        t2 = time.thread_time()
        opt.step()
        t3 = time.thread_time()
        loss.item()
        t4 = time.thread_time()
        for name, t in zip(("frontend lazy", "  forward", "  backward", "  optimizer", "  drain"),
                           (t4 - t0, t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
            parts[name].append(t)

    with _OneThread():
        for _ in range(3):
            eager().item()
            lazy_step()
            graph.replay().item()
            if compiled_step is not None:
                compiled_step().item()   # (a new thread count may recompile: not timed)
        for v in parts.values():
            v.clear()
        for _ in range(3 if quick else rounds):
            t0 = time.thread_time()
            eager().item()
            parts["torch eager"].append(time.thread_time() - t0)
            lazy_step()
            t0 = time.thread_time()
            graph.replay().item()
            parts["frontend captured (replay)"].append(time.thread_time() - t0)
            if compiled_step is not None:
                t0 = time.thread_time()
                compiled_step().item()
                parts["torch.compile"].append(time.thread_time() - t0)
    return {name: statistics.median(t) * 1e3 for name, t in parts.items()}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: small sizes, no torch.compile")
    args = ap.parse_args(argv)
    configure(smoke=args.quick)
    dev = lf.device("cpu")
    print("# torch frontend (noisy: a shared machine)")
    costs = per_op_record_cost(dev)
    native = costs["lazyfuse native"]
    for name, us in costs.items():
        print(f"recording, per elementwise op, {name}: {us:.1f} us of CPU time ({us / native:.1f}x native)")
    times, compiled_step = gpt_step_times(dev, args.quick)
    for name, v in times.items():
        print(f"nanoGPT step, {name}: {v:.1f}" + ("" if name == "captured launches" else " ms"))
    cpu = gpt_step_cpu_times(dev, args.quick, compiled_step)
    for name, ms in cpu.items():
        print(f"nanoGPT step at one thread, CPU time, {name}: {ms:.1f} ms")
    print(f"nanoGPT step at one thread, CPU time, frontend lazy / torch eager: "
          f"{cpu['frontend lazy'] / cpu['torch eager']:.2f}x")
    if "torch.compile" in cpu:
        print(f"nanoGPT step at one thread, CPU time, torch.compile / frontend captured: "
              f"{cpu['torch.compile'] / cpu['frontend captured (replay)']:.2f}x")


if __name__ == "__main__":
    main()
