"""`goodbench history` and `gate --history` end to end (api/history.py, cli/history.py)."""

import json
import os
import sqlite3

import numpy as np
import pytest
from conftest import run_cli
from histruns import clone_run, noisy_series, write_run

import goodbench as gb
from goodbench.errors import InputError, UsageError
from goodbench.history.identity import describe


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    """One real simulated run (records, summary) to judge; made-up histories are cloned from it."""
    out = str(tmp_path_factory.mktemp("hist-real"))
    return gb.simulate(gb.load_workload("mixed-long-short", num_prompts=60), result_dir=out, run_id="tonight")


def _history(tmp_path, real, factor: float, n: int = 12):
    res = tmp_path / "results"
    rng = np.random.default_rng(0)
    for i in range(n):
        clone_run(real.dir, str(res), f"night-{i:02d}", i, factor * (1 + 0.02 * rng.standard_normal()))
    tonight = clone_run(real.dir, str(res), "zz-tonight", n + 1, 1.0)
    for f in ("records.jsonl", "columns"):
        src = os.path.join(real.dir, f)
        os.symlink(src, os.path.join(tonight, f)) if os.path.exists(src) else None
    db, _ = gb.index_history([str(res)], str(tmp_path / "history.sqlite"))
    return db, tonight


def test_gate_history_passes_noise_and_fails_a_regression(tmp_path, real):
    db, tonight = _history(tmp_path / "same", real, 1.0)
    r = run_cli("gate", tonight, "--history", "--history-db", db, "--junit", str(tmp_path / "g.xml"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "goodput vs history" in r.stdout and "over 12 runs" in r.stdout
    assert 'name="goodput vs history"' in (tmp_path / "g.xml").read_text()
    db, tonight = _history(tmp_path / "drop", real, 1.25)  # tonight is 20% below the series
    r = run_cli("gate", tonight, "--history", "--history-db", db, "--history-metric", "goodput")
    assert r.returncode == 1 and "✗ goodput vs history" in r.stdout and "(-20." in r.stdout, r.stdout
    r = run_cli("gate", tonight, "--history", "--history-db", db, "--history-label", "branch=none")  # no series
    assert r.returncode == 0 and "not judged: 0 earlier run(s)" in r.stdout


def test_gate_history_via_the_api(tmp_path, real):
    db, tonight = _history(tmp_path, real, 1.25)
    g = gb.gate(tonight, history=gb.HistorySpec(metrics=("goodput",), db=db))
    (c,) = [c for c in g.clauses if c.name == "goodput vs history"]
    assert not c.passed and g.exit_code == 1
    assert gb.gate(tonight, history=gb.HistorySpec(metrics=("goodput",), min_change=0.5, db=db)).passed
    with pytest.raises(UsageError, match="unknown metric"):
        gb.gate(tonight, history=gb.HistorySpec(metrics=("speed",), db=db))


def test_index_list_trend_and_html(tmp_path):
    res = tmp_path / "results"
    for i, g in enumerate(noisy_series(0)):
        write_run(str(res), f"n{i:02d}", i, {"goodput": float(g)}, labels={"branch": "main"})
    write_run(str(tmp_path / "elsewhere"), "other", 70, {"goodput": 1.0})
    db, result = gb.index_history([str(tmp_path)])
    assert db == os.environ["GOODBENCH_HISTORY_DB"] and result.indexed == 61
    runs = gb.history_runs(gb.HistoryFilters(labels={"branch": "main"}), db, limit=5)
    assert [r["run_id"] for r in runs] == ["n59", "n58", "n57", "n56", "n55"]
    assert [r["run_id"] for r in gb.history_runs(gb.HistoryFilters(under=str(tmp_path / "elsewhere")))] == ["other"]
    (t,) = gb.history_trend("goodput", gb.HistoryFilters(under=str(res)))
    assert len(t.series.points) == 60 and [c.index for c in t.changes] == [40] and t.better == "higher"
    png, js = str(tmp_path / "t.png"), str(tmp_path / "t.json")
    r = run_cli("history", "trend", "--under", str(res), "--png", png, "--json", js)
    assert r.returncode == 0, r.stderr
    assert "change at run 41 (n40, 2026-02-10)" in r.stdout and "regression" in r.stdout and "▁" in r.stdout
    assert (tmp_path / "t.png").read_bytes()[:4] == b"\x89PNG"
    assert json.loads((tmp_path / "t.json").read_text())[0]["changes"][0]["index"] == 40
    r = run_cli("history", "list", "--label", "branch=main", "--limit", "3")
    assert r.returncode == 0 and "3 run(s)" in r.stdout and "n59" in r.stdout and db in r.stdout
    r = run_cli("history", "html", "--out", str(tmp_path / "page"))
    assert r.returncode == 0 and (tmp_path / "page" / "index.html").exists()


def _count(db: str) -> tuple:
    with sqlite3.connect(db) as con:
        return con.execute("SELECT count(DISTINCT identity), count(*) FROM runs").fetchone()


def test_runs_index_themselves_with_labels_and_the_catalogue_rebuilds(tmp_path):
    res, db = str(tmp_path / "r"), str(tmp_path / "mine.sqlite")
    r = run_cli("simulate", "--workload", "hol-stress", "--num-prompts", "20", "--seed", "1", "--quiet",
                "--result-dir", res, "--label", "branch=main", "--label", "runner=ci-1", "--history-db", db)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert os.listdir(res) and all(os.path.isdir(os.path.join(res, d)) for d in os.listdir(res))
    wl = gb.load_workload("hol-stress", num_prompts=20, seed=2)
    gb.simulate(wl, result_dir=res, labels={"branch": "main", "runner": "ci-1"})  # into the default catalogue
    assert _count(db) == (1, 1) and _count(os.environ["GOODBENCH_HISTORY_DB"]) == (1, 1)
    r = run_cli("history", "index", res, "--rebuild", "--history-db", db)
    assert r.returncode == 0 and "2 run(s) indexed" in r.stdout and db in r.stdout
    assert _count(db) == (1, 2)  # other seeds, one series
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT count(*) FROM labels WHERE key = 'runner'").fetchone() == (2,)
    r = run_cli("simulate", "--workload", "hol-stress", "--num-prompts", "20", "--quiet", "--result-dir", res,
                "--no-history", "--history-db", db)  # fmt: skip
    assert r.returncode == 0 and _count(db) == (1, 2)


def test_clear_errors(tmp_path):
    r = run_cli("history", "list", "--history-db", str(tmp_path / "none.sqlite"))
    assert r.returncode == 2 and "no history catalogue" in r.stderr and "Traceback" not in r.stderr
    r = run_cli("history", "trend", "--metric", "speed")
    assert r.returncode == 2 and "unknown metric 'speed'" in r.stderr
    r = run_cli("simulate", "--label", "oops", "--num-prompts", "2")
    assert r.returncode == 2 and "KEY=VALUE" in r.stderr
    (tmp_path / "bad.sqlite").write_text("not a database")
    with pytest.raises(InputError, match="not a readable history catalogue"):
        gb.history_runs(db=str(tmp_path / "bad.sqlite"))


def test_sweep_cells_carry_the_labels_and_index_themselves(tmp_path):
    from goodbench.analysis.backends import Simulated

    wl = gb.load_workload("mixed-long-short", num_prompts=20, goodput="ttft:500 tpot:50")
    s = gb.prepare_sweep(
        wl, ["h100-sxm"], {"max_num_batched_tokens": [1024, 2048]}, result_dir=str(tmp_path), labels={"k": "v"}
    )
    out = gb.sweep(s, Simulated(1), plots=False)
    runs = gb.history_runs(gb.HistoryFilters(labels={"k": "v"}, under=out.dir))
    assert len(runs) == 2 and all("/cells/" in r["dir"] and r["server"] == "goodbench-sim" for r in runs)
    assert len({r["identity"] for r in runs}) == 2  # another chunk size: another series
    heads = sorted(describe(t.series.identity) for t in gb.history_trend("goodput", gb.HistoryFilters(under=out.dir)))
    assert [h.rsplit(" · ", 1)[1] for h in heads] == ["max_num_batched_tokens=1024", "max_num_batched_tokens=2048"]
