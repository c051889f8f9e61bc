"""Performance over time (docs/history.md): the run catalogue indexed from results directories, runs
listed, one metric over time per identity with its change points, a run gated against its series, and
the dashboard page."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from dataclasses import dataclass, field

from ..errors import InputError, UsageError
from ..history import catalogue as cat_mod
from ..history.changepoint import ChangePoint, detect
from ..history.identity import HEADLINE, METRICS, metric_info
from ..history.query import Filters, Series, list_runs, series
from ..history.scan import IndexResult, index_dirs, read_run
from ..history.verdict import ALPHA, MIN_CHANGE, MIN_RUNS, WINDOW, HistoryCheck, judge

HistoryFilters = Filters  # which runs: workload, model, server, server_version, gpu, labels, since, ...


@dataclass
class Trend:
    """One identity's series of a metric, and where it changed."""

    series: Series
    changes: list[ChangePoint]
    unit: str
    better: str


@dataclass
class HistorySpec:
    """gate --history: judge these metrics against the last `window` earlier runs of the run's identity
    (those with every label in `labels`), in the catalogue at `db` (default: the run's own)."""

    metrics: tuple[str, ...] = ("goodput", "ttft_p99", "tpot_p99")
    window: int = WINDOW
    min_runs: int = MIN_RUNS
    alpha: float = ALPHA
    min_change: float = MIN_CHANGE
    labels: dict = field(default_factory=dict)
    db: str | None = None


def catalogue_path(db: str | None = None) -> str:
    """--history-db, else $GOODBENCH_HISTORY_DB, else ~/.local/share/goodbench/history.sqlite."""
    return db or cat_mod.default_path()


@contextlib.contextmanager
def _open(path: str, must_exist: bool = True, readonly: bool = False):
    """The catalogue at path, open for the with-block; whatever SQLite says of it there (a file of
    something else, damaged pages, a read-only mount) is one InputError naming it, never a traceback."""
    if must_exist and not os.path.exists(path):
        raise InputError(
            f"no history catalogue at {path}: runs index themselves as they finish, or build it from "
            "results directories with `goodbench history index DIR`"
        )
    try:
        with cat_mod.Catalogue(path, readonly=readonly) as cat:
            yield cat
    except cat_mod.ForeignFile as e:
        raise InputError(f"{path} is not a goodbench history catalogue: {e}; give another --history-db") from None
    except sqlite3.OperationalError as e:
        if "readonly" in str(e) or "read-only" in str(e) or "unable to open" in str(e):
            raise InputError(f"the history catalogue {path} cannot be written here ({e})") from None
        raise InputError(f"the history catalogue {path} cannot be read: {e}") from None
    except sqlite3.DatabaseError as e:  # damaged pages, not a database
        raise InputError(
            f"{path} is not a readable history catalogue ({e}); delete it and run `goodbench history index DIR` "
            "(the run directories are the source of truth: nothing is lost)"
        ) from None


def _summarize(run_dir: str) -> dict:
    from ..rundir import summarize_dir

    return summarize_dir(run_dir, ci=False)


def index_history(
    paths, db: str | None = None, *, force: bool = False, prune: bool = False, rebuild: bool = False, on_progress=None
) -> tuple[str, IndexResult]:
    """Index every run directory at or under paths (sweep cells included) into the catalogue (db, default
    catalogue_path()). rebuild: start from an empty catalogue."""
    for p in paths:
        if not os.path.isdir(p):
            raise InputError(f"{p} is not a directory")
    db = catalogue_path(db)
    if rebuild:
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(db + suffix):
                os.remove(db + suffix)
    with _open(db, must_exist=False) as cat:
        return db, index_dirs(cat, paths, summarize=_summarize, force=force, prune=prune, on_progress=on_progress)


def history_runs(filters: Filters | None = None, db: str | None = None, limit: int | None = 50) -> list[dict]:
    """The catalogue's runs matching the filters, newest first."""
    with _open(catalogue_path(db), readonly=True) as cat:
        return list_runs(cat, filters or Filters(), limit)


def _check_metric(metric: str) -> None:
    if metric not in METRICS:
        raise UsageError(f"unknown metric {metric!r}; one of: {', '.join(METRICS)}")


def history_trend(
    metric: str = "goodput", filters: Filters | None = None, db: str | None = None, *, last: int | None = None
) -> list[Trend]:
    """metric over time for each identity among the matching runs, with its change points."""
    _check_metric(metric)
    unit, better = metric_info(metric)
    with _open(catalogue_path(db), readonly=True) as cat:
        found = series(cat, metric, filters or Filters(), last)
    return [Trend(s, detect(s.values, better), unit, better) for s in found]


