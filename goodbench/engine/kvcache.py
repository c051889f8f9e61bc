"""Paged KV-cache accounting with optional prefix caching, after vLLM v1's KVCacheManager/BlockPool.

Blocks are counted, not stored. A block is: free (no content), cached-and-evictable (hashed, no
owner, reusable on a prefix hit, evicted LRU-first), cached-and-referenced, or private to one
sequence. Invariant: free + evictable + referenced + sum(private) == num_blocks."""

from __future__ import annotations

from collections import OrderedDict


class Seq:
    """One request inside the engine."""

    __slots__ = (
        "id",
        "prompt_len",
        "max_tokens",
        "arrival",
        "priority",
        "hashes",
        "num_computed",
        "num_output",
        "blocks",
        "cached",
        "status",
        "num_preemptions",
        "payload",
        "order",
        "preloaded",
        "num_cached",
        "lora",
        "klass",
        "images",
        "image_ids",
        "enc_tokens",
        "enc_parts",
        "enc_all",
    )

    def __init__(
        self,
        id,
        prompt_len: int,
        max_tokens: int,
        arrival: float = 0.0,
        priority: int = 0,
        hashes: tuple = (),
        payload=None,
    ):
        self.id = id
        self.prompt_len = prompt_len
        self.max_tokens = max_tokens
        self.arrival = arrival
        self.priority = priority
        self.hashes = hashes  # chained hashes of the prompt's full blocks (prefix caching)
        self.num_computed = 0
        self.num_output = 0
        self.blocks = 0  # blocks held, cached ones included
        self.cached: list = []  # hashes of the held blocks that are in the cache (a prefix)
        self.status = "waiting"
        self.num_preemptions = 0
        self.payload = payload  # the caller's handle (stream, record builder)
        self.order = 0  # arrival order, for priority tie-breaks
        self.preloaded = 0  # prompt tokens whose KV arrived from a prefill instance (disaggregation)
        self.lora = None  # the LoRA adapter it asked for (None: the base model)
        self.klass = None  # its workload class (per-class speculative acceptance; None: not known, as served)
        self.images: tuple = ()  # (width, height) of each image it carries (a vision-language model's)
        self.image_ids: tuple = ()  # each image's content key (engine/vision.image_key), where the caller knows it
        self.enc_tokens = 0  # its images' prompt tokens, not yet encoded (0: none, or encoded)
        self.enc_parts: tuple = ()  # per image: (key or None, encoder tokens, seconds, end in the prompt)
        self.enc_all = 0  # its images' tokens in all (a preempted request encodes them again)
        self.num_cached = -1  # prompt tokens found in the prefix cache at its first admission (vLLM's
        # num_cached_tokens, what its usage reports); -1: not admitted yet

    @property
    def num_tokens(self) -> int:
        return self.prompt_len + self.num_output

    def __repr__(self):
        return f"Seq({self.id}, p={self.prompt_len}, out={self.num_output}/{self.max_tokens}, c={self.num_computed})"


