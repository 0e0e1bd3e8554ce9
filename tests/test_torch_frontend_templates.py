"""Op templates (``lazyfuse.torch_frontend.templates``): a native handler's later calls with the same
argument signature are made again from the tape segment its first call recorded, without running it --
the same tape (so the same plan key), values, op counts; refused where the handler's nodes depend on
more than the key."""
import collections

import pytest
import torch
import torch.nn.functional as F

import lazyfuse as lf
from lazyfuse.torch_frontend import LazyTensor, aten_table, templates

DEV = lf.device("cpu")


@pytest.fixture(autouse=True)
def no_templates():
    templates.clear()
    yield
    templates.clear()


def spied(monkeypatch, names):
    """Count the calls of the native handlers ``names`` (resolved again, so the frontend runs the spies)."""
    calls = collections.Counter()

    def spy(name, fn):
        def handler(*args, **kwargs):
            calls[name] += 1
            return fn(*args, **kwargs)
        return handler
    for name in names:
        monkeypatch.setitem(aten_table.NATIVE, name, spy(name, aten_table.NATIVE[name]))
    monkeypatch.setattr(LazyTensor, "_runners", {})
    return calls


def program(x, w, b, qkv, target):
    """Handlers that make many nodes: layer_norm, causal attention over three views of one storage
    (split), a cat of them (zeros and three writes) and cross-entropy."""
    h = F.layer_norm(x, (x.shape[-1],), w, b)
    q, k, v = qkv.split(8, dim=-1)
    att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    both = torch.cat([q, k, v], dim=-1)
    loss = F.cross_entropy(h.reshape(-1, h.shape[-1]), target.reshape(-1))
    return h, att, both, loss


def inputs(seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(2, 5, 16, generator=g), torch.randn(16, generator=g), torch.randn(16, generator=g),
            torch.randn(2, 2, 5, 24, generator=g), torch.randint(0, 16, (2, 5), generator=g))


def run_lazy(seed):
    lf.sync(DEV)
    lazy = [lf.lazy(t) for t in inputs(seed)]
    engine = DEV.engine
    before = lf.stats(DEV).ops_recorded
    out = program(*lazy)
    tape = (tuple(engine.descs), [v for v in engine.tape if not hasattr(v, "tensor")])   # (scalars' values)
    return out, tape, lf.stats(DEV).ops_recorded - before


def test_a_handlers_later_calls_are_made_from_its_template_with_the_same_tape_values_and_counts(monkeypatch):
    calls = spied(monkeypatch, ["native_layer_norm", "_scaled_dot_product_flash_attention_for_cpu", "cat",
                                "nll_loss_forward", "_log_softmax"])
    first, tape1, ops1 = run_lazy(0)
    assert set(calls) == {"native_layer_norm", "_scaled_dot_product_flash_attention_for_cpu", "cat",
                          "nll_loss_forward", "_log_softmax"} and set(calls.values()) == {1}
    second, tape2, ops2 = run_lazy(1)
    assert set(calls.values()) == {1}        # made from the templates: no handler ran
    assert tape2 == tape1 and ops2 == ops1   # the same nodes in the same order, the same op count
    for seed, got in ((0, first), (1, second)):
        for a, b in zip(got, program(*inputs(seed))):
            torch.testing.assert_close(lf.eager(a), b, rtol=1e-5, atol=1e-5)


