"""The llm-d Benchmark Report: a goodbench run exported as v0.2.1 (valid against llm-d's own JSON Schema),
imported back with its identity, and llm-d's own example reports (v0.2.1, v0.1) imported."""

import json
import os

import pytest
from conftest import ROOT

import goodbench as gb
from goodbench import llmd
from goodbench.errors import InputError
from goodbench.history.identity import identity_of, metrics_of
from goodbench.interop import export_run, import_llmd
from goodbench.store import load_meta, load_summary

DATA = os.path.join(ROOT, "tests", "data", "llmd")


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("llmd"))
    return gb.simulate(gb.load_workload("mixed-long-short", num_prompts=80), result_dir=out, labels={"branch": "main"})


def _validate(report: dict) -> list[str]:
    jsonschema = pytest.importorskip("jsonschema")
    with open(os.path.join(DATA, "br_v0_2_1_json_schema.json"), encoding="utf-8") as f:
        schema = json.load(f)
    v = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    return [f"{e.json_path}: {e.message}" for e in v.iter_errors(report)]


def test_export_is_a_valid_v021_report_with_full_distributions(sim):
    path = export_run(sim.dir, "llmd")
    assert path.endswith("benchmark_report_v0.2.1.json")
    with open(path, encoding="utf-8") as f:
        rep = json.load(f)
    assert _validate(rep) == []
    assert rep["version"] == "0.2.1" and rep["run"]["keywords"] == ["branch=main"]
    agg = rep["results"]["request_performance"]["aggregate"]
    ttft = agg["latency"]["time_to_first_token"]
    assert ttft["units"] == "ms" and set(llmd.PCTS) <= set(ttft) and ttft["min"] <= ttft["p50"] <= ttft["max"]
    assert ttft["p99"] == pytest.approx(sim.summary["ttft_ms"]["p99"], rel=1e-6)  # the summary's definition
    assert agg["latency"]["inter_token_latency"]["units"] == "ms/token"
    assert agg["requests"]["total"] == 80 and agg["requests"]["input_length"]["units"] == "count"
    assert agg["throughput"]["request_rate"]["mean"] == pytest.approx(sim.summary["request_throughput"])
    obs = rep["results"]["observability"]
    assert obs["goodbench_goodput"] == {"units": "queries/s", "mean": pytest.approx(sim.summary["goodput"])}
    eng = rep["scenario"]["stack"][0]["standardized"]
    assert (
        eng["kind"] == "inference_engine"
        and eng["tool"] == "goodbench-sim"
        and eng["accelerator"]["model"] == "h100-sxm"
    )
    load = rep["scenario"]["load"]
    assert load["standardized"]["rate_qps"] == 4.0 and load["metadata"]["cfg_id"] == sim.meta.workload_hash


def test_a_goodbench_report_imports_back_with_its_identity(sim, tmp_path):
    rep = export_run(sim.dir, "llmd", str(tmp_path / "rep.json"))
    d = import_llmd(rep, str(tmp_path / "imp"))
    meta, summary = load_meta(d), load_summary(d)
    assert meta.mode == "imported" and meta.labels == {"branch": "main"}
    assert identity_of(meta.to_dict())["key"] == identity_of(sim.meta.to_dict())["key"]
    got, want = metrics_of(summary), metrics_of(sim.summary)
    for m in ("goodput", "slo_attainment", "ttft_p99", "tpot_p50", "itl_p99", "e2el_mean", "request_throughput"):
        # the export reads records.jsonl (chunk times kept to 0.1 us); the simulation summarised in memory
        assert got[m] == pytest.approx(want[m], rel=1e-4, abs=1e-4), m
    assert "aggregates only" in summary["warnings"][0]
    # an aggregate-only run exports again, from its summary
    with open(export_run(d, "llmd", str(tmp_path / "again.json")), encoding="utf-8") as f:
        again = json.load(f)
    assert _validate(again) == []
    lat = again["results"]["request_performance"]["aggregate"]["latency"]["time_to_first_token"]
    assert lat["p99"] == pytest.approx(sim.summary["ttft_ms"]["p99"], rel=1e-6)


