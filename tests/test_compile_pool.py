"""A drain's new C kernels compile in one go (issue 15): ``c_compile.build_functions`` puts the
kernels no library holds yet into a few libraries, compiled by parallel compiler processes; a
kernel is named by the hash of its code, so one compiled in any plan (or any process sharing
the disk cache) is loaded, never compiled again, and one that fails costs only its own error."""
import numpy as np
import pytest

import lazyfuse as lf
import lazyfuse.codegen.c_compile as c_compile
import lazyfuse.runtime.cpu as cpu

CPU = lf.device("cpu")


def _kernel(name, body="(void)args; (void)meta;"):
    return f"void {name}(char **args, const long *meta) {{ {body} }}\n"


def forget_process():
    """What a second process sharing the disk cache starts with: nothing loaded, no plan."""
    c_compile._loaded = c_compile.LibraryCache()
    c_compile._holder = {}
    CPU.engine.plans.clear()


def test_build_many_compiles_each_source_and_isolates_a_failure(fresh_cache):
    sources = [_kernel("lf_pool_a"), _kernel("lf_pool_b", "this is not C;"), _kernel("lf_pool_c")]
    libs = c_compile.build_many(sources, what="test")
    assert isinstance(libs[1], lf.CompileError) and "part 2 of 3" in str(libs[1])
    assert callable(c_compile.function(libs[0], "lf_pool_a")) and callable(c_compile.function(libs[2], "lf_pool_c"))


def test_a_batch_with_a_bad_kernel_names_it_and_builds_the_others(fresh_cache, monkeypatch):
    monkeypatch.setattr(c_compile, "compile_jobs", lambda: 1)   # one library: the bad kernel is inside it
    bodies = [_kernel(c_compile.SYMBOL_SLOT, f"args[0][{k}] = 1;") for k in range(c_compile.MIN_PART)]
    bodies.append(_kernel(c_compile.SYMBOL_SLOT, "this is not C;"))
    named = [c_compile.named(b, cpu.PRELUDE) for b in bodies]
    got = c_compile.build_functions(dict(named), cpu.PRELUDE, {s: f"kernel number {k}" for k, (s, _) in enumerate(named)})
    bad = got[named[-1][0]]
    assert isinstance(bad, lf.CompileError) and f"kernel number {len(bodies) - 1}" in str(bad)
    assert all(callable(got[s]) for s, _ in named[:-1])
    runs = c_compile.compiler_runs
    again = c_compile.build_functions(dict(named[:-1]), cpu.PRELUDE, {s: "again" for s, _ in named})
    assert c_compile.compiler_runs == runs and all(callable(f) for f in again.values())   # each found compiled


def test_a_few_large_kernels_compile_in_parallel_parts(fresh_cache, monkeypatch):
    """Fewer than ``MIN_PART`` functions, but more than ``MIN_PART_CHARS`` of source: one part per
    core, balanced by size (an optimizer's one large foreach no longer holds the others back)."""
    monkeypatch.setattr(c_compile, "compile_jobs", lambda: 2)
    body = lambda k: " ".join(f"((float *)args[0])[{j}] = {k + j}.0f;" for j in range(c_compile.MIN_PART_CHARS // 20))  # noqa: E731
    named = dict(c_compile.named(_kernel(c_compile.SYMBOL_SLOT, body(k)), cpu.PRELUDE) for k in range(3))
    assert len(named) == 3 and sum(map(len, named.values())) > 2 * c_compile.MIN_PART_CHARS
    runs = c_compile.compiler_runs
    got = c_compile.build_functions(named, cpu.PRELUDE, {s: "large" for s in named})
    assert c_compile.compiler_runs - runs == 2 and all(callable(f) for f in got.values())


def distinct_kernels(x, n):
    """``n`` reductions of ``x`` whose code differs (a different unary op or reduction each)."""
    ops = [lambda v: v.exp(), lambda v: v.tanh(), lambda v: v.sin(), lambda v: v.cos(), lambda v: v.abs(),
           lambda v: v.sigmoid(), lambda v: v.neg(), lambda v: v.sqrt()]
    reds = [lambda v: v.sum(-1), lambda v: v.amax(-1), lambda v: v.amin(-1), lambda v: v.mean(-1)]
    return [reds[k // len(ops) % len(reds)](ops[k % len(ops)](x)) for k in range(n)]


def test_new_kernels_of_a_drain_cost_one_compiler_run_per_part_and_never_compile_twice(fresh_cache, monkeypatch):
    monkeypatch.setattr(c_compile, "compile_jobs", lambda: 2)
    x = lf.tensor(np.abs(np.random.default_rng(0).standard_normal((4, 3))).astype(np.float32))
    before = lf.stats(CPU).compiler_runs
    outs = distinct_kernels(x, 2 * c_compile.MIN_PART)   # 32 kernels, 32 sources: two parts
    lf.sync()
    assert lf.stats(CPU).compiler_runs - before == 2
    want = [o.numpy() for o in outs]
    # a second program sharing 16 of those kernels (another plan) compiles only its new ones
    before = lf.stats(CPU).compiler_runs
    more = distinct_kernels(x, 2 * c_compile.MIN_PART)[:c_compile.MIN_PART] + [(x * 3).tanh().sum(-1)]
    lf.sync()
    assert lf.stats(CPU).compiler_runs - before == 1
    np.testing.assert_allclose(more[-1].numpy(), np.tanh(x.numpy() * 3).sum(-1), rtol=1e-5)
    # a second process sharing the disk cache compiles nothing
    forget_process()
    before = lf.stats(CPU).compiler_runs
    outs = distinct_kernels(x, 2 * c_compile.MIN_PART)
    lf.sync()
    assert lf.stats(CPU).compiler_runs == before
    for got, w in zip(outs, want):
        np.testing.assert_array_equal(got.numpy(), w)


def test_kernels_with_one_code_compile_once(fresh_cache):
    x = lf.tensor([[1.0, 2.0, 3.0]] * 4)
    before = lf.stats(CPU).compiler_runs
    outs = [(x * (k + 1)).sum(-1) for k in range(8)]   # 8 kernels, one code (the factor is a runtime scalar)
    lf.sync()
    assert lf.stats(CPU).compiler_runs - before == 1
    assert [o.numpy()[0] for o in outs] == [6.0 * (k + 1) for k in range(8)]


def test_a_kernel_that_fails_to_compile_is_named_and_the_engine_goes_on(fresh_cache, monkeypatch):
    real = cpu.print_c
    monkeypatch.setattr(cpu, "print_c", lambda k, cfg: real(k, cfg).replace("lf_tanhf(", "lf_no_such_function("))
    x = lf.tensor([[0.5, 1.0], [2.0, 3.0]])
    y = x.tanh() + 1
    with pytest.raises(lf.CompileError, match=r"kernel k\d+ .* of plan"):
        y.numpy()
    with pytest.raises(lf.CompileError):
        y.numpy()   # the failed value stays failed
    monkeypatch.setattr(cpu, "print_c", real)
    np.testing.assert_allclose((x.exp() + 1).numpy(), np.exp(x.numpy()) + 1, rtol=1e-6)
    np.testing.assert_allclose((x.tanh() + 1).numpy(), np.tanh(x.numpy()) + 1, rtol=1e-6)
