"""Verdicts: a finished run loaded, its summary recomputed (the one the run wrote), gated against an
SLO and a baseline, or compared with another run."""

from __future__ import annotations

from ..errors import RunDirError, UsageError
from ..gating import GateResult, GateSpec, evaluate
from ..limits import PRACTICAL_MARGIN
from ..store import load_arrays, load_meta
from .common import Run


def load_run(run_dir: str) -> Run:
    """A results directory: its run.json and summary.json (None for an unfinished or imported run)."""
    from ..store import load_summary

    meta = load_meta(run_dir)
    return Run(run_dir, meta, load_summary(run_dir), bool(meta.interrupted))


def summarize(run: Run | str, slo: dict | str | None = None, ci: bool = True) -> dict:
    """The summary of a run (a Run or a run directory), recomputed from what its directory holds (the
    summary the run wrote, unless slo or ci differ); slo: judge against this SLO ("ttft:500 tpot:50" or
    a dict) instead of the run's own."""
    from ..records import parse_slo
    from ..rundir import summarize_dir

    run_dir = run.dir if isinstance(run, Run) else run
    slo = parse_slo(slo) if isinstance(slo, (str, list)) else slo
    return summarize_dir(run_dir, slo=slo, ci=ci)


def _summary_of(x, slo: dict | None) -> dict:
    if isinstance(x, dict):
        return x
    if isinstance(x, Run) and x.summary is not None and slo is None:
        return x.summary
    return summarize(x, slo)


def _aggregate_only(x) -> str | None:
    from ..llmd import aggregate_only

    return None if isinstance(x, dict) else aggregate_only(x.meta if isinstance(x, Run) else load_meta(x))


def _incomplete(x) -> str | None:
    from ..store import incomplete

    if isinstance(x, dict):
        return None
    return _aggregate_only(x) or incomplete(x.dir if isinstance(x, Run) else x)


def _workload_of(x) -> dict | None:
    """The workload a Run or run directory recorded (None for a summary dict: it does not say)."""
    if isinstance(x, Run):
        return x.meta.workload
    return load_meta(x).workload if isinstance(x, str) else None


def gate(
    run: Run | str | dict,
    spec: GateSpec | None = None,
    *,
    slo: dict | str | None = None,
    baseline: Run | str | dict | None = None,
    allow_incomplete: bool = False,
    allow_different_workloads: bool = False,
    history=None,
) -> GateResult:
    """Pass/fail a run (a Run, a run directory or a summary dict) against the gate spec (default: SLO
    attainment >= 95%). slo: judge against this SLO instead of the run's own. A run directory that
    cannot be read, holds an incomplete run (killed, interrupted, records cut short; unless
    allow_incomplete), or a baseline that ran a different workload (unless allow_different_workloads),
    gives a result that cannot be judged (exit code 2), not an exception. history: a HistorySpec (api/
    history.py): also judge the run against the recent runs of its identity in the catalogue."""
    from ..records import parse_slo
    from ..workloads.identity import difference

    slo = parse_slo(slo) if isinstance(slo, (str, list)) else slo
    if history is not None and _aggregate_only(run):  # an llm-d import: only its series can judge it
        return GateResult(_history_clauses(run, history))
    try:
        for which, x in (("", run), ("baseline: ", baseline)):
            why = None if allow_incomplete or x is None else _incomplete(x)
            if why:
                return GateResult(
                    [],
                    False,
                    f"cannot judge an incomplete run: {which}{why} (--allow-incomplete judges the records it holds)",
                )
        summary = _summary_of(run, slo)
        base = _summary_of(baseline, slo or summary.get("slo")) if baseline is not None else None
        differ = difference(_workload_of(baseline), _workload_of(run)) if baseline is not None else None
    except RunDirError as e:
        return GateResult([], False, str(e))
    if differ and not allow_different_workloads:
        return GateResult([], False, differ)
    spec = spec or GateSpec()
    significant = None
    if base is not None and spec.max_regression is not None and not isinstance(run, dict):
        significant = _significant(baseline, run, slo or summary.get("slo"), spec.max_regression)
    result = evaluate(summary, spec, base, significant)
    if history is not None and result.judgeable:
        result.clauses += _history_clauses(run, history)
    return result


def _significant(baseline, run, slo, margin: float) -> dict | None:
    """{metric: regression} from the two runs' records (compare's bootstrap), or None when the baseline
    is a summary without records."""
    if isinstance(baseline, dict) or _aggregate_only(baseline) or _aggregate_only(run):
        return None
    try:
        res = compare(baseline, run, slo=slo, margin=margin, allow_different_workloads=True)
    except (RunDirError, UsageError):
        return None
    return {m["metric"]: m["regression"] for m in res["metrics"]}


def _history_clauses(run, history) -> list:
    """gate --history's clauses: the run's metrics against the recent series of its identity."""
    from .history import gate_history, history_clause

    if isinstance(run, dict):
        raise UsageError("gate against history needs a run directory, not a summary")
    return [history_clause(c) for c in gate_history(run.dir if isinstance(run, Run) else run, history)]


def compare(
    base: Run | str,
    new: Run | str,
    *,
    slo: dict | str | None = None,
    level: float = 0.95,
    margin: float = PRACTICAL_MARGIN,
    seed: int = 0,
    allow_different_workloads: bool = False,
) -> dict:
    """BASE vs NEW: per-metric deltas with bootstrap intervals of the difference, Mann-Whitney U
    p-values and a verdict per metric (analysis.compare); a regression is significant AND beyond
    max(margin, 1 ms; 1 point of attainment). Runs of different workloads are refused
    (UsageError) unless allow_different_workloads; the result then carries the difference as a warning."""
    from ..analysis.compare import compare as compare_columns
    from ..llmd import aggregate_only
    from ..metrics import RequestMetrics, measured_arrays, summarize as summarize_columns
    from ..records import parse_slo
    from ..workloads.identity import difference

    runs = [load_arrays(r.dir if isinstance(r, Run) else r) for r in (base, new)]
    for r in runs:
        if aggregate_only(r.meta):
            raise UsageError(f"cannot compare {r.meta.run_id}: {aggregate_only(r.meta)}")
    differ = difference(runs[0].meta.workload, runs[1].meta.workload)
    if differ and not allow_different_workloads:
        raise UsageError(differ)
    slo = parse_slo(slo) if isinstance(slo, (str, list)) else slo
    slo = slo or runs[0].meta.slo or runs[1].meta.slo
    cs = [RequestMetrics(measured_arrays(r)) for r in runs]
    sums = [summarize_columns(r, slo=slo, ci=False, prepared=c) for r, c in zip(runs, cs)]
    out = compare_columns(cs[0], cs[1], sums[0], sums[1], level=level, margin=margin, seed=seed)
    if differ:
        out["warnings"].insert(0, differ.split("; pass")[0])
    out["incomplete"] = {}
    for which, r in (("base", base), ("new", new)):
        why = _incomplete(r)
        if why:
            out["incomplete"][which] = why
            out["warnings"].insert(0, f"the {which} run is incomplete: {why}")
    return out
