"""Results directory: results/<run-id>/{run.json, records.jsonl, summary.json}.

records.jsonl gets whole lines in one os.write per batch (O_APPEND, no user-space buffer): the runner
writes finished requests within a second, in slices off the reads' path, so a killed process loses only
requests in flight or finished in its last second, and several worker processes can append to one file.
One writer per run directory: run.json is created exclusively (O_EXCL), so two processes opening the
same run id cannot both succeed, and every temporary file is created exclusively and removed when a
write fails. A write that fails (a full disk: ENOSPC, EDQUOT, EFBIG; a read-only one: EROFS) raises
RunDirError at once and leaves no torn line behind; the caller ends the run."""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import socket
import tempfile
from array import array
from datetime import datetime, timezone

from .columnar import RecordArrays, RunArrays
from .errors import RunDirError
from .records import RequestRecord, RunMeta, RunResult

COLUMNS_DIR = "columns"
COLUMNS_VERSION = 10  # 2: retries; 3: answers, reasoning, local counts, tokens per chunk; 4: priority; 5: sessions;
# 6: items, agent jobs; 7: written only from records whose values were checked (_check_record); 8: cached, replica; 9: adapter; 10: media


def new_run_id(prefix: str = "run") -> str:
    return f"{prefix}-{datetime.now().strftime('%Y%m%d-%H%M%S')}-{os.getpid() % 10000:04d}"


def _safe(run_id: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9._@=+-]{1,128}", run_id) or run_id in (".", ".."):
        raise RunDirError(f"run id {run_id!r} must be 1-128 characters of letters, digits and ._@=+-")
    return run_id


def wall_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def records_lost(path: str, errno: int | None, why: str) -> RunDirError:
    """The error that ends a run whose records.jsonl cannot be written (errno kept for --workers' parent)."""
    e = RunDirError(f"cannot write {path}: {why}; the run stopped there (every record written before is kept)")
    e.errno = errno
    return e


class RunTaken(RunDirError):
    """The run directory already holds a run (RunDir.open tries the next automatic name)."""


def _cannot(what: str, path: str, e: OSError) -> RunDirError:
    return RunDirError(f"cannot {what} {path}: {e.strerror or e}")


class RunStore:
    def __init__(self, result_dir: str, run_id: str):
        self.dir = os.path.join(result_dir, _safe(run_id))
        self.records_path = os.path.join(self.dir, "records.jsonl")
        self._fd: int | None = None
        self.write_error: RunDirError | None = None  # set when a record could not be written

    @classmethod
    def at(cls, run_dir: str) -> RunStore:
        """The store of an existing run directory (worker processes append to it)."""
        run_dir = os.path.normpath(run_dir)
        return cls(os.path.dirname(run_dir), os.path.basename(run_dir))

    def start(self, meta: RunMeta) -> None:
        """Create run.json exclusively (RunTaken when the directory holds a run), then records.jsonl."""
        try:
            os.makedirs(self.dir, exist_ok=True)
        except OSError as e:
            raise _cannot("create the run directory", self.dir, e) from None
        meta.started_wall = meta.started_wall or wall_now()
        meta.host = meta.host or socket.gethostname()
        path = os.path.join(self.dir, "run.json")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            raise RunTaken(f"{self.dir} already holds a run; choose another --run-id") from None
        except OSError as e:
            raise _cannot("write", path, e) from None
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(_json_text(meta.to_dict()))
            self._fd = os.open(self.records_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_EXCL, 0o644)
        except OSError as e:
            with contextlib.suppress(OSError):
                os.unlink(path)
            if isinstance(e, FileExistsError):
                raise RunTaken(f"{self.dir} already holds records.jsonl; choose another --run-id") from None
            raise _cannot("write", self.dir, e) from None

    def open_records(self) -> None:
        """Append to the records of a run already started (worker processes)."""
        try:
            self._fd = os.open(self.records_path, os.O_WRONLY | os.O_APPEND)
        except OSError as e:
            raise _cannot("open", self.records_path, e) from None

    def append(self, rec: RequestRecord) -> None:
        self._write((rec.to_json() + "\n").encode())

    def append_many(self, recs) -> None:
        if recs:
            self._write("".join(r.to_json() + "\n" for r in recs).encode())

    def write_lines(self, lines: list[str]) -> None:
        """Records already serialised (RequestRecord.to_json), one write."""
        if lines:
            self._write(("\n".join(lines) + "\n").encode())

    def _write(self, data: bytes) -> None:
        """One write of whole lines; after a failure every later one fails too (the fd is given up)."""
        try:
            n = os.write(self._fd, data)
        except OSError as e:
            raise self._failed(e, 0, len(data)) from None
        if n != len(data):
            try:  # a short write: the disk filled up (or a file-size limit was reached) in the middle
                os.write(self._fd, data[n:])
            except OSError as e:
                raise self._failed(e, n, len(data)) from None

    def _failed(self, e: OSError, written: int, size: int) -> RunDirError:
        """Give up on records.jsonl: cut off a torn line, close it, remember why (the run ends)."""
        if self.write_error is None:
            if written and self._fd is not None:
                with contextlib.suppress(OSError):
                    os.ftruncate(self._fd, os.lseek(self._fd, 0, os.SEEK_END) - written)
            self.write_error = records_lost(self.records_path, e.errno, e.strerror or str(e))
            self.close()
            self._fd = -1  # every later write fails at once (EBADF) and lands here
        return self.write_error

    def close(self) -> None:
        if self._fd is not None and self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def finish(self, meta: RunMeta, summary: dict | None) -> None:
        self.close()
        meta.finished_wall = wall_now()
        self.write_json("run.json", meta.to_dict())
        if summary is not None:
            self.write_json("summary.json", summary)

    def write_json(self, name: str, obj) -> None:
        """Atomically: an exclusive temporary file, then a rename; the temporary file never stays."""
        write_atomic(os.path.join(self.dir, name), _json_text(obj))


