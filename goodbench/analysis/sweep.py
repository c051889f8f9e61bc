"""Sweeps: a grid of GPU tiers x engine knobs, each cell a run of the same planned requests, on a
backend (backends.py: the simulated engine in parallel processes, or live servers one after another);
the best chunk size per tier, the cheapest cell, sweep.csv and sweep.json."""

from __future__ import annotations

import csv
import json
import math
import os
from dataclasses import dataclass, field, replace

from .. import gating
from ..engine.config import EngineConfig
from ..engine.layout import ClusterSpec, parse_layout
from ..engine.prices import price_table
from ..errors import RunDirError, UsageError
from ..limits import TARGET_ATTAINMENT
from ..metrics import RequestMetrics
from ..metrics.derived import measured_arrays
from ..metrics.hol import stall_p99
from ..metrics.stats import goodput_interval, wilson
from ..records import RunMeta
from ..workloads import Plan, WorkloadSpec
from .grid import Cell, cell_cluster, cell_config

TIE_TOLERANCE = 0.005  # goodputs within 0.5% of the best are ties
TIE_RULE = (
    "goodputs are indistinguishable when a cell's goodput lies inside the highest cell's 95% interval (or "
    "within 0.5% of it); among those the shortest stall wins (stall p99: the worst short class's ITL p99 "
    "while a long prefill is in flight), then the lowest ITL p99, then the lowest TTFT p99"
)


@dataclass
class SweepSetup:
    """What every cell shares: the workload and its plan (the same requests and schedule for every
    cell), the base engine config, the cells, where results go, the instances each cell runs on and
    the GPU prices."""

    spec: WorkloadSpec
    plan: Plan
    base: EngineConfig
    cells: list[Cell]
    out_dir: str
    sweep_id: str
    gpus: list[str]
    params: dict
    cluster: ClusterSpec | None = None  # every cell's instances (None: one instance)
    prices: dict = field(default_factory=dict)  # $ per GPU-hour overrides
    target: float = TARGET_ATTAINMENT  # the attainment a cell must reach to meet the SLO (its verdict)
    labels: dict = field(default_factory=dict)  # every cell's run.json labels (docs/history.md)
    gpu_telemetry: tuple = ()  # live cells: GPU telemetry sources, checked (runner/telemetry.py)
    electricity: dict | None = None  # {usd_per_kwh, facility_factor}: every cell's energy cost

    @property
    def slo(self) -> dict:
        return self.spec.slo

    def layout(self, cell: Cell) -> ClusterSpec:
        """The instances a cell runs on: its own layout, else the sweep's (with the cell's router)."""
        return replace(parse_layout(cell.layout, self.cluster), **cell_cluster(cell))

    @property
    def meta(self) -> dict:
        """sweep.json's meta block."""
        spec, plan = self.spec, self.plan
        return {
            "sweep_id": self.sweep_id,
            "label": plan.arrival.label,
            "workload": spec.to_dict(),
            "workload_hash": spec.hash(),
            "seed": spec.seed,
            "slo": spec.slo,
            "rate": plan.arrival.mean_rate,
            "gpus": self.gpus,
            "params": dict(self.params),
            "base_engine": self.base.to_dict(),
            "endpoint": spec.endpoint,
            "cluster": self.cluster.to_dict() if self.cluster is not None else None,
            "prices": price_table(self.prices),
            "target_attainment": self.target,
        }


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM during a sweep: the rows of the cells that finished (an interrupted live cell's
    row says so in its error and is not ranked). run_sweep writes them, then re-raises (exit 130)."""

    def __init__(self, rows: list[dict]):
        super().__init__()
        self.rows = rows


@dataclass
class SweepResult:
    """A finished grid: one row per cell (sweep.csv), the best cell per tier, the cheapest cell."""

    rows: list[dict]
    best: dict
    cheapest: dict | None


def require_slo(spec: WorkloadSpec) -> None:
    if not spec.slo:
        raise UsageError(
            "a sweep ranks cells by goodput: give an SLO (--goodput ttft:MS tpot:MS) or use a workload with [slo]"
        )


def setup(
    spec: WorkloadSpec,
    plan: Plan,
    base: EngineConfig,
    cells: list[Cell],
    result_dir: str,
    sweep_id: str,
    gpus: list[str],
    params: dict,
    cluster: ClusterSpec | None = None,
    prices: dict | None = None,
    target: float = TARGET_ATTAINMENT,
) -> SweepSetup:
    require_slo(spec)
    out = os.path.join(result_dir, sweep_id)
    if os.path.exists(out):
        raise RunDirError(f"{out} exists; choose another --sweep-id")
    return SweepSetup(spec, plan, base, cells, out, sweep_id, gpus, dict(params), cluster, dict(prices or {}), target)


def cell_meta(s: SweepSetup, cell: Cell, cfg: EngineConfig | None, mode: str, **kw) -> RunMeta:
    """A cell's run.json: the sweep's workload and schedule, the cell's engine (None: an external server)."""
    spec = s.spec
    return RunMeta(
        run_id=cell.slug,
        label=s.plan.arrival.label,
        target={"base_url": "simulated", "endpoint": "", "model": cfg.model if cfg else ""},
        engine=cfg.to_dict() if cfg else None,
        workload=spec.to_dict(),
        workload_hash=spec.hash(),
        slo=s.slo,
        seed=spec.seed,
        mode=mode,
        requested_rate=s.plan.arrival.mean_rate,
        planned_requests=len(s.plan.requests),
        expected_prefix_reuse=s.plan.expected_reuse(),
        target_hit_rate=s.plan.target_hit_rate,
        labels=dict(s.labels),
        target_attainment=s.target,
        electricity=s.electricity,
        **kw,
    )


