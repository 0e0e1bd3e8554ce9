"""One command for a machine with a CUDA (or ROCm) GPU: the Triton tests on the GPU, then a small benchmark.

    python bench/gpu_check.py [--skip-tests] [--skip-compile] [--quick]

1. ``pytest tests/test_interpreter.py`` (and ``test_capture_device.py``, ``test_capture_footguns.py``:
   capture and replay on the GPU, the peers' footguns) with ``LAZYFUSE_TEST_DEVICE=cuda``: the differential
   tests written for the interpreter, run on compiled Triton kernels; and the files whose cuda
   cases run wherever torch sees a GPU (the matmul template and #4's ops, DLPack on GPU memory).
2. The fused chain ``tanh(x*y+1)*exp(-x*x)+sigmoid(y)`` on 2^24 float32 elements: lazyfuse
   (a drain per call, and a captured graph replay), torch eager, and
   ``torch.compile(mode="max-autotune-no-cudagraphs")``; plus device copy bandwidth (torch's
   ``copy_`` and lazyfuse's copy kernel).
3. The decode step of ``bench/capture.py`` on cuda: ``Graph.replay()`` against torch eager and
   ``torch.compile(mode="reduce-overhead")`` (issue 5's GPU comparison).
4. NCCL inside a CUDA graph (issue 21): a one-rank NCCL group on this GPU, collectives recorded by
   ``lf.distributed`` run eagerly and in a captured graph replayed 20 times, against torch's
   own ``torch.distributed`` on the same tensors (``nccl_check``).
5. Results go to ``bench/results/gpu_check-<date>.json`` and ``.md``.

Everything is bounded to stay under ~8 minutes (the test run has its own timeout). Without a
GPU it says so and exits with status 2.
"""
from __future__ import annotations

import argparse
import importlib.util
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
N = 1 << 24
TEST_TIMEOUT_S = 300
GPU_TEST_FILES = ("test_interpreter.py", "test_programs_interpreter.py", "test_interop.py", "test_low_precision.py",
                  "test_capture_device.py", "test_capture_footguns.py", "test_multi_output.py")


def run_tests() -> dict:
    env = dict(os.environ, LAZYFUSE_TEST_DEVICE="cuda", PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *[str(ROOT / "tests" / f) for f in GPU_TEST_FILES]]
    if importlib.util.find_spec("xdist"):   # Triton's compiles are CPU-bound: spread them over the host's cores
        cmd += ["-n", str(min(8, os.cpu_count() or 1))]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=TEST_TIMEOUT_S)
        rc, out = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as e:
        rc, out = "timeout", _text(e.stdout) + _text(e.stderr)
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|errors?)", out)}
    return {"returncode": rc, "seconds": round(time.perf_counter() - t0, 1), **counts, "tail": out[-4000:], "output": out}


def _text(data) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else (data or "")


def timed(fn, sync, reps: int) -> float:
    """Median milliseconds of ``fn`` (after warmup), each call followed by ``sync``."""
    import torch
    for _ in range(3):
        fn()
    sync()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        sync()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def chain(x, y):
    return (x * y + 1).tanh() * (-x * x).exp() + y.sigmoid()


def bench(skip_compile: bool, reps: int) -> dict:
    import torch
    import lazyfuse as lf

    dev = lf.device("cuda")
    g = torch.Generator(device="cuda").manual_seed(0)
    tx = torch.randn(N, device="cuda", generator=g)
    ty = torch.randn(N, device="cuda", generator=g)
    x, y = lf.from_torch(tx, device=dev), lf.from_torch(ty, device=dev)
    lf.sync(dev)
    sync = torch.cuda.synchronize
    chain_bytes = 3 * 4 * N   # two reads and a write of float32
    out = {"elements": N}

    def lazy():
        r = chain(x, y)
        lf.sync(dev)
        return r

    ref = chain(tx, ty)
    err = (lazy().torch() - ref.cpu()).abs().max().item()   # .torch() is a host copy
    out["chain_max_abs_error_vs_torch"] = err
    lf.reset_stats(dev)
    ms = timed(lazy, sync, reps)
    out["lazyfuse_drain_ms"] = ms
    out["lazyfuse_kernels_per_call"] = lf.stats(dev).kernels_launched / (reps + 3)
    graph = lf.capture(dev, lambda: chain(x, y))
    out["lazyfuse_graph_is_hardware"] = graph.is_hardware
    out["lazyfuse_graph_ms"] = timed(graph.replay, sync, reps)
    out["torch_eager_ms"] = timed(lambda: chain(tx, ty), sync, reps)
    if not skip_compile:
        t0 = time.perf_counter()
        compiled = torch.compile(chain, mode="max-autotune-no-cudagraphs")
        compiled(tx, ty)
        sync()
        out["torch_compile_build_s"] = round(time.perf_counter() - t0, 1)
        out["torch_compile_ms"] = timed(lambda: compiled(tx, ty), sync, reps)
    for k in [k for k in out if k.endswith("_ms")]:
        out[k.replace("_ms", "_GBps")] = round(chain_bytes / (out[k] * 1e-3) / 1e9, 1)

    src, dst = torch.randn(N * 4, device="cuda"), torch.empty(N * 4, device="cuda")
    copy_bytes = 2 * 4 * N * 4
    out["torch_copy_GBps"] = round(copy_bytes / (timed(lambda: dst.copy_(src), sync, reps) * 1e-3) / 1e9, 1)
    lsrc, ldst = lf.from_torch(src, device=dev), lf.zeros(N * 4, device=dev)
    lf.sync(dev)

    def lcopy():
        ldst.copy_(lsrc)
        lf.sync(dev)
    out["lazyfuse_copy_GBps"] = round(copy_bytes / (timed(lcopy, sync, reps) * 1e-3) / 1e9, 1)
    return out