def _json_text(obj) -> str:
    return json.dumps(json_safe(obj), indent=2, default=str, allow_nan=False) + "\n"


def _umask_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


_CREATE_MODE = _umask_mode()  # read once at import: os.umask is process-wide, not for every write


def write_atomic(path: str, text: str) -> None:
    """text to path through an exclusively created temporary file beside it, renamed over path; on any
    failure the temporary file is removed and the OSError raised."""
    fd, tmp = tempfile.mkstemp(
        dir=os.path.dirname(path) or ".", prefix="." + os.path.basename(path) + ".", suffix=".tmp"
    )
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            if hasattr(os, "fchmod"):  # mkstemp makes 0600: as open() would make it, beside records.jsonl
                os.fchmod(f.fileno(), _CREATE_MODE)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def check_writable(path: str) -> None:
    """RunDirError now, before any work, when a file the user named (--out) cannot be made beside path
    (a read-only or missing directory): a temporary file is created there and removed."""
    try:
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=".goodbench-", suffix=".tmp")
        os.close(fd)
        os.unlink(tmp)
    except OSError as e:
        raise _cannot("write", path, e) from None


def write_output(path: str, text: str) -> None:
    """A file the user named (--out) written through write_atomic (no temporary file left behind);
    RunDirError naming it when it cannot be written."""
    try:
        write_atomic(path, text)
    except OSError as e:
        raise _cannot("write", path, e) from None


