"""Table tests with hand-built states, and property tests over random workloads."""

from hypothesis import given, settings, strategies as st

from goodbench.engine.config import EngineConfig
from goodbench.engine.core import Engine
from goodbench.engine.costmodel import CostModel
from goodbench.engine.kvcache import KVCache, Seq, block_hashes
from goodbench.engine.scheduler import Scheduler


def make(budget=10, seqs=8, blocks=1000, chunked=True, policy="fcfs", scheduler="vllm", threshold=0, pc=False):
    cfg = EngineConfig(
        max_num_batched_tokens=budget,
        max_num_seqs=seqs,
        num_gpu_blocks=blocks,
        block_size=4,
        enable_chunked_prefill=chunked,
        scheduling_policy=policy,
        scheduler=scheduler,
        long_prefill_token_threshold=threshold,
        enable_prefix_caching=pc,
        max_model_len=4096,
    )
    kv = KVCache(blocks, 4, pc)
    return Scheduler(cfg, kv), kv


def running(sched, seq, computed):
    """Put seq into running with `computed` tokens done (and its blocks held)."""
    sched.add(seq)
    sched._pop()
    seq.status = "running"
    sched.running.append(seq)
    assert sched.kv.allocate(seq, computed)
    seq.num_computed = computed


def entries(batch):
    return [(s.id, n) for s, n in zip(batch.seqs, batch.tokens)]


def test_running_first_in_admission_order_then_waiting_with_leftover():
    s, _ = make(budget=10)
    a = Seq("A", 5, 10)
    a.num_output = 2
    running(s, a, 6)  # decoding: needs 1 token
    b = Seq("B", 30, 5)
    running(s, b, 10)  # partial prefill: 20 left, gets the remaining 9
    s.add(Seq("C", 5, 5))
    batch = s.schedule()
    assert entries(batch) == [("A", 1), ("B", 9)]
    assert batch.decode_tokens == 1 and batch.prefill_tokens == 9
    assert batch.decode_ctx == 7 and batch.prefill_ctx == 19
    assert s.num_waiting() == 1


def test_new_prompt_is_chunked_to_the_leftover_budget():
    s, _ = make(budget=10)
    s.add(Seq("A", 25, 3))
    assert entries(s.schedule()) == [("A", 10)]
    assert entries(s.schedule()) == [("A", 10)]
    assert entries(s.schedule()) == [("A", 5)]


def test_unchunked_prompt_waits_whole_and_blocks_the_queue():
    s, _ = make(budget=4096, chunked=False)
    a = Seq("A", 5, 10)
    a.num_output = 1
    running(s, a, 5)
    s.add(Seq("D", 4095, 1))  # does not fit the 4095 tokens left after A's decode
    s.add(Seq("E", 2, 1))
    assert entries(s.schedule()) == [("A", 1)]
    assert s.num_waiting() == 2  # E is stuck behind D: head-of-line


def test_max_num_seqs_caps_admission_but_not_running():
    s, _ = make(budget=100, seqs=2)
    for i in range(4):
        s.add(Seq(i, 3, 2))
    assert [x for x, _ in entries(s.schedule())] == [0, 1]


def test_long_prefill_threshold_caps_each_chunk():
    s, _ = make(budget=100, threshold=8)
    s.add(Seq("A", 30, 2))
    s.add(Seq("B", 30, 2))
    assert entries(s.schedule()) == [("A", 8), ("B", 8)]


def test_preempts_last_admitted_when_blocks_run_out_and_admits_nothing():
    s, kv = make(budget=100, blocks=3)
    a, b = Seq("A", 4, 10), Seq("B", 4, 10)
    a.num_output = b.num_output = 1
    running(s, a, 4)  # one full block each: the next token of each needs a new block
    running(s, b, 4)
    s.add(Seq("C", 2, 1))
    assert kv.num_free == 1
    batch = s.schedule()
    assert entries(batch) == [("A", 1)]  # A takes the last block
    assert [v.id for v in batch.preempted] == ["B"]  # B, the last admitted, preempts itself
    assert b.status == "preempted" and b.num_computed == 0 and b.blocks == 0 and b.num_preemptions == 1
    assert [w.id for w in s.waiting_seqs()] == ["B", "C"]  # prepended; nothing admitted this step
    kv.check(s.running)


