"""The one run lifecycle (rundir.RunDir): open, append, summarize, finish."""

import json
import os

import pytest
from recs import rec

from goodbench.errors import RunDirError
from goodbench.records import RunMeta
from goodbench.rundir import RunDir
from goodbench.store import load_meta
from goodbench.version import __version__


def records(n=20):
    return [rec(i, sent=i * 0.1, chunks=(i * 0.1 + 0.05, i * 0.1 + 0.07)) for i in range(n)]


def test_open_append_finish(tmp_path):
    rd = RunDir.open(str(tmp_path), RunMeta("r", slo={"ttft": 60}))
    meta = load_meta(rd.dir)
    assert meta.goodbench_version == __version__ and meta.finished_wall is None  # written at start
    for r in records():
        rd.append(r)
    s = rd.finish()
    assert s["requests"]["issued"] == 20 and s["slo_attainment"] == 1.0
    assert json.loads((tmp_path / "r" / "summary.json").read_text()) == json.loads(json.dumps(s))
    assert load_meta(rd.dir).finished_wall
    assert (tmp_path / "r" / "columns" / "columns.json").exists()  # read back as columns: sidecar kept


def rounded(x):
    if isinstance(x, float):
        return round(x, 6)
    if isinstance(x, dict):
        return {k: rounded(v) for k, v in x.items()}
    return [rounded(v) for v in x] if isinstance(x, list) else x


def test_in_memory_and_on_disk_summaries_agree(tmp_path):
    recs = records()
    a = RunDir.open(str(tmp_path), RunMeta("a"))
    a.append_many(recs)
    b = RunDir.open(str(tmp_path), RunMeta("b"))
    b.append_many(recs)
    sa, sb = a.finish(records=recs, ci=False), b.finish(ci=False)
    sa.pop("run_id"), sb.pop("run_id")
    # the backlog is sampled at instants that can coincide with a send; 0.1 us of rounding moves a count
    assert sa.pop("saturation")["saturated"] == sb.pop("saturation")["saturated"]
    assert rounded(sa) == rounded(sb)  # records on disk keep times to 0.1 us
    assert not (tmp_path / "a" / "columns").exists()


def test_the_summary_is_composed_from_the_meta_and_unsummarized_runs(tmp_path):
    rd = RunDir.open(str(tmp_path), RunMeta("x", label="L", mode="simulate"))
    rd.append_many(records(3))
    rd.meta.engine_stats = {"steps": 7, "wall_s": 0.5, "prefix_cache_queries": 10, "prefix_cache_hits": 4}
    s = rd.finish()
    assert s["label"] == "L" and s["simulation"]["steps"] == 7 and s["prefix_cache"]["hit_rate"] == 0.4
    imp = RunDir.open(str(tmp_path), RunMeta("imported"))
    assert imp.finish(summarized=False) is None
    assert not os.path.exists(os.path.join(imp.dir, "summary.json"))


def test_a_fresh_run_id_and_collisions(tmp_path):
    rd = RunDir.open(str(tmp_path), RunMeta(""))
    assert rd.meta.run_id.startswith("run-") and os.path.isdir(rd.dir)
    rd.close()
    RunDir.check_free(str(tmp_path), "unused")
    with pytest.raises(RunDirError, match="already holds a run"):
        RunDir.check_free(str(tmp_path), rd.meta.run_id)
    with pytest.raises(RunDirError):
        RunDir.open(str(tmp_path), RunMeta(rd.meta.run_id))


