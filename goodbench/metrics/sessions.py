"""Multi-turn sessions: numbers per turn index (does the prefix cache keep up as the history grows?) and
per session: a session is completed when every planned turn succeeded, and good when every turn also
met the SLO. Session goodput = good sessions / duration. Pure numpy."""

from __future__ import annotations

import numpy as np

from .derived import RequestMetrics


def session_block(c: RequestMetrics, meets: np.ndarray | None, duration: float) -> dict | None:
    """summary.json's `sessions` (None when the run has no session turns)."""
    cols = c.cols
    has = cols.session >= 0
    if not has.any():
        return None
    code = cols.session[has]
    m = len(cols.session_names)
    sent = np.bincount(code, minlength=m)
    ok = np.bincount(code, weights=c.ok[has], minlength=m)
    planned = np.zeros(m, np.int64)
    np.maximum.at(planned, code, cols.session_turns[has])
    started = sent > 0
    completed = started & (ok == planned) & (sent == planned)
    out = {
        "started": int(started.sum()),
        "completed": int(completed.sum()),
        "turns_per_session": float(planned[started].mean()) if started.any() else None,
    }
    if meets is not None:
        good = completed & (np.bincount(code, weights=meets[has], minlength=m) == planned)
        out["met_slo"] = int(good.sum())
        out["attainment"] = float(good.sum() / started.sum()) if started.any() else None
        out["goodput"] = float(good.sum() / duration) if duration > 0 else None
    return out


def turns(cols) -> list[int]:
    """The turn indices present (1-based), ascending."""
    t = np.unique(cols.turn[cols.turn > 0])
    return [int(x) for x in t]
