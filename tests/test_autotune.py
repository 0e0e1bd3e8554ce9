"""Autotuning: real tuning once, a cached choice in the next process, robust cache files."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import lazyfuse as lf
from lazyfuse.codegen import autotune

ROOT = Path(__file__).resolve().parents[1]

PROGRAM = textwrap.dedent("""
    import json, numpy as np, lazyfuse as lf
    x = lf.tensor(np.arange(300 * 257, dtype=np.float32).reshape(300, 257) / 1000)
    a = (x.exp() * 2).sum(0)      # a column reduction: several strategies to try
    b = (x * 3 + 1).tanh()        # a big pointwise kernel: threads to try
    ok = bool(np.allclose(a.numpy(), (np.exp(x.numpy()) * 2).sum(0), rtol=1e-4)) and \\
        bool(np.allclose(b.numpy(), np.tanh(x.numpy() * 3 + 1), rtol=1e-5, atol=1e-6))
    print(json.dumps({"autotune_runs": lf.stats().autotune_runs, "ok": ok}))
""")


def run_program(cache: Path, **env):
    full = {**os.environ, "LAZYFUSE_CACHE_DIR": str(cache), "LAZYFUSE_AUTOTUNE": "1",
                                   "PYTHONPATH": str(ROOT), **env}
    out = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, env=full, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_second_process_finds_the_cached_choice(tmp_path):
    first = run_program(tmp_path)
    assert first["ok"] and first["autotune_runs"] >= 2
    second = run_program(tmp_path)
    assert second["ok"] and second["autotune_runs"] == 0
    entries = list((tmp_path / "autotune").glob("*.json"))
    assert entries and all("config" in json.loads(p.read_text()) for p in entries)


def test_corrupted_and_truncated_entries_are_ignored_and_rebuilt(tmp_path):
    run_program(tmp_path)
    entries = sorted((tmp_path / "autotune").glob("*.json"))
    entries[0].write_text("{not json")
    for p in entries[1:]:
        p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2])
    again = run_program(tmp_path)
    assert again["ok"] and again["autotune_runs"] == len(entries)
    for p in entries:
        json.loads(p.read_text())  # rewritten whole


def test_concurrent_writers_do_not_corrupt_the_cache(tmp_path):
    env = {**os.environ, "LAZYFUSE_CACHE_DIR": str(tmp_path), "LAZYFUSE_AUTOTUNE": "1",
                                   "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", PROGRAM], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env) for _ in range(3)]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        assert json.loads(out.strip().splitlines()[-1])["ok"]
    for p in (tmp_path / "autotune").glob("*.json"):
        json.loads(p.read_text())
    assert not list((tmp_path / "autotune").glob("*.tmp")) and not list((tmp_path / "c").glob("*.tmp"))
    assert run_program(tmp_path)["autotune_runs"] == 0


def test_autotune_off_takes_the_heuristic_default(tmp_path):
    res = run_program(tmp_path, LAZYFUSE_AUTOTUNE="0")
    assert res["ok"] and res["autotune_runs"] == 0
    assert not list((tmp_path / "autotune").glob("*.json"))


def test_failing_candidates_are_skipped_and_all_failing_raises_compile_error(monkeypatch, tmp_path):
    from lazyfuse.codegen import c_printer
    monkeypatch.setenv("LAZYFUSE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("LAZYFUSE_AUTOTUNE", "1")
    monkeypatch.setenv("LAZYFUSE_AUTOTUNE_AFTER", "1")   # tuned at the build, as the candidates fail there
    real = c_printer.CPrinter.source

    def broken_tile(self):
        src = real(self)
        return src.replace("{", "{ this does not compile;", 1) if self.cfg.strategy == "tile" else src

    monkeypatch.setattr(c_printer.CPrinter, "source", broken_tile)
    x = lf.tensor(np.ones((64, 33), dtype=np.float32))
    np.testing.assert_allclose((x * 2).sum(0).numpy(), np.full(33, 128.0))

    keep = lf.tensor([1.0, 2.0]) + 1
    keep.numpy()
    monkeypatch.setattr(c_printer.CPrinter, "source", lambda self: "void broken( {")
    with pytest.raises(lf.CompileError, match="kernel"):
        ((x + 5.5).exp() * 7).numpy()
    monkeypatch.setattr(c_printer.CPrinter, "source", real)
    np.testing.assert_allclose(keep.numpy(), [2.0, 3.0])
    np.testing.assert_allclose((keep * 2).numpy(), [4.0, 6.0])


def test_signature_rounds_shapes_to_a_size_class():
    from lazyfuse.codegen.kernel import Kernel
    from lazyfuse.codegen.index import Var
    k1 = Kernel("k", (Var("p0", 1000),), (), (), (), (), ())
    k2 = Kernel("k", (Var("p0", 1020),), (), (), (), (), ())
    k3 = Kernel("k", (Var("p0", 5000),), (), (), (), (), ())
    assert autotune.signature(k1) == autotune.signature(k2) != autotune.signature(k3)


CRASH_ON_SECOND_CANDIDATE = textwrap.dedent("""
    import os, signal
    from lazyfuse.codegen import autotune
    real, calls = autotune.benchmark, []
    def crashing(run, *a, **k):
        calls.append(1)
        if len(calls) == 2:          # the second candidate benchmarked kills the process
            os.kill(os.getpid(), signal.SIGSEGV)
        return real(run, *a, **k)
    autotune.benchmark = crashing
