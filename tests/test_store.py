"""Results directories on disk (store): run ids, atomic JSON, torn and corrupt records, the sidecar."""

import json
import os

import pytest
from recs import rec

from goodbench.errors import RunDirError
from goodbench.records import RunMeta
from goodbench.store import RunStore, json_safe, load, load_meta


def started(tmp_path, run_id="r"):
    st = RunStore(str(tmp_path), run_id)
    st.start(RunMeta(run_id))
    return st


@pytest.mark.parametrize("bad", ["../up", "a/b", ".", "..", "", "x" * 129, "sp ace"])
def test_run_ids_cannot_escape_the_result_dir(tmp_path, bad):
    with pytest.raises(RunDirError):
        RunStore(str(tmp_path), bad)


def test_start_writes_run_json_and_refuses_a_used_directory(tmp_path):
    st = started(tmp_path)
    meta = load_meta(st.dir)
    assert meta.run_id == "r" and meta.started_wall and meta.host and meta.goodbench_version
    st.close()
    with pytest.raises(RunDirError, match="already holds a run"):
        started(tmp_path)


def test_a_result_dir_that_is_a_file_is_a_clear_error(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(RunDirError, match="cannot create"):
        RunStore(str(tmp_path / "f"), "r").start(RunMeta("r"))


def test_a_torn_last_line_is_skipped_but_a_corrupt_middle_line_is_an_error(tmp_path):
    st = started(tmp_path)
    st.append_many([rec(0, chunks=(0.1,)), rec(1, chunks=(0.2,))])
    st.close()
    with open(st.records_path, "a") as f:
        f.write('{"id": "r2", "cls"')  # killed mid-write
    assert [r.id for r in load(st.dir).records] == ["r0", "r1"]
    with open(st.records_path, "w") as f:
        f.write('{"id": broken}\n' + json.dumps(rec(1).to_dict()) + "\n")
    with pytest.raises(RunDirError, match="records.jsonl:1"):
        load(st.dir)


def test_missing_and_corrupt_run_json(tmp_path):
    with pytest.raises(RunDirError, match="not a goodbench run directory"):
        load_meta(str(tmp_path))
    (tmp_path / "run.json").write_text("{nope")
    with pytest.raises(RunDirError, match="corrupt"):
        load_meta(str(tmp_path))


def test_finish_completes_run_json_and_writes_strict_json(tmp_path):
    st = started(tmp_path)
    meta = load_meta(st.dir)
    st.finish(meta, {"rate": float("inf"), "x": float("nan")})
    assert load_meta(st.dir).finished_wall
    assert json.loads((tmp_path / "r" / "summary.json").read_text()) == {"rate": "inf", "x": None}
    assert not any(n.endswith(".tmp") for n in os.listdir(st.dir))


def test_json_safe():
    assert json_safe({"a": [float("-inf"), 1.5], "b": (float("nan"),)}) == {"a": ["-inf", 1.5], "b": [None]}


def test_store_at_an_existing_directory(tmp_path):
    st = started(tmp_path)
    again = RunStore.at(st.dir + os.sep)
    assert again.dir == st.dir and again.records_path == st.records_path
