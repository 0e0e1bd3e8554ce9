"""A drain's C kernels compile in a few parts at once (issue 15): ``c_compile.build_many`` runs
one compiler process per usable core, and a part that fails costs only its own kernels."""
import lazyfuse as lf
import lazyfuse.codegen.c_compile as c_compile
import lazyfuse.runtime.cpu as cpu


def _kernel(name, body="(void)args; (void)meta;"):
    return f"void {name}(char **args, const long *meta) {{ {body} }}\n"


def test_build_many_compiles_each_source_and_isolates_a_failure(tmp_path, monkeypatch):
    monkeypatch.setenv("LAZYFUSE_CACHE_DIR", str(tmp_path))
    sources = [_kernel("lf_pool_a"), _kernel("lf_pool_b", "this is not C;"), _kernel("lf_pool_c")]
    libs = c_compile.build_many(sources, what="test")
    assert isinstance(libs[1], lf.CompileError) and "part 2 of 3" in str(libs[1])
    assert callable(c_compile.function(libs[0], "lf_pool_a")) and callable(c_compile.function(libs[2], "lf_pool_c"))


def test_a_plan_of_many_kernels_costs_one_compiler_run_per_part(tmp_path, monkeypatch):
    monkeypatch.setenv("LAZYFUSE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(c_compile, "compile_jobs", lambda: 2)
    runs = []
    real = c_compile._compile
    monkeypatch.setattr(c_compile, "_compile", lambda cc, src, so, what, stats=None: (runs.append(what), real(cc, src, so, what, stats))[1])
    x = lf.tensor([[1.0, 2.0, 3.0]] * 4)
    outs = [(x * (k + 1)).sum(-1) for k in range(2 * cpu.MIN_PART)]   # 32 reductions of one input: 32 kernels
    lf.sync()
    assert len([what for what in runs if what.startswith("plan")]) == 2   # (the probe and runner aside)
    assert [o.numpy()[0] for o in outs] == [6.0 * (k + 1) for k in range(2 * cpu.MIN_PART)]