def decode_bench(skip_compile: bool, reps: int) -> list:
    """Issue 5's GPU comparison: the decode step of bench/capture.py on cuda, ``Graph.replay()``
    against torch eager and ``torch.compile(mode="reduce-overhead")`` (torch's CUDA graphs)."""
    import torch
    import lazyfuse as lf
    from bench.capture import make

    sync = torch.cuda.synchronize
    rows = []
    for hidden in (64, 256):
        row = {"hidden": hidden}
        try:
            x, step_torch, _lx, step_lf, _wbytes = make(hidden, "cuda")
            graph = lf.capture(lf.device("cuda"), step_lf)
            row["is_hardware"] = graph.is_hardware
            row["launches"] = graph.num_launches
            row["max_err"] = float((graph.replay().torch() - step_torch(x).cpu()).abs().max())
            row["replay_us"] = timed(graph.replay, sync, reps) * 1e3
            row["eager_us"] = timed(lambda: step_torch(x), sync, reps) * 1e3
            if not skip_compile:
                cfn = torch.compile(step_torch, mode="reduce-overhead")
                for _ in range(3):
                    cfn(x)
                row["reduce_overhead_us"] = timed(lambda: cfn(x), sync, reps) * 1e3
        except Exception as e:  # noqa: BLE001 (a first GPU run: keep the rest of the report)
            row["error"] = f"{type(e).__name__}: {e}"
        rows.append(row)
    return rows


def nccl_check(replays: int = 20, backend: str = "nccl", device: str = "cuda") -> dict:
    """NCCL collectives from ``lf.distributed`` on cuda, eager and inside a captured CUDA graph: a
    one-rank group (rank 0 of 1, a FileStore), so one GPU is enough. Each check compares with
    ``torch.distributed`` on plain tensors. The capture needs the eager warmup on the
    collective stream first (the warmup iterations of ``lf.capture`` do it, and create the
    communicator outside the capture): a hang or an error here is what the check is for.
    (``backend="gloo", device="cpu"``: the same check on the host graph, which CI runs so that
    this code stays working between GPU sessions.)"""
    import shutil
    import tempfile
    import torch
    import torch.distributed as dist
    import lazyfuse as lf
    D = lf.distributed
    if backend == "nccl" and not dist.is_nccl_available():
        return {"error": "torch was built without NCCL"}
    out = {}
    scratch = tempfile.mkdtemp(prefix="lf-nccl-")   # the FileStore's file (it removes it when done)
    dist.init_process_group(backend, store=dist.FileStore(os.path.join(scratch, "store"), 1), rank=0, world_size=1,
                            timeout=datetime.timedelta(seconds=60))
    try:
        dev = lf.device(device)
        g = torch.Generator(device=dev.torch_device).manual_seed(0)
        base = torch.randn(64, 32, device=dev.torch_device, generator=g)
        x = lf.from_torch(base.clone(), device=dev)

        def step():
            s = D.all_reduce(x * 2 + 1)                       # a kernel, then NCCL
            return D.all_gather(s.tanh(), dim=0).sum(dim=0)   # a kernel, NCCL, a kernel

        def reference(v):
            s = v * 2 + 1
            dist.all_reduce(s)
            gathered = torch.empty(s.shape[0], s.shape[1], device=v.device)
            (getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor)(gathered, s.tanh())
            return gathered.sum(dim=0).cpu()
        out["eager_max_err"] = float((step().torch() - reference(base)).abs().max())   # .torch(): a host copy
        graph = lf.capture(dev, step)
        out["is_hardware"] = graph.is_hardware
        out["launches"] = graph.num_launches
        worst = 0.0
        for k in range(replays):
            v = base + k
            x.copy_(lf.from_torch(v.clone(), device=dev))
            worst = max(worst, float((graph.replay().torch() - reference(v)).abs().max()))
        out["replays"] = replays
        out["replay_max_err"] = worst
        out["ok"] = out["eager_max_err"] < 1e-4 and worst < 1e-4   # sums of 64 values: float32 order
    finally:
        dist.destroy_process_group()
        shutil.rmtree(scratch, ignore_errors=True)
    return out


