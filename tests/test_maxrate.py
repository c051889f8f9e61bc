"""DistServe's max goodput rate (analysis.maxrate): bracketing, bisection, re-probing; simulated and live."""

import asyncio
import json
import os

import pytest
from conftest import run_cli

from goodbench.analysis.maxrate import find_max_rate


def test_find_max_rate_brackets_and_bisects():
    # attainment falls linearly past 7 req/s: the max rate with >= 90% is 7.5
    def evaluate(rate, scale=1):
        att = 1.0 if rate <= 7 else max(0.0, 1.0 - (rate - 7) * 0.2)
        return int(round(att * 2000 * scale)), 2000 * scale

    r = find_max_rate(evaluate, target=0.9, start=1.0, rel_tol=0.02, max_probes=40)
    assert r["max_rate"] == pytest.approx(7.5, rel=0.03)
    assert r["bracket"][0] <= 7.5 <= r["bracket"][1]
    # right at the boundary the 2,000-request intervals straddle the target: the ends were re-probed
    assert max(p["requests"] for p in r["probes"]) > 2000
    step = find_max_rate(lambda rate, scale=1: (2000 if rate <= 5 else 0, 2000), target=0.9, rel_tol=0.02)
    assert step["max_rate"] == pytest.approx(5, rel=0.03) and step["conclusive"]
    assert all(p["requests"] == 2000 for p in step["probes"])  # clear decisions need no longer probes
    assert find_max_rate(lambda rate, scale=1: (0, 100), target=0.9, max_probes=5)["max_rate"] is None


def test_a_disproved_passing_end_searches_lower_rates():
    """At 300 requests rates up to 2.1 pass by a hair (91.7%); with more requests only <= 1.85 passes.
    When the recheck disproves the passing end and no lower rate was probed, the search halves again
    at the larger scale instead of reporting that nothing passes."""

    def evaluate(rate, scale=1):
        n = 300 * scale
        att = 0.95 if rate <= 1.85 else 0.917 if scale == 1 and rate <= 2.1 else 0.85
        return int(att * n), n

    r = find_max_rate(evaluate, target=0.9, start=4.0)
    assert r["max_rate"] is not None and 1.6 < r["max_rate"] <= 1.85
    assert any(p["rate"] < 2.0 and p["requests"] > 300 for p in r["probes"])


