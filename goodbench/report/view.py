"""Everything a report draws from one run directory, loaded once: summary, columns, derived arrays, and
the optional engine step trace and scraped server metrics."""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..columnar import ColumnarRun, RunColumns
from ..metrics import Columns, columns_of, summarize
from ..metrics.saturation import waiting_series
from ..servermetrics import server_timing
from ..store import incomplete, load_columns, load_server_metrics, read_jsonl


@dataclass
class RunView:
    dir: str
    label: str
    meta: dict
    summary: dict
    cols: RunColumns            # non-warm-up requests
    c: Columns
    steps: dict | None          # step_trace.jsonl as arrays (engine clock)
    server: list | None         # server_metrics.jsonl rows (run clock)
    incomplete: str | None = None  # why the directory does not hold a whole run (store.incomplete)


def load_steps(path: str) -> dict | None:
    rows = [r for r in read_jsonl(path) if isinstance(r, dict) and "start" in r]
    if not rows:
        return None
    keys = ("start", "duration", "prefill_tokens", "decode_tokens", "batch_size", "kv_usage", "preemptions")
    return {k: np.array([float(r.get(k) or 0) for r in rows]) for k in keys}


def _kept_blocks(run_dir: str) -> dict:
    """Blocks summary.json holds that records cannot recompute (what the engine or server counted)."""
    from ..errors import RunDirError
    from ..store import load_summary

    try:
        kept = load_summary(run_dir)
    except RunDirError:
        return {}
    return {k: kept[k] for k in ("prefix_cache", "cost") if isinstance(kept, dict) and kept.get(k)}


def load_view(run_dir: str, slo: dict | None = None, label: str | None = None) -> RunView:
    run: ColumnarRun = load_columns(run_dir)
    cols = columns_of(run)
    c = Columns(cols)
    # summary.json keeps what was written at run end; the report shows the numbers recomputed now
    # (same definitions), which also covers runs imported from other tools
    server = load_server_metrics(run_dir) or None
    summary = summarize(run, slo=slo, prepared=c, queue=waiting_series(server or []))
    steps = load_steps(os.path.join(run_dir, "step_trace.jsonl"))
    summary["server_timing"] = server_timing(server or [], summary.get("ttft_ms"))
    summary.update(_kept_blocks(run_dir))
    name = label or run.meta.label
    return RunView(run_dir, f"{run.meta.run_id} ({name})" if name and name != run.meta.run_id else run.meta.run_id,
                   run.meta.to_dict(), summary, cols, c, steps, server, incomplete(run_dir))


def write_reports(paths: list[str], out: str | None = None, slo: dict | None = None, figures: bool = True,
                  on_stage=None, notes: list | None = None) -> list[tuple[str, int]]:
    """`goodbench report`: a sweep report per sweep directory, and one report for the run directories
    (combined when several: in `out`, or combined-<hash> beside the first). Returns (path, figures);
    notes (a list) receives one line per incomplete run (the report marks them too)."""
    import hashlib

    from ..errors import UsageError
    from .html import run_report, sweep_report
    from .runplots import run_figures

    written, runs = [], []
    for path in paths:
        if os.path.exists(os.path.join(path, "sweep.json")):
            written.append((sweep_report(path), 0))
        elif os.path.exists(os.path.join(path, "run.json")):
            runs.append(path)
        else:
            raise UsageError(f"{path} is neither a run directory (run.json) nor a sweep directory (sweep.json)")
    if not runs:
        return written
    stage = on_stage or (lambda text: None)
    stage(f"loading {len(runs)} run(s) ...")
    views = [load_view(r, slo=slo) for r in runs]
    if notes is not None:
        notes += [f"{v.dir} is incomplete: {v.incomplete}" for v in views if v.incomplete]
    if out is None and len(views) > 1:
        tag = hashlib.sha1("\0".join(os.path.abspath(r) for r in runs).encode()).hexdigest()[:8]
        out = os.path.join(os.path.dirname(os.path.abspath(runs[0])), f"combined-{tag}")
    out = out or runs[0]
    os.makedirs(out, exist_ok=True)
    pngs = []
    if figures:
        stage("drawing figures ...")
        pngs = run_figures(views, out)
    stage("writing report.html ...")
    written.append((run_report(views, out, pngs), len(pngs)))
    return written