def test_a_template_serves_a_training_step_with_the_same_losses_and_plans_as_op_by_op(monkeypatch):
    """Forward and backward of a small model trained for three steps: the same losses and op counts
    with templates as with every handler run op by op, and the same plan keys: run op by op after, every
    drain finds the plan the templated run built."""
    def train():
        torch.manual_seed(0)
        model = lf.lazy(torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.LayerNorm(16), torch.nn.GELU(),
                                            torch.nn.Linear(16, 5)))
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        x, y = lf.lazy(torch.randn(6, 12)), lf.lazy(torch.randint(0, 5, (6,)))
        before = lf.stats(DEV)
        losses = []
        for _ in range(3):
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses, lf.stats(DEV) - before
    templated, t = train()
    assert any(t is not templates._REFUSED for t in templates._templates.values())
    monkeypatch.setattr(templates, "call", lambda fn, args, kwargs=None: fn(*args, **(kwargs or {})))
    monkeypatch.setattr(LazyTensor, "_runners", {})
    op_by_op, o = train()
    assert op_by_op == templated and (o.ops_recorded, o.ops_elided) == (t.ops_recorded, t.ops_elided)
    assert o.fusion_cache_misses == 0 and o.fusion_cache_hits == t.fusion_cache_hits + t.fusion_cache_misses


def test_a_template_is_keyed_by_number_types_and_signed_zeros():
    runs = collections.Counter()

    def handler(x, c):
        runs[type(c)] += 1
        return ((x * c) + c) * c - c
    ints = lf.arange(4, device=DEV)
    as_int = templates.call(handler, [ints, 2])
    as_float = templates.call(handler, [ints, 2.0])   # 2 == 2.0, but the result's dtype differs
    assert as_int.dtype is lf.int64 and as_float.dtype is lf.float32 and runs == {int: 1, float: 1}
    assert as_int.tolist() == [2, 6, 10, 14] and as_float.tolist() == [2.0, 6.0, 10.0, 14.0]
    assert templates.call(handler, [lf.arange(1, 5, device=DEV), 2]).tolist() == [6, 10, 14, 18]
    assert runs == {int: 1, float: 1}                # the same key: from the template, over the new tensor

    def over(x, c):
        return (x * c).reciprocal() * 2.0 * 1.0
    ones = lf.ones(3, device=DEV)
    assert templates.call(over, [ones, 0.0]).tolist() == [float("inf")] * 3
    assert templates.call(over, [ones, -0.0]).tolist() == [float("-inf")] * 3   # 0.0 == -0.0: not one key


def test_tensor_arguments_sharing_a_storage_are_part_of_the_key():
    """A template maps each argument to the storage it reads: a call whose arguments share one must not
    serve a call whose arguments have storages of their own, nor the reverse."""
    def handler(a, b):
        return a * 2 + b * 3 + 1
    s = lf.tensor([[1.0, 2.0], [10.0, 20.0]], device=DEV)
    assert templates.call(handler, [s[0], s[1]]).tolist() == [33.0, 65.0]
    t, u = lf.tensor([[1.0, 1.0], [5.0, 5.0]], device=DEV), lf.tensor([[0.0, 0.0], [7.0, 7.0]], device=DEV)
    assert templates.call(handler, [t[0], u[1]]).tolist() == [24.0, 24.0]
    assert templates.call(handler, [u[1], t[0]]).tolist() == [18.0, 18.0]
    assert templates.call(handler, [t[0], t[1]]).tolist() == [18.0, 18.0]


