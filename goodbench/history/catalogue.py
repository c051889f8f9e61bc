"""The run catalogue: one SQLite file (the standard library's) indexing run directories by identity, with
their metrics, so a series over thousands of runs is one indexed query. The directories stay the source
of truth: every row is rebuilt from run.json and summary.json (`goodbench history index DIR`), so
deleting the file loses nothing.

Concurrent writers (sweep cells finishing in parallel processes, two runs ending together, a locust
master) are safe: WAL journal, a busy timeout, one transaction per write, and upserts keyed by the run
directory's path, so indexing a directory twice changes nothing. SQLite rather than DuckDB: it ships
with Python, and DuckDB lets only one process open a database for writing at a time."""

from __future__ import annotations

import json
import os
import sqlite3
import time
import urllib.parse

DB_ENV = "GOODBENCH_HISTORY_DB"  # a catalogue path for every run and history command
OFF_ENV = "GOODBENCH_HISTORY"  # 0 / off / false / no: runs do not index themselves
SCHEMA_VERSION = 2  # 2: the loop and knobs columns (identity.SERIES_FIELDS)
BUSY_TIMEOUT_S = 30.0

RUN_COLUMNS = (
    "run_id started finished mode identity workload workload_key workload_hash model slo server gpu engine server_version "
    "endpoint base_url label goodbench_version commit_sha branch build build_url valid interrupted loop knobs"
).split()
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS runs (
  id INTEGER PRIMARY KEY,
  path TEXT NOT NULL UNIQUE,
  {", ".join(f"{c} {'INTEGER' if c in ('valid', 'interrupted') else 'TEXT'}" for c in RUN_COLUMNS)},
  labels TEXT NOT NULL DEFAULT '{{}}',
  sig TEXT,
  indexed_at REAL
);
CREATE INDEX IF NOT EXISTS runs_identity ON runs(identity, started);
CREATE INDEX IF NOT EXISTS runs_started ON runs(started);
CREATE TABLE IF NOT EXISTS metrics (
  run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  value REAL NOT NULL,
  PRIMARY KEY (run, name)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS labels (
  run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY (run, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS labels_kv ON labels(key, value);
"""


def enabled(env=None) -> bool:
    """Whether finished runs index themselves ($GOODBENCH_HISTORY=0 turns it off)."""
    env = os.environ if env is None else env
    return env.get(OFF_ENV, "1").strip().lower() not in ("0", "off", "false", "no")


def default_path(env=None) -> str:
    """$GOODBENCH_HISTORY_DB, else the user's: $XDG_DATA_HOME/goodbench/history.sqlite (by default
    ~/.local/share/goodbench/history.sqlite). One catalogue for every results directory, and nothing
    added to them: scripts that list a results directory see only runs."""
    env = os.environ if env is None else env
    if env.get(DB_ENV):
        return env[DB_ENV]
    data = env.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(data, "goodbench", "history.sqlite")


OWN_TABLES = frozenset(("runs", "metrics", "labels"))


class ForeignFile(sqlite3.DatabaseError):
    """An SQLite file that is not a goodbench catalogue (its tables are someone else's), or one written by
    a newer goodbench: never altered."""


def _connect(path: str, readonly: bool) -> sqlite3.Connection:
    """Read-only: a catalogue on a read-only mount opens (immutable: WAL's shared-memory file cannot be
    made there); writable: as always. Either way with the busy timeout and foreign keys on."""
    if not readonly:
        con = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    else:
        uri = "file:" + urllib.parse.quote(path)
        con = sqlite3.connect(uri + "?mode=ro", uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        try:
            con.execute("PRAGMA user_version").fetchone()
        except sqlite3.OperationalError:  # "unable to open database file": no -shm beside it on this mount
            con.close()
            con = sqlite3.connect(uri + "?immutable=1", uri=True, isolation_level=None)
    con.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    con.execute("PRAGMA foreign_keys = ON")
    return con


def _check_schema(con: sqlite3.Connection, version: int) -> None:
    if version > SCHEMA_VERSION:
        raise ForeignFile(f"written by a newer goodbench (schema {version}; this one reads {SCHEMA_VERSION})")
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    others = {t for t in tables if not t.startswith("sqlite_")} - OWN_TABLES  # sqlite_stat1 & co. are SQLite's
    if others and (version == 0 or not tables & OWN_TABLES):  # ours are versioned, or hold only our tables
        raise ForeignFile(f"an SQLite file of something else (tables {', '.join(sorted(others)[:5])})")


class Catalogue:
    """An open catalogue. Paths are stored relative to the catalogue's directory when the run lies
    under it (so a results directory moved with its catalogue still resolves), else absolute."""

    def __init__(self, path: str, readonly: bool = False):
        self.path = os.path.abspath(path)
        self.root = os.path.dirname(self.path)
        if readonly and not os.path.exists(self.path):
            raise FileNotFoundError(self.path)
        if not readonly:
            os.makedirs(self.root, exist_ok=True)
        self.con = _connect(self.path, readonly)
        version = self.con.execute("PRAGMA user_version").fetchone()[0]
        _check_schema(self.con, version)
        if readonly and version not in (0, SCHEMA_VERSION):  # an older catalogue, read: migrated first
            self.con.close()
            self.con, readonly = _connect(self.path, False), False
        if not readonly:
            self._migrate()  # an older catalogue gets its new columns (empty until indexed again)

    def _migrate(self) -> None:
        version = self.con.execute("PRAGMA user_version").fetchone()[0]
        if version == SCHEMA_VERSION:
            return
        self._wal()
        with self.transaction():
            if version == 1:  # the new columns, and every row read again at the next index (its key may move)
                have = {r[1] for r in self.con.execute("PRAGMA table_info(runs)")}
                for col in ("loop", "knobs"):
                    if col not in have:
                        self.con.execute(f"ALTER TABLE runs ADD COLUMN {col} TEXT")
                self.con.execute("UPDATE runs SET sig = NULL")
            for stmt in _SCHEMA.split(";"):
                if stmt.strip():
                    self.con.execute(stmt)
            self.con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def _wal(self) -> None:
        """Switch the file to WAL (persistent, so once is enough). The switch needs an exclusive lock
        and SQLite does not always wait on the busy timeout for it: eight processes creating one
        catalogue together saw "database is locked" here. Retry until the busy timeout instead."""
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        delay = 0.005
        while True:
            try:
                if self.con.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                    self.con.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) and "busy" not in str(e) or time.monotonic() > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.2)

    def transaction(self):
        return _Tx(self.con)

    def close(self) -> None:
        self.con.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def key(self, run_dir: str) -> str:
        p = os.path.abspath(run_dir)
        rel = os.path.relpath(p, self.root)
        return p if rel.startswith("..") or os.path.isabs(rel) else rel

    def resolve(self, key: str) -> str:
        """A stored path back to a directory path."""
        return key if os.path.isabs(key) else os.path.join(self.root, key)

    def upsert(self, rows: list[tuple[str, dict, str | None]]) -> None:
        """(run_dir, identity.run_row(...), file signature) for each run, in one transaction."""
        now = time.time()
        cols = ["path", *RUN_COLUMNS, "labels", "sig", "indexed_at"]
        sql = (
            f"INSERT INTO runs ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))}) ON CONFLICT(path) DO UPDATE "
            f"SET {', '.join(f'{c} = excluded.{c}' for c in cols[1:])}"
        )  # not RETURNING: SQLite older than 3.35 (Python 3.10 on older distributions) lacks it
        with self.transaction():
            for run_dir, row, sig in rows:
                vals = [self.key(run_dir), *(_col(row, c) for c in RUN_COLUMNS)]
                self.con.execute(sql, [*vals, json.dumps(row["labels"], sort_keys=True), sig, now])
                rid = self.con.execute("SELECT id FROM runs WHERE path = ?", (vals[0],)).fetchone()[0]
                self.con.execute("DELETE FROM metrics WHERE run = ?", (rid,))
                self.con.execute("DELETE FROM labels WHERE run = ?", (rid,))
                self.con.executemany(
                    "INSERT INTO metrics (run, name, value) VALUES (?, ?, ?)",
                    [(rid, k, v) for k, v in row["metrics"].items()],
                )
                self.con.executemany(
                    "INSERT INTO labels (run, key, value) VALUES (?, ?, ?)",
                    [(rid, k, v) for k, v in row["labels"].items()],
                )

    def signatures(self) -> dict[str, str | None]:
        """Stored path -> the file signature it was indexed with (unchanged directories are skipped)."""
        return dict(self.con.execute("SELECT path, sig FROM runs"))

    def prune(self) -> int:
        """Drop rows whose directory no longer holds a run.json; returns how many."""
        gone = [p for (p,) in self.con.execute("SELECT path FROM runs") if not _has_run(self.resolve(p))]
        with self.transaction():
            self.con.executemany("DELETE FROM runs WHERE path = ?", [(p,) for p in gone])
        return len(gone)

    def count(self) -> int:
        return self.con.execute("SELECT count(*) FROM runs").fetchone()[0]


def _has_run(d: str) -> bool:
    return os.path.exists(os.path.join(d, "run.json"))


def _col(row: dict, c: str):
    v = row.get("commit" if c == "commit_sha" else c)
    if c in ("valid", "interrupted"):
        return None if v is None else int(bool(v))
    return None if v is None else str(v)


class _Tx:
    """BEGIN IMMEDIATE ... COMMIT (ROLLBACK on error): the write lock is taken up front, so two writers
    wait on the busy timeout instead of failing on a lock upgrade."""

    def __init__(self, con):
        self.con = con

    def __enter__(self):
        self.con.execute("BEGIN IMMEDIATE")
        return self.con

    def __exit__(self, exc_type, *exc):
        self.con.execute("ROLLBACK" if exc_type else "COMMIT")
