"""What `goodbench calibrate` takes from runs against a speculating server: the acceptance they measured.

A server that speculates emits a drafted step's accepted tokens in one chunk, so its runs can only be
replayed by an engine that speculates as it did: with its method and k (the method from the user's
--speculative-method, which no counter names; k from the per-position counters) and the acceptance the
runs' vllm:spec_decode_* counters measured, pooled over the runs, per workload class where the runs had
several (metrics/speculative.class_rates). The step-time terms are then fitted on that replay, and the
profile keeps all four, so a what-if (`--num-speculative-tokens 5`, another rate) starts from the server."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..engine.config import EngineConfig
from ..engine.profile import SPEC_KEYS
from ..engine.speculative import METHODS
from ..errors import UsageError
from ..metrics.speculative import client_view, pooled, with_classes
from .calrun import RunData


def measured(runs: list[RunData]) -> dict | None:
    """The runs' speculative block as one run's summary.json has it (counters pooled, the client's chunks
    by class over every run's requests); None when no run speculated."""
    counts = pooled([r.spec for r in runs])
    if counts is None:
        return None
    out = np.concatenate([[q.max_tokens for q in r.requests] for r in runs]).astype(float)
    nch = np.concatenate([r.chunks for r in runs]).astype(float)
    cls = np.array([q.cls for r in runs for q in r.requests], dtype=object)
    return with_classes(counts | client_view(out, nch, np.ones(len(out), bool), cls))


def speculation(runs: list[RunData], base: EngineConfig) -> tuple[EngineConfig, dict | None]:
    """The replay's knobs with the runs' speculation (the user's flags where given), and the runs' block.
    UsageError, before any fit, where the runs speculated and the flags cannot replay it."""
    b = measured(runs)
    if b is None:
        return base, None
    # k: the per-position counters' positions, else the flag, else the draft tokens a drafted step carried
    k = len(b["per_position"]) or int(base.num_speculative_tokens) or round(b["draft_tokens"] / b["drafts"])
    if not base.speculative_method:
        raise UsageError(
            f"the runs speculated ({b['drafts']:,} drafted steps in the server's vllm:spec_decode_* counters, "
            f"{k} draft tokens each): pass the method the server ran, --speculative-method "
            f"{{{','.join(METHODS)}}} (and --speculative-model for a draft model), so the replay drafts as it did"
        )
    if b["per_position"] and base.num_speculative_tokens and base.num_speculative_tokens != k:
        raise UsageError(
            f"--num-speculative-tokens {base.num_speculative_tokens}, but the server's counters have {k} draft "
            "positions: pass the k it ran with, or leave the flag out"
        )
    acc = base.speculative_acceptance or b.get("acceptance")
    if not acc:
        raise UsageError(
            "the server's counters have no per-position acceptance (vllm:spec_decode_num_accepted_tokens_per_pos"
            "_total): give --speculative-acceptance"
        )
    return replace(base, num_speculative_tokens=k, speculative_acceptance=acc), b


def profile_keys(cfg: EngineConfig) -> dict:
    """The speculative knobs the profile's [engine] keeps (none where the replay did not speculate)."""
    if cfg.spec() is None:
        return {}
    return {k: getattr(cfg, k) for k in SPEC_KEYS if getattr(cfg, k) not in (None, "")} | {
        "num_speculative_tokens": int(cfg.num_speculative_tokens)
    }


def note(b: dict | None, cfg: EngineConfig) -> list[str]:
    """calibrate's line on what it replayed the runs' speculation with."""
    if b is None:
        return []
    given = "as given (--speculative-acceptance)" if cfg.speculative_acceptance != b.get("acceptance") else "fitted"
    return [
        f"the runs speculated: replayed with {cfg.speculative_method}, k = {cfg.num_speculative_tokens}, acceptance "
        f"{cfg.speculative_acceptance} ({given}; the counters: acceptance rate {b['acceptance_rate']:.1%}, mean "
        f"acceptance length {b['mean_acceptance_length']:.2f})"
    ]


def held_out(cfg: EngineConfig, others: list[RunData], given: EngineConfig) -> EngineConfig:
    """The replay knobs for predicting a run left out of the fit: the acceptance measured on the other runs
    alone (the user's where given), so its held-out TPOT is not told its own counters."""
    if cfg.spec() is None or given.speculative_acceptance:
        return cfg
    b = measured(others)
    return replace(cfg, speculative_acceptance=b["acceptance"]) if b and b.get("acceptance") else cfg
