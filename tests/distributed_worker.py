"""One rank of a tests/test_distributed.py case: ``python tests/distributed_worker.py CASE RANK
WORLD PORT TIMEOUT``. Joins a gloo process group on 127.0.0.1:PORT (collectives time out after
TIMEOUT seconds), runs ``case_CASE(rank, world)``, prints ``RANK-OK`` and exits 0, or prints the
traceback and exits 1. ``os._exit`` skips interpreter teardown: a torch process group torn down
at exit can abort the process (``terminate called``) after the case passed.
"""
import datetime
import itertools
import os
import sys
import time
import traceback
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))
import lazyfuse as lf  # noqa: E402

D = lf.distributed
DTYPES = ["float32", "float64", "float16", "bfloat16", "int32", "int64", "bool"]


def rank_data(rank, shape, dtype, salt=0):
    """Rank-specific values of ``dtype`` (small integers for the integer types, so sums are exact)."""
    rng = np.random.default_rng(1000 * rank + salt)
    if dtype == "bool":
        return torch.from_numpy(rng.random(shape) < 0.5)
    if dtype in ("int32", "int64"):
        return torch.from_numpy(rng.integers(-50, 50, shape)).to(getattr(torch, dtype))
    return torch.from_numpy(rng.standard_normal(shape)).to(getattr(torch, dtype))


def same(got, want, what):
    want = want.cpu()
    assert tuple(got.shape) == tuple(want.shape), f"{what}: shape {tuple(got.shape)} != {tuple(want.shape)}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    assert torch.equal(got, want), f"{what}: lazyfuse {got} != torch.distributed {want}"


