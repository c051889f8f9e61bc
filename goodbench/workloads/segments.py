"""Prompts with a known prefix structure. A prompt is a sequence of segments (key, tokens): equal keys are
equal token runs, so prompts that share leading segments share a prefix — a system prompt, a retrieved
document, a conversation's history, a trace's hash_ids blocks. From the segments come both the prompt's
text (each word one token, so a segment of n tokens is exactly n tokens for the tokenizer that built it,
and a live server's prefix cache sees the reuse) and, for the simulator, the exact chained hashes of its
KV blocks (no tokenizing: a block is identified by the pieces of segments it covers)."""

from __future__ import annotations

import functools
import random
import zlib

Segments = tuple  # ((key, tokens), ...); a key is any hashable of str/int parts


def _seed(key) -> int:
    """A stable seed for a key (Python's hash() of strings changes between processes)."""
    return zlib.crc32(repr(key).encode())


def segment_text(key, n: int, words: list[str]) -> str:
    """The n-token text of one segment: the same words for the same key, in every process."""
    if n <= 0:
        return ""
    _WORDS.setdefault(id(words), words)
    return _cached_text(key, n, id(words))


_WORDS: dict = {}  # word lists by id (a tokenizer's, kept for its lifetime), so the cache key stays small


@functools.lru_cache(maxsize=65536)
def _cached_text(key, n: int, words_id: int) -> str:
    """Shared blocks (system prompts, documents, trace blocks) are drawn once."""
    rng = random.Random(_seed(key))
    return " " + " ".join(rng.choices(_WORDS[words_id], k=n))


def text_of(segments: Segments, tok) -> str:
    return "".join(segment_text(k, n, tok.words) for k, n in segments)


def tokens_of(segments: Segments) -> int:
    return sum(n for _, n in segments)


def block_hashes(segments: Segments, block_size: int) -> tuple:
    """Chained hashes of the prompt's full KV blocks: block j is identified by the (key, start, length)
    pieces of the segments it covers, so equal leading segments give equal leading hashes."""
    out, h, pieces, filled = [], 0, [], 0
    for key, n in segments:
        pos = 0
        while pos < n:
            take = min(block_size - filled, n - pos)
            pieces.append((key, pos, take))
            pos += take
            filled += take
            if filled == block_size:
                h = hash((h, tuple(pieces)))
                out.append(h)
                pieces, filled = [], 0
    return tuple(out)


def _leading_seen(prompts: list[Segments], block_size: int):
    """Per prompt, in order: (its tokens, its full blocks' hashes, how many leading ones an earlier prompt held),
    the unbounded cache updated after each (at least one token of a prompt is always recomputed, as in vLLM)."""
    seen: set = set()
    for segs in prompts:
        n, hashes = tokens_of(segs), block_hashes(segs, block_size)
        usable = min((n - 1) // block_size, len(hashes))
        k = 0
        while k < usable and hashes[k] in seen:
            k += 1
        yield n, hashes, k
        seen.update(hashes)


def reuse_ratio(prompts: list[Segments], block_size: int = 16, seen_first: int = 0) -> float | None:
    """The theoretical prefix-cache hit rate of a stream of prompts: the share of prompt tokens in full
    blocks already seen by an earlier prompt (an unbounded cache; at least one token of each prompt is
    always recomputed, as in vLLM). The first seen_first prompts only fill the cache (a priming phase)."""
    hit = total = 0
    for i, (n, _, k) in enumerate(_leading_seen(prompts, block_size)):
        if i >= seen_first:
            total += n
            hit += k * block_size
    return hit / total if total else None


def reuse_by_source(prompts: list[Segments], owners: list, block_size: int = 16) -> dict | None:
    """Where the reusable prefix of a stream of prompts comes from: of all prompt tokens, the share in full
    blocks an earlier prompt of the same owner (an agent job's own earlier calls: its conversation) first
    held, and the share another owner's did (a system prompt or document other jobs share); the rest is new.
    The same unbounded cache as reuse_ratio."""
    first: dict = {}
    own = other = total = 0
    for (n, hashes, k), who in zip(_leading_seen(prompts, block_size), owners):
        total += n
        mine = sum(first[h] == who for h in hashes[:k])
        own, other = own + mine * block_size, other + (k - mine) * block_size
        for h in hashes:
            first.setdefault(h, who)
    if not total:
        return None
    return {"own_job": own / total, "other_jobs": other / total, "new": 1 - (own + other) / total}
