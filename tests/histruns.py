"""Synthetic run directories for the history tests: run.json and summary.json as a finished run writes
them (only the blocks the catalogue reads), an empty records.jsonl, and a series of them with noise."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone

import numpy as np

from goodbench.records import RunMeta

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


def write_run(
    result_dir: str,
    run_id: str,
    day: float,
    metrics: dict,
    *,
    workload: str = "nightly",
    model: str = "m-8b",
    labels: dict | None = None,
    server: dict | None = None,
) -> str:
    """A finished run started `day` days after T0; metrics: goodput, ttft_p99, ... (the summary's)."""
    d = os.path.join(result_dir, run_id)
    os.makedirs(d)
    start = (T0 + timedelta(days=day)).isoformat(timespec="seconds")
    meta = RunMeta(
        run_id=run_id,
        label="poisson@4.00",
        target={"base_url": "http://127.0.0.1:8000", "endpoint": "/v1/completions", "model": model},
        workload={"name": workload, "generator": "synthetic", "arrival": {"kind": "poisson", "rate": 4.0}},
        workload_hash=f"{workload}-hash",
        slo={"ttft": 500.0, "tpot": 50.0},
        started_wall=start,
        finished_wall=start,
        labels=dict(labels or {}),
        server=server or {"name": "vllm", "version": "0.11.0"},
    )
    summary = {
        "run_id": run_id,
        "requests": {"issued": 100, "completed": 100, "failed": 0},
        "goodput": metrics.get("goodput"),
        "slo_attainment": metrics.get("slo_attainment", 0.99),
        "ttft_ms": {"p99": metrics.get("ttft_p99", 100.0), "p50": 40.0},
        "tpot_ms": {"p99": metrics.get("tpot_p99", 20.0)},
        "valid": True,
    }
    for name, obj in (("run.json", meta.to_dict()), ("summary.json", summary)):
        with open(os.path.join(d, name), "w", encoding="utf-8") as f:
            json.dump(obj, f)
    open(os.path.join(d, "records.jsonl"), "w").close()
    return d


def noisy_series(seed: int, n: int = 60, at: int | None = 40, drop: float = 0.05, cv: float = 0.02) -> np.ndarray:
    """Goodput over n runs: 10 req/s with cv Gaussian noise, one run in twenty 5-20% low (a noisy
    neighbour, a thermal throttle), and a drop of `drop` from run `at` on (None: no drop)."""
    rng = np.random.default_rng(seed)
    x = 10.0 * (1 + cv * rng.standard_normal(n))
    bad = rng.random(n) < 0.05
    x[bad] *= 1 - rng.uniform(0.05, 0.2, bad.sum())
    if at is not None:
        x[at:] *= 1 - drop
    return x


def clone_run(src: str, result_dir: str, run_id: str, day: float, goodput_factor: float) -> str:
    """An earlier run of src's identity: its run.json and summary.json with another id and start, and
    goodput (and request throughput) scaled, so a real run can be judged against a made-up history."""
    d = os.path.join(result_dir, run_id)
    os.makedirs(d)
    with open(os.path.join(src, "run.json"), encoding="utf-8") as f:
        meta = json.load(f)
    with open(os.path.join(src, "summary.json"), encoding="utf-8") as f:
        summary = json.load(f)
    start = (T0 + timedelta(days=day)).isoformat(timespec="seconds")
    meta |= {"run_id": run_id, "started_wall": start, "finished_wall": start}
    for k in ("goodput", "request_throughput"):
        summary[k] *= goodput_factor
    for name, obj in (("run.json", meta), ("summary.json", summary)):
        with open(os.path.join(d, name), "w", encoding="utf-8") as f:
            json.dump(obj, f)
    return d