def gate_history(run_dir: str, spec: HistorySpec) -> list[HistoryCheck]:
    """Each metric of the run against the earlier runs of its identity (indexing the run first)."""
    for m in spec.metrics:
        _check_metric(m)
    row, why = read_run(run_dir, _summarize)
    if row is None:
        raise InputError(f"{run_dir}: {why}")
    with _open(catalogue_path(spec.db), must_exist=False) as cat:
        index_dirs(cat, [run_dir], summarize=_summarize)
        me = cat.key(run_dir)
        out = []
        for m in spec.metrics:
            found = series(cat, m, Filters(identity=row["identity"], labels=spec.labels))
            earlier = [p.value for s in found for p in s.points if p.started < row["started"] and cat.key(p.path) != me]
            window = earlier[-spec.window :]
            better = metric_info(m)[1]
            out.append(
                judge(
                    m,
                    row["metrics"].get(m),
                    window,
                    better,
                    alpha=spec.alpha,
                    min_runs=spec.min_runs,
                    min_change=spec.min_change,
                )
            )
    return out


def _fmt(v: float, unit: str) -> str:
    if unit == "fraction":
        return f"{v:.1%}"
    return f"{v:.3g} {unit}" if abs(v) < 100 else f"{v:,.0f} {unit}"


def history_clause(c: HistoryCheck):
    """A gate clause (gating.Clause) for one metric judged against its series."""
    from ..gating import Clause

    unit, better = metric_info(c.metric)
    name = f"{c.metric} vs history"
    if not c.judged:
        return Clause(name, "enough earlier runs of this identity", c.note, True)
    sign = ">=" if better == "higher" else "<="
    spread = c.spread if c.spread > 1e-9 * abs(c.center) else 0.0  # a constant series' float dust
    level = f"series {_fmt(c.center, unit)} ± {_fmt(spread, unit)} over {c.n} runs"
    change = f" ({c.change:+.1%})" if c.change is not None else ""
    return Clause(name, f"{sign} {_fmt(c.limit, unit)} ({level})", f"{_fmt(c.value, unit)}{change}", c.passed)


def history_dashboard(
    out_dir: str, filters: Filters | None = None, db: str | None = None, *, metrics=HEADLINE, limit: int = 5000
) -> str:
    """The dashboard page (out_dir/index.html): every matching run (newest `limit`), each headline
    metric's series per identity with its change points, links to each run's report."""
    from ..report.dashboard import write_dashboard

    for m in metrics:
        _check_metric(m)
    with _open(catalogue_path(db), readonly=True) as cat:
        runs = list_runs(cat, filters or Filters(), limit, metrics=tuple(metrics))
        keep = {r["dir"] for r in runs}
        trends = {}
        for m in metrics:
            unit, better = metric_info(m)
            found = [s for s in series(cat, m, filters or Filters()) if any(p.path in keep for p in s.points)]
            for s in found:
                s.points = [p for p in s.points if p.path in keep]
            trends[m] = [Trend(s, detect(s.values, better), unit, better) for s in found]
    return write_dashboard(out_dir, runs, trends)


def history_frontier(out_dir: str, filters: Filters | None = None, db: str | None = None, limit: int = 5000):
    """The frontier of a set of catalogued runs (analysis/frontier.history_rows): frontier.csv, frontier.json,
    pareto.png and report.html in out_dir; a FrontierOutcome (no sweeps of its own)."""
    import os
    import time

    from ..analysis.frontier import FRONTIER_METRICS, history_rows
    from .sweeps import FrontierOutcome, frontier_files

    t = time.perf_counter()
    with _open(catalogue_path(db), readonly=True) as cat:
        runs = list_runs(cat, filters or Filters(), limit, metrics=FRONTIER_METRICS)
    rows = history_rows(runs)
    if not rows:
        raise UsageError("no catalogued run matching these filters has the frontier's numbers (tok_s_per_user and "
                         "output_tok_s_per_gpu: simulated runs and sweep cells from this version on)")  # fmt: skip
    slos = {r.get("slo") for r in runs if r.get("slo") not in (None, "", "none")}
    slo = _one_slo(slos)
    os.makedirs(out_dir, exist_ok=True)
    note = f". These runs were judged by {len(slos)} different SLOs: their good tokens are not comparable"
    meta = {"kind": "history", "loads": [], "slo": slo, "runs": len(rows)}
    title = "catalogued runs: throughput per GPU vs interactivity"
    text, plot, report = frontier_files(rows, out_dir, meta, title, note=note if len(slos) > 1 else "")
    return FrontierOutcome(out_dir, rows, text, plot, [], time.perf_counter() - t, report)


def _one_slo(slos: set) -> dict | None:
    """The runs' SLO when they share one (its TPOT draws the floor); None when they differ or have none."""
    from ..records import parse_slo

    if len(slos) != 1:
        return None
    try:
        return parse_slo(str(next(iter(slos))).split())
    except UsageError:
        return None