def test_sweep_max_rate_cli(tmp_path):
    r = run_cli(
        "sweep",
        "--dataset-name",
        "random",
        "--random-input-len",
        "512",
        "--random-output-len",
        "64",
        "--num-prompts",
        "300",
        "--request-rate",
        "4",
        "--goodput",
        "ttft:300",
        "tpot:80",
        "--gpu",
        "l4",
        "--find-max-rate",
        "--result-dir",
        str(tmp_path),
        "--sweep-id",
        "m",
        timeout=240,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    data = json.loads((tmp_path / "m" / "max_rate.json").read_text())
    res = data["results"][0]
    assert res["max_rate"] and res["max_rate"] > 0 and len(res["probes"]) >= 3
    at_max = [p for p in res["probes"] if p["offered_rate"] == pytest.approx(res["max_rate"])]
    assert at_max and all(p["pass"] for p in at_max)  # every probe at the reported rate passed
    assert any(not p["pass"] and p["offered_rate"] > res["max_rate"] for p in res["probes"])


def test_max_rate_against_a_live_engine(tmp_path):
    # 4 sequences at a time, 16 tokens at 5 ms per step: about 50 req/s of capacity, after which TTFT queues
    r = run_cli(
        "sweep",
        "--dataset-name",
        "random",
        "--random-input-len",
        "16",
        "--random-output-len",
        "16",
        "--num-prompts",
        "40",
        "--request-rate",
        "20",
        "--goodput",
        "ttft:60",
        "--gpu",
        "l40s",
        "--max-num-seqs",
        "4",
        "--fixed-step-ms",
        "5",
        "--live",
        "--find-max-rate",
        "--max-probes",
        "7",
        "--result-dir",
        str(tmp_path),
        "--sweep-id",
        "live",
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    res = json.loads((tmp_path / "live" / "max_rate.json").read_text())["results"][0]
    assert res["max_rate"] is not None and 10 < res["max_rate"] < 120
    assert any(not p["pass"] for p in res["probes"]) and any(p["pass"] for p in res["probes"])
    probes = os.listdir(tmp_path / "live" / "probes" / "l40s")
    assert "server.log" in probes and sum(x.startswith("probe-") for x in probes) == len(res["probes"])


def test_max_rate_honours_instance_layouts(tmp_path):
    """Two replicas (round-robin) serve about twice the rate of one at the same SLO, so the max rate per
    GPU stays about equal; each result carries its layout and GPU count, and the figure is drawn."""
    r = run_cli(
        "sweep",
        "--dataset-name",
        "random",
        "--random-input-len",
        "16",
        "--random-output-len",
        "16",
        "--num-prompts",
        "200",
        "--request-rate",
        "20",
        "--goodput",
        "ttft:60",
        "--gpu",
        "l40s",
        "--max-num-seqs",
        "4",
        "--fixed-step-ms",
        "5",
        "--router",
        "round-robin",
        "--layouts",
        "1x,2x",
        "--find-max-rate",
        "--max-probes",
        "16",  # the default: confirmations with 4x the requests need the room (issue 39)
        "--result-dir",
        str(tmp_path),
        "--sweep-id",
        "lay",
        timeout=240,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    res = {x["layout"]: x for x in json.loads((tmp_path / "lay" / "max_rate.json").read_text())["results"]}
    one, two = res["1x"], res["2x"]
    assert (one["gpus"], two["gpus"]) == (1, 2)
    assert two["max_rate"] == pytest.approx(2 * one["max_rate"], rel=0.25)
    assert two["max_rate_per_gpu"] == pytest.approx(two["max_rate"] / 2)
    assert "per GPU" in r.stdout and (tmp_path / "lay" / "max_rate_per_gpu.png").exists()


def test_a_filling_backlog_of_long_requests_does_not_stop_a_probe(tmp_path):
    """Half the requests stream 250 tokens at 20 ms a step (5 s each): at 10 req/s the backlog grows for
    the whole 4 s the probe sends, yet the engine keeps up (256 sequences at a time). A plain run at that
    rate meets the SLO on every request; the search from that rate must find it (and no probe may stop
    early). The old early-stop, which took any growing backlog for a queue, stopped this probe."""
    from goodbench.analysis.live import live_rate_evaluator
    from goodbench.arrivals import ArrivalSpec, offsets
    from goodbench.client.config import ClientConfig
    from goodbench.client.target import resolve_model
    from goodbench.engine.config import EngineConfig
    from goodbench.engine.serve.launch import start_engine
    from goodbench.records import RequestSpec, RunMeta
    from goodbench.rundir import RunDir
    from goodbench.runner import Progress, RunOptions, run_plan
    from goodbench.workloads import Plan

    rate, slo = 10.0, {"ttft": 500}
    reqs = [RequestSpec(f"r{i}", "long" if i % 2 else "short", "hi", 2, 250 if i % 2 else 5) for i in range(40)]
    arrival = ArrivalSpec(rate=rate)
    plan = Plan(reqs, offsets(arrival, n=len(reqs), seed=0), arrival)
    proc = start_engine(EngineConfig(fixed_step_ms=20, max_num_seqs=256))
    try:
        evaluate = live_rate_evaluator(proc.base_url, plan, slo, 0, str(tmp_path / "probes"))
        res = find_max_rate(evaluate, target=0.9, start=rate, max_probes=1)
        plain = RunDir.open(str(tmp_path), RunMeta(run_id="plain", slo=slo, mode="open", requested_rate=rate))
        model = asyncio.run(resolve_model(proc.base_url, None))
        cfg = ClientConfig(base_url=proc.base_url, model=model)
        run_plan(plan, cfg, plain, RunOptions(slo=slo, scrape_metrics=False), None, None, Progress())
        s = plain.finish(ci=False)
    finally:
        proc.close()
    assert s["slo_met"] == s["requests"]["issued"] == 40  # a plain run at the rate meets the SLO
    (probe,) = res["probes"]
    assert not probe["stopped_early"] and probe["requests"] == probe["planned"] == 40 and probe["pass"]
    assert res["max_rate"] == pytest.approx(rate)  # the rate the probe's schedule offered (issue 39)


def test_a_stopped_probe_says_so_on_the_console_and_in_the_table():
    from goodbench.report.maxrate import max_rate_line, probe_line, stopped_early

    p = {"rate": 4.0, "requests": 23, "planned": 200, "attainment": 1.0, "lo": 0.86, "hi": 1.0, "pass": True}
    assert "stopped early" not in probe_line(p)
    line = probe_line(p | {"stopped_early": True})
    assert "pass" in line and "stopped early after 23 of 200 requests" in line
    r = {
        "cell": "x",
        "max_rate": 4.0,
        "bracket": [4.0, 8.0],
        "conclusive": False,
        "probes": [p | {"stopped_early": True}, p],
    }
    assert stopped_early(r) == "1 of 2" and "1 of 2 probes stopped early" in max_rate_line(r)


def test_a_pasted_endpoint_url_is_the_endpoint_the_rate_search_probes(monkeypatch):
    """`sweep --find-max-rate --base-url http://h:8000/v1/chat/completions` said it took the path off
    and would add /v1/chat/completions, then probed the workload's /v1/completions: the max rate of
    the wrong API. The search probes the endpoint the URL named, with the key from the environment."""
    import contextlib

    from goodbench.analysis import backends

    monkeypatch.setenv("GB_TEST_KEY", "sk-test")
    seen = {}

    def fake_evaluator(base_url, plan, slo, seed, out_dir, endpoint, api_key=None):
        seen.update(base_url=base_url, endpoint=endpoint, api_key=api_key)
        return lambda rate, scale=1: None

    monkeypatch.setattr(backends.live, "live_rate_evaluator", fake_evaluator)
    from goodbench.client.config import api_key_from_env

    with pytest.warns(Warning, match="taken off"):
        b = backends.backend_for(base_url="http://h:8000/v1/chat/completions/", api_key=api_key_from_env("GB_TEST_KEY"))
    setup = type("S", (), {"plan": None, "slo": {}, "spec": type("W", (), {"seed": 0, "endpoint": "completions"})()})()
    with contextlib.ExitStack() as st:
        st.enter_context(b.evaluator(setup, None, "/tmp"))
    assert seen == {"base_url": "http://h:8000", "endpoint": "/v1/chat/completions", "api_key": "sk-test"}
    plain = backends.backend_for(base_url="http://h:8000")
    with plain.evaluator(setup, None, "/tmp"):
        pass
    assert seen["endpoint"] == "/v1/completions" and seen["api_key"] is None  # the workload's endpoint
