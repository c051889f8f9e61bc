"""Speculative decoding in the engine's step (vLLM V1's --speculative-config). Pure.

A decoding request carries k draft tokens into the step: the target verifies k + 1 tokens (its GEMMs and LM
head price them; its attention reads the context once), accepts a prefix of the drafts and emits 1 + a
tokens in one chunk. The drafter runs in the same step: n-gram lookup is host work (priced at 0 GPU
time), EAGLE / EAGLE-3 heads and MTP layers are one layer of the target's shape run k times (the first
pass also over the step's prefill tokens, whose KV the head needs), a draft model is a smaller model run
k times. Whether speculation pays at a batch size is not written in anywhere: it comes out of pricing the
k extra tokens of every request against the steps saved (a memory-bound step gets them almost free, a
compute-bound one pays for each).

Acceptance: per-position conditional rates (the chance draft i is accepted once every draft before it
was), the last one repeated past the list. Each request's draws are a hash of its id, its output count and
the position (jitter.unit), so a run is reproducible and independent of batch order. Defaults per method
are public measurements (docs/engine.md, "Speculative decoding"); a run's counters fit them
(acceptance_from_counters)."""

from __future__ import annotations

import zlib
from dataclasses import dataclass, replace

from ..errors import UsageError
from .jitter import unit

METHODS = ("ngram", "eagle", "eagle3", "mtp", "draft_model")
# Conditional acceptance per position by method (the drafter's published chain acceptance; engine.md).
# ngram has none: it depends wholly on how much of the output repeats the prompt, so it must be given.
DEFAULT_ACCEPTANCE = {
    "mtp": (0.85,),  # DeepSeek-V3 technical report 5.4.3: the second token's acceptance 85-90 % (one MTP
    # module, k = 1; repeated for k > 1 it is an extrapolation, docs/engine.md)
}
MAX_SPEC_TOKENS = 16
# median |error| of the engine's speedup against batch on held-out public sweeps (benchmarks/spec_decode.py:
# EAGLE-3 paper Table 3 and arXiv 2601.11580 Fig. 1, 13 points, Llama-3.1-8B on H100)
SPEC_HELD_OUT = 0.163
# host terms of a speculative step, fitted to vLLM issue #20780 (engine/specfit.py; tests check the refit)
DRAFT_PASS_S = 412.2e-6  # per draft pass of a model drafter (launch, input preparation)
SPEC_STEP_S = 1159.8e-6  # per step that verifies drafts (rejection sampler, the drafter's bookkeeping)


def parse_rates(text: str | None) -> tuple[float, ...]:
    """'0.8,0.7,0.6' -> (0.8, 0.7, 0.6); UsageError naming the bad value (each in (0, 1])."""
    if text is None or str(text).strip() == "":
        return ()
    out = []
    for part in str(text).split(","):
        try:
            v = float(part)
        except ValueError:
            raise UsageError(f"--speculative-acceptance: {part.strip()!r} is not a number") from None
        if not 0 < v <= 1:
            raise UsageError(f"--speculative-acceptance: {v:g} is not a probability in (0, 1]")
        out.append(v)
    return tuple(out)


def parse_acceptance(text: str | None) -> tuple[tuple[float, ...], dict[str, tuple[float, ...]]]:
    """'0.8,0.6;code=0.9,0.85;chat=0.6' -> the rates for every request, and per workload class the rates
    for its requests (how much of the output a drafter guesses depends on the text: code edits repeat the
    prompt, chat does not). UsageError for a bad part."""
    default: tuple[float, ...] = ()
    by: dict[str, tuple[float, ...]] = {}
    for part in str(text or "").split(";"):
        if not part.strip():
            continue
        name, eq, rates = part.rpartition("=")
        name = name.strip()
        if eq and not name:
            raise UsageError(f"--speculative-acceptance: {part.strip()!r} names no class before '='")
        if name in by or (not eq and default):
            raise UsageError(f"--speculative-acceptance: rates for {name or 'every request'} given twice")
        if eq:
            by[name] = parse_rates(rates)
        else:
            default = parse_rates(rates)
    return default, by


def acceptance_text(rates: tuple[float, ...], by_class: dict | None = None) -> str:
    """parse_acceptance's inverse: what --speculative-acceptance takes (classes whose names hold the
    separators ; = , cannot be written and are left out)."""
    fmt = lambda rs: ",".join(f"{max(r, 1e-3):.3g}" for r in rs)  # noqa: E731 (a rate of 0 is no probability)
    parts = [fmt(rates)] + [f"{c}={fmt(rs)}" for c, rs in (by_class or {}).items() if not set(c) & set(";=,")]
    return ";".join(parts)


