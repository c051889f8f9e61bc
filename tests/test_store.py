"""Results directories on disk (store): run ids, atomic JSON, torn and corrupt records, the sidecar."""

import json
import os
import re

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


@pytest.mark.parametrize(
    "field,value,says",
    [
        ("sent_at", float("nan"), "sent_at is NaN"),
        ("sent_at", float("inf"), "sent_at is Infinity"),
        ("sent_at", "12.5", 'sent_at is "12.5"'),
        ("output_tokens", 2.5, "output_tokens is 2.5"),
        ("status", 5, "status is 5"),
        ("chunk_times", ["a", "b"], "chunk_times must be"),
        ("chunk_times", [{}, {}], "chunk_times must be"),
        ("chunk_times", [None, None], "chunk_times must be"),
        ("chunk_times", [0.1, float("inf")], "chunk_times must be"),
        ("chunk_tokens", ["1"], "chunk_times must be finite numbers and chunk_tokens integers"),
    ],
)
def test_a_record_value_of_the_wrong_type_is_one_clear_error_even_on_the_last_line(tmp_path, field, value, says):
    """Issue 42: such values were tracebacks in calibrate, report, gate and export (a NaN sent_at hung
    calibrate); the one check where records are read names the file, the line and the value."""
    st = started(tmp_path)
    st.append_many([rec(0, chunks=(0.1,)), rec(1, chunks=(0.2,))])
    st.close()
    bad = rec(1, chunks=(0.2,)).to_dict() | {field: value}
    with open(st.records_path, "a") as f:
        f.write(json.dumps(bad) + "\n")  # last, so not to be taken for a torn write
    with pytest.raises(RunDirError, match=f"records.jsonl:3: corrupt record: {re.escape(says)}"):
        load(st.dir)


def test_a_run_json_block_of_the_wrong_type_is_one_clear_error(tmp_path):
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "r", "server": [1, 2]}))
    with pytest.raises(RunDirError, match="server is a JSON list, not an object"):
        load_meta(str(tmp_path))


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


def _fail_writes(monkeypatch, err=28, after=0, partial=0):
    """os.write in the store fails with errno err (28: ENOSPC) after `after` successful writes; with
    partial > 0 the failing call first writes that many bytes (a disk that fills mid-line)."""
    import errno as errno_mod

    from goodbench import store as store_mod

    real, calls = os.write, {"n": 0}

    def write(fd, data):
        calls["n"] += 1
        if calls["n"] <= after:
            return real(fd, data)
        if partial and calls["n"] == after + 1:
            return real(fd, data[:partial])
        raise OSError(err, os.strerror(err) if err != errno_mod.EROFS else "Read-only file system")

    monkeypatch.setattr(store_mod.os, "write", write)
    return calls


@pytest.mark.parametrize("partial", [0, 17])
def test_a_full_disk_ends_the_records_at_once_without_a_torn_line(tmp_path, monkeypatch, partial):
    st = started(tmp_path)
    st.append(rec(0, chunks=(0.1,)))
    calls = _fail_writes(monkeypatch, after=0, partial=partial)
    with pytest.raises(RunDirError, match="cannot write .*records.jsonl: No space left on device; the run stopped"):
        st.append(rec(1, chunks=(0.2,)))
    size = os.path.getsize(st.records_path)
    monkeypatch.undo()  # space again: still, every later record fails at once and writes nothing
    with pytest.raises(RunDirError):
        st.append(rec(2, chunks=(0.3,)))
    assert os.path.getsize(st.records_path) == size and calls["n"] >= 1
    assert [r.id for r in load(st.dir).records] == ["r0"]  # no torn line: the partial write was cut off
    with open(st.records_path) as f:
        assert f.read().endswith("}\n")


def test_a_json_write_that_fails_leaves_no_temporary_file(tmp_path, monkeypatch):
    st = started(tmp_path)

    def full(src, dst):  # the temporary file is written; putting it in place fails
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(OSError):
        st.write_json("summary.json", {"x": 1})
    assert sorted(os.listdir(st.dir)) == ["records.jsonl", "run.json"]


def test_a_sidecar_that_cannot_be_written_leaves_nothing_behind(tmp_path, monkeypatch):
    import numpy as np

    from goodbench.store import load_arrays

    st = started(tmp_path)
    st.append_many([rec(i, chunks=(0.1 * i,)) for i in range(1, 4)])
    st.close()

    def full(*a, **kw):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "save", full)
    assert len(load_arrays(st.dir).cols) == 3  # summarised all the same, just not cached
    assert sorted(os.listdir(st.dir)) == ["records.jsonl", "run.json"]