def test_priority_policy_preempts_the_lowest_priority():
    s, kv = make(budget=100, blocks=3, policy="priority")
    hi, lo = Seq("hi", 4, 10, priority=0), Seq("lo", 4, 10, priority=5)
    for q in (lo, hi):
        q.num_output = 1
    running(s, lo, 4)
    running(s, hi, 4)
    assert kv.num_free == 1
    batch = s.schedule()
    # lo (scheduled first, in admission order) gets the last free block; hi then needs one: lo is
    # the lowest priority, so lo is preempted and its tokens are taken back out of the batch
    assert [v.id for v in batch.preempted] == ["lo"]
    assert entries(batch) == [("hi", 1)]


def test_prefix_cache_hit_skips_shared_blocks():
    s, kv = make(budget=100, pc=True)
    ids = list(range(20))
    a = Seq("A", 20, 2, hashes=block_hashes(ids, 4))
    s.add(a)
    s.schedule()
    kv.commit_full_blocks(a)
    b = Seq("B", 22, 2, hashes=block_hashes(ids + [99, 98], 4))
    s.add(b)
    batch = s.schedule()
    assert dict(entries(batch))["B"] == 22 - 20  # 5 cached blocks
    kv.check(s.running)


def test_prefix_hit_always_recomputes_one_token():
    s, kv = make(budget=100, pc=True)
    ids = list(range(16))
    a = Seq("A", 16, 2, hashes=block_hashes(ids, 4))
    s.add(a)
    s.schedule()
    kv.commit_full_blocks(a)
    b = Seq("B", 16, 2, hashes=block_hashes(ids, 4))
    s.add(b)
    assert dict(entries(s.schedule()))["B"] == 4  # 3 of 4 blocks hit: the last block is recomputed


def test_decode_first_puts_decodes_before_older_prefill_chunks():
    s, _ = make(budget=10, scheduler="decode-first")
    b = Seq("B", 30, 5)
    running(s, b, 10)
    a = Seq("A", 5, 10)
    a.num_output = 2
    running(s, a, 6)
    assert entries(s.schedule()) == [("A", 1), ("B", 9)]
    s2, _ = make(budget=10)
    b2, a2 = Seq("B", 30, 5), Seq("A", 5, 10)
    a2.num_output = 2
    running(s2, b2, 10)
    running(s2, a2, 6)
    assert entries(s2.schedule()) == [("B", 10)]  # vLLM v1: admission order, the decode starves this step


def test_prefill_first_runs_prompt_only_steps():
    s, _ = make(budget=100, scheduler="prefill-first")
    a = Seq("A", 5, 10)
    a.num_output = 1
    running(s, a, 5)
    n = Seq("N", 20, 2)
    s.add(n)
    assert entries(s.schedule()) == [("N", 20)]  # a prompt-only step: no decode piggybacks
    n.num_output = 1  # the engine samples N's first token
    assert entries(s.schedule()) == [("A", 1), ("N", 1)]


def test_static_batching_pads_until_the_longest_finishes():
    eng = Engine(
        EngineConfig(scheduler="static", max_num_seqs=2, num_gpu_blocks=1000, max_model_len=4096).resolved(),
        CostModel.for_config(EngineConfig().resolved(), fixed_step_ms=1.0),
    )
    eng.add(Seq("short", 10, 2))
    eng.add(Seq("long", 10, 5))
    eng.add(Seq("next", 10, 1))
    sizes = []
    while eng.has_work:
        r = eng.step()
        sizes.append((len(r.batch.seqs), r.batch.padding))
    assert sizes[:5] == [(2, 0), (2, 0), (1, 1), (1, 1), (1, 1)]  # prefill, then short finishes, padded
    assert sizes[5] == (1, 0)  # only now does "next" start


# ------------------------------------------------------------------------------------------------ properties
REQS = st.lists(st.tuples(st.integers(1, 600), st.integers(1, 40), st.floats(0, 0.5)), min_size=1, max_size=25)


