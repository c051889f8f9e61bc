"""A controlled prefix-cache hit rate: a class's `hit_rate` makes that share of each prompt (its first tokens)
one of `primed_prefixes` prefixes, and a priming phase sends each prefix once before the clock starts (live:
runner/priming.py; simulated: the engine's cache holds them at time 0), so every measured request can find
its prefix cached and the run can check the hit rate it states (metrics/prefix.py)."""

from __future__ import annotations

from ..records import RequestSpec
from .segments import Segments, text_of

KIND = "primed"
OWN_TOKENS = 16  # a priming request's own tail: the prefix's last block is full, so it is cached too


def prime_key(cls: str, j: int) -> tuple:
    return (KIND, cls, j)


def primed(segments: Segments | None) -> bool:
    return bool(segments) and isinstance(segments[0][0], tuple) and segments[0][0][:1] == (KIND,)


def primes(requests: list[RequestSpec], tok, chat: bool) -> list[RequestSpec]:
    """One priming request per primed prefix the plan uses: the prefix at its longest, a tail of its own, one
    output token. Empty for workloads without a controlled hit rate."""
    longest: dict = {}
    for r in requests:
        if primed(r.segments):
            key, n = r.segments[0]
            longest[key] = max(longest.get(key, 0), n)
    out = []
    for key, n in sorted(longest.items()):
        segs = ((key, n), (("prime-tail", *key[1:]), OWN_TOKENS))
        text = text_of(segs, tok)
        prompt = [{"role": "user", "content": text}] if chat else text
        rid = f"prime-{key[1]}-{key[2]}"
        out.append(RequestSpec(rid, key[1], prompt, n + OWN_TOKENS, 1, warmup=True, segments=segs))
    return out


def target_hit_rate(requests: list[RequestSpec], classes) -> float | None:
    """The hit rate the workload states for its measured requests: each class's hit_rate weighted by the
    prompt tokens of its measured requests (classes without one count as 0). None: no class states one."""
    rate = {c.name: c.hit_rate for c in classes}
    if not any(v is not None for v in rate.values()):
        return None
    measured = [r for r in requests if not r.warmup]
    total = sum(r.prompt_tokens for r in measured)
    return sum((rate.get(r.cls) or 0.0) * r.prompt_tokens for r in measured) / total if total else None


def sent(primes: list[RequestSpec]) -> dict:
    """run.json's `priming` block: how many priming requests, how many prompt tokens."""
    return {"requests": len(primes), "prompt_tokens": sum(p.prompt_tokens for p in primes)}
