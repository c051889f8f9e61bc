"""BASE vs NEW (analysis.compare): bootstrap intervals of the difference, verdicts, margin."""

import numpy as np
import pytest
from recs import rec

from goodbench.analysis.compare import compare
from goodbench.columnar import RecordArrays, RunArrays
from goodbench.metrics import RequestMetrics, summarize
from goodbench.records import RunMeta


def _run(offset_s: float, n=400, seed=0):
    rng = np.random.default_rng(seed)
    recs = []
    for i in range(n):
        t = i * 0.05
        ttft = 0.05 + rng.exponential(0.01) + offset_s
        chunks = tuple(t + ttft + np.cumsum(0.01 + rng.exponential(0.002, 8) + offset_s / 10))
        recs.append(rec(i, sent=t, chunks=chunks))
    meta = RunMeta(f"run{offset_s}", slo={"ttft": 80})
    run = RunArrays(meta, RecordArrays.from_records(recs))
    return RequestMetrics(run.cols), summarize(run, ci=False)


def test_compare_a_run_with_itself_finds_no_change():
    c, s = _run(0.0)
    res = compare(c, c, s, s)
    assert {m["verdict"] for m in res["metrics"]} == {"no significant change"}
    assert res["regressions"] == []


def test_compare_flags_a_slower_run_and_respects_the_margin():
    cb, sb = _run(0.0, seed=1)
    cn, sn = _run(0.03, seed=2)  # +30 ms TTFT, +3 ms per gap
    res = compare(cb, cn, sb, sn, margin=0.05)
    by = {m["metric"]: m for m in res["metrics"]}
    assert by["ttft_p50"]["verdict"] == "worse" and by["ttft_p50"]["ci"][0] > 20
    assert by["itl_p50"]["verdict"] == "worse"
    assert by["slo_attainment"]["verdict"] == "worse"
    assert "ttft_p50" in res["regressions"]
    assert by["ttft_p50"]["p_value"] < 1e-6
    lenient = compare(cb, cn, sb, sn, margin=100.0)  # 10000%: nothing moved that much
    assert lenient["regressions"] == []


W = {
    "name": "a",
    "generator": "mixed",
    "classes": [{"name": "short", "input": {"value": 50}}],
    "hol": None,
    "endpoint": "completions",
    "num_requests": 300,
    "seed": 0,
    "arrival": {"rate": 4.0},
    "slo": {"ttft": 500},
}


@pytest.mark.parametrize(
    "other,differs",
    [
        ({**W, "name": "renamed", "num_requests": 50, "seed": 7, "arrival": {"rate": 9.0}, "slo": None}, None),
        ({**W, "classes": [{"name": "short", "input": {"value": 60}}]}, "different classes"),
        ({**W, "generator": "hol", "hol": {"long_input": 8000}}, "different generator, hol"),
        ({**W, "endpoint": "chat"}, "different endpoint"),
        ({"name": "vllm-import", "source": "x.json"}, None),  # an import does not say: cannot refuse
    ],
)
def test_workload_identity(other, differs):
    from goodbench.workloads.identity import difference

    got = difference(W, other)
    assert (got is None) if differs is None else (differs in got and "--allow-different-workloads" in got)


def test_compare_and_gate_refuse_runs_of_different_workloads(tmp_path):
    from conftest import run_cli

    import goodbench as gb

    hol = gb.simulate(gb.load_workload("hol-stress"), result_dir=str(tmp_path)).dir
    mixed = gb.simulate(gb.load_workload("mixed-long-short", num_prompts=100), result_dir=str(tmp_path)).dir
    r = run_cli("compare", hol, mixed)
    assert r.returncode == 2 and "different workloads ('hol-stress' vs 'mixed-long-short'" in r.stderr
    r = run_cli("compare", hol, mixed, "--allow-different-workloads")
    assert r.returncode == 0 and "different workloads" in r.stdout
    r = run_cli("gate", mixed, "--baseline", hol)
    assert r.returncode == 2 and "CANNOT JUDGE: the runs ran different workloads" in r.stdout
    r = run_cli("gate", mixed, "--baseline", hol, "--allow-different-workloads")
    assert r.returncode in (0, 1) and "vs baseline" in r.stdout


def test_identical_configs_with_different_seeds_are_no_regression(tmp_path):
    """A different seed draws other arrivals and lengths: the load swings move every latency near them
    together and goodput's duration moves with the arrivals; neither is the server's change."""
    import goodbench as gb

    runs = [
        gb.simulate(
            gb.load_workload(num_prompts=400, request_rate=8, seed=s, goodput="ttft:500 tpot:50"),
            result_dir=str(tmp_path),
        )
        for s in (1, 2)
    ]
    for base, new in (runs, runs[::-1]):
        res = gb.compare(base, new)
        assert res["regressions"] == [], res["metrics"]
        assert res["margin"] == 0.02 and "1 ms" in res["margin_rule"]


def _steady(offset_s: float, n=400):
    """A run of near-identical requests: the tiny intervals of a simulation."""
    recs = []
    for i in range(n):
        t, ttft = i * 0.05, 0.05 + (i % 7) * 1e-5 + offset_s
        recs.append(rec(i, sent=t, chunks=tuple(t + ttft + 0.01 * np.arange(8))))
    run = RunArrays(RunMeta("steady", slo={"ttft": 80}), RecordArrays.from_records(recs))
    return RequestMetrics(run.cols), summarize(run, ci=False)


def test_a_significant_change_smaller_than_the_practical_margin_is_no_regression():
    cb, sb = _steady(0.0)
    cn, sn = _steady(0.0004)  # +0.4 ms TTFT on every request: significant, below 1 ms
    by = {m["metric"]: m for m in compare(cb, cn, sb, sn)["metrics"]}
    assert by["ttft_p50"]["verdict"] == "worse" and not by["ttft_p50"]["regression"]
    assert by["ttft_p50"]["threshold"] == pytest.approx(1.0, abs=0.01)  # max(2 % of 50 ms, 1 ms)


def test_the_table_says_a_worsening_within_the_margin_is_not_a_regression():
    from rich.console import Console

    from goodbench.report.comparetable import compare_table

    cb, sb = _steady(0.0)
    cn, sn = _steady(0.0004)
    con = Console(width=160, record=True)
    con.print(compare_table(compare(cb, cn, sb, sn)))
    text = con.export_text()
    assert "worse, within margin" in text and "REGRESSION" not in text
