"""The cpu device's matmul library choice: torch.matmul (MKL) or oneDNN's linear, autotuned per shape.

Every library must give the matmul's value for every operand layout it is offered, and the
autotuner's choice must be what the plan's matmul then runs with, from the on-disk cache too.
"""
import numpy as np
import pytest
import torch

import lazyfuse as lf
from lazyfuse import ops
from lazyfuse.codegen import autotune
from lazyfuse.runtime import cpu
from programs_cases import drained_plans

CPU = lf.device("cpu")
ONEDNN = cpu._onednn_linear() is not None


def force(monkeypatch, tmp_path, winner):
    """Autotune on, in an empty cache, with ``winner`` timed fastest; returns the libraries timed."""
    monkeypatch.setenv("LAZYFUSE_AUTOTUNE", "1")
    monkeypatch.setenv("LAZYFUSE_AUTOTUNE_AFTER", "1")   # tuned at the plan's build
    monkeypatch.setenv("LAZYFUSE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(CPU.backend, "tuner", None)
    monkeypatch.setattr(ops, "INLINE_MATMUL", 0)      # every matmul a library call, however small
    timed = []

    def fake_benchmark(run, *args, **kwargs):
        library = "onednn" if run.func is cpu._onednn_matmul else "torch"
        timed.append(library)
        run()
        return 1.0 if library == winner else 2.0
    monkeypatch.setattr(autotune, "benchmark", fake_benchmark)
    CPU.engine.plans.clear()
    return timed


def operands(layout):
    """(a, b) of ``a @ b`` in one of the layouts a program produces, as lf and float64 torch tensors."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 24, 40)).astype(np.float32)
    w = rng.standard_normal((48, 40)).astype(np.float32)
    ref_a, ref_w = torch.from_numpy(a).double(), torch.from_numpy(w).double()
    if layout == "linear":              # x @ w.T, the weight row-major; lf broadcasts it over the batch
        return lf.tensor(a), lf.tensor(w).T, ref_a, ref_w.T
    if layout == "weight k x n":        # x @ w, w row-major (k, n): oneDNN reads it transposed
        return lf.tensor(a), lf.tensor(w.T.copy()), ref_a, ref_w.T
    if layout == "strided input":       # a transposed view as the left operand
        return lf.tensor(a.transpose(1, 0, 2).copy()).transpose(0, 1), lf.tensor(w).T, ref_a, ref_w.T
    if layout == "offset weight":       # the weight a slice of a bigger buffer
        big = lf.tensor(np.concatenate([w, w[:5]]))
        return lf.tensor(a), big[:48].T, ref_a, ref_w.T
    if layout == "2-d":
        return lf.tensor(a[0]), lf.tensor(w).T, ref_a[0], ref_w.T
    raise AssertionError(layout)


@pytest.mark.parametrize("library", cpu.MATMUL_LIBRARIES)
@pytest.mark.parametrize("layout", ["linear", "weight k x n", "strided input", "offset weight", "2-d"])
def test_every_library_computes_the_matmul(monkeypatch, tmp_path, layout, library):
    if library == "onednn" and not ONEDNN:
        pytest.skip("this torch build has no oneDNN")
    timed = force(monkeypatch, tmp_path, library)
    a, b, ref_a, ref_b = operands(layout)
    for _ in range(2):                    # the build path, then the steady state (cached views)
        out, step = step_of(lambda: (a @ b) * 2)
        np.testing.assert_allclose(out.numpy(), (ref_a @ ref_b * 2).numpy(), rtol=1e-5, atol=1e-5)
    assert step.config == library and sorted(timed) == ["onednn", "torch"]


def step_of(program):
    """The (only) matmul step of the plan ``program`` drains, and its bound buffers' dtypes."""
    out, plans = drained_plans(program)
    steps = [st for plan in plans for st in plan.steps if st.kind == "matmul"]
    assert len(steps) == 1
    return out, steps[0]


def test_which_matmuls_may_go_to_onednn():
    x32 = lf.tensor(np.ones((128, 192), np.float32))   # matmuls above LAZYFUSE_INLINE_MATMUL's 2^20 MACs
    w32 = lf.tensor(np.ones((160, 192), np.float32))
    _, linear = step_of(lambda: lf.nn.functional.linear(x32, w32) * 1)
    _, batched = step_of(lambda: x32.reshape(2, 64, 192) @ lf.tensor(np.ones((2, 192, 160), np.float32)))
    _, double = step_of(lambda: x32.double() @ w32.double().T)
    f32 = [lf.float32] * 3
    assert cpu.matmul_libraries(linear, f32) == (cpu.MATMUL_LIBRARIES if ONEDNN else ("torch",))
    assert cpu.matmul_libraries(batched, f32) == ("torch",)           # one weight per batch entry
    assert cpu.matmul_libraries(double, [lf.float64] * 3) == ("torch",)


@pytest.mark.skipif(not ONEDNN, reason="this torch build has no oneDNN")
@pytest.mark.parametrize("winner", cpu.MATMUL_LIBRARIES)
def test_the_tuned_choice_is_cached_on_disk(monkeypatch, tmp_path, winner):
    timed = force(monkeypatch, tmp_path, winner)
    rng = np.random.default_rng(1)
    xs, ws = rng.standard_normal((130, 150)).astype(np.float32), rng.standard_normal((90, 150)).astype(np.float32)
    x, w = lf.tensor(xs), lf.tensor(ws)
    out, step = step_of(lambda: lf.nn.functional.linear(x, w) + 1)
    assert step.config == winner and sorted(timed) == ["onednn", "torch"]
    np.testing.assert_allclose(out.numpy(), xs.astype(np.float64) @ ws.T.astype(np.float64) + 1, rtol=1e-5, atol=1e-4)
    timed.clear()
    CPU.engine.plans.clear()
    _, again = step_of(lambda: lf.nn.functional.linear(x, w) + 1)
    assert again.config == winner and timed == []                     # the on-disk choice, no re-timing


@pytest.mark.skipif(not ONEDNN, reason="this torch build has no oneDNN")
def test_a_drain_with_a_tuned_library_matmul_is_described(monkeypatch, tmp_path):
    """``LAZYFUSE_DEBUG``'s drain lines and ``lf.explain``'s schedule name a tuned matmul's
    library (its config is the library's name, not a kernel config)."""
    from lazyfuse.explain import Explanation, describe_plan
    timed = force(monkeypatch, tmp_path, "onednn")
    rng = np.random.default_rng(2)
    xs, ws = rng.standard_normal((130, 150)).astype(np.float32), rng.standard_normal((90, 150)).astype(np.float32)
    x, w = lf.tensor(xs), lf.tensor(ws)
    out, step = step_of(lambda: lf.nn.functional.linear(x, w) + 1)
    assert step.config == "onednn" and sorted(timed) == ["onednn", "torch"]
    plan = next(p for p in CPU.engine.plans.values() if step in p.steps)
    assert f"{step.name} (matmul) config onednn" in describe_plan(plan, True)
    assert "onednn" in [k.config for k in Explanation.from_plan(plan).kernels]



def split(qkv, i):
    """Head tensor ``i`` (q, k, v) of a (2, 24, 3*4*8) qkv buffer: (2, 4, 24, 8), strided."""
    return qkv[..., 32 * i:32 * (i + 1)].reshape(2, 24, 4, 8).transpose(1, 2)


HEAD_MATMULS = {   # nanoGPT's attention matmuls and its backward's transposed operands
    "q @ k^T": lambda qkv, att: split(qkv, 0) @ split(qkv, 1).transpose(-2, -1),   # the right one column-major
    "att @ v": lambda qkv, att: att @ split(qkv, 2),                               # contiguous @ strided heads
    "att^T @ q": lambda qkv, att: att.transpose(-2, -1) @ split(qkv, 0),            # batch dims that merge
}


@pytest.mark.parametrize("layout", HEAD_MATMULS)
def test_a_matmul_over_heads_is_one_bmm_on_fresh_operands(monkeypatch, layout):
    """A matmul whose operands share batch dims runs as one ``bmm``; strided heads are copied into
    scratch (in their own orientation) at every launch, though the call and its scratch are made
    once for its buffers: a drain and each replay of a captured graph see the current values."""
    monkeypatch.setattr(ops, "INLINE_MATMUL", 0)      # a library call, however small
    bmms = []
    monkeypatch.setattr(cpu, "_bmm", lambda *args: bmms.append(1) or torch_bmm(*args))
    rng = np.random.default_rng(3)
    fn = HEAD_MATMULS[layout]
    values = [(rng.standard_normal((2, 24, 96)).astype(np.float32), rng.standard_normal((2, 4, 24, 24)).astype(np.float32))
              for _ in range(3)]
    ref = [fn(torch.from_numpy(q).double(), torch.from_numpy(a).double()) * 2 for q, a in values]
    qkv, att = lf.tensor(values[0][0]), lf.tensor(values[0][1])
    for _ in range(2):                    # the build path, then the steady state (the call reused)
        out, _ = step_of(lambda: fn(qkv, att) * 2)
        np.testing.assert_allclose(out.numpy(), ref[0].numpy(), rtol=1e-5, atol=1e-5)
    assert len(bmms) == 2
    graph = lf.capture(CPU, lambda: fn(qkv, att) * 2)
    for (q, a), expected in zip(values[1:], ref[1:]):
        qkv.copy_(q)
        att.copy_(a)
        np.testing.assert_allclose(graph.replay().numpy(), expected.numpy(), rtol=1e-5, atol=1e-5)


torch_bmm = cpu._bmm