def expected_tokens(rates) -> float:
    """Mean tokens a drafted step emits per request: 1 + sum over i of P(first i drafts accepted)."""
    out, p = 1.0, 1.0
    for r in rates:
        p *= r
        out += p
    return out


def scaled_rates(rates: tuple[float, ...], target: float) -> tuple[float, ...]:
    """The rates raised to one power g, g chosen so a drafted step emits `target` tokens on average
    (clipped to 1 .. 1 + k): a class that accepts more or less than the run's pooled rates keeps their shape
    along the positions. Bisection on log g (expected_tokens falls as g grows)."""
    k = len(rates)
    base = tuple(min(r, 0.999) for r in rates)
    if target >= expected_tokens((0.999,) * k):
        return (0.999,) * k
    if target <= expected_tokens((1e-3,) * k):
        return (1e-3,) * k
    lo, hi = -12.0, 12.0  # log g
    for _ in range(60):
        mid = (lo + hi) / 2
        if expected_tokens(tuple(r ** (2.0**mid) for r in base)) > target:
            lo = mid
        else:
            hi = mid
    g = 2.0 ** ((lo + hi) / 2)
    return tuple(max(1e-3, r**g) for r in base)


@dataclass(frozen=True)
class SpecDecode:
    """What the engine needs of a speculative config: the method, k and the per-position rates."""

    method: str
    k: int
    rates: tuple[float, ...]  # length k: conditional acceptance at positions 1..k
    by_class: tuple = ()  # (workload class, its length-k rates): a class's requests accept at these

    @classmethod
    def from_knobs(cls, method: str | None, k: int, acceptance: str | None) -> SpecDecode | None:
        """None when speculation is off (no method, or k = 0); UsageError for a config vLLM would refuse."""
        if not method or method == "none":
            if k:
                raise UsageError("--num-speculative-tokens needs --speculative-method (ngram, eagle, ...)")
            return None
        if method not in METHODS:
            raise UsageError(f"speculative method {method!r} is not one of {', '.join(METHODS)}")
        if k == 0:
            return None
        if not 1 <= k <= MAX_SPEC_TOKENS:
            raise UsageError(f"--num-speculative-tokens {k} is not in 1..{MAX_SPEC_TOKENS}")
        given, by = parse_acceptance(acceptance)
        rates = given or DEFAULT_ACCEPTANCE.get(method, ())
        if not rates:
            raise UsageError(
                f"speculative method {method} has no public default acceptance: give --speculative-acceptance "
                "(per-position rates, e.g. 0.7,0.6,0.5, then any per workload class, e.g. 0.7,0.6;code=0.9,0.8; "
                "a live run's summary.json has the server's: speculative.acceptance)"
            )
        stretch = lambda rs: tuple(rs[min(i, len(rs) - 1)] for i in range(k))  # noqa: E731
        return cls(method, k, stretch(rates), tuple((c, stretch(rs)) for c, rs in by.items()))

    def rates_for(self, klass: str | None) -> tuple[float, ...]:
        """The rates a request of this workload class is accepted at (the default for a class not named)."""
        for c, rs in self.by_class:
            if c == klass:
                return rs
        return self.rates

    def accepted(self, seq_id, n_out: int, drafts: int, salt: int = 0, klass: str | None = None) -> int:
        """How many of this step's `drafts` draft tokens the target accepts for this request."""
        rates = self.rates_for(klass) if self.by_class else self.rates
        base = zlib.crc32(str(seq_id).encode()) ^ salt
        a = 0
        for i in range(drafts):
            if unit(base, n_out * MAX_SPEC_TOKENS + i) >= rates[i]:
                break
            a += 1
        return a

    def expected_tokens(self, klass: str | None = None) -> float:
        """Mean tokens a step emits per decoding request of this class: 1 + sum of P(first i accepted)."""
        return expected_tokens(self.rates_for(klass))


VLLM_KEYS = {"prompt_lookup_max", "prompt_lookup_min", "draft_tensor_parallel_size", "max_model_len", "quantization"}


