"""lf.distributed on a real 2-process gloo group (127.0.0.1), every case bounded in time.

Each case runs ``tests/distributed_worker.py CASE`` in two processes: collectives time out
after ``timeout`` seconds (init_process_group(timeout=)), the whole case is killed after
``deadline`` seconds (its process groups with it), and a case passes only when every rank
printed RANK-OK and exited 0. The checks themselves are in the worker, next to their case.
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WORKER = ROOT / "tests" / "distributed_worker.py"

pytest.importorskip("torch.distributed")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(case: str, world: int = 2, timeout: float = 60, deadline: float = 300) -> list:
    """Run ``case`` on ``world`` ranks; the output of each rank, after all have exited (or been killed).
    The ranks share a scratch folder (``LF_TEST_SCRATCH``) to signal each other outside the group."""
    port = free_port()
    scratch = tempfile.mkdtemp(prefix="lf-dist-")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "LF_TEST_SCRATCH": scratch}
    procs = [subprocess.Popen([sys.executable, str(WORKER), case, str(r), str(world), str(port), str(timeout)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=ROOT,
                              start_new_session=True) for r in range(world)]
    end = time.monotonic() + deadline
    outs, hung = [], False
    try:
        for p in procs:
            try:
                outs.append(p.communicate(timeout=max(0.1, end - time.monotonic()))[0])
            except subprocess.TimeoutExpired:
                hung = True
                break
    finally:
        for p in procs:   # stragglers (and anything they started) die with the case
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
        for p in procs[len(outs):]:
            outs.append(p.communicate()[0])
        shutil.rmtree(scratch, ignore_errors=True)
    report = "\n".join(f"--- rank {r} (exit {p.returncode}) ---\n{out}" for r, (p, out) in enumerate(zip(procs, outs)))
    assert not hung, f"case {case} ran past its {deadline} s deadline (killed):\n{report}"
    for p, out in zip(procs, outs):
        assert p.returncode == 0 and "RANK-OK" in out, f"case {case} failed:\n{report}"
    return outs


def test_every_collective_and_dtype_matches_torch_distributed():
    run_ranks("collectives")


def test_bad_arguments_fusion_boundaries_program_order_and_dropped_results():
    """One pair of processes for three cases (each start costs seconds): bad arguments raise
    clear errors and record nothing; a collective is a fusion boundary; collectives run in
    program order across ranks; a result dropped on one rank still runs its collective."""
    run_ranks("semantics")


def test_an_exception_on_one_rank_times_the_others_out_cleanly():
    t0 = time.monotonic()
    outs = run_ranks("rank_fails", timeout=3, deadline=90)
    assert "TIMED-OUT-CLEANLY" in outs[0]
    assert time.monotonic() - t0 < 90


def test_capture_with_collectives_replays_100_times_as_eager():
    run_ranks("capture")


def test_tensor_and_sequence_parallel_and_sharded_optimizer_state_eager_and_captured():
    """The at-scale layouts of the README, written with today's API: weight shards as views and
    the layout's exchanges as collectives (Megatron's sequence-parallel MLP block), and ZeRO-1's
    sharded AdamW state, each eager and captured against one process."""
    run_ranks("layouts")


def test_data_parallel_training_equals_single_process_on_the_global_batch():
    run_ranks("ddp")


def test_gradient_all_reduces_overlap_backward_and_wait_only_where_read():
    """With collectives slowed down (each delivers its result only at its wait, NaN before), DDP
    training still equals one process, uncaptured and captured, and a step waits about one
    collective's delay, not five: the buckets' all-reduces run during the rest of backward."""
    run_ranks("overlap")


def test_torch_frontend_torch_distributed_spelling_and_data_parallel_with_torch_optim():
    run_ranks("frontend")


@pytest.mark.slow
def test_the_ddp_example_runs_under_torchrun():
    torchrun = Path(sys.executable).with_name("torchrun")
    proc = subprocess.Popen([str(torchrun), "--nproc_per_node=2", "--master_addr=127.0.0.1",
                             f"--master_port={free_port()}", str(ROOT / "examples" / "ddp_train.py")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        out = proc.communicate(timeout=600)[0]
    except subprocess.TimeoutExpired:
        proc.terminate()   # torchrun passes SIGTERM on to its workers (each in a session of its own)
        try:
            out = proc.communicate(timeout=60)[0]
        except subprocess.TimeoutExpired:
            proc.kill()
            out = proc.communicate()[0]
        pytest.fail(f"torchrun ran past 600 s (terminated):\n{out}")
    assert proc.returncode == 0, out
    assert "captured: 2 ranks" in out


# -- in this process: no process group, then a one-rank group -------------------------------------------
def test_without_a_process_group_a_collective_says_how_to_make_one():
    import torch.distributed as dist
    import lazyfuse as lf
    if dist.is_initialized():
        pytest.skip("a process group is already initialized in this process")
    with pytest.raises(lf.distributed.CollectiveError, match="init_process_group"):
        lf.distributed.all_reduce(lf.ones(3))


@pytest.fixture
def one_rank_group():
    import datetime
    import torch.distributed as dist
    if dist.is_initialized():
        pytest.skip("a process group is already initialized in this process")
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1,
                            timeout=datetime.timedelta(seconds=30))
    try:
        yield
    finally:
        dist.destroy_process_group()


def test_a_collective_is_a_boundary_in_explain_and_its_pin_ends_with_the_drain(one_rank_group):
    import numpy as np
    import lazyfuse as lf
    D = lf.distributed
    dev = lf.device("cpu")
    x = lf.tensor(np.arange(6, dtype=np.float32))
    y = D.all_reduce(x * 2 + 1).exp()
    text = str(lf.explain(y))
    assert "library call (collective)" in text, text
    lf.sync()
    before = lf.stats().snapshot()
    z = D.all_gather(x.reshape(2, 3), dim=1)
    r = D.reduce_scatter(x.reshape(3, 2), "max")
    assert [s.current.op.label for s in dev.engine.pinned] == ["collective", "collective"]
    del z, r
    lf.sync()
    assert dev.engine.pinned == [], "the drain must release the collectives it ran"
    ran = lf.stats() - before
    # dropped, and both still ran (with the copy that makes all_gather's transposed input dense)
    assert ran.kernels_launched == 3 and ran.ops_elided == 0, ran
    np.testing.assert_allclose(y.numpy(), np.exp(np.arange(6) * 2 + 1), rtol=1e-6)


def test_the_gpu_checks_nccl_graph_check_runs_on_the_host_graph_with_gloo():
    """bench/gpu_check.py's NCCL-in-a-CUDA-graph check needs a GPU; its CPU form (gloo, the host
    graph) runs here so the check still works when a GPU session runs it."""
    import torch.distributed as dist
    if dist.is_initialized():
        pytest.skip("a process group is already initialized in this process")
    sys.path.insert(0, str(ROOT))
    from bench.gpu_check import nccl_check
    got = nccl_check(replays=5, backend="gloo", device="cpu")
    assert got["ok"] and got["is_hardware"] and got["replays"] == 5, got
    assert not dist.is_initialized()


def test_a_kernel_failing_while_a_collective_is_in_flight_loses_only_its_own_value(one_rank_group, monkeypatch):
    """The collective is waited out (its value kept: it ran), the failed kernel's value raises on
    read, and what was not run yet stays pending and computes at the next drain."""
    import numpy as np
    import lazyfuse as lf
    D = lf.distributed
    cpu = lf.device("cpu")
    x = lf.tensor(np.arange(4, dtype=np.float32))
    lf.sync()
    real, made = cpu.call, []

    def call(step, bufs, meta, wrap=None):
        made.append(step.kind)
        run = real(step, bufs, meta, wrap)
        if len(made) != 3:
            return run

        def failing():
            raise RuntimeError("injected launch failure")
        return failing
    monkeypatch.setattr(cpu, "call", call)
    y = D.all_reduce(x * 2)   # kernel, collective (launched, in flight)
    z = (x + 1).exp()         # kernel: fails
    w = y * 3                 # kernel: waits for the collective; not reached
    with pytest.raises(RuntimeError, match="injected"):
        lf.sync()
    monkeypatch.undo()
    assert [str(k) for k in made] == ["kernel", "collective", "kernel", "kernel"], made
    with pytest.raises(RuntimeError, match="injected"):
        z.numpy()
    np.testing.assert_array_equal(y.numpy(), np.arange(4) * 2)
    np.testing.assert_array_equal(w.numpy(), np.arange(4) * 6)
