"""The run catalogue: upserts keyed by directory, paths that survive a move, and concurrent writers."""

import multiprocessing as mp
import os
import shutil
import sqlite3

import pytest
from histruns import write_run

from goodbench.history.catalogue import Catalogue, default_path
from goodbench.history.identity import run_row
from goodbench.history.scan import index_dirs, read_run


def _row(d):
    row, why = read_run(d)
    assert not why
    return row


def test_upsert_is_idempotent_and_replaces_metrics(tmp_path):
    d = write_run(str(tmp_path), "r1", 0, {"goodput": 3.0})
    with Catalogue(str(tmp_path / "h.sqlite")) as cat:
        cat.upsert([(d, _row(d), "s1")])
        cat.upsert([(d, _row(d), "s1")])
        row = _row(d) | {"metrics": {"goodput": 4.0}, "labels": {"x": "1"}}
        cat.upsert([(d, row, "s2")])
        assert cat.count() == 1
        assert cat.con.execute("SELECT name, value FROM metrics").fetchall() == [("goodput", 4.0)]
        assert cat.con.execute("SELECT key, value FROM labels").fetchall() == [("x", "1")]
        assert cat.signatures() == {"r1": "s2"}


def test_paths_are_relative_inside_and_survive_a_move(tmp_path):
    res = tmp_path / "results"
    with Catalogue(str(res / "h.sqlite")) as cat:
        index_dirs(cat, [write_run(str(res), "r1", 0, {"goodput": 3.0})])
    outside = write_run(str(tmp_path / "elsewhere"), "r2", 1, {"goodput": 3.0})
    with Catalogue(str(res / "h.sqlite")) as cat:
        index_dirs(cat, [outside])
        assert sorted(cat.signatures()) == sorted(["r1", os.path.abspath(outside)])
    shutil.move(str(res), str(tmp_path / "moved"))
    with Catalogue(str(tmp_path / "moved" / "h.sqlite")) as cat:
        assert os.path.isdir(cat.resolve("r1")) and cat.prune() == 0
        shutil.rmtree(os.path.join(cat.root, "r1"))
        assert cat.prune() == 1 and cat.count() == 1


def test_where_the_catalogue_lives():
    assert default_path({"GOODBENCH_HISTORY_DB": "/x/h.sqlite", "XDG_DATA_HOME": "/d"}) == "/x/h.sqlite"
    assert default_path({"XDG_DATA_HOME": "/d"}) == "/d/goodbench/history.sqlite"
    home = os.path.expanduser("~")
    assert default_path({}) == os.path.join(home, ".local", "share", "goodbench", "history.sqlite")


def _writer(args):
    db, d, k = args
    row = _row(d)
    for i in range(k):
        with Catalogue(db) as cat:  # a fresh connection each time, as runs finishing in processes do
            cat.upsert([(d, row | {"metrics": {"goodput": float(i)}}, str(i))])
    return k


def test_concurrent_writers_never_corrupt_it(tmp_path):
    """Eight processes, each upserting its own run and one shared run 25 times: every write lands
    (busy timeout, BEGIN IMMEDIATE), the shared row is one row, and SQLite's integrity check passes."""
    db = str(tmp_path / "h.sqlite")
    own = [write_run(str(tmp_path), f"r{i}", i, {"goodput": 1.0}) for i in range(8)]
    shared = write_run(str(tmp_path), "shared", 9, {"goodput": 1.0})
    jobs = [(db, d, 25) for d in own] + [(db, shared, 25)] * 8
    with mp.get_context("fork").Pool(8) as pool:
        assert sum(pool.map(_writer, jobs)) == 25 * 16
    with sqlite3.connect(db) as con:
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert con.execute("SELECT count(*) FROM runs").fetchone() == (9,)
        assert con.execute("SELECT count(*) FROM metrics").fetchone() == (9,)
        assert con.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_a_row_without_summary(tmp_path):
    d = write_run(str(tmp_path), "r1", 0, {"goodput": 2.0})
    with Catalogue(str(tmp_path / "h.sqlite")) as cat:
        cat.upsert([(d, run_row({"run_id": "r1"}, None), None)])
        assert cat.count() == 1 and cat.con.execute("SELECT count(*) FROM metrics").fetchone() == (0,)