# -- every collective against torch.distributed on plain torch tensors, every dtype -----------------
def case_collectives(rank, world):
    ops = {"sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.AVG, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}
    for name in DTYPES:
        x = rank_data(rank, (4, 6), name)
        t = lf.from_torch(x.clone())
        is_float = name.startswith("float") or name == "bfloat16"
        for op, top in ops.items():
            if op == "avg" and not is_float:
                continue
            want = x.clone()
            dist.all_reduce(want, top)
            same(D.all_reduce(t, op).torch(), want, f"all_reduce {op} {name}")
            want = torch.empty(2, 6, dtype=x.dtype)
            (getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor)(want, x.clone(), top)
            same(D.reduce_scatter(t, op).torch(), want, f"reduce_scatter {op} {name}")
        want = torch.empty(8, 6, dtype=x.dtype)
        (getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor)(want, x)
        same(D.all_gather(t).torch(), want, f"all_gather {name}")
        want = torch.empty(4, 6, dtype=x.dtype)
        dist.all_to_all_single(want, x.clone())
        same(D.all_to_all(t).torch(), want, f"all_to_all {name}")
        want = x.clone()
        dist.broadcast(want, 1)
        same(D.broadcast(t, src=1).torch(), want, f"broadcast {name}")
        same(t.torch(), x, f"the input of the functional collectives {name}")
    # the arithmetic itself, not only torch's word for it (float64: exact for two ranks)
    x = rank_data(rank, (4, 6), "float64")
    others = [rank_data(r, (4, 6), "float64") for r in range(world)]
    t = lf.from_torch(x)
    np.testing.assert_array_equal(D.all_reduce(t, "avg").numpy(), (sum(others) / world).numpy())
    np.testing.assert_array_equal(D.all_reduce(t, "max").numpy(), torch.stack(others).amax(0).numpy())
    # along another dim, a strided (transposed) input, torch's ReduceOp, out= and the in-place forms
    same(D.all_gather(t, dim=1).torch(), torch.cat(others, 1), "all_gather dim=1")
    same(D.reduce_scatter(t, dim=1).torch(), sum(others).chunk(world, 1)[rank], "reduce_scatter dim=1")
    same(D.all_reduce(t.T, dist.ReduceOp.SUM).torch(), sum(others).T, "all_reduce of a transposed view")
    out = lf.zeros((4, 6), dtype=lf.float64)
    assert D.all_reduce(t, "min", out=out) is out
    same(out.torch(), torch.stack(others).amin(0), "all_reduce out=")
    u = lf.from_torch(x.clone())
    assert D.all_reduce_(u) is u
    same(u.torch(), sum(others), "all_reduce_")
    v = lf.from_torch(x.clone())
    view = v[1:3]
    D.broadcast_(view, src=0)
    want = x.clone()
    want[1:3] = others[0][1:3]
    same(v.torch(), want, "broadcast_ into a view lands in its base")


def case_bad_input(rank, world):
    t = lf.ones((3, 4))
    for call, err, words in [
        (lambda: D.all_reduce(t, "prod"), D.CollectiveError, "op='prod'"),
        (lambda: D.reduce_scatter(t), lf.ShapeError, "multiple of the group's world size"),
        (lambda: D.all_to_all(lf.ones(3)), lf.ShapeError, "multiple"),
        (lambda: D.broadcast(t, src=5), D.CollectiveError, "src=5"),
        (lambda: D.all_reduce(lf.ones(3, dtype=lf.int32), "avg"), lf.DTypeError, "floating"),
        (lambda: D.all_reduce(torch.ones(3)), lf.DTypeError, "lazyfuse Tensor"),
        (lambda: D.all_reduce(lf.ones(3, requires_grad=True)), lf.AutogradError, "not differentiable"),
    ]:
        try:
            call()
        except err as e:
            assert words in str(e), f"{err.__name__} message {e!r} lacks {words!r}"
        else:
            raise AssertionError(f"no {err.__name__} for {words}")
    # nothing was recorded by the refused calls: the ranks are still in step
    same(D.all_reduce(t).torch(), torch.full((3, 4), float(world)), "after the refused calls")


# -- fusion around a collective, program order, dropped results -------------------------------------------
def case_fusion_and_order(rank, world):
    x = lf.tensor(np.arange(12, dtype=np.float32).reshape(3, 4) + rank)
    xs = [np.arange(12, dtype=np.float32).reshape(3, 4) + r for r in range(world)]
    lf.sync()
    before = lf.stats().snapshot()
    y = ((D.all_reduce(x * 2 + 1) * 3).exp() - 1).numpy()
    ran = lf.stats() - before
    # the producer chain is one kernel up to the collective, the consumer chain one after it
    assert ran.kernels_launched == 3, f"{ran.kernels_launched} launches, expected kernel + collective + kernel"
    np.testing.assert_allclose(y, np.exp(3 * sum(2 * a + 1 for a in xs)) - 1, rtol=1e-5)

    # program order: the same two collectives, recorded in the same order, but with a live root
    # on rank 0 (an in-place write recorded before both) that reads the second one; its graph
    # walk reaches the second collective first. Each must still run the first one first.
    a_in = lf.tensor(np.full(4, 1.0 + rank, dtype=np.float32))
    b_in = lf.tensor(np.full(4, 10.0 * (1 + rank), dtype=np.float32))
    w = lf.zeros(4)
    lf.sync()
    if rank == 0:
        w.add_(1)
    a = D.all_reduce(a_in)
    b = D.all_reduce(b_in)
    w.add_(b)
    lf.sync()
    np.testing.assert_array_equal(a.numpy(), np.full(4, sum(1.0 + r for r in range(world))))
    np.testing.assert_array_equal(b.numpy(), np.full(4, sum(10.0 * (1 + r) for r in range(world))))

    # reads in another order than records on one rank: the drain runs all pending collectives
    c = D.all_reduce(a_in * 2)
    d = D.all_gather(b_in)
    if rank == 1:
        got_d, got_c = d.numpy(), c.numpy()
    else:
        got_c, got_d = c.numpy(), d.numpy()
    np.testing.assert_array_equal(got_c, a.numpy() * 2)
    np.testing.assert_array_equal(got_d, np.concatenate([np.full(4, 10.0 * (1 + r)) for r in range(world)]))


def case_dropped(rank, world):
    x = lf.tensor(np.full(5, 1.0 + rank, dtype=np.float32))
    total = sum(1.0 + r for r in range(world))
    lf.sync()
    before = lf.stats().snapshot()
    kept = D.all_reduce(x * 3)
    dropped = D.all_reduce(x + 1)
    if rank == 0:
        del dropped   # dropped on one rank only: rank 0 must still take part
    lf.sync()
    ran = lf.stats() - before
    assert ran.ops_elided == 0, f"{ran.ops_elided} ops elided: a collective (or its input) was dropped"
    assert ran.kernels_launched == 4, f"{ran.kernels_launched} launches: expected 2 kernels + 2 collectives"
    np.testing.assert_array_equal(kept.numpy(), np.full(5, 3 * total))
    if rank == 1:
        np.testing.assert_array_equal(dropped.numpy(), np.full(5, total + world))
    # dropped on every rank, consumer and all: the collective still runs, what reads it is elided
    lf.sync()
    before = lf.stats().snapshot()
    gone = D.all_reduce(x).exp() * 2
    del gone
    lf.sync()
    ran = lf.stats() - before
    assert ran.kernels_launched == 1 and ran.ops_elided == 2, ran
    # the in-place form of a dropped tensor still runs too
    z = lf.tensor(np.full(3, 2.0, dtype=np.float32))
    D.all_reduce_(z)
    del z
    after = D.all_reduce(x)
    np.testing.assert_array_equal(after.numpy(), np.full(5, total))


def case_rank_fails(rank, world):
    """Rank 1 fails before the collective and stays alive (it never joins) until rank 0 is done;
    rank 0 gets a clean CollectiveError after the group's timeout, its engine still usable."""
    done = Path(os.environ["LF_TEST_SCRATCH"]) / "rank0-done"
    x = lf.tensor(np.ones(4, dtype=np.float32))
    assert D.all_reduce(x).numpy()[0] == world   # the group works
    graph = lf.capture(lf.device("cpu"), lambda: D.all_reduce(x * 2) + x)   # on every rank: 3 warmups, 1 capture
    if rank == 1:
        try:
            raise ValueError("this rank's own bug")
        except ValueError:
            give_up = time.monotonic() + 120   # alive, never reaching the collective (the case's deadline is 90 s)
            while not done.exists() and time.monotonic() < give_up:
                time.sleep(0.1)
        return
    try:
        y = D.all_reduce(x * 2)
        before = x * 3   # independent of the collective: runs while it is in flight
        z = y + 1        # waits for it
        after = x * 4    # planned after the wait that fails
        t0 = time.monotonic()
        try:
            z.numpy()
        except D.CollectiveError as e:
            waited = time.monotonic() - t0
            assert isinstance(e, lf.LazyfuseError) and isinstance(e, RuntimeError)
            assert "all_reduce(sum) on rank 0 of 2 failed" in str(e), str(e)
            assert "timed out" in str(e.__cause__).lower(), repr(e.__cause__)   # gloo's own timeout, passed on
            assert waited < float(os.environ["LF_TEST_TIMEOUT"]) + 10, waited
        else:
            raise AssertionError("rank 0's collective did not fail")
        for t in (y, z):
            try:
                t.numpy()
            except D.CollectiveError:
                pass
            else:
                raise AssertionError("a value computed from the failed collective was readable")
        np.testing.assert_array_equal((x * 5 + 1).numpy(), np.full(4, 6.0))   # the engine still works
        np.testing.assert_array_equal(before.numpy(), np.full(4, 3.0))   # independent work is not lost
        np.testing.assert_array_equal(after.numpy(), np.full(4, 4.0))
        try:   # a replay's collective fails the same way, the other launches of the replay waited out
            graph.replay()
        except D.CollectiveError as e:
            assert "all_reduce(sum) on rank 0 of 2 failed" in str(e), str(e)   # (gloo: the pair is closed now)
        else:
            raise AssertionError("rank 0's replayed collective did not fail")
        np.testing.assert_array_equal((x * 6).numpy(), np.full(4, 6.0))
        print("TIMED-OUT-CLEANLY", flush=True)
    finally:
        done.touch()   # rank 1 may go


# -- capture ----------------------------------------------------------------------------------------------
def case_capture(rank, world):
    dev = lf.device("cpu")
    x = lf.tensor(np.zeros((4, 8), dtype=np.float32))
    w = lf.tensor(np.random.default_rng(rank).standard_normal((4, 8)).astype(np.float32))

    def step():
        s = D.all_reduce(x * w + 1)                 # kernel, collective
        g = D.all_gather(s[:2].relu(), dim=1)       # kernel, collective
        r = D.reduce_scatter(s.tanh(), "max")       # kernel, collective
        return (g.sum() + r.sum() * 2).reshape(1)   # kernel(s)

    def eager(xv):
        x.copy_(xv)
        return step().numpy().copy()

    rng = np.random.default_rng(7)   # the same inputs on every rank
    base = [rng.standard_normal((4, 8)).astype(np.float32) for _ in range(100)]
    inputs = [b + np.float32(rank) for b in base]
    first = [(base[0] + np.float32(r)) * np.float32(3) for r in range(world)]   # each rank's x * 3
    want = [eager(v) for v in inputs]

    lf.reset_stats()
    graph = lf.capture(dev, step)
    stats = lf.stats()
    # warmup as on one device: build path, then the steady state twice, then the capture run
    assert stats.fusion_cache_misses == 1 and stats.fusion_cache_hits == 3, stats
    assert graph.is_hardware and graph.fallback_reason is None
    launches = graph.num_launches
    assert launches >= 6, launches   # the three collectives are launches of the host graph
    for v, ref in zip(inputs, want):
        x.copy_(v)
        np.testing.assert_array_equal(graph.replay().numpy(), ref)

    # the two deliberate bugs, as on one device (a consumer reads the collective's result)
    def closure():
        return D.all_reduce(x * 3) + 1
    for kwargs in ({"hold_outputs": False}, {"warmup_iters": 1}):
        try:
            lf.capture(dev, closure, **kwargs)
        except lf.CaptureAllocationError as e:
            assert "Likely cause" in str(e)
        else:
            raise AssertionError(f"capture with {kwargs} did not raise CaptureAllocationError")
    # (the failed capture runs' collectives stay pending, on every rank alike, and run now)
    lf.sync()
    g2 = lf.capture(dev, closure)
    x.copy_(inputs[0])
    np.testing.assert_array_equal(g2.replay().numpy(), sum(first) + np.float32(1))
    # a closure returning the collective's own result: never elided, so hold_outputs=False warms
    # it up anyway and the capture succeeds (the documented exception to the one-device bug)
    g3 = lf.capture(dev, lambda: D.all_reduce(x * 3), hold_outputs=False)
    np.testing.assert_array_equal(g3.replay().numpy(), sum(first))


# -- tensor and sequence parallel: a rank's shard is a view, the layout's exchanges are collectives -------
def case_layouts(rank, world):
    """Megatron's sequence-parallel MLP block on shards, eager and captured, equal to the full
    block in one process: each rank holds a slice of the sequence (dim 1 of batch x seq x
    hidden), layer-norms it, all-gathers the sequence, multiplies by its column shard of W1
    (a view of the full weight), gelu, by its row shard of W2 (a view), and reduce-scatters the
    partial sums back to its slice of the sequence, plus the residual. Plain tensor parallel is
    the same without the sequence split: a column-parallel linear all-gathers its outputs."""
    F = lf.nn.functional
    batch, seq, hidden, ffn = 2, 8, 16, 32
    rng = np.random.default_rng(5)   # the same full weights on every rank
    w1, w2 = (rng.standard_normal(s).astype(np.float32) / 4 for s in ((hidden, ffn), (ffn, hidden)))
    inputs = [rng.standard_normal((batch, seq, hidden)).astype(np.float32) for _ in range(4)]
    mine = slice(rank * seq // world, (rank + 1) * seq // world)
    cols = slice(rank * ffn // world, (rank + 1) * ffn // world)

    def full_block(v):   # the reference: one process, the whole sequence and the whole weights
        v = torch.from_numpy(v).double()
        h = torch.nn.functional.layer_norm(v, (hidden,))
        return (torch.nn.functional.gelu(h @ torch.from_numpy(w1).double()) @ torch.from_numpy(w2).double() + v).numpy()

    W1, W2 = lf.tensor(w1), lf.tensor(w2)
    w1_shard, w2_shard = W1[:, cols], W2[cols]   # views of the full weights: index arithmetic, no copy
    x = lf.tensor(inputs[0][:, mine])

    def block():
        h = D.all_gather(F.layer_norm(x, (hidden,)), dim=1)        # the whole sequence
        partial = F.gelu(h @ w1_shard) @ w2_shard                   # this rank's share of the sum
        return D.reduce_scatter(partial, "sum", dim=1) + x          # back to this rank's slice

    for v in inputs:
        x.copy_(v[:, mine])
        np.testing.assert_allclose(block().numpy(), full_block(v)[:, mine], rtol=1e-4, atol=1e-5)
    graph = lf.capture(lf.device("cpu"), block)
    assert graph.is_hardware, graph.fallback_reason
    for v in inputs:
        x.copy_(v[:, mine])
        np.testing.assert_allclose(graph.replay().numpy(), full_block(v)[:, mine], rtol=1e-4, atol=1e-5)
    # tensor parallel, column-parallel linear: each rank's output columns, gathered along the last dim
    full = lf.tensor(inputs[0])
    np.testing.assert_allclose(D.all_gather(full @ w1_shard, dim=-1).numpy(), inputs[0] @ w1, rtol=1e-4, atol=1e-5)
    case_sharded_optimizer(rank, world)


def case_sharded_optimizer(rank, world):
    """Sharded optimizer state (ZeRO-1) by hand, eager and captured, equal to one torch process on
    the global batch: the gradients are reduce-scattered instead of all-reduced, each rank's AdamW
    steps its shard of the flat parameters only (so it holds that shard's moments only), and the
    updated shards are all-gathered back into every rank's parameters (written in place, as a
    captured step needs)."""
    import ddp_train
    from train_mlp import WARMUP, batch_of, forward, init_params, make_data
    F = lf.nn.functional
    steps = 10
    arrays = init_params(ddp_train.SIZES, seed=1)   # the reference's initial values, on every rank
    xs, ys = make_data(steps, ddp_train.BATCH, ddp_train.SIZES)
    ref_losses, ref_params = ddp_train.train_single(steps)
    flat = np.concatenate([a.ravel() for a in arrays])
    assert flat.size % world == 0
    n = flat.size // world
    for captured in (False, True):
        params = [lf.tensor(a, requires_grad=True) for a in arrays]
        shard = lf.tensor(flat[rank * n:(rank + 1) * n], requires_grad=True)
        shard.grad = lf.zeros(n)   # one buffer for every step's averaged gradient shard
        opt = lf.optim.AdamW([shard], lr=1e-2)
        x = lf.tensor(ddp_train.local_rows(xs[0], rank, world))
        y = lf.tensor(ddp_train.local_rows(ys[0], rank, world))

        def step():
            with lf.no_grad():
                for p in params:
                    if p.grad is not None:
                        p.grad.zero_()
            loss = ((forward(params, x, F.gelu, F.linear) - y) ** 2).mean()
            loss.backward()
            with lf.no_grad():
                shard.grad.copy_(D.reduce_scatter(lf.cat([p.grad.reshape(-1) for p in params]), "avg"))
                opt.step()
                whole = D.all_gather(shard)
                at = 0
                for p in params:
                    p.copy_(whole[at:at + p.numel()].reshape(p.shape))
                    at += p.numel()
            return D.all_reduce(loss.detach(), "avg")

        losses = {}
        graph = lf.capture(lf.device("cpu"), step, warmup_iters=WARMUP) if captured else None
        if graph is not None:
            losses[WARMUP] = graph.output.item()
        for k in range(WARMUP + 1 if captured else 0, steps):
            x.copy_(ddp_train.local_rows(xs[batch_of(k)], rank, world))
            y.copy_(ddp_train.local_rows(ys[batch_of(k)], rank, world))
            losses[k] = (graph.replay() if captured else step()).item()
        what = f"sharded AdamW, captured={captured}"
        assert [m.numel() for m in opt.state[0]] == [n, n], what   # the moments of this rank's shard only
        np.testing.assert_allclose(list(losses.values()), [ref_losses[k] for k in losses], rtol=1e-4, atol=1e-6,
                                   err_msg=what)
        for got, want in zip(params, ref_params):
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-5, err_msg=what)


def case_semantics(rank, world):
    # the interpreter device binds collectives the same way (torch views of its host buffers)
    t = lf.tensor(np.full(3, 1.0 + rank, dtype=np.float32), device="interpreter")
    np.testing.assert_array_equal(D.all_reduce(t * 2).numpy(), np.full(3, sum(2.0 + 2 * r for r in range(world))))
    case_bad_input(rank, world)
    case_fusion_and_order(rank, world)
    case_dropped(rank, world)


# -- data-parallel training -----------------------------------------------------------------------------
def case_ddp(rank, world):
    import ddp_train
    for captured in (False, True):
        losses, params = ddp_train.train_ddp(steps=20, captured=captured, bucket_bytes=4096)
        ref_losses, ref_params = ddp_train.train_single(steps=20)
        seen = [k for k in range(20) if not np.isnan(losses[k])]
        assert seen[0] == (3 if captured else 0) and len(seen) == 20 - seen[0], seen   # warmup steps are unobserved
        np.testing.assert_allclose([losses[k] for k in seen], [ref_losses[k] for k in seen], rtol=1e-4, atol=1e-6,
                                   err_msg=f"captured={captured}")
        for got, want in zip(params, ref_params):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=f"captured={captured}")


# -- overlap: a bucket's all-reduce runs while the rest of backward does ----------------------------------
class SlowWork:
    """A collective's Work that delivers its result only at ``wait()``, and not before ``delay``
    seconds after the launch: the output holds NaN until then, so a step that read it without
    waiting would compute garbage. ``blocked`` sums the seconds spent waiting, over all."""
    blocked = 0.0

    def __init__(self, work, stage, out, delay):
        self.work, self.stage, self.out, self.due = work, stage, out, time.perf_counter() + delay

    def wait(self):
        t0 = time.perf_counter()
        self.work.wait()
        time.sleep(max(0.0, self.due - time.perf_counter()))
        self.out.copy_(self.stage)
        SlowWork.blocked += time.perf_counter() - t0
        return True


def slow_collectives(delay):
    """Every host collective of lf.distributed from now on is a SlowWork (on every rank alike)."""
    from lazyfuse.runtime import collectives
    for kind, launch in list(collectives._LAUNCH.items()):
        def slow(dist_, spec, src, out, async_op, launch=launch):
            stage = torch.empty_like(out)
            work = launch(dist_, spec, src, stage, async_op)
            out.fill_(float("nan") if out.is_floating_point() else -1)
            return SlowWork(work, stage, out, delay)
        collectives._LAUNCH[kind] = slow


def case_overlap(rank, world):
    import ddp_train
    from lazyfuse.runtime.collectives import Schedule
    delay, steps = 0.1, 12
    slow_collectives(delay)
    ref_losses, ref_params = ddp_train.train_single(steps=steps)
    for captured in (False, True):
        SlowWork.blocked = 0.0
        losses, params = ddp_train.train_ddp(steps=steps, captured=captured, bucket_bytes=4096)
        blocked = SlowWork.blocked
        seen = [k for k in range(steps) if not np.isnan(losses[k])]
        np.testing.assert_allclose([losses[k] for k in seen], [ref_losses[k] for k in seen], rtol=1e-4, atol=1e-6,
                                   err_msg=f"captured={captured}")
        for got, want in zip(params, ref_params):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=f"captured={captured}")
        # each step has 5 collectives (4 gradient buckets and the loss), each taking `delay`: one
        # after the other a step would wait 5 * delay; launched as soon as ready and waited for
        # only where read, they run together and a step waits about one delay
        assert blocked < 2.5 * delay * steps, f"captured={captured}: {blocked:.2f} s waiting over {steps} steps"
    # the plan of a training step: the first bucket's all-reduce is launched, then backward kernels
    # run and later buckets launch, and only then does a step wait for it
    plans = [p for p in lf.device("cpu").engine.plans.values() if isinstance(p.waits, Schedule)]
    plan = max(plans, key=lambda p: sum(st.kind == "collective" for st in p.steps))
    kinds = [str(st.kind) for st in plan.steps]
    collectives = [j for j, k in enumerate(kinds) if k == "collective"]
    first = collectives[0]
    waited = next((j for j, w in enumerate(plan.waits.before) if first in w), len(kinds))
    kernels = [j for j in range(first + 1, waited) if kinds[j] == "kernel"]
    later = [j for j in collectives if first < j < waited]
    assert len(collectives) == 5 and kernels and later and kernels[0] < later[-1], (kinds, plan.waits.before)