def from_vllm_config(text: str) -> dict:
    """vLLM's --speculative-config JSON as EngineConfig knobs: method, num_speculative_tokens, model (a
    built-in shape: the draft's), and goodbench's `acceptance`; vLLM's drafter settings the engine does not
    model (n-gram lookup lengths, the draft's TP) are accepted and left out. UsageError for anything else."""
    import json

    try:
        d = json.loads(text)
    except ValueError as e:
        raise UsageError(f"--speculative-config is not JSON: {e}") from None
    if not isinstance(d, dict):
        raise UsageError("--speculative-config: expected a JSON object")
    names = {"method": "speculative_method", "num_speculative_tokens": "num_speculative_tokens"}
    names |= {"model": "speculative_model", "acceptance": "speculative_acceptance"}
    unknown = sorted(set(d) - set(names) - VLLM_KEYS)
    if unknown:
        raise UsageError(f"--speculative-config: unknown key {unknown[0]!r}; known: {', '.join(sorted(names))}")
    out = {names[k]: v for k, v in d.items() if k in names}
    k = out.get("num_speculative_tokens", 0)
    if isinstance(k, bool) or not isinstance(k, int):
        raise UsageError(f"--speculative-config: num_speculative_tokens must be a whole number, got {k!r}")
    if isinstance(out.get("speculative_acceptance"), list):
        out["speculative_acceptance"] = ",".join(str(x) for x in out["speculative_acceptance"])
    if out.get("speculative_method") == "draft_model" or (
        "speculative_model" in out and "speculative_method" not in out
    ):
        out.setdefault("speculative_method", "draft_model")
    return out


def draft_shape(method: str, target, draft=None):
    """The model the drafter runs each pass: None for n-gram (host work), one layer of the target for
    EAGLE / EAGLE-3 / MTP (DeepSeek's MTP module is one MoE layer; EAGLE's a decoder layer at the
    target's width), the named draft model's shape otherwise."""
    if method == "ngram":
        return None
    if method == "draft_model":
        if draft is None:
            raise UsageError("--speculative-method draft_model needs --speculative-model (a built-in model shape)")
        return draft
    moe = target.moe if target.moe is None else replace(target.moe, dense_layers=0)
    return replace(target, name=f"{target.name} {method} head", layers=1, moe=moe, sliding_layers=0)


@dataclass(frozen=True)
class Drafter:
    """The drafter's time in a step: its k passes over the decoding requests, the first also over the
    step's prefill tokens. `cost` is the draft's CostModel on the target's tier and TP (None: n-gram)."""

    spec: SpecDecode
    cost: object = None
    fixed: bool = False  # a fixed-step test engine: speculation adds no time

    def time(self, batch) -> float:
        """The drafter's GPU passes and the step's speculative host terms (engine/specfit.py)."""
        if not batch.drafted or self.fixed:
            return self.gpu_time(batch)
        passes = self.spec.k * DRAFT_PASS_S if self.cost is not None else 0.0
        return self.gpu_time(batch) + passes + SPEC_STEP_S

    def gpu_time(self, batch) -> float:
        cm = self.cost
        if cm is None or cm.fixed_step_s is not None:
            return 0.0
        r = len(batch.drafted)
        if not r and not batch.prefill_tokens:
            return 0.0
        first = cm.pass_time(
            batch.prefill_tokens, r, batch.decode_ctx, batch.prefill_attn, batch.prefill_ctx, batch.num_seqs
        )
        rest = cm.pass_time(0, r, batch.decode_ctx, 0, 0, r) if r else 0.0
        return first + (self.spec.k - 1) * rest


@dataclass
class SpecCounters:
    """vLLM's spec_decode counters, as its /metrics names them."""

    drafts: int = 0  # requests that carried drafts into a step (vllm:spec_decode_num_drafts)
    draft_tokens: int = 0
    accepted: int = 0
    per_pos: list = None  # accepted tokens at each position

    def add(self, drafts: int, accepted: int) -> None:
        if self.per_pos is None:
            self.per_pos = [0] * MAX_SPEC_TOKENS
        self.drafts += 1
        self.draft_tokens += drafts
        self.accepted += accepted
        for i in range(accepted):
            self.per_pos[i] += 1


def acceptance_from_counters(drafts: float, per_pos: list[float]) -> tuple[float, ...]:
    """Per-position conditional rates from a run's counters: accepted at position i over accepted at i - 1
    (over the drafts at position 1): what --speculative-acceptance takes."""
    out, prev = [], float(drafts)
    for n in per_pos:
        if prev <= 0:
            break
        out.append(min(1.0, float(n) / prev))
        prev = float(n)
    return tuple(out)


def engine_counts(counters: list[SpecCounters], k: int) -> dict | None:
    """engine_stats' `speculative`: the instances' counters summed (None: no instance speculated)."""
    cs = [c for c in counters if c is not None]
    if not cs:
        return None
    per = [sum((c.per_pos or [0] * k)[i] for c in cs) for i in range(k)]
    return {
        "k": k,
        "drafts": sum(c.drafts for c in cs),
        "draft_tokens": sum(c.draft_tokens for c in cs),
        "accepted": sum(c.accepted for c in cs),
        "per_pos": per,
    }
