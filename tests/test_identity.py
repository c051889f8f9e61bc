"""history/identity.py: what makes two runs comparable over time, and the metrics a catalogue keeps."""

import json

from goodbench.engine.config import EngineConfig
from goodbench.history.identity import (
    METRICS,
    describe,
    engine_key,
    identity_of,
    metrics_of,
    run_row,
    server_of,
    tell_apart,
)


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


def test_keys_of_runs_driven_as_their_workload_says_are_unchanged():
    """Issue 39 added the loop to the identity only where there is one: these keys are the ones main gave
    before it (an open-loop run, a simulated engine with a knob), so existing series go on."""
    assert identity_of(_meta())["key"] == "3f2977a2063b"
    eng = EngineConfig(max_num_batched_tokens=256).to_dict()
    assert identity_of(_meta(mode="simulate", server=None, engine=eng))["key"] == "ed3be371bef4"
    closed = _meta()["workload"] | {"arrival": {"kind": "closed", "concurrency": 8}}  # goodbench's own closed loop
    assert identity_of(_meta(mode="closed", workload=closed))["loop"] == ""


def test_a_locust_closed_loop_and_the_engine_it_started_are_identity():
    """Issue 39: a `--via locust` closed-loop run shared a series with an open-loop run of the same workload
    on a differently configured server: the loop and the engine locust's run started were not identity."""
    open_run = identity_of(_meta())
    driven = {"via": "locust", "loop": "closed", "users": 16, "workers": 0}
    srv = {"name": "goodbench", "version": "0.1.0", "driven_as": driven}
    locust = identity_of(_meta(mode="closed", label="locust-closed", server=srv))
    assert locust["key"] != open_run["key"] and locust["loop"] == "closed loop x16 (locust)"
    assert describe(locust).endswith("· closed loop x16 (locust)")
    assert identity_of(_meta(mode="closed", server=srv | {"driven_as": driven | {"users": 32}}))["key"] != locust["key"]
    a = identity_of(_meta(mode="closed", server=srv | {"engine": EngineConfig(max_num_seqs=8).to_dict()}))
    b = identity_of(_meta(mode="closed", server=srv | {"engine": EngineConfig(max_num_seqs=64).to_dict()}))
    assert a["key"] != b["key"] and a["engine"] and json.loads(a["knobs"])["max_num_seqs"] == 8
    capped = identity_of(_meta(max_concurrency=4))
    assert capped["loop"] == "max 4 in flight" and capped["key"] != open_run["key"]


def test_series_alike_but_for_a_knob_are_told_apart_by_it():
    """Sweep cells: the same workload, model and server, another budget; their headers name it."""
    cells = [
        identity_of(_meta(mode="simulate", server=None, engine=EngineConfig(max_num_batched_tokens=n).to_dict()))
        for n in (256, 2048)
    ]
    other = identity_of(_meta(workload=_meta()["workload"] | {"name": "another"}))
    tell_apart([*cells, other])
    assert [describe(c).rsplit(" · ", 1)[1] for c in cells] == [
        "max_num_batched_tokens=256",
        "max_num_batched_tokens=2048",
    ]
    assert "apart" not in other or not other["apart"]
    rates = [identity_of(_meta(workload=_meta()["workload"] | {"arrival": {"rate": r}})) for r in (2, 8)]
    tell_apart(rates)
    assert [r["apart"] for r in rates] == ["arrival.rate=2", "arrival.rate=8"]


def test_run_via_locust_hands_its_loop_and_engine_to_the_run_json(monkeypatch):
    """The locust master writes run.json from the server block run --via locust gives it: that block names
    the loop and users, and the engine it started, so the identity above sees them (no load is sent)."""
    import contextlib

    import goodbench as gb
    from goodbench.api import runs
    from goodbench.runner import via_locust

    cfg = EngineConfig(max_num_seqs=8)
    seen = {}

    @contextlib.contextmanager
    def started(target, engine, pin, on_stage):
        yield runs.Target("http://127.0.0.1:9", preflight=False, model="m"), cfg, None

    monkeypatch.setattr(runs, "_server", started)
    monkeypatch.setattr(runs, "_server_info", lambda ccfg, c: {"name": "goodbench", "version": "0"})
    monkeypatch.setattr(via_locust, "run_locust", lambda spec, r: seen.setdefault("run", r) and 0)
    wl = gb.load_workload("mixed-long-short", num_prompts=4)
    assert runs.run_via_locust(wl, engine=cfg, users=12) == 0
    server = seen["run"].server
    assert server["driven_as"] == {"via": "locust", "loop": "closed", "users": 12, "workers": 0}
    ident = identity_of(_meta(mode="closed", label="locust-closed", server=server))
    assert ident["loop"] == "closed loop x12 (locust)" and ident["engine"] == engine_key(cfg.to_dict())