def test_a_catalogue_from_before_the_loop_column_is_migrated_and_read_again(tmp_path):
    """Schema 1 (no loop or knobs columns): opened, read-only included, it gets them, and every row is read
    again at the next index (a locust run's key moves to its own series)."""
    from goodbench.history import catalogue as catmod

    db = str(tmp_path / "old.sqlite")
    d = write_run(str(tmp_path), "r1", 0, {"goodput": 3.0})
    with sqlite3.connect(db) as con:
        con.executescript(catmod._SCHEMA.replace(", loop TEXT, knobs TEXT", "") + "; PRAGMA user_version = 1;")
        con.execute("INSERT INTO runs (path, run_id, identity, sig) VALUES ('r1', 'r1', 'old', 'same')")
    with Catalogue(db, readonly=True) as cat:
        cols = {r[1] for r in cat.con.execute("PRAGMA table_info(runs)")}
        assert {"loop", "knobs"} <= cols and cat.signatures() == {"r1": None}
    with Catalogue(db) as cat:
        res = index_dirs(cat, [str(tmp_path)])
        assert res.indexed == 1 and cat.con.execute("SELECT identity FROM runs").fetchone()[0] == _row(d)["identity"]


def _catalogue_of_three(tmp_path):
    import goodbench as gb

    for i in range(3):
        write_run(str(tmp_path / "res"), f"r{i}", i, {"goodput": 4.0 + i, "ttft_p99": 100.0})
    db, _ = gb.index_history([str(tmp_path / "res")], str(tmp_path / "h.sqlite"))
    return db


def test_a_damaged_catalogue_is_one_line_from_every_command(tmp_path, capsys):
    """Issue 42's probe: a catalogue with damaged pages ended list, trend, html and gate --history in
    tracebacks (only opening it was guarded). Each is now one line naming it, exit 2."""
    from goodbench.cli import main

    db = _catalogue_of_three(tmp_path)
    with open(db, "r+b") as f:  # the first page's header kept, every other page overwritten
        f.seek(4096)
        f.write(b"\xa5" * (os.path.getsize(db) - 4096))
    for argv in (
        ["history", "list", "--history-db", db],
        ["history", "trend", "--metric", "goodput", "--history-db", db],
        ["history", "html", "--history-db", db, "--out", str(tmp_path / "dash")],
        ["history", "index", str(tmp_path / "res"), "--history-db", db],
    ):
        code = main(argv)
        err = capsys.readouterr().err
        assert code == 2 and "Traceback" not in err and err.count("\n") == 1, (argv, err)
        assert "history catalogue" in err and db in err, (argv, err)


def test_a_foreign_sqlite_file_is_refused_and_left_as_it_was(tmp_path, capsys):
    """A --history-db pointing at another program's database had goodbench's tables added to it."""
    from goodbench.cli import main

    other = tmp_path / "app.sqlite"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE users (id INTEGER, name TEXT)")
    con.commit()
    con.close()
    before = other.read_bytes()
    for argv in (
        ["history", "list", "--history-db", str(other)],
        ["history", "index", str(tmp_path), "--history-db", str(other)],
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "is not a goodbench history catalogue" in err and "users" in err, err
    assert other.read_bytes() == before


def test_a_catalogue_read_where_nothing_can_be_written_is_read(tmp_path):
    """A valid catalogue on a read-only mount was called unreadable ("delete it"). Read-only opens
    (list, trend, the dashboard) read it, immutable, without WAL's shared-memory file."""
    import goodbench as gb

    db = _catalogue_of_three(tmp_path)
    ro = Catalogue(db, readonly=True)
    try:
        assert ro.count() == 3
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            ro.con.execute("DELETE FROM runs")
    finally:
        ro.close()
    assert len(gb.history_runs(db=db)) == 3
