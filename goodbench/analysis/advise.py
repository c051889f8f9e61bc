"""Chunk-size advice from first principles, then settled on a simulated sweep of sizes by the sweep's own
best-cell rule (settle), so `advise` and `sweep` on the same traffic give one answer.

Two bounds:
- memory: a chunk of N prompt tokens needs activation memory and KV for N tokens on top of the KV the
  concurrent decodes hold; the ceiling is what is left after weights, runtime and that decode
  reserve, divided by the per-token cost;
- SLO: a P-token prompt split into chunks of C tokens takes ceil(P / C) steps of `t_chunk` each, so to
  finish inside the TTFT SLO it may use at most floor(SLO / t_chunk) chunks: C = ceil(P / allowed),
  clamped to [min chunk, memory ceiling]. t_chunk comes from the cost model (a step carrying the
  chunk and the concurrent decodes), iterated to a fixed point since it depends on C, unless given.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from ..arrivals import ArrivalSpec
from ..engine.config import EngineConfig
from ..engine.costmodel import CostModel
from ..engine.hardware import GIB
from ..workloads import ClassSpec, LengthDist, WorkloadSpec


@dataclass
class Advice:
    gpu: str
    model: str
    inputs: dict
    memory_ceiling: int
    time_per_chunk_ms: float
    chunks_allowed: int
    chunk: int
    reasons: list


def chunk_for(prompt_tokens: int, ttft_slo_ms: float, t_chunk_ms: float, floor: int, ceiling: int) -> tuple[int, int]:
    """(chunks allowed, chunk size): e.g. 500 ms, 45 ms/chunk, 6000 tokens -> (11, 546)."""
    allowed = max(1, math.floor(ttft_slo_ms / t_chunk_ms))
    return allowed, min(max(math.ceil(prompt_tokens / allowed), floor), ceiling)


def advise(
    cfg: EngineConfig,
    ttft_slo_ms: float,
    prompt_tokens: int,
    concurrency: int = 32,
    context: int = 1024,
    min_chunk: int = 256,
    max_chunk: int = 16384,
    time_per_chunk_ms: float | None = None,
) -> Advice:
    cfg = replace(cfg, max_num_batched_tokens=None).resolved()
    m = cfg.shape()
    mem = cfg.memory()
    tp = cfg.tensor_parallel_size
    kv_tok = cfg.kv_bytes_per_token()
    act_tok = (4 * m.hidden + 2 * m.active_ffn / tp) * 2  # bytes per token in flight through a layer (bf16)
    free = mem["usable"] - mem["weights"] - mem["non_torch"] - mem["lora_slots"]
    reserve = concurrency * context * kv_tok
    per_token = act_tok + kv_tok
    ceiling = int(max(0.0, free - reserve) // per_token)
    ceiling = max(min_chunk, min(ceiling, max_chunk))
    cm = CostModel.for_config(cfg)
    reasons = []
    if time_per_chunk_ms is None:
        c = min_chunk
        for _ in range(20):  # fixed point: the chunk's own size sets its step time
            t = cm.step_time(c, concurrency, concurrency * (context + 1), c * (c + 1) / 2, c, concurrency + 1) * 1000
            allowed, nc = chunk_for(prompt_tokens, ttft_slo_ms, t, min_chunk, ceiling)
            if nc == c:
                break
            c = nc
        t_ms = t
        reasons.append(
            f"time per chunk {t_ms:.1f} ms from the cost model (a {c}-token chunk beside {concurrency} "
            f"decodes at {context} tokens of context)"
        )
    else:
        t_ms = time_per_chunk_ms
        reasons.append(f"time per chunk {t_ms:.1f} ms as given")
    allowed, chunk = chunk_for(prompt_tokens, ttft_slo_ms, t_ms, min_chunk, ceiling)
    if math.ceil(prompt_tokens / chunk) * t_ms > ttft_slo_ms:
        reasons.append(
            f"even at the ceiling the {prompt_tokens}-token prompt needs "
            f"{math.ceil(prompt_tokens / chunk)} chunks = {math.ceil(prompt_tokens / chunk) * t_ms:.0f} ms "
            f"> the {ttft_slo_ms:g} ms TTFT SLO before any queueing: the SLO is out of reach on this tier"
        )
    inputs = {
        "usable_gib": mem["usable"] / GIB,
        "weights_gib": mem["weights"] / GIB,
        "runtime_gib": mem["non_torch"] / GIB,
        "decode_kv_reserve_gib": reserve / GIB,
        "kv_bytes_per_token": kv_tok,
        "activation_bytes_per_token": act_tok,
        "concurrency": concurrency,
        "context": context,
        "prompt_tokens": prompt_tokens,
        "ttft_slo_ms": ttft_slo_ms,
        "min_chunk": min_chunk,
    }
    return Advice(cfg.gpu, cfg.model, inputs, ceiling, t_ms, allowed, chunk, reasons)


def check_workload(
    a: Advice, ttft_slo_ms: float, tpot_slo_ms: float | None, num_prompts: int, request_rate: float
) -> WorkloadSpec:
    """The traffic the advice is checked on: 10% long prompts of the advised length arriving among
    90% short decoding chats, Poisson at request_rate."""
    slo = {"ttft": ttft_slo_ms} | ({"tpot": tpot_slo_ms} if tpot_slo_ms else {})
    return WorkloadSpec(
        name="advise-check",
        generator="mixed",
        num_requests=num_prompts,
        seed=0,
        slo=slo,
        arrival=ArrivalSpec(rate=request_rate),
        classes=(
            ClassSpec("short", 0.9, LengthDist(value=128), LengthDist(value=128)),
            ClassSpec("long", 0.1, LengthDist(value=a.inputs["prompt_tokens"]), LengthDist(value=32)),
        ),
    )


def check_sizes(a: Advice) -> list[int]:
    """The chunk sizes the check simulates: powers of two within [min chunk, ceiling], and the advice."""
    lo = a.inputs["min_chunk"]
    return sorted({256, 512, 1024, 2048, 4096, a.chunk} & set(range(lo, a.memory_ceiling + 1)) | {a.chunk})


def p95_prompt(plan) -> int:
    """The 95th-percentile prompt length of a plan's requests, tokens (what the SLO bound sizes for)."""
    return int(math.ceil(np.percentile([r.prompt_tokens for r in plan.requests], 95)))