def test_llmd_v021_example_imports_in_milliseconds(tmp_path):
    pytest.importorskip("yaml")
    d = import_llmd(os.path.join(DATA, "br_v0_2_1_example.yaml"), str(tmp_path))
    meta, s = load_meta(d), load_summary(d)
    assert meta.target["model"] == "Qwen/Qwen3-0.6B" and meta.server == {
        "name": "llm-d",
        "version": "ghcr.io/llm-d/llm-d-cuda:0.3.1",
    }
    assert meta.gpus == {"NVIDIA-H100-80GB-HBM3": 8} and meta.started_wall == "2025-11-05T18:00:42+00:00"
    assert meta.labels and meta.workload["name"] == "llmd-inference-perf"
    assert s["ttft_ms"]["mean"] == pytest.approx(36.8578234128654)  # 0.0368... s in the report
    assert s["requests"]["issued"] == 500 and s["duration_s"] == pytest.approx(49.97206788184121)
    assert s["goodput"] is None  # llm-d's schema has no SLO


def test_llmd_v01_example_imports(tmp_path):
    pytest.importorskip("yaml")
    d = import_llmd(os.path.join(DATA, "br_v0_1_example.yaml"), str(tmp_path), run_id="v01")
    s = load_summary(d)
    assert s["requests"] == {"issued": 32, "completed": 31, "failed": 1, "by_status": {"ok": 31, "cancelled": 1}}
    assert s["ttft_ms"]["mean"] == pytest.approx(0.800974442732916) and s["request_throughput"] == pytest.approx(
        1.0238155253639
    )
    assert load_meta(d).target["model"] == "deepseek-ai/DeepSeek-R1-0528"


def test_bad_reports_are_clear_errors(tmp_path):
    p = tmp_path / "r.json"
    p.write_text(json.dumps({"version": "9.9"}))
    with pytest.raises(InputError, match="not an llm-d Benchmark Report"):
        import_llmd(str(p), str(tmp_path))
    bad_units = {"version": "0.2", "run": {"uid": "u"}, "results": {"request_performance": {"aggregate": {
        "latency": {"time_to_first_token": {"units": "count", "mean": 1}}}}}}  # fmt: skip
    p.write_text(json.dumps(bad_units))
    with pytest.raises(InputError, match="not a time"):
        import_llmd(str(p), str(tmp_path))
    with pytest.raises(InputError, match="cannot read"):
        import_llmd(str(tmp_path / "missing.json"), str(tmp_path))


def test_statistics_and_durations():
    s = llmd.statistics([1.0, 2.0, 3.0, float("nan")], "ms")
    assert s["mean"] == 2.0 and s["p50"] == 2.0 and s["min"] == 1.0 and s["max"] == 3.0 and s["units"] == "ms"
    assert llmd.statistics([], "ms") is None
    assert llmd._seconds("PT1H2M3.5S") == 3723.5 and llmd._seconds("P1D") is None


def test_an_aggregate_only_run_is_refused_by_report_compare_gate_but_judged_by_its_history(sim, tmp_path):
    d = import_llmd(export_run(sim.dir, "llmd", str(tmp_path / "rep.json")), str(tmp_path / "imp"))
    with pytest.raises(gb.RunDirError, match="aggregates only"):
        from goodbench.report.view import load_view

        load_view(d)
    with pytest.raises(gb.UsageError, match="aggregates only"):
        gb.compare(d, sim.dir)
    g = gb.gate(d)
    assert not g.judgeable and "aggregates only" in g.reason
    g = gb.gate(d, history=gb.HistorySpec(metrics=("goodput",), db=str(tmp_path / "h.sqlite")))
    assert (
        g.judgeable and [c.name for c in g.clauses] == ["goodput vs history"] and "not judged" in g.clauses[0].observed
    )