def start_row(s: SweepSetup, cell: Cell) -> tuple[dict, EngineConfig | None]:
    """A cell's row (its label and knobs) and config; an impossible config is the row's error."""
    row: dict = {"cell": cell.label, "gpu": cell.gpu, **{k: v for k, v in cell.params}}
    try:
        return row, cell_config(s.base, cell)
    except UsageError as e:
        row["error"] = str(e)
        return row, None


def summary_row(s: dict) -> dict:
    """A cell's numbers for the table and CSV, with Wilson intervals of attainment and goodput."""
    n = s["requests"]["issued"]
    k = s.get("slo_met") or 0
    row = {
        "ttft_p50_ms": s["ttft_ms"]["p50"],
        "ttft_p99_ms": s["ttft_ms"]["p99"],
        "itl_p50_ms": s["itl_ms"]["p50"],
        "itl_p99_ms": s["itl_ms"]["p99"],
        "itl_p99_over_p50": s["itl_p99_over_p50"],
        "tpot_p50_ms": s["tpot_ms"]["p50"],
        "tpot_p99_ms": s["tpot_ms"]["p99"],
        "request_throughput": s["request_throughput"],
        "output_throughput": s["output_throughput"],
        "goodput": s["goodput"],
        "slo_attainment": s["slo_attainment"],
        "issued": n,
        "tok_s_per_user": s.get("tok_s_per_user"),  # the frontier's axes (metrics/frontier.py)
        "output_tok_s_per_gpu": s.get("output_tok_s_per_gpu"),
        "good_output_tok_s_per_gpu": s.get("good_output_tok_s_per_gpu"),
        "joules_per_good_token": (s.get("energy") or {}).get("joules_per_good_token"),  # engine/power.py, telemetry
        "good_tokens_per_kwh": (s.get("energy") or {}).get("good_tokens_per_kwh"),
        "energy_usd_per_million_good_tokens": (s.get("energy") or {}).get("energy_usd_per_million_good_tokens"),
        **fleet_row(s.get("replicas")),
    }
    if s.get("slo_attainment") is not None:
        row["attainment_lo"], row["attainment_hi"] = wilson(k, n)
        row["goodput_lo"], row["goodput_hi"] = goodput_interval(k, n, s["duration_s"])
    return row


def fleet_row(block: dict | None) -> dict:
    """A fleet's cell: prefix-cache hit rate, balance, TTFT p50 of hits and misses (metrics/replicas.py)."""
    if not block:
        return {}
    p50 = {k: (block.get(f"ttft_ms_{k}") or {}).get("p50") for k in ("hit", "miss")}
    return {
        "hit_rate": block["hit_rate"],
        "jain_index": block["jain_index"],
        "ttft_p50_hit_ms": p50["hit"],
        "ttft_p50_miss_ms": p50["miss"],
    }