def run_engine(reqs, **cfgkw):
    cfg = EngineConfig(max_model_len=1024, block_size=4, **cfgkw).resolved()
    eng = Engine(cfg, CostModel.for_config(cfg, fixed_step_ms=10.0))
    seqs = [Seq(i, p, o) for i, (p, o, _) in enumerate(reqs)]
    arrivals = sorted(range(len(reqs)), key=lambda i: reqs[i][2])
    t, k, total = 0.0, 0, 0
    static = cfg.scheduler == "static"
    for _ in range(100_000):
        while k < len(arrivals) and reqs[arrivals[k]][2] <= t:
            eng.add(seqs[arrivals[k]])
            k += 1
        if not eng.has_work:
            if k == len(arrivals):
                break
            t = reqs[arrivals[k]][2]
            continue
        res = eng.step()
        assert res is not None
        b = res.batch
        if not static:
            assert sum(b.tokens) <= cfg.max_num_batched_tokens
        assert eng.num_running <= cfg.max_num_seqs
        eng.kv.check(eng.sched.running)
        assert eng.kv.free >= 0
        total += sum(b.tokens)
        t += res.duration
    assert all(s.num_output == s.max_tokens and s.status == "finished" for s in seqs)
    assert eng.kv.num_free == eng.kv.num_blocks  # every block back (cached ones are evictable)
    return total, eng.stats.preemptions


@settings(max_examples=60, deadline=None)
@given(
    reqs=REQS,
    budget=st.integers(8, 1024),
    seqs=st.integers(1, 16),
    blocks=st.integers(400, 2000),
    sched=st.sampled_from(["vllm", "decode-first", "prefill-first"]),
    pc=st.booleans(),
    thr=st.sampled_from([0, 0, 64]),
)
def test_engine_invariants(reqs, budget, seqs, blocks, sched, pc, thr):
    # blocks >= 400 x 4 tokens: any single request (<= 640 tokens) fits, so nothing is unschedulable
    run_engine(
        reqs,
        max_num_batched_tokens=budget,
        max_num_seqs=seqs,
        num_gpu_blocks=blocks,
        scheduler=sched,
        enable_prefix_caching=pc,
        long_prefill_token_threshold=thr,
    )


@settings(max_examples=30, deadline=None)
@given(reqs=REQS, seqs=st.integers(1, 16))
def test_static_batching_invariants(reqs, seqs):
    run_engine(reqs, max_num_seqs=seqs, num_gpu_blocks=5000, scheduler="static", enable_prefix_caching=False)


@settings(max_examples=40, deadline=None)
@given(reqs=REQS, budget=st.integers(16, 512))
def test_chunked_and_unchunked_process_the_same_tokens(reqs, budget):
    chunked, p1 = run_engine(reqs, max_num_batched_tokens=budget, num_gpu_blocks=5000, enable_prefix_caching=False)
    whole, p2 = run_engine(reqs, enable_chunked_prefill=False, num_gpu_blocks=5000, enable_prefix_caching=False)
    assert p1 == p2 == 0
    assert chunked == whole == sum(p + o - 1 for p, o, _ in reqs)


def test_held_requests_count_as_waiting_and_can_be_aborted():
    cfg = EngineConfig(async_scheduling=True).resolved()
    eng = Engine(cfg, CostModel.for_config(cfg, fixed_step_ms=10.0))
    a, b, c = (Seq(i, 20, 5) for i in range(3))
    eng.add(a)  # idle engine: straight to the waiting queue
    assert eng.sched.num_waiting() == 1 and not eng.sched.incoming
    eng.step()  # a's prefill; a's next step is scheduled ahead now
    eng.add(b)
    eng.add(c)
    assert eng.sched.incoming == [b, c] and eng.sched.num_waiting() == 2 and eng.has_work
    eng.abort(c)
    assert eng.sched.incoming == [b] and c.status == "aborted"
    res = eng.step()  # built before b could join
    assert res.batch.seqs == [a] and eng.sched.waiting_seqs() == [b]
    assert set(eng.step().batch.seqs) == {a, b}
