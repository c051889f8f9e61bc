"""The frontier view: tokens/s per GPU against tokens/s per user over a load axis, the frontier of all tokens and of
good tokens, frontier.csv and pareto.png from `goodbench sweep --concurrency A,B,...`."""

import csv
import json
import os
import subprocess
import sys

import pytest

from goodbench.analysis.frontier import parse_loads
from goodbench.errors import UsageError
from goodbench.metrics.derived import RequestMetrics
from goodbench.metrics.frontier import frontier_block, mark, non_dominated
from goodbench.records import RequestRecord


def test_non_dominated_keeps_points_no_other_beats_on_both_axes():
    xs, ys = [10, 20, 30, 15, 30], [100, 80, 40, 70, 40]
    assert non_dominated(xs, ys) == [True, True, True, False, True]  # (15, 70) is beaten by (20, 80); ties kept
    assert non_dominated([1, float("nan")], [1, 5]) == [True, False]


def _rec(i, sent, first, gaps):
    t = tuple(first + sum(gaps[:k]) for k in range(len(gaps) + 1))
    return RequestRecord(
        id=str(i), cls="c", scheduled_at=sent, sent_at=sent, first_token_at=first, finished_at=t[-1], chunk_times=t,
        chunk_tokens=(1,) * len(t), output_tokens=len(t), prompt_tokens=10,
    )  # fmt: skip


def test_frontier_block_is_median_interactivity_and_tokens_per_gpu():
    """Two requests at 10 and 20 ms per token: median 1/TPOT = 75 tok/s; 2 GPUs over 1 s; only the request that
    meets tpot:15 is good."""
    recs = [_rec(0, 0.0, 0.1, [0.010] * 4), _rec(1, 0.0, 0.1, [0.020] * 4)]
    cols = RequestMetrics(recs)
    b = frontier_block(cols, {"tpot": 15}, {"h100-sxm": 2}, 1.0)
    assert b["tok_s_per_user"] == pytest.approx(75.0)
    assert b["output_tok_s_per_gpu"] == pytest.approx(10 / 2)
    assert b["good_output_tok_s_per_gpu"] == pytest.approx(5 / 2)
    assert frontier_block(cols, None, None, 1.0)["output_tok_s_per_gpu"] is None  # GPUs unknown: no per-GPU figure


def test_mark_sets_both_frontiers():
    rows = [
        {"tok_s_per_user": 100, "output_tok_s_per_gpu": 500, "good_output_tok_s_per_gpu": 500},
        {"tok_s_per_user": 50, "output_tok_s_per_gpu": 900, "good_output_tok_s_per_gpu": 100},
        {"tok_s_per_user": 40, "output_tok_s_per_gpu": 800, "good_output_tok_s_per_gpu": 50},
    ]
    mark(rows)
    assert [r["on_frontier"] for r in rows] == [True, True, False]
    assert [r["on_good_frontier"] for r in rows] == [True, False, False]  # its tokens mostly missed the SLO


@pytest.mark.parametrize("text", ["0,4", "1,x", "1.5,4", "4,4"])
def test_bad_loads_are_refused(text):
    with pytest.raises(UsageError):
        parse_loads(text, "concurrency")
    assert parse_loads("1,2.5,inf", "request-rate") == [1, 2.5, float("inf")]


def _gb(args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "goodbench", *args], capture_output=True, text=True, cwd=cwd, timeout=600
    )


