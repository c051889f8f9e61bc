"""Questions asked of the catalogue: which runs match these filters, and one metric over time for each
identity among them. Filter values match exactly, or as a glob when they hold * or ?."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from .catalogue import Catalogue
from .identity import METRICS, SERIES_FIELDS, tell_apart

FILTER_COLUMNS = ("workload", "model", "server", "server_version", "gpu", "identity", "mode", "run_id", "branch")
LIST_METRICS = ("goodput", "slo_attainment", "ttft_p99", "tpot_p99")
_SHOWN = (
    "run_id started mode identity workload workload_key workload_hash model slo server gpu engine server_version "
    "goodbench_version commit_sha branch build build_url label valid interrupted labels loop knobs"
).split()


@dataclass
class Filters:
    """Which runs: identity fields, the server's version, labels (all must match), a time range
    (ISO dates or times, compared with the run's start in UTC)."""

    workload: str | None = None
    model: str | None = None
    server: str | None = None
    server_version: str | None = None
    gpu: str | None = None
    identity: str | None = None  # the identity key, or a prefix of it
    mode: str | None = None
    run_id: str | None = None
    branch: str | None = None
    labels: dict = field(default_factory=dict)
    since: str | None = None
    until: str | None = None
    under: str | None = None  # runs whose directory is at or under this one

    def where(self, cat: Catalogue | None = None) -> tuple[str, list]:
        sql, args = [], []
        if self.under and cat is not None:
            top = cat.key(self.under)
            sql.append("(r.path = ? OR substr(r.path, 1, ?) = ?)")
            args += [top, len(top) + 1, top.rstrip("/") + "/"]
        for col in FILTER_COLUMNS:
            v = getattr(self, col)
            if v is None:
                continue
            if col == "identity" and not any(c in v for c in "*?"):
                v += "*"
            op = "GLOB" if any(c in v for c in "*?[") else "="
            sql.append(f"r.{'commit_sha' if col == 'commit' else col} {op} ?")
            args.append(v)
        for k, v in self.labels.items():
            op = "GLOB" if any(c in v for c in "*?[") else "="
            sql.append(f"EXISTS (SELECT 1 FROM labels l WHERE l.run = r.id AND l.key = ? AND l.value {op} ?)")
            args += [k, v]
        if self.since:
            sql.append("r.started >= ?")
            args.append(self.since)
        if self.until:
            sql.append("r.started <= ?")
            args.append(self.until + ("T99" if len(self.until) == 10 else ""))  # a date: the whole day
        return (" AND ".join(sql) or "1"), args


@dataclass
class Point:
    """One run in a series."""

    path: str
    run_id: str
    started: str
    value: float
    server_version: str | None = None
    commit: str | None = None
    goodbench_version: str = ""
    labels: dict = field(default_factory=dict)


@dataclass
class Series:
    """One metric over time for one identity, oldest first."""

    metric: str
    identity: dict
    points: list[Point]

    @property
    def values(self) -> list[float]:
        return [p.value for p in self.points]


def _row(cur, r) -> dict:
    d = {c[0]: v for c, v in zip(cur.description, r)}
    d["labels"] = json.loads(d.get("labels") or "{}")
    d["commit"] = d.pop("commit_sha", None)
    return d


def list_runs(cat: Catalogue, f: Filters, limit: int | None = 50, metrics=LIST_METRICS) -> list[dict]:
    """Matching runs, newest first, with a few metrics each (None where a run lacks one)."""
    where, args = f.where(cat)
    picks = ", ".join(f"(SELECT value FROM metrics m WHERE m.run = r.id AND m.name = '{m}') AS m_{m}" for m in metrics)
    lim = "" if limit is None else f" LIMIT {int(limit)}"
    cur = cat.con.execute(
        f"SELECT r.path, {', '.join('r.' + c for c in _SHOWN)}, {picks} FROM runs r WHERE {where} "
        f"ORDER BY r.started DESC, r.path{lim}",
        args,
    )
    out = []
    for r in cur.fetchall():
        d = _row(cur, r)
        d["dir"] = cat.resolve(d.pop("path"))
        d["metrics"] = {m: d.pop(f"m_{m}") for m in metrics}
        out.append(d)
    return out


def series(cat: Catalogue, metric: str, f: Filters, last: int | None = None) -> list[Series]:
    """metric over time for each identity among the matching runs (each series oldest first; last: only
    its newest N runs). Identities in order of their newest run, newest first. Interrupted runs and runs
    marked invalid (the load generator fell behind) are not part of any series: their numbers are not
    the server's."""
    if metric not in METRICS:
        raise KeyError(metric)
    where, args = f.where(cat)
    cur = cat.con.execute(
        "SELECT r.path, r.run_id, r.started, m.value, r.server_version, r.commit_sha, r.goodbench_version, r.labels, "
        f"{', '.join('r.' + c for c in SERIES_FIELDS)}, r.identity FROM runs r JOIN metrics m ON m.run = r.id "
        f"AND m.name = ? WHERE {where} AND r.interrupted = 0 AND (r.valid IS NULL OR r.valid = 1) "
        "ORDER BY r.identity, r.started, r.path",
        [metric, *args],
    )
    groups: dict[str, Series] = {}
    for r in cur.fetchall():
        key = r[-1]
        s = groups.get(key)
        if s is None:
            ident = {k: v or "" for k, v in zip(SERIES_FIELDS, r[8:-1])} | {"key": key}
            s = groups[key] = Series(metric, ident, [])
        s.points.append(Point(cat.resolve(r[0]), r[1], r[2], r[3], r[4], r[5], r[6] or "", json.loads(r[7] or "{}")))
    out = list(groups.values())
    tell_apart([s.identity for s in out])  # sweep cells' series name the knob that separates them
    if last:
        for s in out:
            s.points = s.points[-last:]
    return sorted(out, key=lambda s: s.points[-1].started, reverse=True)
