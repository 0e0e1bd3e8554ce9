"""Issue 19's numbers: the torch frontend's cost (lf.lazy / lf.eager).

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
4. The floors under issue 19's two bars (bench/torch_frontend_floors.py): the step's matmuls alone
   (lazyfuse's captured calls and torch's own), against torch.compile's step / 1.5; the aten ops
   torch dispatches into the frontend per phase, times torch's own per-op cost of that route, plus the
   step's kernels, against torch eager's step.
The page (bench/results/torch_frontend-DATE.md and .json, or ``--out DIR``) says which bars are met
and what each floor allows. Numbers from a shared machine are noisy; --quick is a smoke run (small
sizes, no torch.compile).

    python -m bench.torch_frontend [--quick] [--out DIR]
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
from bench import torch_frontend_floors as floors
from bench.common import compiled, configure, heading, machine, publish, timeit, timeit_interleaved

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
    results = {"torch eager": timeit(trainer(GPT(cfg), x, y), reps=10, warmup=2, name="torch eager") * 1e3}
    torch.manual_seed(0)
    model = GPT(cfg)
    step_c = compiled(trainer(model, x, y))
    if step_c is not None:
        t0 = time.perf_counter()
        step_c()
        results["torch.compile cold first step"] = (time.perf_counter() - t0) * 1e3
        results["torch.compile"] = timeit(step_c, reps=10, warmup=2, name="torch.compile") * 1e3
    torch.manual_seed(0)
    lazy_step = trainer(lf.lazy(GPT(cfg), device=dev), lf.lazy(x, device=dev), lf.lazy(y, device=dev))
    t0 = time.perf_counter()
    lazy_step().item()
    results["frontend cold first step"] = (time.perf_counter() - t0) * 1e3
    results["frontend lazy"] = timeit(lambda: lazy_step().item(), reps=10, warmup=2, name="frontend lazy") * 1e3
    results.update(async_stream_times(dev, trainer(GPT(cfg), x, y), lazy_step))
    torch.manual_seed(0)
    graph = lf.capture(dev, trainer(lf.lazy(GPT(cfg), device=dev), lf.lazy(x, device=dev),
                                    lf.lazy(y, device=dev)))
    results["frontend captured"] = timeit(lambda: graph.replay().item(), reps=10, warmup=2,
                                           name="frontend captured") * 1e3
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
            lf.sync(dev)   # (the stream's worker, and its OpenMP team, end with its queue: stream.py)
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


def matmul_floors(dev, quick: bool, rounds: int = 10) -> dict:
    """The captured bar's floor (bench/torch_frontend_floors.py): the nanoGPT step's matmuls alone,
    lazyfuse's (its captured step's own calls) and torch's (its eager step's, remade), in launch
    order, at one thread (CPU time) and at torch's thread count now (wall time), milliseconds, the
    best of ``rounds``; their counts and flops."""
    cfg, x, y = gpt_setup(quick)
    torch.manual_seed(0)
    graph = lf.capture(dev, trainer(lf.lazy(GPT(cfg), device=dev), lf.lazy(x, device=dev), lf.lazy(y, device=dev)))
    ours = floors.lazyfuse_matmuls(graph)
    torch.manual_seed(0)
    eager = trainer(GPT(cfg), x, y)
    eager()
    theirs, attention = floors.torch_matmuls(eager)
    sets = {"lazyfuse's matmuls": [c for _, c in ours], "torch's matmuls": [c for _, c in theirs],
            "torch's fused attention kernels": [c for _, c in attention]}
    out = {"threads": torch.get_num_threads(), "rounds": 3 if quick else rounds,
           "lazyfuse matmuls": [str(m) for m, _ in ours], "torch matmuls": [str(m) for m, _ in theirs],
           "torch attention kernels": [name for name, _ in attention],
           "lazyfuse flops": sum(m.flops for m, _ in ours), "torch flops": sum(m.flops for m, _ in theirs)}
    with _OneThread():
        for name, calls in sets.items():
            out[f"{name}, one thread"] = floors.best_time(calls, time.thread_time, out["rounds"]) * 1e3
        out["large GEMM GFLOP/s, one thread"] = floors.large_gemm_gflops(time.thread_time, 2 if quick else 5)
    with dev.launching():   # (lazyfuse's calls run at its thread budget's count, as in a replay)
        for name, calls in sets.items():
            out[f"{name}, {out['threads']} threads"] = floors.best_time(calls, time.perf_counter, out["rounds"]) * 1e3
    del graph
    return out


def step_dispatch_counts(dev, quick: bool) -> dict:
    """The lazy bar's count (bench/torch_frontend_floors.py): aten ops torch dispatches into the
    frontend, and the new tensors they return, per phase of one warm nanoGPT training step."""
    cfg, x, y = gpt_setup(quick)
    torch.manual_seed(0)
    model = lf.lazy(GPT(cfg), device=dev)
    X, Y = lf.lazy(x, device=dev), lf.lazy(y, device=dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(2):   # (warm: op templates and cached plans in place, as in the timed steps)
        floors.step_dispatches(model, X, Y, opt)
    return floors.step_dispatches(model, X, Y, opt)


def bars_and_floors(costs, times, cpu, mm, counts) -> tuple:
    """The page's verdicts: each bar met or not, each floor against its bar (payload, lines)."""
    verdicts, lines = {}, ["## Bars (issue 19)", ""]
    lazy_ratio = cpu["frontend lazy"] / cpu["torch eager"]
    verdicts["lazy bar met"] = lazy_ratio <= 1.0
    lines.append(f"- Lazy step no slower than torch eager (CPU time at one thread): frontend lazy / torch eager "
                 f"= {lazy_ratio:.2f}x: **{'met' if verdicts['lazy bar met'] else 'not met'}**.")
    compile_cpu = cpu.get("torch.compile")
    if compile_cpu is not None:
        captured_ratio = compile_cpu / cpu["frontend captured (replay)"]
        verdicts["captured bar met"] = captured_ratio >= 1.5
        lines.append(f"- Captured step at least 1.5x faster than torch.compile's (CPU time at one thread): "
                     f"torch.compile / frontend captured = {captured_ratio:.2f}x: "
                     f"**{'met' if verdicts['captured bar met'] else 'not met'}**.")
    else:
        lines.append("- Captured step at least 1.5x faster than torch.compile's: n/a (no torch.compile in this run).")
    n = mm["threads"]
    lines += ["", "## The captured bar's floor: the step's matmuls alone", "",
              f"The matmuls of one nanoGPT step, run by themselves in launch order (torch's MKL/oneDNN calls: the "
              f"libraries torch.compile and lazyfuse's cpu matmuls both call), the best of {mm['rounds']} runs. "
              f"lazyfuse's: the {len(mm['lazyfuse matmuls'])} matmul launches of its captured step, the calls "
              f"its replay makes on the graph's buffers; torch's: the {len(mm['torch matmuls'])} "
              f"mm/addmm/bmm/baddbmm its eager step dispatches (a TorchDispatchMode), remade on copies of their "
              f"operands, and apart its {len(mm['torch attention kernels'])} fused attention kernels (torch's "
              "attention matmuls run inside them; lazyfuse's are among its matmuls). A lazyfuse matmul of at most "
              f"`LAZYFUSE_INLINE_MATMUL` ({lf.ops.INLINE_MATMUL}) multiply-adds is a fused reduction inside a C "
              "kernel, not a library call, and is not listed (none is at the issue's size).", "",
              f"| ms | one thread (CPU time) | {n} threads (wall) |", "|---|---|---|"]
    for name in ("lazyfuse's matmuls", "torch's matmuls", "torch's fused attention kernels"):
        lines.append(f"| {name} | {mm[name + ', one thread']:.2f} | {mm[f'{name}, {n} threads']:.2f} |")
    compile_wall = times.get("torch.compile")
    if compile_cpu is not None:
        lines.append(f"| torch.compile's step | {compile_cpu:.2f} | {compile_wall:.2f} |")
        bar = {"one thread": compile_cpu / 1.5, f"{n} threads": compile_wall / 1.5}
        lines.append(f"| the bar: torch.compile's step / 1.5 | {bar['one thread']:.2f} | {bar[f'{n} threads']:.2f} |")
        for who in ("lazyfuse's", "torch's"):
            exceeds = {k: mm[f"{who} matmuls, {k}"] > v for k, v in bar.items()}
            verdicts[f"{who} matmuls exceed the captured bar"] = exceeds
            lines.append(f"| {who} matmuls alone exceed the bar | " +
                         " | ".join("**yes**" if exceeds[k] else "no" for k in bar) + " |")
    flops, ours_ms = mm["lazyfuse flops"], mm["lazyfuse's matmuls, one thread"]
    lines += ["", f"Flops of the step's matmuls: lazyfuse {flops / 1e6:.1f} M, torch's mm/addmm/bmm "
              f"{mm['torch flops'] / 1e6:.1f} M (its attention kernels' not counted). lazyfuse's matmuls at one "
              f"thread attain {floors.gflops(flops, ours_ms / 1e3):.1f} GFLOP/s; "
              f"torch's GEMM on a 1024^3 product {mm['large GEMM GFLOP/s, one thread']:.1f} GFLOP/s at one thread."]
    peak = floors.peak_gflops_per_core()
    lines.append(f"One core's float32 FMA peak: {peak[0]:.1f} GFLOP/s ({peak[1]})." if peak else
                 "One core's FMA peak: not derived (this script knows the FMA width of AMD family 25 only).")
    lines += ["", "## The lazy bar's floor: torch's dispatch per op, plus the kernels", "",
              "Per phase of one warm frontend step: the aten ops torch dispatches into the frontend's "
              "`__torch_dispatch__` and the new tensors they return (counted by wrapping the handler).", "",
              "| phase | aten ops dispatched | new result tensors |", "|---|---|---|"]
    lines += [f"| {phase} | {ops} | {results} |" for phase, (ops, results) in counts.items()]
    dispatch = costs["torch's dispatch into an empty Python handler"]
    wrapper = costs["  ... plus the wrapper tensor per result"] - dispatch
    kernels = cpu["frontend captured (replay)"]
    floor = floors.lazy_floor_ms(counts, dispatch, wrapper, kernels)
    eager = cpu["torch eager"]
    verdicts["lazy floor"] = floor
    verdicts["lazy bar reachable by a __torch_dispatch__ design"] = floor <= eager
    lines += ["", f"Floor at one thread (CPU time): {sum(o for o, _ in counts.values())} dispatches x {dispatch:.1f} us "
              f"(torch's dispatch into an empty Python handler) + {sum(r for _, r in counts.values())} results x "
              f"{wrapper:.1f} us (a wrapper tensor each) + {kernels:.1f} ms (the step's kernels: its captured replay) "
              f"= **{floor:.1f} ms**, against torch eager's step {eager:.1f} ms: the lazy bar is "
              + ("reachable by a `__torch_dispatch__` design with these kernels only if its recording costs less than "
                 f"{eager - floor:.1f} ms a step." if floor <= eager else
                 "**out of reach of any `__torch_dispatch__` design with these kernels** (before lazyfuse records "
                 "anything).")
              + " The floor leaves out the work above the dispatcher that torch eager pays too (nn.Module calls, "
              "the autograd engine, torch.optim's Python): the true floor is higher."]
    return verdicts, lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: small sizes, no torch.compile")
    ap.add_argument("--out", default=None, help="folder for the page (default: bench/results/)")
    args = ap.parse_args(argv)
    configure(args.out, smoke=args.quick)
    dev = lf.device("cpu")
    info = machine()
    costs = per_op_record_cost(dev, rounds=3 if args.quick else 15)
    times, compiled_step = gpt_step_times(dev, args.quick)
    cpu = gpt_step_cpu_times(dev, args.quick, compiled_step)
    mm = matmul_floors(dev, args.quick)
    counts = step_dispatch_counts(dev, args.quick)
    native = costs["lazyfuse native"]
    lines = heading("torch frontend (issue 19)", info, "torch", "cc") + [
        "`python -m bench.torch_frontend`" + (" --quick (small sizes)" if args.quick else "") +
        ": nanoGPT (n_layer=2, n_head=4, n_embd=128, block 64, vocab 65, batch 8) trained with torch.optim.AdamW "
        "on the frontend, against torch eager and torch.compile; medians unless said. See the script's docstring.", "",
        "## Recording cost per elementwise op (CPU time)", "", "| route | us | x native |", "|---|---|---|"]
    lines += [f"| {name.strip()} | {us:.1f} | {us / native:.1f}x |" for name, us in costs.items()]
    lines += ["", f"## nanoGPT step, wall time at torch's {torch.get_num_threads()} threads", "", "| | ms |", "|---|---|"]
    lines += [f"| {name} | {v:.1f} |" for name, v in times.items() if name != "captured launches"]
    lines += ["", f"Captured launches: {times['captured launches']}.", "",
              "## nanoGPT step at one thread, CPU time", "", "| | ms |", "|---|---|"]
    lines += [f"| {name.strip() if not name.startswith(' ') else '... ' + name.strip()} | {ms:.1f} |"
              for name, ms in cpu.items()]
    lines.append("")
    verdicts, verdict_lines = bars_and_floors(costs, times, cpu, mm, counts)
    lines += verdict_lines
    ratios = {"torch eager / frontend lazy (one thread)": cpu["torch eager"] / cpu["frontend lazy"]}
    if "torch.compile" in cpu:
        ratios["torch.compile / frontend captured (one thread)"] = cpu["torch.compile"] / cpu["frontend captured (replay)"]
    publish("torch_frontend", {"machine": info, "record_cost_us": costs, "step_ms": times, "one_thread_cpu_ms": cpu,
                               "matmul_floor": mm, "dispatches": counts, "verdicts": verdicts}, lines, ratios)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
