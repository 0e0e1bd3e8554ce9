"""The plan store (runtime.plan_store): a second process takes the first one's compiled plans
from the cache folder — no planner, no compiler, no autotuning — and computes the same values."""
import json
import os
import subprocess
import sys
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
import torch

import lazyfuse as lf
from lazyfuse.codegen import autotune, c_compile
from lazyfuse.codegen.c_printer import print_c
from lazyfuse.explain import Explanation
from lazyfuse.runtime import plan_store

ROOT = Path(__file__).resolve().parents[1]
CPU = lf.device("cpu")

SCRIPT = r"""
import json, numpy as np, torch, lazyfuse as lf
rng = np.random.default_rng(0)
x = lf.tensor(rng.standard_normal((8, 64)).astype(np.float32))
w = lf.tensor(rng.standard_normal((64, 32)).astype(np.float32))
# a fused chain, a matmul (a library call), a softmax, an extern, a reduction: one plan
y = (((x * 2 + 1).tanh() @ w).relu().softmax(-1) + lf.extern(torch.cumsum, x, 1)[:, :32]).sum(0).numpy()
s = lf.stats()
print(json.dumps({"y": y.tolist(), "built": s.plans_built, "loaded": s.plans_loaded,
                  "compiler_runs": s.compiler_runs, "autotune_runs": s.autotune_runs,
                  "kernels": s.kernels_launched}))
"""


def test_a_second_process_takes_the_first_ones_plans(tmp_path):
    env = {**os.environ, "LAZYFUSE_CACHE_DIR": str(tmp_path), "LAZYFUSE_PLAN_STORE": "1",
           "LAZYFUSE_AUTOTUNE": "1", "PYTHONPATH": str(ROOT)}

    def process():
        out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr[-3000:]
        return json.loads(out.stdout.strip().splitlines()[-1])
    first, second = process(), process()
    assert (first["built"], first["loaded"]) == (1, 0) and first["compiler_runs"] >= 1
    assert (second["built"], second["loaded"], second["compiler_runs"], second["autotune_runs"]) == (0, 1, 0, 0)
    assert second["kernels"] == first["kernels"]
    assert second["y"] == first["y"]   # the same kernels: bit for bit


