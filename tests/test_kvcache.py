"""Paged KV accounting (engine.kvcache): allocation, release, prefix hits and LRU eviction."""

from goodbench.engine.kvcache import KVCache, Seq, block_hashes


def test_allocation_rounds_up_to_blocks_and_fails_without_changes():
    kv = KVCache(num_blocks=4, block_size=16)
    a = Seq("a", prompt_len=20, max_tokens=4)
    assert kv.allocate(a, 20) and a.blocks == 2 and kv.num_free == 2
    b = Seq("b", prompt_len=40, max_tokens=4)
    assert not kv.allocate(b, 40) and b.blocks == 0 and kv.num_free == 2  # needs 3
    a.num_computed = 20
    assert kv.allocate(a, 12) and a.blocks == 2  # 32 tokens still fit in 2 blocks
    kv.check([a, b])
    kv.release(a)
    assert kv.num_free == 4 and a.blocks == 0
    kv.check([a, b])


def test_prefix_hit_reuses_committed_blocks_and_keeps_one_token_to_compute():
    ids = list(range(64))
    h = block_hashes(ids, 16)
    assert len(h) == 4 and block_hashes(ids[:40], 16) == h[:2]
    kv = KVCache(num_blocks=8, block_size=16, prefix_caching=True)
    a = Seq("a", 64, 4, hashes=h)
    assert kv.cached_prefix_blocks(a) == 0 and kv.allocate(a, 64)
    a.num_computed = 64
    kv.commit_full_blocks(a)
    kv.release(a)
    assert len(kv.evictable) == 4  # reusable, not freed
    b = Seq("b", 64, 4, hashes=h)
    hit = kv.cached_prefix_blocks(b)
    assert hit == 3  # (64 - 1) // 16: the last token is always recomputed
    assert kv.allocate(b, 64 - hit * 16, hit_blocks=hit) and kv.hits == 48
    kv.check([b])


def test_eviction_takes_least_recently_released_blocks_first():
    kv = KVCache(num_blocks=2, block_size=4, prefix_caching=True)
    for name, ids in (("x", [1, 2, 3, 4]), ("y", [5, 6, 7, 8])):
        s = Seq(name, 4, 1, hashes=block_hashes(ids, 4))
        kv.allocate(s, 4)
        s.num_computed = 4
        kv.commit_full_blocks(s)
        kv.release(s)
    first = next(iter(kv.evictable))
    z = Seq("z", 4, 1)
    assert kv.allocate(z, 4) and first not in kv.evictable and len(kv.evictable) == 1
    kv.check([z])
