"""Run directories into the catalogue: find them under the paths given (sweep cells included), read
run.json and summary.json, and upsert what changed since the last index, in batches (one transaction
each). A directory whose files are unchanged (same size and modification time) is skipped."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from .catalogue import Catalogue
from .identity import run_row

BATCH = 500  # rows per transaction


@dataclass
class IndexResult:
    indexed: int = 0
    unchanged: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (directory, why): left out or without metrics
    pruned: int = 0


def find_run_dirs(paths) -> list[str]:
    """Every directory holding a run.json at or under the paths (not descending into run directories,
    hidden directories or symlinked ones), sorted."""
    out: list[str] = []
    for top in paths:
        if os.path.isfile(os.path.join(top, "run.json")):
            out.append(top)
            continue
        for dirpath, dirnames, files in os.walk(top):
            if "run.json" in files:
                out.append(dirpath)
                dirnames[:] = []
            else:
                dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
    return sorted(set(out))


def signature(run_dir: str) -> str:
    """Size and modification time of run.json and summary.json: what an unchanged directory keeps."""
    parts = []
    for name in ("run.json", "summary.json"):
        try:
            st = os.stat(os.path.join(run_dir, name))
            parts.append(f"{st.st_size}:{st.st_mtime_ns}")
        except OSError:
            parts.append("-")
    return "/".join(parts)


def _json(path: str):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def read_run(run_dir: str, summarize=None) -> tuple[dict | None, str]:
    """(the catalogue row, a note or "") or (None, why it is skipped). summarize(run_dir) -> summary: for a run
    that keeps no summary.json (an import); None leaves such a run without metrics."""
    try:
        meta = _json(os.path.join(run_dir, "run.json"))
    except (OSError, ValueError) as e:
        return None, f"run.json unreadable: {e}"
    if not isinstance(meta, dict):
        return None, "run.json is not an object"
    if not meta.get("finished_wall"):
        return None, "not finished (still running, or killed before its summary)"
    summary = None
    sp = os.path.join(run_dir, "summary.json")
    try:
        if os.path.exists(sp):
            summary = _json(sp)
        elif summarize is not None:
            summary = summarize(run_dir)
    except Exception as e:  # a corrupt summary or records: the run is listed, without metrics
        summary, note = None, f"indexed without metrics: {type(e).__name__}: {e}"
    else:
        note = ""
    try:
        return run_row(meta, summary if isinstance(summary, dict) else None), note
    except (AttributeError, TypeError, ValueError) as e:  # a run.json of another shape (hand-edited, foreign)
        return None, f"run.json has an unexpected shape: {type(e).__name__}: {e}"


def index_dirs(
    cat: Catalogue, paths, *, summarize=None, force: bool = False, prune: bool = False, on_progress=None
) -> IndexResult:
    """Index every run directory at or under paths. on_progress(done, total) after each batch."""
    dirs = find_run_dirs(paths)
    known = {} if force else cat.signatures()
    res, batch = IndexResult(), []
    for i, d in enumerate(dirs, 1):
        sig = signature(d)
        if known.get(cat.key(d)) == sig:
            res.unchanged += 1
        else:
            row, why = read_run(d, summarize)
            if why:
                res.skipped.append((d, why))
            if row is not None:
                batch.append((d, row, sig))
        if len(batch) >= BATCH or i == len(dirs):
            cat.upsert(batch)
            res.indexed += len(batch)
            batch = []
            if on_progress is not None:
                on_progress(i, len(dirs))
    if prune:
        res.pruned = cat.prune()
    return res


def index_run(cat: Catalogue, run_dir: str, meta: dict, summary: dict | None) -> None:
    """One finished run, from what its lifecycle holds in memory (no re-read)."""
    cat.upsert([(run_dir, run_row(meta, summary), signature(run_dir))])
