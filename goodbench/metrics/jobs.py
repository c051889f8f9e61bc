"""Agent jobs (workloads/agent.py): numbers per job, not per call. A job's completion time (JCT) is its
last call's end minus its arrival (its first call's schedule); its critical path is the chain from the
last call back through, at each step, the parent that finished last, summing each call's latency
(sent to end) and the tool / think time planned before it. What JCT has beyond the critical path is
the client's own time (dispatch, scheduling lag): reported, so a benchmark can show it is small. A job
is completed when every call of its graph succeeded (one final call, no branch left), and good when
it also met the per-call SLO clauses in every call and `jct`. Pure numpy."""

from __future__ import annotations

import numpy as np

from .derived import RequestMetrics
from .dist import dist


def _parents(cols, i: int) -> tuple[int, ...]:
    code = cols.parents[i]
    key = cols.parents_names[code] if code >= 0 else ""
    return tuple(int(x) for x in key.split(",")) if key else ()


def job_rows(cols) -> list[np.ndarray]:
    """Each agent job's call rows (indices into cols), jobs in code order."""
    idx = np.nonzero(cols.job >= 0)[0]
    order = idx[np.argsort(cols.job[idx], kind="stable")]
    return np.split(order, np.nonzero(np.diff(cols.job[order]))[0] + 1) if order.size else []


def critical_path(c: RequestMetrics, rows: np.ndarray) -> tuple[bool, list[int]]:
    """(completed, the rows on the job's critical path from its last call back to its first): from the
    last call, through at each step the parent that finished last."""
    cols = c.cols
    by_node = {int(cols.node[i]): int(i) for i in rows}
    parents = {n: _parents(cols, i) for n, i in by_node.items()}
    used = {p for ps in parents.values() for p in ps}
    sinks = [n for n in by_node if n not in used]
    ok = bool(c.ok[rows].all()) and len(sinks) == 1 and all(p in by_node for ps in parents.values() for p in ps)
    end = {n: _end(c, i) for n, i in by_node.items()}
    cur, path = (sinks[0] if ok else max(end, key=end.get)), []
    while cur is not None:
        path.append(by_node[cur])
        ps = [p for p in parents[cur] if p in by_node]
        cur = max(ps, key=end.get) if ps else None
    return ok, path


def _end(c: RequestMetrics, i: int) -> float:
    return float(c.sent[i] if np.isnan(c.fin[i]) else c.fin[i])


def _one_job(c: RequestMetrics, rows: np.ndarray) -> tuple[bool, float, float, float, float]:
    """(completed, JCT, critical path, of it the planned tool/think time, the client's share) in s."""
    ok, path_rows = critical_path(c, rows)
    jct = max(_end(c, i) for i in rows) - float(np.nanmin(c.sched[rows]))
    path = planned = 0.0
    for i in path_rows:
        delay = c.cols.delay[i]
        delay = 0.0 if np.isnan(delay) or i == path_rows[-1] else float(delay)
        path += _end(c, i) - float(c.sent[i]) + delay
        planned += delay
    return ok, jct, path, planned, jct - path


def _per_depth(c: RequestMetrics, has: np.ndarray) -> dict:
    out = {}
    for d in np.unique(c.cols.depth[has]):
        sel = has & (c.cols.depth == d) & c.ok & ~np.isnan(c.first)
        out[str(int(d))] = {
            "calls": int((has & (c.cols.depth == d)).sum()),
            "ttft_ms": dist(c.ttft[sel]),
            "e2e_ms": dist(c.e2e[sel]),
            "prompt_tokens_mean": float(c.cols.prompt_tokens[sel].mean()) if sel.any() else None,
            "hit_rate": _hit_rate(c.cols, has & (c.cols.depth == d) & c.ok),
        }
    return out


def job_block(c: RequestMetrics, slo: dict | None, duration: float) -> dict | None:
    """summary.json's `jobs` (None when the run has no agent job calls)."""
    cols = c.cols
    has = cols.job >= 0
    if not has.any():
        return None
    groups = job_rows(cols)
    n_calls = int(has.sum())
    res = np.array([_one_job(c, g) for g in groups], float)  # completed, jct, path, planned, client
    done = res[:, 0] > 0
    meets = c.meets(slo)
    good = done.copy()
    if meets is not None:
        good &= np.array([bool(meets[g].all()) for g in groups])
    if slo and "jct" in slo:
        good &= res[:, 1] * 1000.0 <= slo["jct"]
    judged = meets is not None or bool(slo and "jct" in slo)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(res[:, 1] > 0, res[:, 2] / res[:, 1], np.nan)[done]
    out = {
        "started": len(groups),
        "completed": int(done.sum()),
        "calls_per_job": float(n_calls / len(groups)),
        "jct_ms": dist(res[done, 1].copy()),
        "critical_path_ms": dist(res[done, 2].copy()),
        "critical_path_share": {"min": _f(np.min(share)), "p50": _f(np.median(share))} if share.size else None,
        "tool_think_on_path_ms": dist(res[done, 3].copy()),
        "client_overhead_ms": dist(res[done, 4].copy()),
        "throughput": float(done.sum() / duration) if duration > 0 else None,
        "met_slo": int(good.sum()) if judged else None,
        "attainment": float(good.sum() / len(groups)) if judged else None,
        "goodput": float(good.sum() / duration) if judged and duration > 0 else None,
        "per_depth": _per_depth(c, has),
    }
    return out


def _hit_rate(cols, sel: np.ndarray) -> float | None:
    """Cached prompt tokens over prompt tokens of the calls whose usage said (None: none did)."""
    said = sel & (cols.cached >= 0)
    p = cols.prompt_tokens[said].sum()
    return float(cols.cached[said].sum() / p) if said.any() and p else None


def _f(v) -> float | None:
    return None if np.isnan(v) else float(v)