""")


def test_a_candidate_that_crashed_a_process_is_never_tried_again(tmp_path):
    """A candidate that kills the process mid-tuning is marked before it runs, so the next
    process skips it (with a warning naming it) instead of dying the same way forever."""
    env = {**os.environ, "LAZYFUSE_CACHE_DIR": str(tmp_path), "LAZYFUSE_AUTOTUNE": "1", "LAZYFUSE_AUTOTUNE_AFTER": "1",
                                   "PYTHONPATH": str(ROOT)}
    dead = subprocess.run([sys.executable, "-c", CRASH_ON_SECOND_CANDIDATE + PROGRAM], capture_output=True,
                          text=True, env=env, timeout=300)
    assert dead.returncode == -11, dead.stderr
    marks = [json.loads(p.read_text()) for p in (tmp_path / "autotune").glob("*.json")]
    trying = [m["trying"] for m in marks if "trying" in m]
    assert len(trying) == 1

    again = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, env=env, timeout=300)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout.strip().splitlines()[-1])["ok"]
    assert f"candidate {trying[0]} never came back" in again.stderr
    entries = [json.loads(p.read_text()) for p in (tmp_path / "autotune").glob("*.json")]
    crashed = [e for e in entries if e.get("crashed")]
    assert len(crashed) == 1 and crashed[0]["crashed"] == trying[0:1]
    assert trying[0] not in crashed[0]["timings_us"] and "trying" not in crashed[0]

    third = run_program(tmp_path)   # the record stays: no warning, no re-tuning
    assert third["ok"] and third["autotune_runs"] == 0


@pytest.fixture
def tuned_at_third_run(monkeypatch, tmp_path):
    """Tuning on, off the build path (``LAZYFUSE_AUTOTUNE_AFTER=3``), an empty cache and no plan
    cached on ``cpu``: the device, a (300, 257) array and its lazy tensor."""
    cpu = lf.device("cpu")
    monkeypatch.setenv("LAZYFUSE_AUTOTUNE", "1")
    monkeypatch.setenv("LAZYFUSE_AUTOTUNE_AFTER", "3")
    monkeypatch.setenv("LAZYFUSE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(cpu.backend, "tuner", None)
    cpu.engine.plans.clear()
    a = np.arange(300 * 257, dtype=np.float32).reshape(300, 257) / 1000
    return cpu, a, lf.tensor(a)


def test_tuning_waits_for_a_plans_third_run_and_a_cached_choice_is_built_at_once(tuned_at_third_run, last_candidate_wins):
    """Tuning off the build path (``LAZYFUSE_AUTOTUNE_AFTER=3``): a plan's first two
    runs take the heuristic default, its third benchmarks the candidates, and a later build of
    the same kernel (another plan, or another process) takes the cached winner without tuning."""
    cpu, a, x = tuned_at_third_run

    def run():
        got = (x.exp() * 2).sum(0)
        np.testing.assert_allclose(got.numpy(), (np.exp(a) * 2).sum(0), rtol=1e-4)
        return next(st for st in cpu.engine.plans[next(reversed(cpu.engine.plans))].steps if st.kind == "kernel")

    tuned_before = lf.stats(cpu).autotune_runs
    configs = []
    for _ in range(4):
        configs.append(run().config.label())
        configs.append(lf.stats(cpu).autotune_runs - tuned_before)
    default = cpu.backend.candidates(run().kernel)[0].label()
    assert configs[:4] == [default, 0, default, 0], configs   # two runs untuned
    assert configs[5] == configs[7] == 1 and configs[4] == configs[6] != default, configs   # tuned at the third
    cpu.engine.plans.clear()
    assert run().config.label() == configs[4] and lf.stats(cpu).autotune_runs - tuned_before == 1
    cpu.engine.plans.clear()


def test_a_capture_never_tunes_and_its_graph_keeps_the_code_it_recorded(tuned_at_third_run):
    cpu, a, x = tuned_at_third_run
    want = (np.exp(a) * 2).sum(0)
    before = lf.stats(cpu).autotune_runs
    graph = lf.capture(cpu, lambda: (x.exp() * 2).sum(0), warmup_iters=2)   # runs 1 and 2, then the capture
    assert lf.stats(cpu).autotune_runs == before
    np.testing.assert_allclose(graph.replay().numpy(), want, rtol=1e-4)
    np.testing.assert_allclose((x.exp() * 2).sum(0).numpy(), want, rtol=1e-4)   # the plan's third run: tuned
    assert lf.stats(cpu).autotune_runs == before + 1
    np.testing.assert_allclose(graph.replay().numpy(), want, rtol=1e-4)
    cpu.engine.plans.clear()


@pytest.mark.parametrize("marker_alive", [True, False])
def test_a_trying_mark_of_a_live_process_is_a_concurrent_tuner_not_a_crash(monkeypatch, tmp_path, marker_alive):
    """Three processes tuning one kernel at once each see the others' ``trying`` marks: a mark
    whose process still runs is not a crash (they used to mark each other's candidates crashed
    until none was left); a mark whose process is gone is."""
    import socket
    import warnings
    from types import SimpleNamespace
    monkeypatch.setenv("LAZYFUSE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("LAZYFUSE_AUTOTUNE", "1")
    monkeypatch.delenv("LAZYFUSE_AUTOTUNE_FORCE", raising=False)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        if not marker_alive:
            other.kill()
            other.wait()
        tuner, labels = autotune.Tuner("test-backend"), ["default", "wide"]
        key = tuner.key("sig")
        tuner.store(key, {"crashed": [], "signature": "sig", "trying": "wide", "trying_pid": other.pid,
                          "trying_host": socket.gethostname()})
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            best = autotune.choose(tuner, "sig", labels, [lambda: None, lambda: None], SimpleNamespace(autotune_runs=0))
    finally:
        other.kill()
        other.wait()
    entry = tuner.entry(key)
    assert best in (0, 1) and "trying" not in entry
    came_back = [str(w.message) for w in seen if "never came back" in str(w.message)]
    if marker_alive:
        assert not came_back and entry["crashed"] == [] and set(entry["timings_us"]) == set(labels)
    else:
        assert len(came_back) == 1 and entry["crashed"] == ["wide"] and set(entry["timings_us"]) == {"default"}
