"""Sweep cells on the simulated engine, in parallel processes: each cell the sweep's plan through its
config on its instances (engine.virtual.simulate), kept as a run directory under cells/ with the same
summary a `goodbench simulate` run gets (metrics/compose.py)."""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from concurrent.futures import Future, ProcessPoolExecutor

from ..engine.prices import price_table
from ..engine.virtual import simulate
from ..metrics import summarize
from ..proctree import pool_init
from ..records import RunMeta, RunResult
from ..rundir import RunDir
from .grid import Cell
from .knobs import calibration_notes
from .sweep import (
    SweepInterrupted,
    SweepSetup,
    cell_meta,
    config_row,
    cost_row,
    slo_scale_row,
    stall_row,
    start_row,
    summary_row,
    verdict_row,
)

# The plan is built once in the parent; forked workers read it from here.
_SHARED: dict = {}


def run_cell(cell: Cell) -> dict:
    """One simulated cell: a run directory under cells/, and its row."""
    s: SweepSetup = _SHARED["setup"]
    row, cfg = start_row(s, cell)
    if cfg is None:
        return row
    layout = s.layout(cell)
    t = time.perf_counter()
    out = simulate(cfg, s.plan, layout)
    wall = time.perf_counter() - t
    meta = cell_meta(
        s,
        cell,
        cfg,
        "simulate",
        gpus=layout.gpus(cfg),
        prices=price_table(s.prices),
        engine_stats=out.stats
        | {
            "wall_s": wall,
            "notes": calibration_notes(cfg, s.plan.requests, out.stats["max_step_tokens"]),
        },
    )
    rd = RunDir.open(os.path.join(s.out_dir, "cells"), meta)
    rd.append_many(out.records)
    summary = rd.finish(records=out.records, ci=False)
    row.update(summary_row(summary))
    row.update(stall_row(RunResult(meta, out.records)))
    row.update(verdict_row(summary, s.target))
    row.update(cost_row(summary["cost"], layout.label()))
    row.update(slo_scale_row(out.records, s.slo, _SHARED.get("slo_scales") or ()))
    row.update(config_row(cfg, rd.dir))
    row.update(edge_row(s, cfg, layout, summary))
    if _SHARED.get("keep_summaries"):
        row["summary"] = summary
    return row


def edge_row(s: SweepSetup, cfg, layout, summary: dict) -> dict:
    """The cell again with every step time the engine's expected error faster and slower
    (summary.engine_uncertainty): its attainment and goodput at both edges, so a verdict or a best chunk
    size that the error could flip is marked (sweep.mark_flips, sweep.best_per_tier)."""
    u = summary.get("engine_uncertainty") or {}
    pct = u.get("step_time_pct")
    if not pct:
        return {}
    out = {"engine_uncertainty_pct": pct}
    for edge, f in (("fast", 1 - pct / 100), ("slow", 1 + pct / 100)):
        recs = simulate(cfg, s.plan, layout, step_scale=f).records
        e = summarize(RunResult(RunMeta(edge, slo=s.slo), recs), ci=False)
        out[f"attainment_{edge}"], out[f"goodput_{edge}"] = e["slo_attainment"], e["goodput"]
    return out


def run_cells(s: SweepSetup, jobs: int = 0, on_done=None, slo_scales=(), keep_summaries: bool = False) -> list[dict]:
    """Every cell (in parallel processes when jobs > 1; 0: one per CPU). keep_summaries: each row also
    carries its cell's whole summary under "summary" (not written to sweep.csv). Ctrl-C or SIGTERM:
    the pool's workers are stopped at once and SweepInterrupted carries the rows of finished cells."""
    _SHARED.update(setup=s, slo_scales=tuple(slo_scales), keep_summaries=keep_summaries)
    jobs = jobs or (os.cpu_count() or 1)
    rows: list[dict] = []
    if jobs <= 1 or len(s.cells) <= 1:
        try:
            for c in s.cells:
                rows.append(run_cell(c))
                if on_done:
                    on_done(rows[-1])
        except KeyboardInterrupt:
            raise SweepInterrupted(rows) from None
        return rows
    # the workers ignore SIGINT, die with this process and exit at once if it is already gone (proctree)
    ex = ProcessPoolExecutor(
        max_workers=min(jobs, len(s.cells)),
        mp_context=mp.get_context("fork"),
        initializer=pool_init,
        initargs=(os.getpid(),),
    )
    futures: list[Future] = []
    try:
        futures = [ex.submit(run_cell, c) for c in s.cells]
        for f in futures:
            rows.append(f.result())
            if on_done:
                on_done(rows[-1])
    except KeyboardInterrupt:
        _abort(ex)
        done = [f.result() for f in futures if f.done() and not f.cancelled() and not f.exception()]
        raise SweepInterrupted(done) from None
    finally:
        ex.shutdown(cancel_futures=True)
    return rows


def _abort(ex: ProcessPoolExecutor) -> None:
    """Stop a pool now: its workers terminated (no public API does it), queued cells cancelled."""
    for p in list((getattr(ex, "_processes", None) or {}).values()):
        if p.is_alive():
            p.terminate()
    ex.shutdown(wait=True, cancel_futures=True)