# -- the torch frontend: torch.distributed's own spelling, DataParallel with torch.optim ---------------
def case_frontend(rank, world):
    case_frontend_collectives(rank, world)
    case_frontend_ddp(rank, world)


def case_frontend_collectives(rank, world):
    """``torch.distributed.all_reduce`` / ``broadcast`` on frontend tensors record lazy collectives
    (no drain, counted natively) and give torch.distributed's values on plain tensors."""
    counters = lf.torch_frontend.counters
    lf.torch_frontend.reset()
    for op in (dist.ReduceOp.SUM, dist.ReduceOp.AVG, dist.ReduceOp.MAX, dist.ReduceOp.MIN):
        plain = rank_data(rank, (3, 5), "float32", salt=int(op))
        t = lf.lazy(plain.clone())
        before = lf.stats().snapshot()
        assert dist.all_reduce(t * 1, op=op) is None   # a temporary: recorded, never elided
        work = dist.all_reduce(t, op=op, async_op=True)
        work.wait()
        assert (lf.stats() - before).kernels_launched == 0, "recording a collective must not drain"
        dist.all_reduce(plain, op=op)
        same(lf.eager(t), plain, f"torch.distributed.all_reduce({op}) on a LazyTensor")
    b = lf.lazy(rank_data(rank, (4,), "int64"))
    dist.broadcast(b, src=world - 1)
    want = rank_data(rank, (4,), "int64")
    dist.broadcast(want, src=world - 1)
    same(lf.eager(b), want, "torch.distributed.broadcast on a LazyTensor")
    assert counters.native["c10d.allreduce_.default"] == 8 and counters.native["c10d.broadcast_.default"] == 1, \
        lf.torch_frontend.report()
    assert not counters.fallback, lf.torch_frontend.report()
    # a reduce op lazyfuse lacks runs in the eager fallback, correctly
    p = lf.lazy(rank_data(rank, (3,), "float32") + 2)
    dist.all_reduce(p, op=dist.ReduceOp.PRODUCT)
    want = rank_data(rank, (3,), "float32") + 2
    dist.all_reduce(want, op=dist.ReduceOp.PRODUCT)
    same(lf.eager(p), want, "all_reduce(PRODUCT) through the fallback")
    assert counters.fallback["c10d.allreduce_.default"] == 1, lf.torch_frontend.report()
    # so does any other c10d op, its outputs written back (all_gather into a list of tensors)
    outs = [lf.lazy(torch.zeros(2, 3)) for _ in range(world)]
    dist.all_gather(outs, lf.lazy(rank_data(rank, (2, 3), "float32")))
    for r, o in enumerate(outs):
        same(lf.eager(o), rank_data(r, (2, 3), "float32"), f"all_gather into LazyTensors, rank {r}'s")


