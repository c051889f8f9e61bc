"""`--worker-metrics`: each replica's /metrics behind a router, checked before the clock starts, sampled several
times a second during the run into worker_metrics.jsonl (runner/scrape.sample_loop), and after the run each
request given the replica whose counters moved for it (metrics/attribution.py), written into its record. A
reply's --replica-header, where it named one, wins; the counters' choice is then checked against it."""

from __future__ import annotations

import asyncio
import os
from dataclasses import replace

import numpy as np

from ..errors import UsageError, warn
from ..metrics.attribution import DONE, HOW, KEEP, OUTPUT, PROMPT, attribute, worker_counters
from ..redact import scrub_url
from ..store import load, read_jsonl, write_atomic
from .scrape import read_round
from .telemetry import metrics_url

FILE = "worker_metrics.jsonl"
INTERVAL_S = 0.2  # fine enough that few requests end between two samples; a /metrics read costs a server ~1 ms
__all__ = ["FILE", "INTERVAL_S", "KEEP", "attribute_run", "check_workers", "parse_workers"]


def parse_workers(specs) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """`NAME=URL` or `URL` items -> (names, /metrics URLs); unnamed workers are w0, w1, ... in order."""
    names, urls = [], []
    for i, item in enumerate(x.strip() for x in specs if x and x.strip()):
        name, sep, url = item.partition("=")
        if not sep or "://" in name or "/" in name:
            name, url = f"w{i}", item
        names.append(name.strip())
        urls.append(metrics_url(url.strip(), "--worker-metrics", "a worker's URL (http://host:port), NAME=URL"))
    if len(set(names)) != len(names):
        raise UsageError(f"--worker-metrics: two workers share a name ({', '.join(names)})")
    return tuple(names), tuple(urls)


def check_workers(names, urls) -> None:
    """Every worker answers /metrics with vLLM's finished-request counter (UsageError naming the one that does
    not); one without the prompt/output token histograms is attributed by timing alone (warned)."""
    samples = asyncio.run(read_round(list(urls)))
    for name, url, (_, sample, _) in zip(names, urls, samples):
        if sample is None:
            raise UsageError(f"--worker-metrics {name}={scrub_url(url)}: no answer (is the worker running there?)")
        keys = {k.split("{", 1)[0] for k in sample}
        if DONE not in keys:
            raise UsageError(f"--worker-metrics {name}={scrub_url(url)}: its /metrics has no {DONE}")
        if PROMPT not in keys or OUTPUT not in keys:
            warn(
                f"--worker-metrics {name}: no {PROMPT} / {OUTPUT} in its /metrics: its requests are attributed "
                "by their timing alone"
            )


def attribute_run(run_dir: str, names: tuple[str, ...]) -> dict:
    """Give each completed request of the finished run the replica whose counters moved for it, in
    records.jsonl (rewritten whole, atomically); a record that already names a replica keeps it. Returns the
    attribution's counts (metrics/attribution.Attribution.stats) and, where replies named replicas too, how
    often the counters agreed with them."""
    recs = load(run_dir).records
    rows = read_jsonl(os.path.join(run_dir, FILE))
    fin = np.array([np.nan if r.finished_at is None else r.finished_at for r in recs], float)
    prompt = np.array([-1 if r.prompt_tokens_server is None else r.prompt_tokens_server for r in recs], np.int64)
    output = np.array([r.output_tokens if r.output_tokens_source == "usage" else -1 for r in recs], np.int64)
    ok = np.array([r.status == "ok" for r in recs], bool) & ~np.isnan(fin)
    got = attribute(fin, prompt, output, ok, worker_counters(rows, len(names)))
    stats = {"method": "worker counters", "sampled_every_s": INTERVAL_S} | got.stats(ok)
    said = [(r.replica == names[w], h) for r, w, h in zip(recs, got.replica, got.how) if r.replica and w >= 0]
    if said:  # the header's truth, overall and by how sure the counters were
        stats["agrees_with_header"] = round(sum(a for a, _ in said) / len(said), 4)
        by = {HOW[k]: [a for a, h in said if h == k] for k in range(len(HOW))}
        stats["agrees_by_how"] = {k: round(sum(v) / len(v), 4) for k, v in by.items() if v}
    if any(r.replica is None and w >= 0 for r, w in zip(recs, got.replica)):
        recs = [replace(r, replica=names[w]) if r.replica is None and w >= 0 else r for r, w in zip(recs, got.replica)]
        write_atomic(os.path.join(run_dir, "records.jsonl"), "".join(r.to_json() + "\n" for r in recs))
    return stats