def test_a_template_is_refused_where_the_nodes_depend_on_more_than_the_key(monkeypatch):
    runs = collections.Counter()

    def counted(name, fn):
        def handler(*args):
            runs[name] += 1
            return fn(*args)
        return handler
    draws = counted("draws", lambda x: (x + lf.rand(x.shape, device=DEV)) * 1.5 + 1)
    writes = counted("writes", lambda x: (x.copy_(x * 2), x + 1)[1] * 3 - 1)
    other = lf.ones(3, device=DEV) * 5
    reads = counted("reads", lambda x: (x * other + 1) * 2 - 1)
    x = lf.zeros(3, device=DEV)
    a, b = templates.call(draws, [x]).tolist(), templates.call(draws, [x]).tolist()
    assert a != b                                               # each call draws anew, as op by op
    for _ in range(2):
        target = lf.ones(3, device=DEV)
        assert templates.call(writes, [target]).tolist() == [8.0] * 3 and target.tolist() == [2.0] * 3
    assert templates.call(reads, [lf.ones(3, device=DEV)]).tolist() == [11.0] * 3
    other = lf.ones(3, device=DEV) * 7                          # noqa: F841 (read by ``reads``)
    assert templates.call(reads, [lf.ones(3, device=DEV)]).tolist() == [15.0] * 3
    assert runs == {"draws": 2, "writes": 2, "reads": 2}

    kept = counted("kept", lambda a, b: (a @ b) * 2 + 1)
    m = lf.ones((4, 4), device=DEV)
    templates.call(kept, [m, m * 1])
    templates.call(kept, [m, m * 1])
    assert runs["kept"] == 1
    monkeypatch.setattr(lf.ops, "INLINE_MATMUL", 0)             # a matmul's lowering changes: another key
    assert templates.call(kept, [m, m * 1]).tolist() == [[9.0] * 4] * 4 and runs["kept"] == 2
    monkeypatch.setattr(templates, "MAX_PENDING", 0)            # the replay would pass the queue's bound
    assert templates.call(kept, [m, m * 1]).tolist() == [[9.0] * 4] * 4 and runs["kept"] == 3


def test_a_handler_that_makes_few_nodes_runs_op_by_op():
    """A template pays only where the handler makes several nodes: one that makes fewer than WORTH is
    always run (its key would cost about what it does)."""
    runs = []

    def small(x):
        runs.append(1)
        return x * 2
    for _ in range(3):
        assert templates.call(small, [lf.ones(2, device=DEV)]).tolist() == [2.0, 2.0]
    assert len(runs) == 3 and small in templates._direct


def test_a_recordings_replay_enters_the_tape_op_by_op_recording_makes_and_refuses_to_pass_the_bound(monkeypatch):
    """``Recording.replay`` (the optimizer's updates) enters its nodes as it makes them, in the
    recording's order: the same tape as recording the update op by op. Where its writes would pass the
    pending queue's bound it makes nothing and says so (the optimizer then records op by op)."""
    from lazyfuse.torch_frontend import recording
    from lazyfuse.torch_frontend.recording import Recording

    def update(a, b):
        a.copy_(a * 2 + b.sqrt() * 0.5)
        b.mul_(0.25)

    def fresh():
        lf.sync(DEV)
        return lf.tensor([1.0, 2.0, 3.0], device=DEV), lf.tensor([4.0, 16.0, 64.0], device=DEV)

    a, b = fresh()
    rec = Recording.of(lambda: update(a, b), [a._storage, b._storage])
    a, b = fresh()
    update(a, b)
    by_ops = tuple(DEV.engine.descs)
    c, d = fresh()
    assert rec.replay([c._storage, d._storage]) is True
    assert tuple(DEV.engine.descs) == by_ops
    assert c.tolist() == a.tolist() == [3.0, 6.0, 10.0] and d.tolist() == b.tolist() == [1.0, 4.0, 16.0]
    e, f = fresh()
    monkeypatch.setattr(recording, "MAX_PENDING", 0)
    counted = lf.stats(DEV).ops_recorded
    assert rec.replay([e._storage, f._storage]) is False
    assert lf.stats(DEV).ops_recorded == counted and e.tolist() == [1.0, 2.0, 3.0] and f.tolist() == [4.0, 16.0, 64.0]


@pytest.mark.parametrize("dim,start,end,step", [(0, None, None, 1), (1, 1, 3, 1), (1, -3, None, 2), (2, 2, 100, 3),
                                                (-1, -100, -1, 1), (1, 3, 1, 1), (0, 5, 9, 1)])
