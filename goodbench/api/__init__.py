"""The public Python API: what `goodbench/__init__.py` exports and every CLI command calls.

    import goodbench as gb
    wl = gb.load_workload("hol-stress", num_prompts=100)
    run = gb.simulate(wl, gb.EngineConfig(max_num_batched_tokens=2048))
    print(run.summary["slo_attainment"], gb.gate(run).verdict)

Each function does one whole job (a run, a simulation, a sweep, a verdict) and returns typed results;
rendering and exit codes stay in the CLI. runs.py: simulate, run, run_via_locust; verdicts.py:
load_run, summarize, gate, compare; sweeps.py: prepare_sweep, sweep, frontier, max_rate, min_gpus, advise;
calibration.py: calibrate; history.py: index_history, history_runs, history_trend, history_dashboard (and gate's
HistorySpec)."""

from __future__ import annotations

from .calibration import calibrate
from .common import Run, load_workload
from .history import HistoryFilters, HistorySpec, history_dashboard, history_runs, history_trend, index_history
from .runs import Target, run, run_via_locust, simulate
from .sweeps import (
    FrontierOutcome,
    SweepOutcome,
    advice_traffic,
    advise,
    check_advice,
    frontier,
    max_rate,
    min_gpus,
    prepare_sweep,
    sweep,
)
from .verdicts import compare, gate, load_run, summarize

__all__ = [
    "HistoryFilters",
    "HistorySpec",
    "Run",
    "FrontierOutcome",
    "SweepOutcome",
    "Target",
    "advice_traffic",
    "advise",
    "calibrate",
    "check_advice",
    "frontier",
    "compare",
    "gate",
    "history_dashboard",
    "history_runs",
    "history_trend",
    "index_history",
    "load_run",
    "load_workload",
    "max_rate",
    "min_gpus",
    "prepare_sweep",
    "run",
    "run_via_locust",
    "simulate",
    "summarize",
    "sweep",
]
