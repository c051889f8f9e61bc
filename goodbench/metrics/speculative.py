"""Speculative decoding over a run: what the server's counters say (vLLM's vllm:spec_decode_*, scraped
before and after; or the simulated engine's own counts) beside what the client saw (tokens per streamed
chunk after the first: a step's accepted drafts arrive together). Pure.

summary.json's `speculative` block (only where the server speculated):
  drafts, draft_tokens, accepted_tokens      counter deltas over the run
  acceptance_rate                            accepted / draft tokens
  mean_acceptance_length                     1 + accepted / drafts: tokens a drafted step emits per request
  per_position                               accepted at position i / drafts (vLLM's per-position rate)
  conditional_rates                          accepted at i / accepted at i - 1: what --speculative-acceptance takes
  tokens_per_chunk, tokens_per_chunk_by_class  the client's view: output tokens after the first over
                                             chunks after the first, completed streamed requests
  acceptance_by_class                        per class (two or more): the pooled conditional rates scaled so a
                                             drafted step emits the counters' mean length times the class's
                                             tokens per chunk over the run's (class_rates)
  acceptance                                 all of it as --speculative-acceptance takes it: what the engine
                                             (and goodbench calibrate's profile) replays the run with"""

from __future__ import annotations

import numpy as np

from ..engine.speculative import acceptance_from_counters, acceptance_text, scaled_rates
from ..prometheus import delta, delta_by

PREFIX = "vllm:spec_decode_num_"


def block(drafts: float, draft_tokens: float, accepted: float, per_pos: list[float], source: str) -> dict | None:
    """The counters' part of the block (None when no draft was made)."""
    if not drafts:
        return None
    return {
        "observed_by": source,
        "drafts": int(drafts),
        "draft_tokens": int(draft_tokens),
        "accepted_tokens": int(accepted),
        "acceptance_rate": accepted / draft_tokens if draft_tokens else None,
        "mean_acceptance_length": 1 + accepted / drafts,
        "per_position": [n / drafts for n in per_pos],
        "conditional_rates": list(acceptance_from_counters(drafts, per_pos)),
    }


def _per_position(rows: list[dict]) -> list[float]:
    """Deltas of vllm:spec_decode_num_accepted_tokens_per_pos_total by position (summed over engines)."""
    d = delta_by(rows, PREFIX + "accepted_tokens_per_pos_total", "position")
    return [d[p] for p in sorted(d, key=int)]


def pooled(blocks: list[dict | None]) -> dict | None:
    """Several runs' counter blocks as one: their counts summed (per position from each run's rate)."""
    bs = [b for b in blocks if b]
    if not bs:
        return None
    k = max(len(b["per_position"]) for b in bs)
    per = [sum(b["per_position"][i] * b["drafts"] for b in bs if i < len(b["per_position"])) for i in range(k)]
    total = {key: sum(b[key] for b in bs) for key in ("drafts", "draft_tokens", "accepted_tokens")}
    return block(total["drafts"], total["draft_tokens"], total["accepted_tokens"], per, bs[0]["observed_by"])


def observed(rows: list[dict]) -> dict | None:
    """The block from a live run's scraped counters (None: the server did not speculate)."""
    d = delta(rows, PREFIX + "drafts_total")
    if not d:
        return None
    return block(
        d,
        delta(rows, PREFIX + "draft_tokens_total") or 0.0,
        delta(rows, PREFIX + "accepted_tokens_total") or 0.0,
        _per_position(rows),
        "the server's vllm:spec_decode_* counters",
    )


def simulated(counts: dict | None) -> dict | None:
    """The block from the simulated engine's counts (engine_stats' `speculative`)."""
    if not counts:
        return None
    k = counts.get("k", 0)
    return block(
        counts["drafts"], counts["draft_tokens"], counts["accepted"], counts["per_pos"][:k], "the simulated engine"
    )


def tokens_per_chunk(out: np.ndarray, nchunks: np.ndarray, mask: np.ndarray) -> float | None:
    """Output tokens after the first over chunks after the first, over the masked requests."""
    m = mask & (nchunks >= 2)
    n = float((nchunks[m] - 1).sum())
    return float((out[m] - 1).sum()) / n if n else None


def client_view(out: np.ndarray, nchunks: np.ndarray, ok: np.ndarray, classes: np.ndarray) -> dict:
    """tokens_per_chunk overall and by workload class (completed requests)."""
    by = {str(c): tokens_per_chunk(out, nchunks, ok & (classes == c)) for c in sorted(set(classes.tolist()))}
    return {"tokens_per_chunk": tokens_per_chunk(out, nchunks, ok), "tokens_per_chunk_by_class": by}


def class_rates(b: dict) -> dict[str, tuple[float, ...]]:
    """Per workload class, the run's pooled conditional rates scaled (speculative.scaled_rates) so a drafted
    step emits the counters' mean acceptance length times the class's tokens per chunk over the run's: the
    counters set the level (the server counts every draft), the client's chunks only the classes' ratio (a
    chunk cut short by max_tokens or two steps read together bias every class alike). Empty with one class."""
    rates, tpc, by = b.get("conditional_rates"), b.get("tokens_per_chunk"), b.get("tokens_per_chunk_by_class") or {}
    by = {c: t for c, t in by.items() if t}
    if not rates or not tpc or len(by) < 2:
        return {}
    return {c: scaled_rates(tuple(rates), b["mean_acceptance_length"] * t / tpc) for c, t in by.items()}


def with_classes(b: dict) -> dict:
    """The block with acceptance_by_class and the --speculative-acceptance text that replays it (as it is
    without per-position counters: a server older than them)."""
    if not b.get("conditional_rates"):
        return b
    by = class_rates(b)
    out = dict(b, acceptance=acceptance_text(tuple(b["conditional_rates"]), by))
    if by:
        out["acceptance_by_class"] = {c: list(rs) for c, rs in by.items()}
    return out


def describe(b: dict | None) -> str | None:
    """The console's line: 'acceptance 62.0% · mean acceptance length 2.86 · 2.71 tokens per chunk'."""
    if not b:
        return None
    bits = []
    if b.get("acceptance_rate") is not None:
        bits.append(f"acceptance {b['acceptance_rate']:.1%}")
    bits.append(f"mean acceptance length {b['mean_acceptance_length']:.2f}")
    if b.get("tokens_per_chunk") is not None:
        bits.append(f"{b['tokens_per_chunk']:.2f} tokens per chunk (client)")
    return " · ".join(bits)
