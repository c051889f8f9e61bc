"""A class's shared prefixes, read from its table: system prompts and documents (reuse that follows from the
traffic), or a controlled hit rate (`hit_rate`: that share of every prompt, in whole `hit_block`s, is one of
`primed_prefixes` prefixes, sent once before the clock starts so that every measured request finds its prefix
cached)."""

from __future__ import annotations


def prefixes(ctx, c: dict, key: str) -> dict:
    """The prefix keys of class table c (ctx: workloads/parse.py's error and number helper)."""
    p = f"{key}."
    out = {
        "system_prompts": ctx.num(c, "system_prompts", p, int, 0, limit="count_or_zero"),
        "prefix_tokens": ctx.num(c, "prefix_tokens", p, int, 0, limit="tokens_or_zero"),
        "prefix_share": ctx.num(c, "prefix_share", p, float, 1.0, limit="fraction"),
        "documents": ctx.num(c, "documents", p, int, 0, limit="count_or_zero"),
        "document_tokens": ctx.num(c, "document_tokens", p, int, 0, limit="tokens_or_zero"),
        "document_skew": ctx.num(c, "document_skew", p, float, 0.0, limit="weight"),
        "hit_rate": ctx.num(c, "hit_rate", p, float, None, limit="fraction"),
        "primed_prefixes": ctx.num(c, "primed_prefixes", p, int, 1, limit="requests"),
        "hit_block": ctx.num(c, "hit_block", p, int, 128, limit="tokens"),
    }
    if out["prefix_share"] > 1:
        raise ctx.err(f"{key}.prefix_share", "a fraction of the requests, at most 1")
    if bool(out["system_prompts"]) != bool(out["prefix_tokens"]):
        raise ctx.err(key, "system_prompts and prefix_tokens go together")
    if bool(out["documents"]) != bool(out["document_tokens"]):
        raise ctx.err(key, "documents and document_tokens go together")
    if (out["system_prompts"] or out["documents"] or out["hit_rate"] is not None) and c.get("source") == "sharegpt":
        raise ctx.err(key, "shared prefixes are for synthetic classes")
    _check_hit_rate(ctx, c, key, out)
    return out


def _check_hit_rate(ctx, c: dict, key: str, out: dict) -> None:
    h = out["hit_rate"]
    if h is None:
        for k in ("primed_prefixes", "hit_block"):
            if k in c:
                raise ctx.err(f"{key}.{k}", "goes with hit_rate (the share of each prompt primed)")
        return
    if not 0 < h < 1:
        raise ctx.err(f"{key}.hit_rate", f"{h:g}: the share of each prompt found in the cache, between 0 and 1")
    if out["system_prompts"] or out["documents"]:
        raise ctx.err(key, "hit_rate sets the shared prefix itself: leave out system_prompts and documents")
