"""Recorded agent jobs replayed (`[agent] trace = FILE`): each job's graph of calls with their token
counts, the tool / think time before each call, and the prompt's KV blocks (equal hash ids become
identical prompt blocks, so a prefix cache sees the recorded reuse). Two formats:

- goodbench (docs/workloads.md), JSON lines, one call each:
  {"job": "j0", "node": 0, "parents": [], "arrival_s": 0.0, "in": 1800, "out": 60, "delay_ms": 0,
   "tools": false, "hash_ids": [1, 2, 3], "block_size": 64}
  (`arrival_s` on a job's first call; `delay_ms`: the wait after the last parent's end.)
- weka: the Claude Code traces of callanjfox/agentic-coding-analysis (docs/TRACE_FORMAT.md, MIT),
  also read by kv-cache-tester, AIPerf and guidellm: one JSON object per session (a file, or one per
  line) with `requests` (`in`, `out`, `hash_ids`, `think_time` s, `stop`) and nested `subagent`
  entries: a sub-agent's chain starts after the parent's preceding call, and the parent's next call
  waits for it (unless its status is async_launched). Sessions carry no start time: they arrive by
  the workload's arrival process.

Replayed calls send their recorded lengths (their prompts are the recorded blocks, not the replies
of this run). A third, OpenTelemetry GenAI spans, is read by oteltrace.py. Pure but for reading the file."""

from __future__ import annotations

import json

from ..errors import InputError
from ..jsonlines import json_lines, read_text
from ..limits import MAX_TOKENS, problem
from .agent import Job, Node
from .oteltrace import otel_jobs

DEFAULT_BLOCK = 64
MAX_NESTING = 100  # weka sub-agents inside sub-agents: recorded sessions nest a few deep


def _blocks(scope, key, n: int, ids, bs: int) -> tuple:
    """A prompt of n tokens: one segment per hash id (bs tokens each), the rest its own."""
    out, left = [], max(n, 1)
    for h in ids or ():
        if left <= 0:
            break
        take = min(bs, left)
        out.append((("agent-trace-block", scope, h), take))
        left -= take
    if left > 0:
        out.append((("agent-trace-call",) + key, left))
    return tuple(out)


def _count(d: dict, key: str, where: str, lo: int = 0) -> int:
    """A node number or token count; token counts stop at limits.MAX_TOKENS, as in every trace."""
    v = d.get(key)
    if type(v) is not int or not lo <= v <= MAX_TOKENS:
        raise InputError(f"{where}: {key!r} must be an integer from {lo} to {MAX_TOKENS:,}, got {v!r}")
    return v


def _number(d: dict, key: str, where: str, limit: str, default: float = 0.0) -> float:
    """A time from the trace (limits.py's range for `limit`: finite, not negative): NaN or 1e400 in a
    delay would spin the simulation, 1e300 would put every call past any run."""
    v = d.get(key)
    if v is None:
        return default
    why = problem(limit, v) if not isinstance(v, str) else f"expected a number, got {v!r}"
    if why is not None:
        raise InputError(f"{where}: {key!r} {why}")
    return float(v)


def _block_size(d: dict, where: str) -> int:
    v = d.get("block_size")
    if v is None:
        return DEFAULT_BLOCK
    if type(v) is not int or not 1 <= v <= 4096:
        raise InputError(f"{where}: 'block_size' must be an integer from 1 to 4,096 tokens, got {v!r}")
    return v


def _hash_ids(d: dict, where: str) -> list:
    ids = d.get("hash_ids") or []
    if not isinstance(ids, list) or not all(isinstance(h, (int, str)) and not isinstance(h, bool) for h in ids):
        raise InputError(f"{where}: 'hash_ids' must be a list of integers or strings")
    return ids


def _finish(name: str, arrival: float, calls: list[dict]) -> Job:
    """Nodes from calls listed parents first: depth from the parents."""
    depth: dict[int, int] = {}
    nodes = []
    for k, c in enumerate(calls):
        d = 1 + max((depth[p] for p in c["parents"]), default=-1)
        depth[k] = d
        kind = "plan" if not c["parents"] else "step"
        nodes.append(
            Node(k, tuple(c["parents"]), d, kind, -1, 0, max(1, c["out"]), 0, 0.0, c["delay"], c["segs"], c["tools"])
        )
    return Job(name, arrival, 0, (), tuple(nodes))


def _read_text(path: str) -> str:
    return read_text(path, "the agent trace", "an agent trace is JSON lines or JSON")


