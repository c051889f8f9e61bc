"""history/identity.py: what makes two runs comparable over time, and the metrics a catalogue keeps."""

from goodbench.engine.config import EngineConfig
from goodbench.history.identity import METRICS, engine_key, identity_of, metrics_of, run_row, server_of


def _meta(**kw):
    base = {
        "run_id": "r",
        "mode": "open",
        "target": {"base_url": "http://h:1", "model": "m"},
        "workload": {"name": "w", "generator": "synthetic", "seed": 0, "path": "/a/w.toml", "arrival": {"rate": 4}},
        "workload_hash": "h0",
        "slo": {"ttft": 500.0},
        "server": {"name": "vllm", "version": "0.11.0"},
        "goodbench_version": "0.1.0",
    }
    return base | kw


def test_what_changes_along_a_series_is_not_identity():
    a = identity_of(_meta())
    for kw in (
        {"server": {"name": "vllm", "version": "0.12.0"}},
        {"goodbench_version": "9"},
        {"labels": {"branch": "pr"}},
        {"provenance": {"commit": "x"}},
        {"workload": _meta()["workload"] | {"seed": 7, "path": "/b/w.toml"}, "workload_hash": "h7"},
        {"target": {"base_url": "http://other:2", "model": "m"}},
    ):
        assert identity_of(_meta(**kw))["key"] == a["key"], kw


def test_what_a_run_measures_is_identity():
    a = identity_of(_meta())["key"]
    for kw in (
        {"workload": _meta()["workload"] | {"arrival": {"rate": 8}}},
        {"target": {"model": "other"}},
        {"slo": {"ttft": 300.0}},
        {"server": {"name": "sglang"}},
        {"labels": {"gpu": "h100"}},  # the one label that is: the GPU of a server goodbench cannot see
    ):
        assert identity_of(_meta(**kw))["key"] != a, kw


def test_engine_key_ignores_defaults_and_the_derived_kv_size():
    d = EngineConfig().resolved().to_dict()
    assert engine_key(d) == engine_key(d | {"num_gpu_blocks": 1})
    assert engine_key(d) == engine_key({k: v for k, v in d.items() if k != "block_size"})  # a knob added later
    assert engine_key(d) != engine_key(d | {"max_num_batched_tokens": 2048})


def test_servers():
    assert server_of(_meta(mode="simulate", server=None)) == ("goodbench-sim", "0.1.0")
    assert server_of(_meta(server=None, engine={"gpu": "h100-sxm"})) == ("goodbench", "0.1.0")
    assert server_of(_meta()) == ("vllm", "0.11.0")
    assert server_of(_meta(server=None)) == ("unknown", None)


def test_metrics_and_row():
    s = {
        "goodput": 3.5,
        "slo_attainment": 0.97,
        "requests": {"issued": 200, "failed": 4},
        "ttft_ms": {"p99": 120.0, "p50": float("nan")},
        "cost": {"goodput_per_gpu": 1.75},
    }
    m = metrics_of(s)
    assert m == {
        "goodput": 3.5,
        "slo_attainment": 0.97,
        "failed_fraction": 0.02,
        "goodput_per_gpu": 1.75,
        "ttft_p99": 120.0,
    }
    assert set(m) <= set(METRICS) and metrics_of(None) == {}
    row = run_row(_meta(labels={"a": 1}, provenance={"commit": "c1"}), s)
    assert row["labels"] == {"a": "1"} and row["commit"] == "c1" and row["server_version"] == "0.11.0"
    assert row["gpu"] == "" and row["identity"] == identity_of(_meta(labels={"a": 1}))["key"]