def stall_row(result) -> dict:
    """A cell's stall_p99_ms (metrics.hol.stall_p99, from its records: a RunResult) and its long class."""
    cols = measured_arrays(result)
    stall, long_name = stall_p99(cols, RequestMetrics(cols))
    return {"stall_p99_ms": stall, "long_class": long_name}


def verdict_row(summary: dict, target: float) -> dict:
    """A cell's verdict on the SLO, from the project's one judge (gating): pass, fail or cannot judge."""
    g = gating.evaluate(summary, gating.GateSpec(min_attainment=target))
    return {"verdict": "cannot judge" if not g.judgeable else ("pass" if g.passed else "fail")}


def config_row(cfg: EngineConfig, run_dir: str) -> dict:
    return {
        "max_num_batched_tokens": cfg.max_num_batched_tokens,
        "enable_chunked_prefill": cfg.enable_chunked_prefill,
        "model": cfg.model,
        "run_dir": run_dir,
    }


def cost_row(c: dict, layout: str) -> dict:
    return {
        "layout": layout,
        "gpus": c["gpus"],
        "usd_per_hour": c["usd_per_hour"],
        "usd_per_million_output_tokens": c["usd_per_million_output_tokens"],
        "goodput_per_gpu": c["goodput_per_gpu"],
        "goodput_per_usd_hour": c["goodput_per_usd_hour"],
    }


def slo_scale_row(recs, slo: dict | None, scales) -> dict:
    """SLO-scale curve (DistServe): attainment with every threshold multiplied by each scale."""
    if not slo or not scales:
        return {}
    c = RequestMetrics([r for r in recs if not r.warmup])
    out = {}
    for k in scales:
        m = c.meets({key: v * k for key, v in slo.items()})
        out[f"attainment@{k:g}"] = float(m.mean()) if m.size else None
    return out


def run_sweep(s: SweepSetup, backend, on_done=None) -> SweepResult:
    """Every cell on the backend (backends.Simulated or backends.Live); writes sweep.csv and sweep.json."""
    os.makedirs(s.out_dir, exist_ok=True)
    try:
        rows = backend.run_cells(s, on_done)
    except SweepInterrupted as e:
        mark_flips(e.rows, s.target)
        write_results(e.rows, s.out_dir, s.meta | {"interrupted": True, "cells_planned": len(s.cells)})
        raise
    mark_flips(rows, s.target)
    return write_results(rows, s.out_dir, s.meta)


def mark_flips(rows: list[dict], target: float) -> None:
    """verdict_could_flip on each simulated cell: whether it meets the SLO (attainment >= target) at
    step times the engine's error faster and slower (simcells: attainment_fast / attainment_slow)
    disagree, so the table's verdict is within the engine's error."""
    for r in rows:
        if r.get("attainment_fast") is not None and r.get("attainment_slow") is not None:
            fast, slow = (gating.attains(r[k], target) for k in ("attainment_fast", "attainment_slow"))
            r["verdict_could_flip"] = fast != slow