@pytest.fixture
def store(tmp_path, monkeypatch):
    """The plan store on, in an empty cache, nothing loaded or cached in memory."""
    monkeypatch.setenv("LAZYFUSE_PLAN_STORE", "1")
    monkeypatch.setenv("LAZYFUSE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(c_compile, "_loaded", c_compile.LibraryCache())
    forget()
    yield tmp_path
    forget()


def forget():
    """A new process's in-memory state: no plan cached (the disk caches stay)."""
    lf.sync(CPU)
    CPU.engine.plans.clear()
    CPU.engine.structures.clear()


def chain(a):
    x = lf.tensor(a)
    return ((x * 2 + 1).tanh() * x.exp()).sum(-1)


def test_a_stored_plan_computes_what_the_planned_one_did(store):
    a = np.random.default_rng(1).standard_normal((6, 40)).astype(np.float32)
    want = ((torch.from_numpy(a).double() * 2 + 1).tanh() * torch.from_numpy(a).double().exp()).sum(-1).numpy()
    before = lf.stats(CPU)
    np.testing.assert_allclose(chain(a).numpy(), want, rtol=2e-5, atol=2e-5)
    forget()
    np.testing.assert_allclose(chain(a).numpy(), want, rtol=2e-5, atol=2e-5)
    d = lf.stats(CPU) - before
    assert (d.plans_built, d.plans_loaded) == (1, 1)
    assert len(list((store / "plans").glob("*.pkl"))) == 1


def test_a_stored_plan_keeps_a_kernels_launch_thread_count(store, monkeypatch):
    """A kernel bound to ``SERIAL`` (the default's function, launched on one thread) comes back
    from the store launched the same way."""
    from lazyfuse.codegen.c_printer import SERIAL
    monkeypatch.setenv("LAZYFUSE_AUTOTUNE_FORCE", "1")   # every parallel kernel: its SERIAL launch
    a = np.random.default_rng(2).standard_normal((512, 512)).astype(np.float32)
    want = ((torch.from_numpy(a).double() * 2 + 1).tanh() * torch.from_numpy(a).double().exp()).sum(-1).numpy()
    np.testing.assert_allclose(chain(a).numpy(), want, rtol=2e-5, atol=2e-5)
    forget()
    before = lf.stats(CPU)
    np.testing.assert_allclose(chain(a).numpy(), want, rtol=2e-5, atol=2e-5)
    assert (lf.stats(CPU) - before).plans_loaded == 1
    (step,) = [st for st in CPU.engine.plans[next(reversed(CPU.engine.plans))].steps if st.kind == "kernel"]
    assert step.config.threads == SERIAL["threads"] and step.compiled.func is c_compile.launch_on()
    assert step.compiled.args[0] == 1


def test_a_record_whose_library_is_gone_plans_again(store):
    a = np.ones((3, 8), np.float32)
    chain(a).numpy()
    forget()
    for so in (store / "c").glob("*.so"):
        so.unlink()
    c_compile._loaded = c_compile.LibraryCache()
    before = lf.stats(CPU)
    np.testing.assert_allclose(chain(a).numpy(), np.full(3, 8 * np.tanh(3.0) * np.e), rtol=1e-5)
    d = lf.stats(CPU) - before
    # planned again; its kernels' code is still loaded in this process (dlopen finds a library it
    # holds by name), so only another process would compile them again
    assert (d.plans_built, d.plans_loaded) == (1, 0)


def test_a_truncated_record_plans_again(store):
    a = np.ones((3, 8), np.float32)
    chain(a).numpy()
    forget()
    for rec in (store / "plans").glob("*.pkl"):
        rec.write_bytes(rec.read_bytes()[:10])
    before = lf.stats(CPU)
    chain(a).numpy()
    assert (lf.stats(CPU) - before).plans_built == 1


def test_what_has_no_stable_name_is_never_stored(store):
    x = lf.tensor(np.ones((2, 3), np.float32))
    key = lambda: CPU.engine.misses.misses[-1].key   # noqa: E731
    lf.extern(lambda t: t.flip(0), x).numpy()        # a lambda: no name another process could match
    assert plan_store.digest(key().parts, CPU.backend) is None
    lf.extern(torch.flip, x, (0,)).numpy()
    assert plan_store.digest(key().parts, CPU.backend) is not None


def test_a_knob_that_changes_code_changes_the_record(store, monkeypatch):
    chain(np.ones((3, 8), np.float32)).numpy()
    parts = CPU.engine.misses.misses[-1].key.parts
    name = plan_store.digest(parts, CPU.backend)
    monkeypatch.setenv("LAZYFUSE_PARALLEL_THRESHOLD", "7")
    assert plan_store.digest(parts, CPU.backend) != name


def planned_and_loaded(a):
    """The plan ``chain(a)`` builds, then the one a new process would load for it."""
    chain(a).numpy()
    planned = next(reversed(CPU.engine.plans.values()))
    forget()
    chain(a).numpy()
    loaded = next(reversed(CPU.engine.plans.values()))
    assert (planned.origin, loaded.origin) == ("planned", "loaded")
    return planned, loaded


def test_a_loaded_plans_kernels_stay_pickled_until_read(store):
    planned, loaded = planned_and_loaded(np.ones((5, 24), np.float32))
    kernels = [st for st in loaded.steps if st.kind == "kernel"]
    assert kernels and all(type(st.__dict__["_kernel"]) is bytes for st in kernels)   # launched without them
    # read (lf.explain, tuning, a rebind), each is the kernel the first process lowered
    code = lambda st: (autotune.signature(st.kernel), print_c(st.kernel, st.config))  # noqa: E731
    assert [code(st) for st in kernels] == [code(st) for st in planned.steps if st.kind == "kernel"]
    assert Explanation.from_plan(loaded).kernels == Explanation.from_plan(planned).kernels


def test_a_loaded_plan_serves_other_sizes_of_its_structure(store, monkeypatch):
    # while tuning explores, the rebind compares the template's kernel itself (its tuning class)
    monkeypatch.setenv("LAZYFUSE_AUTOTUNE", "1")
    planned_and_loaded(np.ones((5, 24), np.float32))
    before = lf.stats(CPU)
    for n in (6, 7):   # the template's tuning class (5 rounds up to 8)
        a = np.random.default_rng(n).standard_normal((n, 24)).astype(np.float32)
        want = ((torch.from_numpy(a).double() * 2 + 1).tanh() * torch.from_numpy(a).double().exp()).sum(-1).numpy()
        np.testing.assert_allclose(chain(a).numpy(), want, rtol=2e-5, atol=2e-5)
    d = lf.stats(CPU) - before
    assert (d.plans_rebound, d.plans_built, d.compiler_runs) == (2, 0, 0)


def test_a_plan_tuned_at_a_later_run_is_stored_with_its_tuned_choice(store, monkeypatch, last_candidate_wins):
    """With tuning off the build path (``LAZYFUSE_AUTOTUNE_AFTER=3``) the record is written once
    the plan is tuned, not at its build: a new process then loads the tuned kernels, where a
    record of the build's heuristic defaults would keep them for good (a loaded plan never tunes)."""
    monkeypatch.setenv("LAZYFUSE_AUTOTUNE", "1")
    monkeypatch.setenv("LAZYFUSE_AUTOTUNE_AFTER", "3")
    monkeypatch.setattr(CPU.backend, "tuner", None)
    a = np.arange(300 * 257, dtype=np.float32).reshape(300, 257) / 1000
    configs = lambda: [st.config for st in next(reversed(CPU.engine.plans.values())).steps]  # noqa: E731
    for run in range(1, 4):
        np.testing.assert_allclose((lf.tensor(a).exp() * 2).sum(0).numpy(), (np.exp(a) * 2).sum(0), rtol=1e-4)
        assert len(list((store / "plans").glob("*.pkl"))) == (run == 3), run   # written once tuned
    tuned = configs()
    assert last_candidate_wins and tuned != [CPU.backend.candidates(st.kernel)[0] for st in next(reversed(CPU.engine.plans.values())).steps]
    forget()
    (lf.tensor(a).exp() * 2).sum(0).numpy()
    assert next(reversed(CPU.engine.plans.values())).origin == "loaded" and configs() == tuned