def json_safe(obj):
    """Strict JSON: an infinite rate is written as "inf", NaN as null."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


_TIMES = ("scheduled_at", "sent_at", "first_token_at", "finished_at", "first_answer_at", "delay_s")
_INTS = ("output_tokens", "prompt_tokens", "prompt_tokens_server", "http_status", "retries", "reasoning_tokens")
_INTS += ("output_tokens_local", "priority", "turn", "session_turns", "items", "node", "depth", "cached_tokens")
_INTS += ("images", "image_pixels", "media_bytes", "audio_ms")
_TEXTS = ("id", "cls", "output_tokens_source", "status", "error", "origin", "session", "job", "replica", "adapter")
_META_DICTS = ("target", "engine", "workload", "slo", "gate", "gpus", "prices", "engine_stats", "client_lag")
_META_DICTS += ("labels", "server", "provenance")


class _BadValue(ValueError):
    """A record or run.json value of the wrong type or not finite (never taken for a torn line)."""


def _check_record(d: dict) -> None:
    """The one check of a record's values as read, so that every command (calibrate, report, gate,
    export) meets a clear RunDirError instead of a traceback or a hang: times are finite numbers,
    counts integers, texts strings (each may be null); chunk times finite numbers, chunk tokens ints."""
    for k in _TIMES:
        v = d.get(k)
        if v is not None and (type(v) not in (int, float) or not math.isfinite(v)):
            raise _BadValue(f"{k} is {json.dumps(v)[:40]}, not a finite number of seconds")
    for k in _INTS + ("parents",):
        v = d.get(k)
        vs = v if k == "parents" and isinstance(v, list) else [v]
        if v is not None and any(type(x) is not int for x in vs):
            raise _BadValue(f"{k} is {json.dumps(v)[:40]}, not an integer")
    for k in _TEXTS:
        if d.get(k) is not None and not isinstance(d[k], str):
            raise _BadValue(f"{k} is {json.dumps(d[k])[:40]}, not a string")
    times, toks = d.get("chunk_times") or [], d.get("chunk_tokens") or []
    try:  # C speed over millions of chunks: fsum takes only numbers, an int array only ints
        ok = isinstance(times, list) and math.isfinite(math.fsum(times)) and isinstance(toks, list)
        ok = ok and len(array("q", toks)) >= 0
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok:
        raise _BadValue("chunk_times must be finite numbers and chunk_tokens integers")


def load_meta(run_dir: str) -> RunMeta:
    meta_path = os.path.join(run_dir, "run.json")
    try:
        with open(meta_path, encoding="utf-8") as f:
            d = json.load(f)
        if not isinstance(d, dict):
            raise _BadValue(f"a JSON {type(d).__name__}, not an object")
        for k in _META_DICTS:
            if d.get(k) is not None and not isinstance(d[k], dict):
                raise _BadValue(f"{k} is a JSON {type(d[k]).__name__}, not an object")
        return RunMeta.from_dict(d)
    except FileNotFoundError:
        raise RunDirError(f"{run_dir} is not a goodbench run directory (no run.json)") from None
    except (ValueError, TypeError, AttributeError) as e:
        raise RunDirError(f"{meta_path} is corrupt: {str(e)[:200]}") from None
    except OSError as e:
        raise _cannot("read", meta_path, e) from None


def load(run_dir: str) -> RunResult:
    """Load a run directory. A truncated last line (process killed mid-write) is skipped; any other line
    that is not a record is a RunDirError naming it."""
    meta = load_meta(run_dir)
    records: list[RequestRecord] = []
    rp = os.path.join(run_dir, "records.jsonl")
    try:
        with open(rp, "rb") as f:
            lines = f.read().split(b"\n")
    except FileNotFoundError:
        return RunResult(meta, records)
    except OSError as e:
        raise _cannot("read", rp, e) from None
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line.decode("utf-8"))
            if not isinstance(d, dict):
                raise TypeError(f"a JSON {type(d).__name__}, not an object")
            _check_record(d)
            records.append(RequestRecord.from_dict(d))
        except _BadValue as e:
            raise RunDirError(f"{rp}:{i}: corrupt record: {e}") from None
        except (ValueError, TypeError) as e:
            if i >= len(lines) - 1 and not isinstance(e, UnicodeDecodeError):
                break  # torn final write
            raise RunDirError(f"{rp}:{i}: corrupt record: {str(e)[:200]}") from None
    return RunResult(meta, records)


def error_samples(run_dir: str, limit: int = 3, scan: int = 2000) -> tuple[str, ...]:
    """The first `limit` distinct error texts in records.jsonl (looking at no more than `scan` failed
    records), for the summary's failure hazards: columns do not keep error texts."""
    out: list[str] = []
    seen = 0
    try:
        with open(os.path.join(run_dir, "records.jsonl"), encoding="utf-8", errors="replace") as f:
            for line in f:
                if '"error":"' not in line and '"error": "' not in line:
                    continue
                try:
                    d = json.loads(line)
                except ValueError:
                    continue
                err = d.get("error") if isinstance(d, dict) else None
                seen += 1
                if isinstance(err, str) and err and err not in out:
                    out.append(err)
                if len(out) >= limit or seen >= scan:
                    break
    except OSError:
        pass
    return tuple(out)


def _records_bytes(run_dir: str) -> int:
    try:
        return os.path.getsize(os.path.join(run_dir, "records.jsonl"))
    except OSError:
        return 0


def save_arrays(run_dir: str, cols: RecordArrays) -> str:
    """Write the columnar sidecar columns/ (one .npy per array, no pickles), tagged with the size of
    records.jsonl it mirrors; records.jsonl stays the source of truth."""
    import shutil

    import numpy as np

    final = os.path.join(run_dir, COLUMNS_DIR)
    tmp = tempfile.mkdtemp(dir=run_dir, prefix="." + COLUMNS_DIR + ".", suffix=".tmp")  # exclusive
    try:
        for name in RecordArrays.ARRAYS:
            np.save(os.path.join(tmp, name + ".npy"), getattr(cols, name), allow_pickle=False)
        with open(os.path.join(tmp, "columns.json"), "w", encoding="utf-8") as f:
            json.dump(
                {
                    "version": COLUMNS_VERSION,
                    "requests": len(cols),
                    **{k: getattr(cols, k) for k in RecordArrays.NAMES},
                    "records_bytes": _records_bytes(run_dir),
                },
                f,
            )
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)  # a full disk leaves nothing half-written behind
        raise
    return final