class KVCache:
    def __init__(self, num_blocks: int, block_size: int, prefix_caching: bool = False):
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.prefix_caching = prefix_caching
        self.free = num_blocks
        self.evictable: OrderedDict = OrderedDict()
        self.refs: dict = {}
        self.hits = 0  # prefix-cache hit tokens, for metrics
        self.queries = 0

    @property
    def num_free(self) -> int:
        return self.free + len(self.evictable)

    @property
    def usage(self) -> float:
        return 1.0 - self.num_free / self.num_blocks

    def cached_prefix_blocks(self, seq: Seq) -> int:
        """Full prompt blocks already in the cache; at least one token is always recomputed."""
        if not self.prefix_caching or not seq.hashes:
            return 0
        return self.cached_blocks_of(seq.hashes[: (seq.num_tokens - 1) // self.block_size])

    def cached_blocks_of(self, hashes) -> int:
        """How many leading blocks of this hash chain are in the cache (a router's prefix probe)."""
        k = 0
        for h in hashes:
            if h in self.refs or h in self.evictable:
                k += 1
            else:
                break
        return k

    def prime(self, hashes) -> int:
        """Blocks cached and idle before the clock starts (a priming phase ran): as many of these as fit, in
        order, evictable; returns how many went in. Nothing with prefix caching off."""
        k = 0
        for h in hashes if self.prefix_caching else ():
            if h in self.refs or h in self.evictable:
                continue
            if not self.free:
                break
            self.free -= 1
            self.evictable[h] = None
            k += 1
        return k

    def _take(self, n: int) -> None:
        if n <= self.free:
            self.free -= n
            return
        n -= self.free
        self.free = 0
        for _ in range(n):
            self.evictable.popitem(last=False)

    def allocate(self, seq: Seq, num_new_tokens: int, hit_blocks: int = 0) -> bool:
        """Make room for num_new_tokens more computed tokens (after hit_blocks cached ones on
        admission). False, with nothing changed, when the blocks are not there."""
        bs = self.block_size
        if hit_blocks:
            hit = seq.hashes[:hit_blocks]
            touch_evictable = sum(1 for h in hit if h in self.evictable)
            held_after = hit_blocks
            start_tokens = hit_blocks * bs
        else:
            touch_evictable = 0
            held_after = seq.blocks
            start_tokens = seq.num_computed
        need = -(-(start_tokens + num_new_tokens) // bs) - held_after
        if need < 0:
            need = 0
        if need + touch_evictable > self.num_free:
            return False
        if hit_blocks:
            for h in seq.hashes[:hit_blocks]:
                if h in self.evictable:
                    del self.evictable[h]
                    self.refs[h] = 1
                else:
                    self.refs[h] += 1
            seq.cached = list(seq.hashes[:hit_blocks])
            seq.blocks = hit_blocks
            self.hits += hit_blocks * bs
        self._take(need)
        seq.blocks += need
        return True

    def commit_full_blocks(self, seq: Seq) -> None:
        """After a step: prompt blocks that became full enter the cache (first writer wins)."""
        if not self.prefix_caching or len(seq.cached) >= len(seq.hashes):
            return
        full = min(seq.num_computed // self.block_size, len(seq.hashes))
        for j in range(len(seq.cached), full):
            h = seq.hashes[j]
            if h in self.refs or h in self.evictable:
                return  # a duplicate computed concurrently: keep ours private
            self.refs[h] = 1
            seq.cached.append(h)

    def release(self, seq: Seq) -> None:
        """Free a sequence's blocks; its cached blocks stay reusable, tail blocks evicted first."""
        self.free += seq.blocks - len(seq.cached)
        for h in reversed(seq.cached):
            r = self.refs[h] - 1
            if r:
                self.refs[h] = r
            else:
                del self.refs[h]
                self.evictable[h] = None
        seq.blocks = 0
        seq.cached = []

    def check(self, seqs) -> None:
        """Assert the accounting invariant (tests)."""
        private = sum(s.blocks - len(s.cached) for s in seqs)
        total = self.free + len(self.evictable) + len(self.refs) + private
        assert total == self.num_blocks, (total, self.num_blocks)
        assert self.free >= 0 and private >= 0


def block_hashes(token_ids, block_size: int) -> tuple:
    """Chained hashes of full blocks: equal prefixes give equal leading hashes."""
    out = []
    h = 0
    for i in range(0, len(token_ids) - block_size + 1, block_size):
        h = hash((h, tuple(token_ids[i : i + block_size])))
        out.append(h)
    return tuple(out)


def image_keyed(text_hashes: tuple, ids: tuple, image_tokens: int, block_size: int) -> tuple:
    """A prompt's block hashes with its images in front (vLLM hashes each image's content into the blocks its
    tokens fill, and so into every block after): the images' full blocks, then the text's blocks chained
    under the images' keys. Two prompts share blocks only where they carry the same images."""
    key = hash(tuple(ids))
    return tuple(hash((key, "image", k)) for k in range(image_tokens // block_size)) + tuple(
        hash((key, h)) for h in text_hashes
    )