def case_frontend_ddp(rank, world):
    """``lf.distributed.DataParallel`` over a frontend model's parameters with ``torch.optim``
    (AdamW, and SGD with momentum), uncaptured and captured: over 20 steps, the losses and
    parameters of a single torch process on the global batch. A captured AdamW step replays
    like eager steps because the frontend puts it on torch's fused path with its step count on
    the device (``torch_frontend/optimizers.py``): a replay advances the bias corrections."""
    from torch import nn
    steps, batch = 20, 16

    def make(seed):
        torch.manual_seed(seed)
        return nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4))
    gen = torch.Generator().manual_seed(1)
    xs = [torch.randn(batch, 16, generator=gen) for _ in range(steps)]
    ys = [torch.randn(batch, 4, generator=gen) for _ in range(steps)]
    rows = slice(rank * batch // world, (rank + 1) * batch // world)
    optimizers = {"AdamW": lambda ps: torch.optim.AdamW(ps, lr=1e-2),
                  "SGD": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9)}
    for (name, optimizer), captured in itertools.product(optimizers.items(), (False, True)):
        what = f"torch.optim.{name}, captured={captured}"
        schedule = [0] * 3 + list(range(steps)) if captured else list(range(steps))   # capture: 3 warmup steps
        ref = make(0)
        opt_r = optimizer(ref.parameters())
        want = []
        for k in schedule:
            opt_r.zero_grad()
            loss = nn.functional.mse_loss(ref(xs[k]), ys[k])
            loss.backward()
            opt_r.step()
            want.append(loss.item())
        model = lf.lazy(make(rank))   # other values on each rank: DataParallel broadcasts rank 0's
        ddp = D.DataParallel(model.parameters(), bucket_bytes=1024)
        opt = optimizer(model.parameters())
        x, y = lf.lazy(xs[0][rows]), lf.lazy(ys[0][rows])

        def step():
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            ddp.all_reduce_gradients()
            opt.step()
            loss = loss.detach()
            dist.all_reduce(loss, op=dist.ReduceOp.AVG)   # the global batch's loss, torch's spelling
            return loss
        if captured:
            graph = lf.capture(lf.device("cpu"), step)
            assert graph.is_hardware, f"{what}: {graph.fallback_reason}"
            got = [graph.output.item()]
            want = want[3:]
        else:
            got = []
        for k in range(1 if captured else 0, steps):
            x.copy_(xs[k][rows])
            y.copy_(ys[k][rows])
            got.append((graph.replay() if captured else step()).item())
        np.testing.assert_allclose(got, want, rtol=2e-5, err_msg=what)
        for p, q in zip(model.parameters(), ref.parameters()):
            np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-4, atol=1e-5, err_msg=what)


def main():
    case, rank, world, port, timeout = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
    os.environ["LF_TEST_TIMEOUT"] = timeout
    try:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=float(timeout)))
        globals()[f"case_{case}"](rank, world)
    except BaseException:
        traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)
    print("RANK-OK", flush=True)
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
