"""How fast, and in how much memory, goodbench summarises a very large run.

Builds a synthetic run directory of N requests x K chunks (default 1,000,000 x 100 = 100M chunk times;
20% "long" prompts, 80% "short", Poisson sends, exponential gaps with occasional stalls) as the columns/
sidecar a finished run leaves behind, then times, each in a fresh process, with peak RSS:
  1. summarize(load_arrays(dir)) with confidence intervals, variants and HOL attribution (summary.json);
  2. the same with ci=False (what sweeps use);
  3. `goodbench report --no-figures` and `goodbench report` (figures thin points for drawing).
The one-time cost at the end of a run, parsing records.jsonl into columns, is measured on a smaller run
(--jsonl-requests) and reported per million chunk times.

  python benchmarks/summary_scale.py                        # 1M requests x 100 chunks
  python benchmarks/summary_scale.py --requests 100000      # quicker
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


def build(run_dir: str, n: int, k: int, seed: int = 0, with_jsonl: bool = False) -> None:
    from goodbench.columnar import RecordArrays
    from goodbench.records import RunMeta
    from goodbench.store import RunStore, save_arrays

    rng = np.random.default_rng(seed)
    rate = 100.0
    sent = np.sort(rng.uniform(0, n / rate, n))
    is_long = rng.random(n) < 0.2
    ttft = np.where(is_long, 0.3, 0.05) + rng.exponential(0.03, n)
    first = sent + ttft
    nch = np.full(n, k, np.int64)
    chunk = np.empty(n * k)
    block = 50_000
    for i0 in range(0, n, block):
        i1 = min(n, i0 + block)
        g = rng.exponential(0.02, (i1 - i0, k))
        g[:, 0] = 0.0
        stalls = rng.random(g.shape) < 0.005
        g[stalls] += 0.2
        chunk[i0 * k : i1 * k] = (first[i0:i1, None] + np.cumsum(g, axis=1)).ravel()
    cols = RecordArrays(
        ids=np.array([f"r{i}" for i in range(n)]),
        cls=is_long.astype(np.int32),
        cls_names=["short", "long"],
        origin=np.zeros(n, np.int32),
        origin_names=[""],
        status=np.zeros(n, np.int8),
        scheduled=sent.copy(),
        sent=sent,
        first=first,
        finished=chunk.reshape(n, k)[:, -1].copy(),
        out_tokens=nch.copy(),
        out_source=np.zeros(n, np.int8),
        prompt_tokens=np.where(is_long, 3000, 50).astype(np.int64),
        http_status=np.full(n, 200, np.int32),
        warmup=np.zeros(n, bool),
        chunk_tok_sum=nch.copy(),
        nchunks=nch,
        retries=np.zeros(n, np.int8),
        first_answer=first.copy(),
        reasoning_tokens=np.zeros(n, np.int64),
        out_local=np.full(n, -1, np.int64),
        priority=np.full(n, np.nan),
        session=np.full(n, -1, np.int64),
        session_names=[],
        turn=np.zeros(n, np.int32),
        session_turns=np.zeros(n, np.int32),
        tokens=np.zeros(0, np.int16),
        chunk_times=chunk,
    )
    meta = RunMeta(
        run_id=os.path.basename(run_dir),
        label=f"synthetic {n}x{k}",
        mode="open",
        slo={"ttft": 500, "tpot": 50},
        requested_rate=rate,
        workload={"name": "synthetic-scale"},
    )
    st = RunStore(os.path.dirname(run_dir), os.path.basename(run_dir))
    st.start(meta)
    if with_jsonl:
        recs = cols.to_records()
        for i in range(0, len(recs), 10_000):
            st.append_many(recs[i : i + 10_000])
    st.finish(meta, None)
    if not with_jsonl:
        save_arrays(run_dir, cols)


CHILD = r"""
import json, resource, sys, time
t = time.perf_counter()
from goodbench.store import load_arrays
from goodbench.metrics import summarize
run = load_arrays(sys.argv[1], write_sidecar=sys.argv[3] == "write")
t_load = time.perf_counter() - t
s = summarize(run, ci=sys.argv[2] == "ci")
total = time.perf_counter() - t
print(json.dumps({"load_s": t_load, "total_s": total, "rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
                  "itl_n": s["itl_ms"]["n"], "itl_p99": s["itl_ms"]["p99"], "itl_ci": s["itl_ms"].get("ci", {}).get("method"),
                  "hol": bool(s.get("hol"))}))
"""


def child(run_dir: str, ci: bool, write: bool = False) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, run_dir, "ci" if ci else "noci", "write" if write else "no"],
        capture_output=True,
        text=True,
        cwd=os.path.dirname(HERE),
    )
    if out.returncode:
        raise SystemExit(out.stderr)
    return json.loads(out.stdout)


def timed_cli(*args) -> tuple[float, float]:
    t = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "goodbench", *args], check=True, capture_output=True, cwd=os.path.dirname(HERE)
    )
    return time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--chunks", type=int, default=100)
    ap.add_argument("--jsonl-requests", type=int, default=20_000)
    ap.add_argument("--no-report", action="store_true")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="gb-scale-")
    try:
        big = os.path.join(tmp, "big")
        t = time.perf_counter()
        build(big, a.requests, a.chunks)
        print(
            f"built {a.requests:,} requests x {a.chunks} chunks = {a.requests * a.chunks:,} chunk times "
            f"in {time.perf_counter() - t:.1f} s ({sum(os.path.getsize(os.path.join(big, 'columns', f)) for f in os.listdir(os.path.join(big, 'columns'))) / 2**30:.2f} GiB sidecar)"
        )
        for ci in (True, False):
            r = child(big, ci)
            print(
                f"summarize(load_arrays) ci={ci!s:5}: {r['total_s']:.2f} s (load {r['load_s']:.2f} s), "
                f"peak RSS {r['rss_gib']:.2f} GiB · ITL n={r['itl_n']:,} p99={r['itl_p99']:.1f} ms "
                f"[{r['itl_ci']}] hol={r['hol']}"
            )
        if not a.no_report:
            for extra in (["--no-figures"], []):
                s, rss = timed_cli("report", big, *extra)
                print(
                    f"goodbench report {' '.join(extra) or '(with figures)'}: {s:.1f} s, "
                    f"peak RSS (largest child so far) {rss:.2f} GiB"
                )
        small = os.path.join(tmp, "small")
        build(small, a.jsonl_requests, a.chunks, with_jsonl=True)
        r = child(small, True, write=True)
        per_m = r["load_s"] / (a.jsonl_requests * a.chunks / 1e6)
        print(
            f"one-time records.jsonl -> columns at run end: {r['load_s']:.2f} s for "
            f"{a.jsonl_requests * a.chunks:,} chunk times = {per_m:.2f} s per million chunk times"
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
