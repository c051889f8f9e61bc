"""Run directories into the catalogue: found under results and sweep directories, unchanged ones skipped."""

import json
import os
from pathlib import Path

from histruns import write_run

from goodbench.history.catalogue import Catalogue
from goodbench.history.scan import find_run_dirs, index_dirs, read_run


def test_find_run_dirs(tmp_path):
    a = write_run(str(tmp_path), "a", 0, {"goodput": 1.0})
    cell = write_run(str(tmp_path / "sweep-1" / "cells"), "c1", 0, {"goodput": 1.0})
    os.makedirs(os.path.join(a, "columns"))
    write_run(str(tmp_path / ".hidden"), "h", 0, {"goodput": 1.0})
    assert find_run_dirs([str(tmp_path)]) == sorted([a, cell])
    assert find_run_dirs([a]) == [a]


def test_unchanged_directories_are_skipped_and_changed_ones_reread(tmp_path):
    dirs = [write_run(str(tmp_path), f"r{i}", i, {"goodput": 1.0}) for i in range(3)]
    with Catalogue(str(tmp_path / "h.sqlite")) as cat:
        res = index_dirs(cat, [str(tmp_path)])
        assert (res.indexed, res.unchanged) == (3, 0)
        res = index_dirs(cat, [str(tmp_path)])
        assert (res.indexed, res.unchanged) == (0, 3)
        p = Path(dirs[0], "summary.json")
        p.write_text(json.dumps(json.loads(p.read_text()) | {"goodput": 2.0}, indent=1))  # another size
        res = index_dirs(cat, [str(tmp_path)])
        assert (res.indexed, res.unchanged) == (1, 2)
        assert cat.con.execute("SELECT max(value) FROM metrics WHERE name = 'goodput'").fetchone() == (2.0,)
        assert index_dirs(cat, [str(tmp_path)], force=True).indexed == 3


def test_unfinished_corrupt_and_summaryless_runs(tmp_path):
    ok = write_run(str(tmp_path), "ok", 0, {"goodput": 1.0})
    running = write_run(str(tmp_path), "running", 0, {"goodput": 1.0})
    p = Path(running, "run.json")
    p.write_text(json.dumps(json.loads(p.read_text()) | {"finished_wall": None}))
    corrupt = write_run(str(tmp_path), "corrupt", 0, {"goodput": 1.0})
    Path(corrupt, "run.json").write_text("{")
    bare = write_run(str(tmp_path), "bare", 0, {"goodput": 1.0})
    os.remove(os.path.join(bare, "summary.json"))
    assert read_run(running)[0] is None and "not finished" in read_run(running)[1]
    assert read_run(corrupt)[0] is None and "unreadable" in read_run(corrupt)[1]
    odd = write_run(str(tmp_path / "odd"), "odd", 0, {"goodput": 1.0})
    p = Path(odd, "run.json")
    p.write_text(json.dumps(json.loads(p.read_text()) | {"workload": "a string", "target": 3}))
    assert read_run(odd) == (None, read_run(odd)[1]) and "unexpected shape" in read_run(odd)[1]
    row, why = read_run(bare, summarize=lambda d: {"goodput": 9.0})
    assert row["metrics"] == {"goodput": 9.0} and not why

    def broken(d):
        raise ValueError("bad records")

    row, why = read_run(bare, summarize=broken)
    assert row["metrics"] == {} and "without metrics" in why and "bad records" in why
    with Catalogue(str(tmp_path / "h.sqlite")) as cat:
        res = index_dirs(cat, [str(tmp_path)], summarize=broken)
        assert res.indexed == 2 and len(res.skipped) == 4  # ok and bare indexed; bare's note, running, corrupt, odd
        assert read_run(ok)[0]["metrics"]["goodput"] == 1.0
