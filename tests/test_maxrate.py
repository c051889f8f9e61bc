"""DistServe's max goodput rate (analysis.maxrate): bracketing, bisection, re-probing; simulated and live."""

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
    at_max = [p for p in res["probes"] if p["rate"] == res["max_rate"]]
    assert at_max and all(p["pass"] for p in at_max)  # every probe at the reported rate passed
    assert any(not p["pass"] and p["rate"] > res["max_rate"] for p in res["probes"])


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
        "10",
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