def markdown(report: dict) -> str:
    lines = [f"# gpu_check {report['date']}", "", f"- device: {report['device']}",
             f"- torch {report['torch']}, triton {report['triton']}, python {report['python']}", ""]
    tests = report.get("tests")
    if tests:
        lines += ["## tests (LAZYFUSE_TEST_DEVICE=cuda)", "",
                  f"returncode {tests['returncode']}, {tests.get('passed', 0)} passed, {tests.get('failed', 0)} failed, "
                  f"{tests.get('skipped', 0)} skipped in {tests['seconds']} s", ""]
    b = report.get("bench")
    if b:
        lines += ["## fused chain tanh(x*y+1)*exp(-x*x)+sigmoid(y), 2^24 float32", "",
                  "| variant | ms | GB/s |", "|---|---|---|"]
        for name in ("lazyfuse_drain", "lazyfuse_graph", "torch_eager", "torch_compile"):
            if f"{name}_ms" in b:
                lines.append(f"| {name} | {b[f'{name}_ms']:.3f} | {b[f'{name}_GBps']} |")
        lines += ["", f"lazyfuse kernels per call: {b['lazyfuse_kernels_per_call']:.2f}; max abs error vs torch: "
                  f"{b['chain_max_abs_error_vs_torch']:.2e}; graph on hardware: {b['lazyfuse_graph_is_hardware']}", "",
                  f"copy bandwidth (256 MiB): torch {b['torch_copy_GBps']} GB/s, lazyfuse {b['lazyfuse_copy_GBps']} GB/s"]
    decode = report.get("decode")
    nccl = report.get("nccl")
    if nccl:
        lines += ["", "## NCCL in a CUDA graph (one-rank group)", "", ", ".join(f"{k}: {v}" for k, v in nccl.items())]
    for key in ("bench_error", "decode_error", "nccl_error"):
        if key in report:
            lines += ["", f"{key}: {report[key]}"]
    if decode:
        lines += ["", "## decode step at batch 1 (bench/capture.py's, on cuda)", "",
                  "| hidden | launches | replay us | eager us | reduce-overhead us | max err | error |",
                  "|---|---|---|---|---|---|---|"]
        for r in decode:
            cells = [r.get(k) for k in ("hidden", "launches", "replay_us", "eager_us", "reduce_overhead_us", "max_err")]
            lines.append("| " + " | ".join("-" if c is None else f"{c:.4g}" if isinstance(c, float) else str(c)
                                           for c in cells) + f" | {r.get('error', '')} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--skip-tests", action="store_true", help="only the benchmark")
    ap.add_argument("--skip-compile", action="store_true", help="no torch.compile baseline (saves ~1-2 min)")
    ap.add_argument("--quick", action="store_true", help="fewer timing repetitions")
    args = ap.parse_args(argv)

    import torch
    if not torch.cuda.is_available():
        print("gpu_check: torch sees no CUDA/HIP GPU here (torch.cuda.is_available() is False), so there is "
              "nothing to check. Run it on a GPU machine; on the CPU use `pytest tests/test_interpreter.py`.",
              file=sys.stderr)
        return 2
    import triton
    sys.path.insert(0, str(ROOT))
    report = {"date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), "device": torch.cuda.get_device_name(),
              "torch": torch.__version__, "triton": triton.__version__, "python": platform.python_version()}
    if not args.skip_tests:
        print("running tests/test_interpreter.py on cuda ...", flush=True)
        report["tests"] = run_tests()
        print(report["tests"]["tail"][-2500:], flush=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = RESULTS / f"gpu_check-{datetime.date.today().isoformat()}"
    if "tests" in report:
        stem.with_suffix(".tests.log").write_text(report["tests"].pop("output"))
    sections = (("bench", "benchmarking ...", lambda: bench(args.skip_compile, 10 if args.quick else 50)),
                ("decode", "decode step vs reduce-overhead ...", lambda: decode_bench(args.skip_compile, 20 if args.quick else 100)),
                ("nccl", "NCCL collectives inside a CUDA graph ...", nccl_check))
    for key, banner, section in sections:
        print(banner, flush=True)
        try:
            report[key] = section()
        except Exception as e:  # noqa: BLE001 (one broken section must not lose the others' results)
            report[f"{key}_error"] = f"{type(e).__name__}: {e}"
            print(report[f"{key}_error"], file=sys.stderr, flush=True)
        stem.with_suffix(".json").write_text(json.dumps(report, indent=2) + "\n")
    md = markdown(report)
    stem.with_suffix(".md").write_text(md)
    print(md)
    tests = report.get("tests")
    nccl_ok = report.get("nccl", {}).get("ok", False)
    return 0 if (not tests or tests["returncode"] == 0) and nccl_ok else 1


if __name__ == "__main__":
    sys.exit(main())
