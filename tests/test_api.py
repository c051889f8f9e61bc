"""The public Python API (goodbench/__init__.py, goodbench/api.py): a frozen export list, and each
function used as a notebook user would."""

import os
import re
import subprocess
import sys

import pytest
from conftest import ROOT
from recs import same_summary

import goodbench as gb

EXPORTS = [
    "__version__",
    "load_workload",
    "run",
    "run_via_locust",
    "simulate",
    "load_run",
    "summarize",
    "gate",
    "compare",
    "prepare_sweep",
    "sweep",
    "frontier",
    "max_rate",
    "advise",
    "check_advice",
    "calibrate",
    "index_history",
    "history_runs",
    "history_trend",
    "history_dashboard",
    "Run",
    "Target",
    "SweepOutcome",
    "FrontierOutcome",
    "HistorySpec",
    "HistoryFilters",
    "EngineConfig",
    "WorkloadSpec",
    "WorkloadOptions",
    "GateSpec",
    "GateResult",
    "RunMeta",
    "RequestRecord",
    "RequestSpec",
    "GoodbenchError",
    "UsageError",
    "InputError",
    "RunDirError",
    "TargetError",
    "GoodbenchWarning",
]
HOL = os.path.join(ROOT, "workloads", "hol-stress.toml")


def test_the_export_list_is_frozen():
    # adding a name is an API decision: extend EXPORTS (and the README) deliberately
    assert gb.__all__ == EXPORTS
    for name in EXPORTS:
        assert getattr(gb, name) is not None, name
    with pytest.raises(AttributeError):
        gb.nope  # noqa: B018


def test_importing_goodbench_loads_only_the_version():
    code = "import sys, goodbench; print(sorted(m for m in sys.modules if m.startswith('goodbench')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.stdout.strip() == "['goodbench', 'goodbench.version']", out.stderr


def test_load_workload_takes_the_flags_as_keywords():
    wl = gb.load_workload(HOL, num_prompts=10, goodput="ttft:300")
    assert (wl.num_requests, wl.slo) == (10, {"ttft": 300.0})
    assert gb.load_workload(dataset_name="mixed", request_rate=3).arrival.rate == 3.0
    with pytest.raises(gb.UsageError, match="load_workload"):
        gb.load_workload(HOL, num_requests=10)  # the flag is num_prompts
    with pytest.raises(gb.InputError):
        gb.load_workload("/nonexistent.toml")


def test_simulate_gate_load_summarize_compare(tmp_path):
    wl = gb.load_workload(HOL)
    good = gb.simulate(wl, gb.EngineConfig(), result_dir=str(tmp_path))  # hol-stress shows HOL on the defaults
    bad = gb.simulate(wl, gb.EngineConfig(enable_chunked_prefill=False), result_dir=str(tmp_path))
    assert isinstance(good, gb.Run) and good.summary["simulation"]["steps"] > 0
    assert gb.gate(good).passed and gb.gate(bad).exit_code == 1
    assert gb.gate(bad.dir, gb.GateSpec(min_attainment=0.0)).passed
    again = gb.load_run(good.dir)
    assert again.summary == good.summary and again.meta.engine["max_num_batched_tokens"] == 8192
    assert len(again.records()) == good.summary["requests"]["issued"] == len(again.arrays().cols)
    strict = gb.summarize(good, slo="ttft:1")
    assert strict["slo"] == {"ttft": 1.0} and strict["slo_attainment"] < good.summary["slo_attainment"]
    res = gb.compare(good, bad)
    assert "itl_p99" in [m["metric"] for m in res["metrics"]] and res["regressions"]


def test_gate_on_an_unreadable_run_cannot_judge(tmp_path):
    r = gb.gate(str(tmp_path))
    assert not r.judgeable and r.exit_code == 2


def test_run_against_the_auto_started_engine(tmp_path):
    wl = gb.load_workload(
        dataset_name="random",
        random_input_len=16,
        random_output_len=4,
        num_prompts=5,
        request_rate="inf",
        goodput="ttft:2000",
    )
    run = gb.run(wl, engine=gb.EngineConfig(fixed_step_ms=2), result_dir=str(tmp_path), pin=False)
    assert run.summary["requests"]["completed"] == 5 and not run.interrupted
    assert os.path.exists(os.path.join(run.dir, "engine.log")) and run.meta.engine["fixed_step_ms"] == 2
    assert run.meta.server == {"name": "goodbench", "version": gb.__version__, "owned_by": "goodbench"} | {
        k: run.meta.server[k] for k in ("header", "max_model_len", "root") if k in run.meta.server
    }


def test_run_reports_an_unreachable_target():
    with pytest.raises(gb.TargetError, match="unreachable"):
        gb.run(gb.load_workload(num_prompts=1), "http://127.0.0.1:9")


def readme_blocks(heading: str) -> list[str]:
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    section = text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_the_readme_python_api_example_runs_as_is(tmp_path):
    code = readme_blocks("Python API")[0]
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env=dict(os.environ, HF_HUB_OFFLINE="1"),
    )
    assert out.returncode == 0, out.stderr
    assert "PASS" in out.stdout and "FAIL" in out.stdout  # the example contrasts a passing and a failing config


def test_failed_runs_name_the_likely_cause(tmp_path):
    """Against a real server: a base URL ending in /v1 is read without it (a warning says so); a model
    name the server does not serve is refused by the preflight before the clock starts, and, with the
    preflight off, ends with the cause in the summary's warnings (the server's own message)."""
    from goodbench.engine.serve.launch import start_engine

    proc = start_engine(gb.EngineConfig(fixed_step_ms=1.0), str(tmp_path / "engine.log"))
    try:
        wl = gb.load_workload(
            dataset_name="random", random_input_len=8, random_output_len=2, num_prompts=4, request_rate="inf"
        )
        with pytest.warns(gb.GoodbenchWarning, match="/v1 taken off"):
            v1 = gb.run(wl, proc.base_url + "/v1", result_dir=str(tmp_path), pin=False).summary
        with pytest.raises(gb.TargetError, match="'no-such-model' is not served"):
            gb.run(wl, gb.Target(base_url=proc.base_url, model="no-such-model"), result_dir=str(tmp_path), pin=False)
        unchecked = gb.Target(base_url=proc.base_url, model="no-such-model", preflight=False)
        model = gb.run(wl, unchecked, result_dir=str(tmp_path), pin=False).summary
    finally:
        proc.close()
    assert v1["requests"]["completed"] == 4
    said = [w for w in model["warnings"] if "the server said" in w]
    assert said and "The model `no-such-model` does not exist." in said[0] and "'no-such-model'" in said[0]


def test_every_path_composes_the_same_summary(tmp_path):
    """What a run writes, gb.summarize and the report's view: one composer, one summary."""
    import json

    from goodbench.report.view import load_view

    sim = gb.simulate(gb.load_workload("shared-documents", num_prompts=60), result_dir=str(tmp_path))
    live = gb.run(
        gb.load_workload("shared-documents", num_prompts=8, request_rate="inf"),
        engine=gb.EngineConfig(fixed_step_ms=2),
        result_dir=str(tmp_path),
        pin=False,
    )
    for run in (sim, live):
        with open(os.path.join(run.dir, "summary.json")) as f:
            written = json.load(f)
        same_summary(written, gb.summarize(run))
        same_summary(written, load_view(run.dir).summary)
    assert sim.summary["prefix_cache"] and sim.summary["simulation"] and sim.summary["cost"]
    assert "server_timing" in live.summary and live.summary["prefix_cache"]