def test_a_read_only_run_directory_is_one_clear_error(tmp_path, monkeypatch):
    import builtins
    import errno

    (tmp_path / "ro").mkdir()
    ro_dir = str(tmp_path / "ro")
    real_os_open, real_open = os.open, builtins.open

    def denied(path):
        if str(path).startswith(ro_dir):
            raise OSError(errno.EROFS, "Read-only file system", str(path))

    def os_open(path, flags, *a, **kw):
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            denied(path)
        return real_os_open(path, flags, *a, **kw)

    def open_(path, mode="r", *a, **kw):
        if any(c in mode for c in "wax+"):
            denied(path)
        return real_open(path, mode, *a, **kw)

    monkeypatch.setattr(os, "open", os_open)
    monkeypatch.setattr(builtins, "open", open_)
    with pytest.raises(RunDirError, match="cannot write .*: Read-only file system"):
        RunStore(str(tmp_path), "ro").start(RunMeta("ro"))


def _claim(result_dir, run_id, barrier, out):
    try:
        barrier.wait(5)
        st = RunStore(result_dir, run_id)
        st.start(RunMeta(run_id))
        st.append(rec(0, chunks=(0.1,)))
        out.put("won")
    except RunDirError:
        out.put("refused")
    except Exception as e:  # noqa: BLE001
        out.put(f"crashed: {type(e).__name__}: {e}")


def test_two_processes_opening_one_run_id_exactly_one_wins(tmp_path):
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    for i in range(25):
        barrier, out = ctx.Barrier(2), ctx.Queue()
        procs = [ctx.Process(target=_claim, args=(str(tmp_path), f"race{i}", barrier, out)) for _ in range(2)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(10)
        assert sorted(out.get(timeout=5) for _ in procs) == ["refused", "won"]
        assert len(load(str(tmp_path / f"race{i}")).records) == 1


def _read_only(monkeypatch, where: str):
    """Files under `where` cannot be created (a read-only file system; root ignores chmod)."""
    import errno
    import tempfile

    real = tempfile.mkstemp

    def mkstemp(*a, dir=None, **kw):
        if str(dir).startswith(where):
            raise OSError(errno.EROFS, "Read-only file system", dir)
        return real(*a, dir=dir, **kw)

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)


def test_calibrate_out_in_a_read_only_directory_is_said_before_the_fit(tmp_path, monkeypatch):
    """Issue 42: `calibrate --out` into a read-only directory was a traceback after the whole fit."""
    import goodbench.api.calibration as calibration

    def fit(*a):
        raise AssertionError("fitted although the profile could not be written")

    monkeypatch.setattr(calibration, "calibrate_runs", fit)
    _read_only(monkeypatch, str(tmp_path))
    with pytest.raises(RunDirError, match="cannot write .*p.toml: Read-only file system"):
        calibration.calibrate([str(tmp_path)], out=str(tmp_path / "p.toml"))
    assert os.listdir(tmp_path) == []


def test_history_html_out_that_cannot_be_written_is_one_clear_error_and_leaves_no_tmp(tmp_path, monkeypatch):
    """Issue 42: `history html --out` on a read-only directory was a traceback."""
    from goodbench.report.dashboard import write_dashboard

    _read_only(monkeypatch, str(tmp_path / "ro"))
    (tmp_path / "ro").mkdir()
    with pytest.raises(RunDirError, match="cannot write .*index.html: Read-only file system"):
        write_dashboard(str(tmp_path / "ro"), [], {})

    def full(src, dst):  # written, but putting it in place fails: the temporary file goes
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(RunDirError, match="No space left on device"):
        write_dashboard(str(tmp_path / "d"), [], {})
    assert os.listdir(tmp_path / "d") == [] and os.listdir(tmp_path / "ro") == []


@pytest.mark.skipif(not hasattr(os, "fchmod"), reason="POSIX modes")
def test_json_files_of_a_run_have_the_mode_its_records_have(tmp_path):
    """Issue 42's probe: run.json and summary.json came out 0600 (the temporary file's) beside a 0644
    records.jsonl, so a teammate could read the records and not the run they belong to."""
    import stat

    import goodbench as gb

    r = gb.simulate(gb.load_workload(None, dataset_name="random", num_prompts=3), result_dir=str(tmp_path))
    mode = {
        n: stat.S_IMODE(os.stat(os.path.join(r.dir, n)).st_mode) for n in ("records.jsonl", "run.json", "summary.json")
    }
    assert len(set(mode.values())) == 1, mode