def _read_arrays(run_dir: str) -> RecordArrays | None:
    import numpy as np

    d = os.path.join(run_dir, COLUMNS_DIR)
    try:
        with open(os.path.join(d, "columns.json"), encoding="utf-8") as f:
            info = json.load(f)
        if info.get("version") != COLUMNS_VERSION or info.get("records_bytes") != _records_bytes(run_dir):
            return None  # stale: records were appended or rewritten since
        arrays = {name: np.load(os.path.join(d, name + ".npy"), allow_pickle=False) for name in RecordArrays.ARRAYS}
    except (OSError, ValueError, KeyError):
        return None
    return RecordArrays(**{k: list(info[k]) for k in RecordArrays.NAMES}, **arrays)


def load_arrays(run_dir: str, write_sidecar: bool = True) -> RunArrays:
    """A run as arrays: from the columns/ sidecar when it matches records.jsonl (seconds for 100M chunk
    times), else parsed from records.jsonl and the sidecar (re)written for next time."""
    meta = load_meta(run_dir)
    cols = _read_arrays(run_dir)
    if cols is None:
        try:
            cols = RecordArrays.from_records(load(run_dir).records)
        except (ValueError, TypeError, OverflowError, KeyError, AttributeError) as e:
            raise RunDirError(f"{run_dir}/records.jsonl holds a record with a value of the wrong type: {e}") from None
        if write_sidecar:
            try:
                save_arrays(run_dir, cols)
            except OSError:
                pass  # a read-only results directory still summarises, just slower next time
    return RunArrays(meta, cols)


def count_records(run_dir: str) -> int:
    """Whole lines in records.jsonl (a torn last line does not count)."""
    try:
        with open(os.path.join(run_dir, "records.jsonl"), "rb") as f:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 24), b""))
    except FileNotFoundError:
        return 0


def load_summary(run_dir: str) -> dict | None:
    """summary.json as written at run end; None when the run has none (unfinished, imported)."""
    try:
        with open(os.path.join(run_dir, "summary.json"), encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except ValueError as e:
        raise RunDirError(f"{run_dir}/summary.json is corrupt: {e}") from None


def incomplete(run_dir: str) -> str | None:
    """Why a run directory does not hold a whole run (None when it does): it was killed before its
    summary, interrupted, or its records stop short of what its schedule planned."""
    meta = load_meta(run_dir)
    if meta.mode == "imported":
        return None
    if meta.finished_wall is None or not os.path.exists(os.path.join(run_dir, "summary.json")):
        return (
            f"the run did not finish (no summary; {count_records(run_dir)} records): it was killed or is still running"
        )
    if meta.interrupted:
        return f"the run was interrupted (Ctrl-C) with {count_records(run_dir)} records"
    if meta.planned_requests and count_records(run_dir) < meta.planned_requests:
        return f"records stop early: {count_records(run_dir)} of {meta.planned_requests} planned requests"
    return None


def read_jsonl(path: str, limit: int = 2_000_000) -> list[dict]:
    """The JSON objects of a JSON-lines side file (server metrics, step traces); torn lines skipped."""
    rows = []
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for i, line in enumerate(f):
                if i >= limit:
                    break
                try:
                    obj = json.loads(line)
                except ValueError:
                    continue  # a torn last line
                if isinstance(obj, dict):
                    rows.append(obj)
    except OSError:
        return []
    return rows


def load_gpu_telemetry(run_dir: str) -> list[dict]:
    """gpu_telemetry.jsonl rows ({"t", "source", "metrics"}: runner/telemetry.py), [] when absent."""
    return [r for r in read_jsonl(os.path.join(run_dir, "gpu_telemetry.jsonl")) if isinstance(r.get("metrics"), dict)]


def load_server_metrics(run_dir: str) -> list[dict]:
    """server_metrics.jsonl rows ({"t": run-clock seconds, "metrics": {name: value}}), [] when absent."""
    return [r for r in read_jsonl(os.path.join(run_dir, "server_metrics.jsonl")) if isinstance(r.get("metrics"), dict)]
