"""How fast the history catalogue indexes and answers over many runs (issue 25's targets: 10,000 run
directories indexed in <= 30 s, a trend query over them in <= 200 ms).

Makes N run directories (default 10,000) from one real simulated run: its run.json and summary.json
(~14 KB, as `goodbench simulate` writes them) cloned with another run id, start time, labels and
goodput, spread over 20 identities (5 workloads x 4 models) of N/20 runs each, with an empty
records.jsonl. Then, --repeats times each:
  1. `goodbench history index DIR --rebuild` (the command, timed from outside: Python's start included);
  2. the same with nothing changed (every directory stat'ed, none re-read);
  3. a trend query in one process (api.history_trend: SQL for one identity's N/20 runs, and the change
     point test over them), and the SQL alone (history.query.series), each the median of 20 calls; a
     trend of every identity at once (all N runs, 20 series; median of 5); the SQL of a label filter;
  4. the dashboard page over every run (api.history_dashboard, 7 metrics x 20 identities);
  5. one run added to the full catalogue as RunDir.finish does it (open, upsert, close).

  flock /work/bench.lock python benchmarks/history_scale.py
  python benchmarks/history_scale.py --runs 2000 --repeats 1      # quicker
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

WORKLOADS = ("mixed-long-short", "hol-stress", "bursty", "rag-mix", "sharegpt")
MODELS = ("llama-3.1-8b", "llama-3.1-70b", "qwen3-32b", "mistral-7b")


def template(tmp: str) -> tuple[dict, dict]:
    """run.json and summary.json of one real simulated run."""
    import goodbench as gb

    run = gb.simulate(gb.load_workload("mixed-long-short", num_prompts=200), result_dir=tmp, run_id="template")
    with open(os.path.join(run.dir, "run.json"), encoding="utf-8") as f:
        meta = json.load(f)
    with open(os.path.join(run.dir, "summary.json"), encoding="utf-8") as f:
        return meta, json.load(f)


def generate(out: str, n: int, meta: dict, summary: dict, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    for i in range(n):
        ident = i % 20
        wl, model = WORKLOADS[ident % 5], MODELS[ident // 5]
        start = (t0 + timedelta(hours=i)).isoformat(timespec="seconds")
        run_id = f"run-{i:06d}"
        m = dict(meta)
        m |= {"run_id": run_id, "started_wall": start, "finished_wall": start}
        m["workload"] = dict(meta["workload"], name=wl)
        m["target"] = dict(meta["target"], model=model)
        m["labels"] = {"branch": "main" if i % 3 else "pr", "runner": f"gpu-{i % 4}"}
        s = dict(summary, run_id=run_id, goodput=summary["goodput"] * (1 + 0.02 * rng.standard_normal()))
        d = os.path.join(out, run_id)
        os.makedirs(d)
        for name, obj in (("run.json", m), ("summary.json", s)):
            with open(os.path.join(d, name), "w", encoding="utf-8") as f:
                json.dump(obj, f, indent=2)
        open(os.path.join(d, "records.jsonl"), "w").close()


def cli(*args) -> float:
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "goodbench", *args], capture_output=True, text=True)
    wall = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(r.stderr)
    return wall


def median_ms(fn, k: int = 20) -> tuple[float, float]:
    times = []
    for _ in range(k):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times), max(times)


def queries(db: str, out: str) -> dict:
    import goodbench as gb
    from goodbench.history.catalogue import Catalogue
    from goodbench.history.query import Filters, series
    from goodbench.history.scan import index_run

    f = gb.HistoryFilters(workload="hol-stress", model="qwen3-32b")
    trends = gb.history_trend("goodput", f, db)
    assert len(trends) == 1, len(trends)
    res = {"trend_points": len(trends[0].series.points)}
    res["trend_ms"] = median_ms(lambda: gb.history_trend("goodput", f, db))
    res["trend_all_ms"] = median_ms(lambda: gb.history_trend("goodput", db=db), k=5)  # 20 series, every run
    with Catalogue(db) as cat:
        res["sql_ms"] = median_ms(lambda: series(cat, "goodput", Filters(workload="hol-stress", model="qwen3-32b")))
        res["label_sql_ms"] = median_ms(lambda: series(cat, "goodput", Filters(labels={"branch": "pr"})))
    t = time.perf_counter()
    gb.history_dashboard(os.path.join(out, "page"), db=db, limit=100_000)
    res["dashboard_s"] = time.perf_counter() - t
    res["page_mb"] = os.path.getsize(os.path.join(out, "page", "index.html")) / 1e6
    d = os.path.join(out, "results", "run-000000")
    with open(os.path.join(d, "run.json"), encoding="utf-8") as fh:
        meta = json.load(fh)

    def one():
        with Catalogue(db) as cat:
            index_run(cat, d, meta, None)

    res["one_run_ms"] = median_ms(one)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--keep", action="store_true", help="keep the generated directories")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="gb-history-")
    res_dir = os.path.join(tmp, "results")
    db = os.environ["GOODBENCH_HISTORY_DB"] = os.path.join(tmp, "history.sqlite")  # never the user's
    try:
        meta, summary = template(os.path.join(tmp, "template"))
        t = time.perf_counter()
        generate(res_dir, a.runs, meta, summary)
        print(f"generated {a.runs} run directories in {time.perf_counter() - t:.1f} s ({res_dir})")
        for rep in range(a.repeats):
            full = cli("history", "index", res_dir, "--rebuild")
            again = cli("history", "index", res_dir)
            q = queries(db, tmp)
            print(
                f"[{rep + 1}] index {a.runs} dirs: {full:.2f} s (command wall); unchanged re-index {again:.2f} s; "
                f"trend ({q['trend_points']} runs, SQL + change points) median {q['trend_ms'][0]:.1f} ms "
                f"(max {q['trend_ms'][1]:.1f}); SQL alone {q['sql_ms'][0]:.1f} ms; every identity "
                f"({a.runs} runs, 20 series) {q['trend_all_ms'][0]:.0f} ms; by label over "
                f"{a.runs * 1 // 3} runs {q['label_sql_ms'][0]:.1f} ms; dashboard {q['dashboard_s']:.2f} s "
                f"({q['page_mb']:.1f} MB); one run added {q['one_run_ms'][0]:.1f} ms"
            )
        print(f"catalogue: {os.path.getsize(db) / 1e6:.1f} MB")
    finally:
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
