"""goodbench: goodput benchmarking and load testing for LLM serving.

The public Python API (what the `goodbench` command line is built on):

    import goodbench as gb
    wl = gb.load_workload("hol-stress")                           # a built-in workload or a file
    sim = gb.simulate(wl, gb.EngineConfig(max_num_batched_tokens=2048))
    live = gb.run(wl, "http://127.0.0.1:8000")                    # any OpenAI-compatible server
    print(sim.summary["goodput"], gb.gate(sim).verdict)

Names are loaded on first use, so `import goodbench` stays light."""

from __future__ import annotations

import importlib

from .version import __version__

_EXPORTS = {
    # functions (goodbench.api)
    "load_workload": "api",
    "run": "api",
    "run_via_locust": "api",
    "simulate": "api",
    "load_run": "api",
    "summarize": "api",
    "gate": "api",
    "compare": "api",
    "prepare_sweep": "api",
    "sweep": "api",
    "frontier": "api",
    "max_rate": "api",
    "advise": "api",
    "check_advice": "api",
    "calibrate": "api",
    "index_history": "api",
    "history_runs": "api",
    "history_trend": "api",
    "history_dashboard": "api",
    # types
    "Run": "api",
    "Target": "api",
    "SweepOutcome": "api",
    "FrontierOutcome": "api",
    "HistorySpec": "api",
    "HistoryFilters": "api",
    "EngineConfig": "engine.config",
    "WorkloadSpec": "workloads",
    "WorkloadOptions": "workloads",
    "GateSpec": "gating",
    "GateResult": "gating",
    "RunMeta": "records",
    "RequestRecord": "records",
    "RequestSpec": "records",
    # errors
    "GoodbenchError": "errors",
    "UsageError": "errors",
    "InputError": "errors",
    "RunDirError": "errors",
    "TargetError": "errors",
    "GoodbenchWarning": "errors",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'goodbench' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
