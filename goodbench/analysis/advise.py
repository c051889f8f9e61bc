"""Chunk-size advice from first principles, then checked against a simulated sweep.

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

from ..arrivals import ArrivalSpec
from ..engine.config import EngineConfig
from ..engine.costmodel import CostModel
from ..engine.hardware import GIB, get_model
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
    m = get_model(cfg.model)
    mem = cfg.memory()
    tp = cfg.tensor_parallel_size
    kv_tok = cfg.kv_bytes_per_token()
    act_tok = (4 * m.hidden + 2 * m.ffn / tp) * 2  # bytes per token in flight through a layer (bf16)
    free = mem["usable"] - mem["weights"] - mem["non_torch"]
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


def check(a: Advice, base: EngineConfig, spec: WorkloadSpec, tok, jobs: int = 0) -> list[dict]:
    """Simulate the check workload at each of check_sizes(a) on the advised tier. Rows are sweep rows
    plus the long class's TTFT (long_ttft_p50_ms / long_ttft_p99_ms); cells go to a temporary folder,
    removed afterwards."""
    import tempfile

    from ..workloads import build_plan
    from .backends import Simulated
    from .grid import grid
    from .sweep import run_sweep, setup

    plan = build_plan(spec, tok)
    cells = grid([base.gpu], {"max_num_batched_tokens": check_sizes(a)})
    with tempfile.TemporaryDirectory(prefix="goodbench-advise-") as out:  # removed afterwards, even on Ctrl-C
        s = setup(spec, plan, base, cells, out, "check", [base.gpu], {})
        rows = run_sweep(s, Simulated(jobs, keep_summaries=True)).rows
    for r in rows:
        summary = r.pop("summary", {})
        long_ttft = (summary.get("per_class") or {}).get("long", {}).get("ttft_ms", {})
        r["long_ttft_p50_ms"], r["long_ttft_p99_ms"] = long_ttft.get("p50"), long_ttft.get("p99")
        r["itl_max_ms"] = (summary.get("itl_ms") or {}).get("max")
    return rows


# what the check compares, and which way is better (+1 higher, -1 lower)
CHECK_COLUMNS = (
    ("slo_attainment", 1),
    ("goodput", 1),
    ("long_ttft_p99_ms", -1),
    ("itl_p99_ms", -1),
    ("itl_max_ms", -1),
)


def _better(a: dict, b: dict, key: str, sign: int, tol: float = 0.005) -> int:
    """+1 when a beats b on key (by more than tol, relative), -1 when worse, 0 when level or unknown."""
    x, y = a.get(key), b.get(key)
    if x is None or y is None or abs(x - y) <= tol * max(abs(x), abs(y), 1e-9):
        return 0
    return 1 if (x - y) * sign > 0 else -1


def reconcile(a: Advice, rows: list[dict]) -> str | None:
    """What the simulated check says about the advice, when it disagrees: a size at least as good on
    every column and better on one (dominating: take it), or better on TTFT and ITL p99 but with a
    longer worst stall (ITL max), which is what the advice minimises (the table then explains it)."""
    ok = [r for r in rows if not r.get("error")]
    advised = next((r for r in ok if r["max_num_batched_tokens"] == a.chunk), None)
    if advised is None:
        return None
    rivals = []
    for r in ok:
        votes = [_better(r, advised, k, s) for k, s in CHECK_COLUMNS]
        if r is not advised and min(votes) >= 0 and max(votes) > 0:
            return (
                f"the check favours {r['max_num_batched_tokens']} tokens: at least as good as the advised "
                f"{a.chunk} on every column and better on some; take {r['max_num_batched_tokens']}"
            )
        if r is not advised and min(votes[:4]) >= 0 and max(votes[:4]) > 0:
            rivals.append(r)
    if not rivals:
        return None
    best = max(rivals, key=lambda r: (r["goodput"] or 0, -(r["long_ttft_p99_ms"] or 0)))
    return (
        f"at this load {best['max_num_batched_tokens']} tokens does better on TTFT and ITL p99 at the same "
        f"goodput, but its worst stall is longer (ITL max {best['itl_max_ms']:.1f} vs {advised['itl_max_ms']:.1f} "
        f"ms): the advice is the smallest chunk that meets the TTFT SLO, which keeps decoding streams' longest "
        f"stall shortest. Take {best['max_num_batched_tokens']} if stalls of that length are acceptable."
    )
