"""Class mixtures (the synthetic, mixed and sharegpt generators): each request draws a class by
weight, then its lengths from the class's distributions (or from ShareGPT for dataset classes)."""

from __future__ import annotations

import random

import numpy as np

from ..errors import UsageError
from ..records import RequestSpec
from .lengths import sample_lengths
from .media import content, draw, stats
from .priming import prime_key
from .segments import text_of
from .spec import MESSAGE_APIS, ClassSpec, WorkloadSpec


def as_prompt(text: str, chat: bool):
    return [{"role": "user", "content": text}] if chat else text


def _class_rows(c: ClassSpec, n: int, spec: WorkloadSpec, tok, rng_np, rng_py) -> list[tuple]:
    """n (prompt text, prompt tokens, output tokens) rows for one class."""
    if c.source == "sharegpt":
        from .sharegpt import load_raw, sample, source_key

        recs, report = load_raw(c.dataset)
        fixed = c.output.value if c.output.dist == "constant" else None
        rows = sample(recs, tok, n, spec.seed, fixed_output=fixed, cache_key=source_key(report))
        if c.output.dist not in ("constant", "dataset"):
            outs = sample_lengths(c.output, n, rng_np)
            rows = [(p, pl, int(o)) for (p, pl, _), o in zip(rows, outs)]
        return rows
    ins = sample_lengths(c.input, n, rng_np)
    outs = sample_lengths(c.output, n, rng_np)
    return [(tok.synthetic_text(int(i), rng_py), int(i), int(o)) for i, o in zip(ins, outs)]


def _prefix_segments(c: ClassSpec, n: int, rng: np.random.Generator) -> list[tuple]:
    """Per request, the shared segments in front of its own text: a system prompt (for a share of the
    requests) and a document (Zipf popularity), each the same tokens wherever it is chosen."""
    out = [() for _ in range(n)]
    if c.system_prompts:
        use = rng.random(n) < c.prefix_share
        pick = rng.integers(0, c.system_prompts, n)
        for i in np.flatnonzero(use):
            out[i] = ((("system-prompt", c.name, int(pick[i])), c.prefix_tokens),)
    if c.documents:
        ranks = np.arange(1, c.documents + 1, dtype=float)
        p = ranks**-c.document_skew
        docs = rng.choice(c.documents, size=n, p=p / p.sum())
        for i in range(n):
            out[i] = out[i] + ((("document", c.name, int(docs[i])), c.document_tokens),)
    return out


def _primed_rows(c: ClassSpec, rows: list[tuple], tok, rng_py) -> tuple[list[tuple], list[tuple]]:
    """A controlled-hit-rate class (workloads/priming.py): each prompt's first hit_rate x its tokens, rounded to
    whole hit_blocks (a server caches whole KV blocks: vLLM's are 16 tokens on GPUs, 128 on CPUs; rounding to the
    nearest keeps the mean rate unbiased), are one of the class's primed prefixes (drawn uniformly), the rest its
    own; (prefix segments, rows)."""
    shared, out = [], []
    b = c.hit_block
    for text, pl, ol in rows:
        k = min(int(round(c.hit_rate * pl / b)) * b, (pl - 1) // b * b)
        if k <= 0:  # a one-token prompt: nothing to share
            shared.append(())
            out.append((text, pl, ol))
            continue
        shared.append(((prime_key(c.name, rng_py.randrange(c.primed_prefixes)), k),))
        out.append((tok.synthetic_text(pl - k, rng_py), pl - k, ol))
    return shared, out


def _media(c: ClassSpec, spec: WorkloadSpec, n: int, ci: int) -> list | None:
    """Each of the class's n requests' images and audio (None: the class sends none)."""
    if c.media is None:
        return None
    if spec.endpoint not in MESSAGE_APIS:
        raise UsageError(f"class {c.name} sends images or audio: use --endpoint-type chat, responses or messages")
    return draw(c.media, n, spec.seed * 31 + ci)


def mixture_requests(spec: WorkloadSpec, tok, n: int) -> list[RequestSpec]:
    """n requests, reproducible for spec.seed: the class of each drawn first, then each class's rows."""
    chat = spec.endpoint in MESSAGE_APIS
    rng_np = np.random.default_rng(spec.seed)
    rng_py = random.Random(spec.seed)
    weights = np.array([c.weight for c in spec.classes], dtype=float)
    which = rng_np.choice(len(spec.classes), size=n, p=weights / weights.sum())
    out: list = [None] * n
    for ci, c in enumerate(spec.classes):
        idx = np.flatnonzero(which == ci)
        if idx.size == 0:
            continue
        rows = _class_rows(c, idx.size, spec, tok, rng_np, rng_py)
        shared = _prefix_segments(c, idx.size, rng_np) if c.system_prompts or c.documents else None
        if c.hit_rate is not None:
            shared, rows = _primed_rows(c, rows, tok, rng_py)
        media = _media(c, spec, idx.size, ci)
        for j, (i, (text, pl, ol)) in enumerate(zip(idx, rows)):
            segs = None
            if shared is not None and shared[j]:  # the shared prefix, then this request's own tokens
                segs = shared[j] + ((("own", f"r{i}"), pl),)
                text, pl = text_of(shared[j], tok) + text, pl + sum(n for _, n in shared[j])
            items = media[j] if media else ()
            out[i] = RequestSpec(
                id=f"r{i}",
                cls=c.name,
                prompt=[{"role": "user", "content": content(spec.endpoint, text, items)}]
                if items
                else as_prompt(text, chat),
                media=stats(items) if items else None,
                prompt_tokens=pl,
                max_tokens=ol,
                reasoning_tokens=int(round(c.reasoning * ol)),
                priority=c.priority,
                segments=segs,
            )
    return out
