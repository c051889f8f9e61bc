"""A fleet behind a router, seen per request: which replica served it (a response header the client was
told to read, or the simulated cluster's instance) and how many of its prompt tokens the server found in
its prefix cache (its usage's cached_tokens). One judge for live runs and simulations, so that a
simulated fleet's prediction and the measured fleet read the same block. Pure numpy.

hit rate = cached prompt tokens / prompt tokens, over the completed requests whose usage said;
a request is a cache hit when any of its prompt tokens came from the cache (vLLM counts whole blocks);
balance = Jain's index over the requests each replica served, (sum x)^2 / (n sum x^2): 1 = even,
1/n = all on one replica; sessions_split: multi-turn sessions served by more than one replica. n = the fleet's replicas where the run knows them (a simulated cluster), else
the replicas seen serving: a live replica that served nothing is invisible to the client."""

from __future__ import annotations

import numpy as np

from .derived import RequestMetrics
from .dist import dist


def jain_index(counts) -> float | None:
    x = np.asarray(counts, float)
    if not x.size or not (x > 0).any():
        return None
    return float(x.sum() ** 2 / (x.size * (x**2).sum()))


def peak_in_flight(start: np.ndarray, end: np.ndarray) -> int:
    """The most requests open at once, each open from start to end (the client's view of a replica's
    running requests: sent to last byte)."""
    keep = ~np.isnan(start) & ~np.isnan(end)
    if not keep.any():
        return 0
    t = np.concatenate([start[keep], end[keep]])
    step = np.concatenate([np.ones(int(keep.sum()), np.int64), -np.ones(int(keep.sum()), np.int64)])
    order = np.lexsort((step, t))  # at a tie an end (-1) comes before a start: touching is not overlapping
    return int(np.cumsum(step[order]).max())


def _cache_numbers(prompt: np.ndarray, cached: np.ndarray) -> dict:
    p, k = int(prompt.sum()), int(cached.sum())
    return {"prompt_tokens": p, "cached_tokens": k, "hit_rate": k / p if p else None}


def fleet_names(engine: dict | None, target: dict | None = None) -> list[str] | None:
    """A simulated or served cluster's instance names (as its records and x-goodbench-replica name them), or
    the replicas a live run was told sit behind its router (`goodbench run --replicas`)."""
    named = (target or {}).get("replicas") if isinstance(target, dict) else None
    if isinstance(named, list) and named:
        return [str(x) for x in named]
    cl = (engine or {}).get("cluster") if isinstance(engine, dict) else None
    if not isinstance(cl, dict):
        return None
    n = cl.get("prefill") or cl.get("replicas") or 0
    return [str(i) for i in range(n)] if isinstance(n, int) and n > 1 else None


def replica_block(c: RequestMetrics, fleet: list[str] | None = None, ci: bool = True) -> dict | None:
    """summary.json's `replicas` (None when no request has a replica or a cached-token count). fleet:
    every replica's name where the run knows them (those that served nothing get a row of zeros)."""
    cols = c.cols
    said = c.ok & (cols.cached >= 0)
    seen = cols.replica >= 0
    if not said.any() and not seen.any():
        return None
    prompt = cols.prompt_tokens
    per: dict = {}
    for code, name in enumerate(cols.replica_names):
        mine = cols.replica == code
        if not mine.any():
            continue
        k = mine & said
        per[name] = {
            "requests": int(mine.sum()),
            **_cache_numbers(prompt[k], cols.cached[k]),
            "peak_running": peak_in_flight(c.sent[mine], np.fmax(c.fin[mine], c.last[mine])),
        }
    if seen.any():
        idle = {"requests": 0, "prompt_tokens": 0, "cached_tokens": 0, "hit_rate": None, "peak_running": 0}
        per |= {name: dict(idle) for name in fleet or () if name not in per}
    hit = said & (cols.cached > 0)
    has_first = ~np.isnan(c.ttft)
    return {
        "requests": len(cols),
        "attributed": int(seen.sum()),
        "cache_reported": int(said.sum()),
        **_cache_numbers(prompt[said], cols.cached[said]),
        "hit_requests": int(hit.sum()),
        "ttft_ms_hit": dist(c.ttft[hit & has_first], ci) if hit.any() else None,
        "ttft_ms_miss": dist(c.ttft[said & ~hit & has_first], ci) if (said & ~hit).any() else None,
        "jain_index": jain_index([v["requests"] for v in per.values()]),
        "balance_over": "fleet" if fleet else "seen",  # every replica, or only those that served a request
        **_affinity(cols, seen),
        "per_replica": per,
    }


def _affinity(cols, seen: np.ndarray) -> dict:
    """Session affinity: of the multi-turn sessions whose turns were attributed, how many stayed on one
    replica (a router keyed on --session-header should keep them all)."""
    mine = seen & (cols.session >= 0)
    if not mine.any():
        return {}
    pairs = np.unique(np.stack([cols.session[mine], cols.replica[mine].astype(np.int64)]), axis=1)
    sessions, replicas = np.unique(pairs[0], return_counts=True)
    return {"sessions": int(sessions.size), "sessions_split": int((replicas > 1).sum())}


def describe(block: dict | None, expected: float | None = None) -> str | None:
    """One line: "2 replicas, balance (Jain) 0.98; hit rate 61.2% (the workload allows 75.0%); TTFT p50
    hit 41 ms, miss 180 ms" (None without a block)."""
    if not block:
        return None
    parts = []
    per = block.get("per_replica") or {}
    if per:
        j = block.get("jain_index")
        parts.append(f"{len(per)} replica{'s' if len(per) != 1 else ''}, balance (Jain) {j:.2f}" if j else "")
        if j and block.get("balance_over") == "seen":
            parts[-1] += " (over the replicas seen; --replicas names them all)"
        if block["attributed"] < block["requests"]:
            parts[-1] += f" ({block['requests'] - block['attributed']} requests unattributed)"
    hr = block.get("hit_rate")
    if hr is not None:
        parts.append(f"hit rate {hr:.1%}" + ("" if expected is None else f" (the workload allows {expected:.1%})"))
    p50 = [(k, (block.get(f"ttft_ms_{k}") or {}).get("p50")) for k in ("hit", "miss")]
    if any(v is not None for _, v in p50):
        parts.append("TTFT p50 " + ", ".join(f"{k} {v:.0f} ms" for k, v in p50 if v is not None))
    if block.get("sessions"):
        parts.append(f"{block['sessions_split']} of {block['sessions']} sessions moved between replicas")
    how = block.get("attribution")
    if how:
        said = ", ".join(f"{how[k]} {k}" for k in ("exact", "ambiguous", "timing", "unattributed") if how.get(k))
        agree = how.get("agrees_with_header")
        parts.append(f"by the workers' counters: {said}" + ("" if agree is None else f" ({agree:.0%} as the header)"))
    return "; ".join(p for p in parts if p) or None
