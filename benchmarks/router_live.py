"""A real KV-aware router in front of two `goodbench serve` workers, measured live and predicted by the
simulated fleet (issue 44's first target).

First the fleet's front end (HTTP through the router, the worker's JSON and tokenizing: what the served
engine's host adds before its modelled engine) is measured on held-out traffic: the `calibrate` workload,
one request at a time through a one-worker fleet, each TTFT less the simulated one, fitted as a constant
plus a cost per prompt token. The fleet simulations take it (`frontend_ms`, `frontend_token_us`); the
workloads they predict never enter that fit.

For each workload and vllm-router policy: two workers (prefix caching on, cached tokens in usage, each
naming itself in x-goodbench-replica) behind `vllm-router --policy P`, one `goodbench run` through it
(every request's replica from the header, its cached tokens from its usage), the workers' prefix-cache
hit counters read before and after; then `simulate --replicas 2 --router P` of the same requests. It
reports the sum of per-request cached tokens against the counters' delta, the live hit rate and TTFT
p50 against the simulated ones, and each policy's balance.

    python benchmarks/router_live.py                       # shared-documents and sessions, round_robin and cache_aware
    python benchmarks/router_live.py --num-prompts 60 --repeats 3 --out /tmp/router.json

Needs vllm-router (pip install vllm-router). Loopback only; each run is bounded by --num-prompts."""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from dataclasses import replace

import numpy as np

import goodbench as gb
from goodbench.analysis.fleet import RouterFleet
from goodbench.engine.layout import ClusterSpec


def front_end(out_dir: str, n: int = 40) -> tuple[float, float]:
    """(ms per request, us per prompt token) the live fleet adds to the simulated TTFT: measured on the
    held-out `calibrate` workload, one request at a time (no queueing), through a one-worker fleet."""
    spec = gb.load_workload("calibrate", num_prompts=n, concurrency=1)
    cfg = gb.EngineConfig(enable_prefix_caching=True)
    with RouterFleet(cfg, "round_robin", n=1) as fleet:
        live = {r.id: r for r in gb.run(spec, fleet.base_url, result_dir=out_dir, scrape_metrics=False).records()}
    sim = {r.id: r for r in gb.simulate(spec, cfg, result_dir=out_dir).records()}
    pairs = [(live[k], sim[k]) for k in live if k in sim and live[k].status == "ok" and sim[k].status == "ok"]
    x = np.array([a.prompt_tokens for a, _ in pairs], float)
    y = np.array([(a.first_token_at - a.sent_at) - (b.first_token_at - b.sent_at) for a, b in pairs])
    slope, base = np.polyfit(x, y, 1)
    return max(base, 0.0) * 1e3, max(slope, 0.0) * 1e6


def one(workload: str, policy: str, n: int, rate: float | None, out_dir: str, front: tuple) -> dict:
    kw = {"num_prompts": n} | ({"request_rate": rate} if rate else {})
    spec = gb.load_workload(workload, **kw)
    cfg = gb.EngineConfig(enable_prefix_caching=True)
    sim_cfg = replace(cfg, frontend_ms=front[0], frontend_token_us=front[1])
    with RouterFleet(cfg, policy) as fleet:
        before = fleet.hits()
        target = gb.Target(base_url=fleet.base_url, replica_header="x-goodbench-replica", replicas=fleet.names)
        live = gb.run(spec, target, result_dir=out_dir, scrape_metrics=False)
        after = fleet.hits()
    sim = gb.simulate(spec, sim_cfg, result_dir=out_dir, cluster=ClusterSpec(replicas=2, router=policy))
    recs = [r for r in live.records() if not r.warmup and r.status == "ok"]
    lv, sv = live.summary["replicas"], sim.summary["replicas"]
    return {
        "workload": workload,
        "policy": policy,
        "requests": len(recs),
        "attributed": sum(r.replica is not None for r in recs),
        "cached_tokens_sum": sum(r.cached_tokens or 0 for r in recs),
        "counter_delta": sum(after.values()) - sum(before.values()),
        "hit_rate_live": lv["hit_rate"],
        "hit_rate_sim": sv["hit_rate"],
        "ttft_p50_live_ms": live.summary["ttft_ms"]["p50"],
        "ttft_p50_sim_ms": sim.summary["ttft_ms"]["p50"],
        "jain_live": lv["jain_index"],
        "jain_sim": sv["jain_index"],
        "goodput_live": live.summary.get("goodput"),
        "goodput_sim": sim.summary.get("goodput"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default="shared-documents,sessions")
    ap.add_argument("--policies", default="round_robin,cache_aware")
    ap.add_argument("--num-prompts", type=int, default=80, help="requests (sessions: sessions) per run (default 80)")
    ap.add_argument("--rate", type=float, help="request rate (default: the workload's)")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--out", help="write every row as JSON here")
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        front = front_end(tmp)
        print(f"front end (held out: calibrate workload, one worker): {front[0]:.1f} ms + {front[1]:.2f} us/token")
        for _ in range(a.repeats):
            for w in a.workloads.split(","):
                for p in a.policies.split(","):
                    r = one(w, p, a.num_prompts, a.rate, tmp, front)
                    rows.append(r)
                    dh = r["hit_rate_sim"] - r["hit_rate_live"]
                    dt = r["ttft_p50_sim_ms"] / r["ttft_p50_live_ms"] - 1
                    print(
                        f"{w:16s} {p:12s} n={r['requests']:4d} attributed {r['attributed']:4d}  cached sum "
                        f"{r['cached_tokens_sum']:7d} vs counters {r['counter_delta']:9.0f}  hit rate live "
                        f"{r['hit_rate_live']:.3f} sim {r['hit_rate_sim']:.3f} ({dh:+.3f})  TTFT p50 live "
                        f"{r['ttft_p50_live_ms']:.1f} sim {r['ttft_p50_sim_ms']:.1f} ms ({dt:+.1%})  Jain live "
                        f"{r['jain_live']:.2f} sim {r['jain_sim']:.2f}",
                        flush=True,
                    )
    for w in a.workloads.split(","):
        for p in a.policies.split(","):
            mine = [r for r in rows if r["workload"] == w and r["policy"] == p]
            dt = [r["ttft_p50_sim_ms"] / r["ttft_p50_live_ms"] - 1 for r in mine]
            dh = [r["hit_rate_sim"] - r["hit_rate_live"] for r in mine]
            print(
                f"{w} {p}: hit-rate error {min(dh):+.3f}..{max(dh):+.3f}, TTFT p50 error "
                f"{min(dt):+.1%}..{max(dt):+.1%} over {len(mine)} runs (median {statistics.median(dt):+.1%})"
            )
    if a.out:
        with open(a.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
