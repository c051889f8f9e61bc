"""The frontier of a sweep over loads (`goodbench sweep --concurrency 1,4,16` or `--request-rate 1,2,4`): one row per
(configuration, load) with throughput per GPU against tokens per user, the non-dominated points of all tokens and
of good tokens only (requests meeting the SLO, as the one judge counts them), frontier.csv / frontier.json, and
the caption that says which configuration wins where."""

from __future__ import annotations

import csv
import json
import math
import os

from ..metrics.frontier import mark
from ..store import json_safe

FIELDS = (
    "config", "gpus", "load", "concurrency_or_rate", "output_tok_s_per_gpu", "tok_s_per_user",
    "good_output_tok_s_per_gpu", "slo_attainment", "ttft_p50_ms", "tpot_p50_ms", "on_frontier", "on_good_frontier",
    "good_tokens_per_kwh", "run_dir",
)  # fmt: skip


def parse_loads(text: str | None, kind: str) -> list[float]:
    """`--concurrency 1,4,16` / `--request-rate 1,2,inf` as numbers (one value: a list of one)."""
    from ..errors import UsageError
    from ..limits import check

    if text is None:
        return []
    try:
        vals = [float(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"--{kind} {text!r}: expected numbers separated by commas, e.g. 1,4,16,64") from None
    finite = kind != "concurrency" or all(math.isfinite(v) for v in vals)  # a rate may be inf (all at once)
    if (
        not vals
        or not finite
        or any(not v > 0 for v in vals)
        or (kind == "concurrency" and any(v != int(v) for v in vals))
    ):
        raise UsageError(f"--{kind} {text!r}: expected positive {'whole ' if kind == 'concurrency' else ''}numbers")
    if len(set(vals)) != len(vals):
        raise UsageError(f"--{kind} {text!r}: a load named twice")
    for v in vals:
        check(kind.replace("-", "_"), int(v) if kind == "concurrency" else v, f"--{kind}")
    return vals


def load_label(kind: str, value: float) -> str:
    return f"{'c' if kind == 'concurrency' else 'r'}{value:g}"


def frontier_rows(kind: str, value: float, rows: list[dict]) -> list[dict]:
    """One sweep's cells at one load as frontier rows (failed cells left out)."""
    out = []
    for r in rows:
        if r.get("error") or r.get("output_throughput") is None:
            continue
        gpus = r.get("gpus") or 1
        per_gpu = r.get("output_tok_s_per_gpu")
        out.append(
            {
                "config": r["cell"],
                "gpus": gpus,
                "load": load_label(kind, value),
                "concurrency_or_rate": value,
                "output_tok_s_per_gpu": per_gpu if per_gpu is not None else r["output_throughput"] / gpus,
                "tok_s_per_user": r.get("tok_s_per_user"),
                "good_output_tok_s_per_gpu": r.get("good_output_tok_s_per_gpu"),
                "slo_attainment": r.get("slo_attainment"),
                "ttft_p50_ms": r.get("ttft_p50_ms"),
                "tpot_p50_ms": r.get("tpot_p50_ms"),
                "good_tokens_per_kwh": r.get("good_tokens_per_kwh"),
                "run_dir": r.get("run_dir"),
            }
        )
    return out


def tpot_floor(slo: dict | None) -> float | None:
    """The SLO's interactivity floor in tokens per user: 1000 / its TPOT (ms), when it has one."""
    t = (slo or {}).get("tpot")
    return 1000.0 / t if t else None


def write_frontier(rows: list[dict], out_dir: str, meta: dict) -> None:
    with open(os.path.join(out_dir, "frontier.csv"), "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    with open(os.path.join(out_dir, "frontier.json"), "w", encoding="utf-8") as f:
        json.dump(json_safe({"meta": meta, "rows": rows}), f, indent=2, default=str, allow_nan=False)


FRONTIER_METRICS = ("tok_s_per_user", "output_tok_s_per_gpu", "good_output_tok_s_per_gpu", "slo_attainment")
FRONTIER_METRICS += ("ttft_p50", "tpot_p50")
_LOAD_KEYS = ("num_requests", "warmup_requests")  # knobs that say how hard, not what, a run drove


def history_rows(runs: list[dict]) -> list[dict]:
    """Catalogued runs (history list_runs rows with FRONTIER_METRICS) as frontier rows: a configuration is
    what the run served (GPU, server, model, workload, the knobs that are not its load), labelled by the knobs
    that tell it from the others; its load is the run's arrival (users or rate). Runs without the axes are
    left out."""
    pts = []
    for r in runs:
        m = r.get("metrics") or {}
        if m.get("tok_s_per_user") is None or m.get("output_tok_s_per_gpu") is None:
            continue
        try:
            knobs = json.loads(r.get("knobs") or "{}")
        except ValueError:
            knobs = {}
        arrival = {k: v for k, v in knobs.items() if k.startswith("arrival.")}
        what = {k: v for k, v in knobs.items() if not k.startswith("arrival.") and k not in _LOAD_KEYS}
        closed = arrival.get("arrival.kind") == "closed"
        load = arrival.get("arrival.concurrency") if closed else arrival.get("arrival.rate")
        base = " · ".join(str(x) for x in (r.get("gpu"), r.get("model"), r.get("server"), r.get("workload")) if x)
        pts.append((base, what, r, m, load))
    differ = sorted({k for _, w, *_ in pts for k in w if len({json.dumps(p[1].get(k)) for p in pts}) > 1})
    out = []
    for base, what, r, m, load in pts:
        apart = ", ".join(f"{k}={what.get(k, 'default')}" for k in differ if k != "gpu")
        out.append(
            {
                "config": base + (f" · {apart}" if apart else ""),
                "gpus": None,
                "load": r.get("label") or "",
                "concurrency_or_rate": load if isinstance(load, (int, float)) else 0,
                "output_tok_s_per_gpu": m["output_tok_s_per_gpu"],
                "tok_s_per_user": m["tok_s_per_user"],
                "good_output_tok_s_per_gpu": m.get("good_output_tok_s_per_gpu"),
                "slo_attainment": m.get("slo_attainment"),
                "ttft_p50_ms": m.get("ttft_p50"),
                "tpot_p50_ms": m.get("tpot_p50"),
                "run_dir": r.get("dir"),
            }
        )
    return mark(out)
