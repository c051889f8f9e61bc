"""`goodbench report`: report.html (with its figures) for run directories and sweep directories."""

from __future__ import annotations

import hashlib
import os

from ..errors import RunDirError, UsageError
from .frontierfig import runs_frontier
from .html import run_report, sweep_report
from .runfigures import run_figures
from .view import load_view


def write_reports(
    paths: list[str],
    out: str | None = None,
    slo: dict | None = None,
    figures: bool = True,
    on_stage=None,
    notes: list | None = None,
    target: float | None = None,
) -> list[tuple[str, int]]:
    """`goodbench report`: a sweep report per sweep directory, and one report for the run directories
    (combined when several: in `out`, or combined-<hash> beside the first). Returns (path, figures);
    notes (a list) receives one line per incomplete run (the report marks them too); target: the
    attainment shown as pass (default: each run's own --target-attainment, recorded in run.json)."""
    written, runs = [], []
    for path in paths:
        if os.path.exists(os.path.join(path, "sweep.json")):
            try:
                written.append((sweep_report(path), 0))
            except OSError as e:
                raise RunDirError(f"cannot write the report in {path}: {e.strerror or e}") from None
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
    try:
        os.makedirs(out, exist_ok=True)
        pngs = []
        if figures:
            stage("drawing figures ...")
            pngs = run_figures(views, out)
            front = runs_frontier(views, out) if len(views) > 1 else None  # several runs: their frontier
            pngs += [front] if front else []
        stage("writing report.html ...")
        written.append((run_report(views, out, pngs, target), len(pngs)))
    except OSError as e:  # a full or read-only disk
        raise RunDirError(f"cannot write the report in {out}: {e.strerror or e}") from None
    return written