def write_results(rows: list[dict], out_dir: str, meta: dict) -> SweepResult:
    """sweep.csv (one row per cell) and sweep.json (meta, cells, best per tier, cheapest). A row's
    "summary" (Simulated(keep_summaries=True)) stays in the result's rows and is not written."""
    written = [{k: v for k, v in r.items() if k != "summary"} for r in rows]
    cols: list[str] = []
    for r in written:
        cols += [k for k in r if k not in cols]
    with open(os.path.join(out_dir, "sweep.csv"), "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows(written)
    result = SweepResult(rows, best_per_tier(written), cheapest(written))
    with open(os.path.join(out_dir, "sweep.json"), "w", encoding="utf-8") as f:
        json.dump(
            {"meta": meta, "cells": written, "best": result.best, "cheapest": result.cheapest}, f, indent=2, default=str
        )
    return result


def cheapest(rows: list[dict]) -> dict | None:
    """The cell (any tier, chunk size or layout) with the lowest $ per million output tokens delivered
    within the SLO, and the most goodput per GPU; None when no cell has a price and a delivery."""
    priced = [r for r in rows if r.get("usd_per_million_output_tokens") is not None and not r.get("error")]
    if not priced:
        return None
    top = min(priced, key=lambda r: r["usd_per_million_output_tokens"])
    per_gpu = max((r for r in rows if r.get("goodput_per_gpu") is not None), key=lambda r: r["goodput_per_gpu"])
    return {
        "cell": top["cell"],
        "usd_per_million_output_tokens": top["usd_per_million_output_tokens"],
        "goodput_per_usd_hour": top.get("goodput_per_usd_hour"),
        "slo_attainment": top.get("slo_attainment"),
        "most_goodput_per_gpu": per_gpu["cell"],
        "goodput_per_gpu": per_gpu["goodput_per_gpu"],
    }


def indistinct(r: dict, top: dict) -> bool:
    """r's goodput cannot be told from the top cell's: within its 95% interval, or within 0.5%."""
    lo = top.get("goodput_lo")
    return r["goodput"] >= top["goodput"] * (1 - TIE_TOLERANCE) or (lo is not None and r["goodput"] >= lo)


def _felt(r: dict) -> tuple[float, float, float]:
    """What a user feels, worst first: the stall, the pooled ITL p99, the TTFT p99 (unknown: last)."""
    return tuple(math.inf if r.get(k) is None else r[k] for k in ("stall_p99_ms", "itl_p99_ms", "ttft_p99_ms"))


def rank(rows: list[dict]) -> tuple[list[dict], list[dict], dict | None]:
    """The best-cell rule (TIE_RULE), the one place it lives: the sweep's best per tier and `advise`'s
    budget both come from it. Rows of one tier and load -> (ranked, tied with the best, highest goodput):
    the cells whose goodput cannot be told from the highest, by _felt; then the rest by goodput, then
    _felt. Failed cells and cells without a goodput are left out."""
    ok = [r for r in rows if r.get("goodput") is not None and not r.get("error")]
    if not ok:
        return [], [], None
    top = max(ok, key=lambda r: (r["goodput"], [-x for x in _felt(r)]))
    tied = sorted((r for r in ok if indistinct(r, top)), key=_felt)
    rest = sorted((r for r in ok if not indistinct(r, top)), key=lambda r: (-r["goodput"], *_felt(r)))
    return tied + rest, tied, top


def best_per_tier(rows: list[dict]) -> dict:
    """Per GPU: the best cell by rank (TIE_RULE), and its margin to the next."""
    out = {}
    for gpu in dict.fromkeys(r["gpu"] for r in rows):
        ok = [r for r in rows if r["gpu"] == gpu and r.get("goodput") is not None and not r.get("error")]
        ranked, tied, top = rank(ok)
        if not ranked:
            continue
        b = ranked[0]
        nxt = ranked[1] if len(ranked) > 1 else None
        out[gpu] = {
            "cell": b["cell"],
            "max_num_batched_tokens": b.get("max_num_batched_tokens"),
            "enable_chunked_prefill": b.get("enable_chunked_prefill"),
            "goodput": b["goodput"],
            "stall_p99_ms": b.get("stall_p99_ms"),
            "itl_p99_ms": b.get("itl_p99_ms"),
            "next": nxt["cell"] if nxt else None,
            "margin_goodput": (b["goodput"] - nxt["goodput"]) if nxt else None,
            "separated": (
                nxt is not None
                and b.get("goodput_lo") is not None
                and b["goodput_lo"] > nxt.get("goodput_hi", math.inf)
            ),
            # added by issue 23: the cells whose goodput cannot be told from the highest, and the rule
            "tied": [
                {
                    "cell": r["cell"],
                    "goodput": r["goodput"],
                    "stall_p99_ms": r.get("stall_p99_ms"),
                    "itl_p99_ms": r.get("itl_p99_ms"),
                }
                for r in tied
                if r is not b
            ],
            "highest_goodput": top["cell"],
            "rule": TIE_RULE,
        } | _best_at_the_edges(ok, b["cell"])
    return out


def _best_at_the_edges(ok: list[dict], best: str) -> dict:
    """The best cell by rank with step times the engine's error faster and slower (simulated cells: their
    goodputs at the edges, ties within 0.5%; the latencies are the cells' own): when either is another
    cell, the best chunk size could flip within that error."""
    out = {}
    for edge in ("fast", "slow"):
        key = f"goodput_{edge}"
        if all(r.get(key) is not None for r in ok):
            ranked = rank([r | {"goodput": r[key], "goodput_lo": None} for r in ok])[0]
            out[f"best_if_{edge}"] = ranked[0]["cell"]
    if out:
        out["could_flip"] = any(v != best for v in out.values())
    return out