def check(a: Advice, base: EngineConfig, spec: WorkloadSpec, tok, jobs: int = 0, plan=None) -> list[dict]:
    """Simulate the check workload (or plan, already built from it) at each of check_sizes(a) on the
    advised tier. Rows are sweep rows (stall_p99_ms, verdict) plus the long class's TTFT
    (long_ttft_p50_ms / long_ttft_p99_ms) and the pooled ITL max; cells go to a temporary folder,
    removed afterwards."""
    import tempfile

    from ..workloads import build_plan
    from .backends import Simulated
    from .grid import grid
    from .sweep import run_sweep, setup

    plan = plan if plan is not None else build_plan(spec, tok)
    cells = grid([base.gpu], {"max_num_batched_tokens": check_sizes(a)})
    with tempfile.TemporaryDirectory(prefix="goodbench-advise-") as out:  # removed afterwards, even on Ctrl-C
        s = setup(spec, plan, base, cells, out, "check", [base.gpu], {})
        rows = run_sweep(s, Simulated(jobs, keep_summaries=True)).rows
    for r in rows:
        summary = r.pop("summary", {})
        long_ttft = (summary.get("per_class") or {}).get(r.get("long_class") or "long", {}).get("ttft_ms", {})
        r["long_ttft_p50_ms"], r["long_ttft_p99_ms"] = long_ttft.get("p50"), long_ttft.get("p99")
        r["itl_max_ms"] = (summary.get("itl_ms") or {}).get("max")
    return rows


@dataclass
class AdviceCheck:
    """The advice settled on its simulated check: the budget is the sweep's best-cell rule
    (analysis.sweep.rank: goodput, then the shortest stall) over the simulated sizes, so `advise` and a
    sweep of the same traffic give one answer; then whether that budget meets the TTFT SLO the advice was
    derived from (the long class's TTFT p99 against it) and the SLO verdict (gating) on its cell."""

    rows: list[dict]
    budget: int | None  # None: no size delivered a goodput
    derived: int  # the SLO-bound chunk from first principles (Advice.chunk)
    ttft_slo_ms: float
    long_class: str | None
    long_ttft_p99_ms: float | None
    verdict: str | None  # gating's verdict on the budget's cell: pass, fail or cannot judge
    slo_attainment: float | None = None

    @property
    def miss_ms(self) -> float | None:
        """How far the long class's TTFT p99 is over the TTFT SLO (0.0: within it; None: unknown)."""
        if self.long_ttft_p99_ms is None:
            return None
        return max(0.0, self.long_ttft_p99_ms - self.ttft_slo_ms)

    @property
    def meets(self) -> bool:
        return self.verdict == "pass" and self.miss_ms == 0.0


def settle(a: Advice, rows: list[dict]) -> AdviceCheck:
    """The advised budget: the best simulated size by the sweep's rule, with the check's verdict on it."""
    from .sweep import rank

    ranked = rank(rows)[0]
    slo = a.inputs["ttft_slo_ms"]
    if not ranked:
        return AdviceCheck(rows, None, a.chunk, slo, None, None, None)
    b = ranked[0]
    return AdviceCheck(
        rows,
        b["max_num_batched_tokens"],
        a.chunk,
        slo,
        b.get("long_class"),
        b.get("long_ttft_p99_ms"),
        b.get("verdict"),
        b.get("slo_attainment"),
    )
