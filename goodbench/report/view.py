"""Everything a report draws from one run directory, loaded once: summary, columns, derived arrays, and
the optional engine step trace and scraped server metrics."""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..columnar import RecordArrays, RunArrays
from ..errors import RunDirError
from ..llmd import aggregate_only
from ..metrics import RequestMetrics, measured_arrays
from ..rundir import summarize_dir
from ..store import incomplete, load_arrays, load_gpu_telemetry, load_server_metrics, read_jsonl


@dataclass
class RunView:
    dir: str
    label: str
    meta: dict
    summary: dict
    cols: RecordArrays  # non-warm-up requests
    c: RequestMetrics
    steps: dict | None  # step_trace.jsonl as arrays (engine clock)
    server: list | None  # server_metrics.jsonl rows (run clock)
    incomplete: str | None = None  # why the directory does not hold a whole run (store.incomplete)
    gpus: list | None = None  # gpu_telemetry.jsonl rows (run clock): GPU power over the run


def load_steps(path: str) -> dict | None:
    rows = [r for r in read_jsonl(path) if isinstance(r, dict) and "start" in r]
    if not rows:
        return None
    keys = ("start", "duration", "prefill_tokens", "decode_tokens", "batch_size", "kv_usage", "preemptions")
    return {k: np.array([float(r.get(k) or 0) for r in rows]) for k in keys}


def load_view(run_dir: str, slo: dict | None = None, label: str | None = None) -> RunView:
    """A run directory for the report: its summary recomputed from the directory (rundir.summarize_dir:
    the one the run wrote, or the same definitions applied to a run imported from another tool), the
    columns and derived arrays the figures draw, the step trace and the scraped server metrics."""
    run: RunArrays = load_arrays(run_dir)
    if aggregate_only(run.meta):
        raise RunDirError(f"{run_dir}: {aggregate_only(run.meta)}")
    cols = measured_arrays(run)
    c = RequestMetrics(cols)
    summary = summarize_dir(run_dir, slo=slo, prepared=c, run=run)
    steps = load_steps(os.path.join(run_dir, "step_trace.jsonl"))
    server = load_server_metrics(run_dir) or None
    name = label or run.meta.label
    return RunView(
        run_dir,
        f"{run.meta.run_id} ({name})" if name and name != run.meta.run_id else run.meta.run_id,
        run.meta.to_dict(),
        summary,
        cols,
        c,
        steps,
        server,
        incomplete(run_dir),
        load_gpu_telemetry(run_dir) or None,
    )
