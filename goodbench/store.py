"""Results directory: results/<run-id>/{run.json, records.jsonl, summary.json}.

records.jsonl gets one os.write per finished request (O_APPEND, no user-space buffer), so a killed
process loses only requests still in flight, and several worker processes can append to one file."""

from __future__ import annotations

import json
import math
import os
import re
import socket
from datetime import datetime, timezone

from .records import RequestRecord, RunMeta, RunResult


class StoreError(RuntimeError):
    pass


def new_run_id(prefix: str = "run") -> str:
    return f"{prefix}-{datetime.now().strftime('%Y%m%d-%H%M%S')}-{os.getpid() % 10000:04d}"


def _safe(run_id: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9._@=+-]{1,128}", run_id) or run_id in (".", ".."):
        raise StoreError(f"run id {run_id!r} must be 1-128 characters of letters, digits and ._@=+-")
    return run_id


def wall_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class RunStore:
    def __init__(self, result_dir: str, run_id: str):
        self.dir = os.path.join(result_dir, _safe(run_id))
        self.records_path = os.path.join(self.dir, "records.jsonl")
        self._fd: int | None = None

    def start(self, meta: RunMeta) -> None:
        if os.path.exists(os.path.join(self.dir, "run.json")):
            raise StoreError(f"{self.dir} already holds a run; choose another --run-id")
        os.makedirs(self.dir, exist_ok=True)
        meta.started_wall = meta.started_wall or wall_now()
        meta.host = meta.host or socket.gethostname()
        self.write_json("run.json", meta.to_dict())
        self.open_records()

    def open_records(self) -> None:
        self._fd = os.open(self.records_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def append(self, rec: RequestRecord) -> None:
        os.write(self._fd, (json.dumps(rec.to_dict(), separators=(",", ":")) + "\n").encode())

    def append_many(self, recs) -> None:
        if recs:
            os.write(self._fd, "".join(json.dumps(r.to_dict(), separators=(",", ":")) + "\n"
                                       for r in recs).encode())

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def finish(self, meta: RunMeta, summary: dict | None) -> None:
        self.close()
        meta.finished_wall = wall_now()
        self.write_json("run.json", meta.to_dict())
        if summary is not None:
            self.write_json("summary.json", summary)

    def write_json(self, name: str, obj) -> None:
        tmp = os.path.join(self.dir, name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(json_safe(obj), f, indent=2, default=str, allow_nan=False)
            f.write("\n")
        os.replace(tmp, os.path.join(self.dir, name))


def json_safe(obj):
    """Strict JSON: an infinite rate is written as "inf", NaN as null."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


def load(run_dir: str) -> RunResult:
    """Load a run directory. A truncated last line (process killed mid-write) is skipped."""
    meta_path = os.path.join(run_dir, "run.json")
    try:
        with open(meta_path, encoding="utf-8") as f:
            meta = RunMeta.from_dict(json.load(f))
    except FileNotFoundError:
        raise StoreError(f"{run_dir} is not a goodbench run directory (no run.json)") from None
    except (json.JSONDecodeError, TypeError) as e:
        raise StoreError(f"{meta_path} is corrupt: {e}") from None
    records: list[RequestRecord] = []
    rp = os.path.join(run_dir, "records.jsonl")
    if os.path.exists(rp):
        with open(rp, encoding="utf-8") as f:
            lines = f.read().split("\n")
        for i, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                records.append(RequestRecord.from_dict(json.loads(line)))
            except (json.JSONDecodeError, TypeError) as e:
                if i >= len(lines) - 1:
                    break  # torn final write
                raise StoreError(f"{rp}:{i}: corrupt record: {e}") from None
    return RunResult(meta, records)