def test_slice_select_and_unbind_make_torchs_views(dim, start, end, step):
    """aten's slice and select make their views directly (not through lazyfuse's indexing): torch's
    bounds, clamping and errors, and they still alias their base."""
    base = torch.arange(60.0).reshape(3, 4, 5)
    lazy = lf.lazy(base.clone())
    aten = torch.ops.aten
    got = aten.slice.Tensor(lazy, dim, start, end, step)
    torch.testing.assert_close(lf.eager(got), aten.slice.Tensor(base, dim, start, end, step))
    for d in range(3):
        for i in (-1, 0, 1):
            torch.testing.assert_close(lf.eager(aten.select.int(lazy, d, i)), base.select(d, i))
        assert [lf.eager(t).tolist() for t in lazy.unbind(d)] == [t.tolist() for t in base.unbind(d)]
    with pytest.raises(lf.ShapeError, match="out of range"):
        aten.select.int(lazy, 1, 4)
    with pytest.raises(lf.LazyfuseError):
        aten.slice.Tensor(lazy, 1, 0, 2, 0)
    lazy[:, 1:3].mul_(0)       # a write through a slice lands in the base
    base[:, 1:3].mul_(0)
    torch.testing.assert_close(lf.eager(lazy), base)


def test_an_equal_small_plain_tensor_reuses_its_upload_and_a_changed_one_is_uploaded_again():
    """nanoGPT's ``torch.arange`` positions are a new plain tensor every step: one equal to the last
    upload of its dtype and shape is that upload (still counted in the report); another value, or one
    changed in place after its upload, is uploaded anew."""
    w = lf.lazy(torch.randn(6, 3))
    aten_table._uploads.clear()
    lf.torch_frontend.reset()
    first = F.embedding(torch.arange(4), w)
    uploads = dict(aten_table._uploads)
    again = F.embedding(torch.arange(4), w)
    assert [v[1] for v in aten_table._uploads.values()] == [v[1] for v in uploads.values()]   # reused
    changed = F.embedding(torch.arange(4).flip(0), w)
    plain = torch.arange(4)
    same = F.embedding(plain, w)
    plain.fill_(5)
    moved = F.embedding(plain, w)
    for got, idx in ((first, [0, 1, 2, 3]), (again, [0, 1, 2, 3]), (changed, [3, 2, 1, 0]), (same, [0, 1, 2, 3]),
                     (moved, [5] * 4)):
        torch.testing.assert_close(lf.eager(got), lf.eager(w)[idx])
    assert sum(n for (reason, _), n in lf.torch_frontend.counters.drains.items()
               if reason.startswith("implicit upload")) == 5


def test_a_replay_at_the_places_of_the_last_one_enters_its_very_descriptors():
    """``recording.remake`` (templates' and recordings' replays): a call that starts where the last one
    did, its inputs where they were, enters the descriptor objects the last one made (the drain's key
    comparison finds them equal by identity); elsewhere it makes them anew, equal in structure."""
    from lazyfuse.torch_frontend.recording import Recording

    def update(a, b):
        a.copy_(a * 2 + b.sqrt() * 0.5)

    def fresh(shift=False):
        lf.sync(DEV)
        a, b = lf.tensor([1.0, 2.0, 3.0], device=DEV), lf.tensor([4.0, 16.0, 64.0], device=DEV)
        if shift:
            keep = b * 1   # entered first: the replay starts further on
            return a, b, keep
        return a, b, None
    a, b, _ = fresh()
    rec = Recording.of(lambda: update(a, b), [a._storage, b._storage])
    made = {n for n, e in enumerate(rec.nodes) if e[0] is not None}
    runs = []
    for shift in (False, False, True):
        a, b, keep = fresh(shift)
        rec.replay([a._storage, b._storage])
        runs.append(list(DEV.engine.descs))
        assert a.tolist() == [3.0, 6.0, 10.0]
    first, second, shifted = runs
    assert second == first and sum(x is y for x, y in zip(first, second)) >= len(made)
    assert len(shifted) > len(first) and not any(x is y for x in shifted for y in first if len(x) == 5)