def test_sweep_over_concurrency_writes_the_frontier(tmp_path):
    r = _gb(
        ["sweep", "--workload", "mixed-long-short", "--num-prompts", "40", "--goodput", "ttft:1000", "tpot:50",
         "--gpu", "h100-sxm,l40s", "--concurrency", "1,8,64", "--result-dir", str(tmp_path), "--sweep-id", "f",
         "--jobs", "2"],
        tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    root = tmp_path / "f"
    with open(root / "frontier.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 6 and {r["load"] for r in rows} == {"c1", "c8", "c64"}
    want = {"config", "gpus", "concurrency_or_rate", "output_tok_s_per_gpu", "tok_s_per_user"}
    assert want | {"good_output_tok_s_per_gpu", "on_frontier", "on_good_frontier"} <= set(rows[0])
    h100 = sorted((r for r in rows if r["config"] == "h100-sxm"), key=lambda r: float(r["concurrency_or_rate"]))
    per_user = [float(r["tok_s_per_user"]) for r in h100]
    per_gpu = [float(r["output_tok_s_per_gpu"]) for r in h100]
    assert per_user == sorted(per_user, reverse=True) and per_gpu == sorted(per_gpu)  # the trade-off itself
    assert any(r["on_frontier"] == "True" for r in rows)
    assert all(r["on_frontier"] == "False" for r in rows if r["config"] == "l40s")  # the H100 dominates
    meta = json.loads((root / "frontier.json").read_text())["meta"]
    assert meta["kind"] == "concurrency" and "tok/s per user" in meta["caption"]
    assert os.path.getsize(root / "pareto.png") > 10_000
    assert (root / "load-c8" / "sweep.csv").exists()
    html = (root / "report.html").read_text()
    assert "Frontier: throughput per GPU against interactivity" in html and 'href="load-c64/report.html"' in html
    summary = json.loads(next((root / "load-c8" / "cells").glob("*/summary.json")).read_text())
    assert summary["tok_s_per_user"] > 0 and summary["output_tok_s_per_gpu"] > 0
    # the same points from the history catalogue: the same frontier
    db = str(tmp_path / "h.db")
    assert _gb(["history", "index", str(root), "--history-db", db], tmp_path).returncode == 0
    r = _gb(["history", "frontier", "--history-db", db, "--out", str(tmp_path / "hf")], tmp_path)
    assert r.returncode == 0, r.stderr
    with open(tmp_path / "hf" / "frontier.csv") as f:
        again = list(csv.DictReader(f))
    key = lambda r: (r["config"].split(" ")[0], float(r["tok_s_per_user"]))  # noqa: E731
    assert sorted(key(r) for r in again if r["on_frontier"] == "True") == sorted(
        key(r) for r in rows if r["on_frontier"] == "True"
    )
    assert (tmp_path / "hf" / "pareto.png").exists()


def test_a_load_axis_with_a_rate_search_is_refused_before_any_cell(tmp_path):
    r = _gb(["sweep", "--goodput", "ttft:500", "--concurrency", "1,4", "--find-max-rate", "--result-dir",
             str(tmp_path)], tmp_path)  # fmt: skip
    assert r.returncode == 2 and "does not combine" in r.stderr
    assert not any(tmp_path.iterdir())
    r = _gb(["sweep", "--goodput", "ttft:500", "--concurrency", "4", "--find-max-rate"], tmp_path)
    assert r.returncode == 2 and "open-loop" in r.stderr


def test_load_lists_that_cannot_be_one_axis_are_refused(tmp_path):
    for args in (["--concurrency", "1,4", "--request-rate", "3,5"], ["--concurrency", "inf,4"]):
        r = _gb(["sweep", "--goodput", "ttft:500", *args, "--result-dir", str(tmp_path)], tmp_path)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    rows = [{"tok_s_per_user": 1.0, "output_tok_s_per_gpu": 2.0, "good_output_tok_s_per_gpu": 2.0,
             "concurrency_or_rate": float("inf")}]  # fmt: skip
    from goodbench.analysis.frontier import write_frontier

    write_frontier(mark(rows), str(tmp_path), {"loads": [1.0, float("inf")]})
    meta = json.loads((tmp_path / "frontier.json").read_text())  # strict JSON: no Infinity
    assert meta["meta"]["loads"] == [1.0, "inf"] and meta["rows"][0]["concurrency_or_rate"] == "inf"


def test_a_report_of_several_runs_draws_their_frontier(tmp_path):
    for c in (1, 16):
        r = _gb(["simulate", "--dataset-name", "random", "--random-input-len", "200", "--random-output-len", "100",
                 "--concurrency", str(c), "--num-prompts", str(4 * c), "--goodput", "tpot:30", "--result-dir",
                 str(tmp_path), "--run-id", f"c{c}", "--no-history"], tmp_path)  # fmt: skip
        assert r.returncode == 0, r.stderr
    r = _gb(["report", str(tmp_path / "c1"), str(tmp_path / "c16"), "--out", str(tmp_path / "rep")], tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "rep" / "pareto.png").exists()
    assert "Frontier: throughput per GPU against interactivity" in (tmp_path / "rep" / "report.html").read_text()