def read_goodbench(path: str) -> tuple[list[Job], bool]:
    """Jobs of a goodbench agent trace, and whether every job has an arrival time."""
    by_job: dict[str, list] = {}
    arrivals: dict[str, float] = {}
    for i, d in json_lines(_read_text(path).splitlines(), path):
        where = f"{path}:{i}"
        if not isinstance(d, dict) or not isinstance(d.get("job"), str):
            raise InputError(f"{where}: expected an object with a string 'job'")
        parents = d.get("parents") or []
        if not isinstance(parents, list) or not all(type(p) is int and p >= 0 for p in parents):
            raise InputError(f"{where}: 'parents' must be a list of node numbers (0, 1, ...)")
        node = _count(d, "node", where)
        calls = by_job.setdefault(d["job"], [])
        if node != len(calls) or any(p >= node for p in parents):
            raise InputError(f"{where}: nodes of job {d['job']!r} must be numbered 0, 1, ... with parents first")
        if d.get("arrival_s") is not None:
            arrivals[d["job"]] = _number(d, "arrival_s", where, "trace_time")
        bs = _block_size(d, where)
        segs = _blocks("global", (d["job"], node), _count(d, "in", where, 1), _hash_ids(d, where), bs)
        delay = _number(d, "delay_ms", where, "milliseconds") / 1000
        calls.append({"parents": parents, "out": _count(d, "out", where, 1), "delay": delay, "segs": segs,
                      "tools": bool(d.get("tools"))})  # fmt: skip
    if not by_job:
        raise InputError(f"{path}: no calls")
    jobs = [_finish(j, arrivals.get(j, 0.0), calls) for j, calls in by_job.items()]
    return jobs, len(arrivals) == len(jobs)


def _weka_chain(reqs: list, parent: int | None, calls: list, ctx: tuple) -> int | None:
    """A (sub-)agent's requests as a chain after `parent`; sub-agents fork from the preceding call and
    join the next one. The chain's last call."""
    sid, bs, where, nest = ctx
    if nest > MAX_NESTING:
        raise InputError(f"{where}: sub-agents nested more than {MAX_NESTING} deep")
    if not isinstance(reqs, list):
        raise InputError(f"{where}: 'requests' must be a list")
    prev, joins = parent, []
    for r in reqs:
        if not isinstance(r, dict):
            raise InputError(f"{where}: each request must be an object")
        if r.get("type") == "subagent":
            last = _weka_chain(r.get("requests") or [], prev, calls, (sid, bs, where, nest + 1))
            if last is not None and r.get("status") != "async_launched":
                joins.append(last)
            continue
        k = len(calls)
        segs = _blocks(sid, (sid, k), _count(r, "in", where, 1), _hash_ids(r, where), bs)
        parents = ([prev] if prev is not None else []) + joins
        think = _number(r, "think_time", where, "seconds")
        calls.append({"parents": parents, "out": max(1, _count(r, "out", where)), "delay": think,
                      "segs": segs, "tools": r.get("stop") == "tool_use"})  # fmt: skip
        prev, joins = k, []
    return prev


def read_weka(path: str) -> list[Job]:
    """Sessions of a Weka / kv-cache-tester trace file (one JSON object, or one per line)."""
    text = _read_text(path)
    try:
        docs = [json.loads(text)]
    except ValueError:
        docs = [d for _, d in json_lines(text.splitlines(), path)]
    except RecursionError:
        raise InputError(f"{path}: JSON nested too deep to be an agent trace") from None
    jobs = []
    for i, d in enumerate(docs):
        if not isinstance(d, dict) or not isinstance(d.get("requests"), list):
            raise InputError(f"{path}: session {i + 1} has no 'requests' list")
        scope = "global" if d.get("hash_id_scope") == "global" else str(d.get("id", i))
        calls: list = []
        where = f"{path}: session {i + 1}"
        _weka_chain(d["requests"], None, calls, (scope, _block_size(d, where), where, 0))
        if calls:
            jobs.append(_finish(str(d.get("id", f"s{i}")), 0.0, calls))
    if not jobs:
        raise InputError(f"{path}: no requests")
    return jobs


def sniff(path: str) -> str:
    """goodbench (JSON lines of calls with 'job'), otel (OpenTelemetry spans) or weka (sessions with 'requests')."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            head = f.read(4096)
    except OSError as e:
        raise InputError(f"agent trace {path}: {e.strerror or e}") from None
    if '"resourceSpans"' in head or '"spanId"' in head or '"span_id"' in head:
        return "otel"
    return "goodbench" if '"job"' in head.split("\n", 1)[0] else "weka"


def read_agent_trace(path: str, fmt: str | None = None) -> tuple[list[Job], bool]:
    """The jobs of an agent trace and whether they carry arrival times."""
    fmt = fmt or sniff(path)
    if fmt == "weka":
        return read_weka(path), False
    if fmt == "otel":
        return [_finish(name, arrival, calls) for name, arrival, calls in otel_jobs(path)], True
    return read_goodbench(path)