def test_a_full_disk_ends_with_a_summary_of_what_was_written(tmp_path, monkeypatch):
    from goodbench import store as store_mod

    rd = RunDir.open(str(tmp_path), RunMeta("r"))
    recs = records(10)
    for r in recs[:6]:
        rd.append(r)
    real = os.write
    monkeypatch.setattr(
        store_mod.os, "write", lambda fd, b: (_ for _ in ()).throw(OSError(28, "No space left on device"))
    )
    with pytest.raises(RunDirError):
        rd.append(recs[6])
    monkeypatch.setattr(store_mod.os, "write", real)
    with pytest.raises(RunDirError, match="No space left on device") as e:
        rd.finish(records=recs)  # what it meant to keep: the summary is of what is on disk
    assert e.value.summary["requests"]["issued"] == 6
    assert load_meta(rd.dir).interrupted  # incomplete: the gate will not judge it as whole


def test_open_with_an_automatic_name_takes_the_next_free_one(tmp_path):
    a = RunDir.open(str(tmp_path), RunMeta(""), prefix="x")
    b = RunDir.open(str(tmp_path), RunMeta(""), prefix="x")
    assert a.dir != b.dir and os.path.exists(os.path.join(b.dir, "run.json"))


# ----------------------------------------------------------------------------------------------- history
def _rows():
    import sqlite3

    with sqlite3.connect(os.environ["GOODBENCH_HISTORY_DB"]) as con:  # each test's own (conftest.py)
        return con.execute("SELECT path, run_id, labels, commit_sha FROM runs ORDER BY path").fetchall()


def test_a_finished_run_indexes_itself_with_labels_and_provenance(tmp_path, monkeypatch):
    monkeypatch.setenv("GOODBENCH_LABELS", "branch=main")
    monkeypatch.setenv("GOODBENCH_COMMIT", "c0ffee")
    rd = RunDir.open(str(tmp_path), RunMeta("r", slo={"ttft": 60}, labels={"gpu": "h100"}))
    rd.append_many(records())
    rd.finish()
    meta = load_meta(rd.dir)
    assert meta.labels == {"branch": "main", "gpu": "h100"} and meta.provenance == {"commit": "c0ffee"}
    assert _rows() == [(rd.dir, "r", '{"branch": "main", "gpu": "h100"}', "c0ffee")]  # outside it: absolute
    assert os.listdir(tmp_path) == ["r"]  # nothing but runs in a results directory


def test_runs_under_the_catalogue_are_kept_relative(tmp_path, monkeypatch):
    monkeypatch.setenv("GOODBENCH_HISTORY_DB", str(tmp_path / "history.sqlite"))
    rd = RunDir.open(str(tmp_path / "sweep-1" / "cells"), RunMeta("cell-a"))
    rd.append_many(records())
    rd.finish()
    assert _rows()[0][:2] == ("sweep-1/cells/cell-a", "cell-a")


def test_an_import_without_summary_is_indexed_with_its_metrics(tmp_path):
    import sqlite3

    rd = RunDir.open(str(tmp_path), RunMeta("imp", mode="imported", slo={"ttft": 60}))
    rd.append_many(records())
    rd.finish(summarized=False)
    assert not (tmp_path / "imp" / "summary.json").exists()
    with sqlite3.connect(os.environ["GOODBENCH_HISTORY_DB"]) as con:
        assert con.execute("SELECT value FROM metrics WHERE name = 'slo_attainment'").fetchone() == (1.0,)


def test_the_history_can_be_turned_off_and_never_fails_a_run(tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("GOODBENCH_HISTORY", "0")
    rd = RunDir.open(str(tmp_path / "a"), RunMeta("r"))
    rd.append_many(records())
    rd.finish()
    assert not os.path.exists(os.environ["GOODBENCH_HISTORY_DB"])
    monkeypatch.delenv("GOODBENCH_HISTORY")
    monkeypatch.setenv("GOODBENCH_HISTORY_DB", str(tmp_path))  # a directory: SQLite cannot open it
    rd = RunDir.open(str(tmp_path / "b"), RunMeta("r"))
    rd.append_many(records())
    s = rd.finish()
    assert s["requests"]["issued"] == 20 and (tmp_path / "b" / "r" / "summary.json").exists()
    assert "warning: run not added to the history catalogue" in capfd.readouterr().err
