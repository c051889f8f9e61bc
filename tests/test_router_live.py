"""A real router (vllm-router, from PyPI) in front of two `goodbench serve` workers on loopback: every
request attributed to the worker that served it, the per-request cached tokens summing to the workers'
own prefix-cache hit counters, and the simulated fleet's hit rate beside the measured one. Bounded:
30 requests per policy. Needs vllm-router (the dev extra installs it)."""

import os

import pytest
from conftest import require_router

import goodbench as gb
from goodbench.analysis.fleet import RouterFleet
from goodbench.engine.layout import ClusterSpec
from goodbench.store import read_jsonl


@pytest.fixture(autouse=True)
def _router():
    require_router()


@pytest.mark.parametrize("policy", ["round_robin", "cache_aware"])
def test_a_live_router_fleet_is_attributed_and_its_cache_counted(policy, tmp_path):
    spec = gb.load_workload("shared-documents", num_prompts=30)
    cfg = gb.EngineConfig(enable_prefix_caching=True)
    with RouterFleet(cfg, policy, log_dir=str(tmp_path)) as fleet:
        before = fleet.hits()
        target = gb.Target(base_url=fleet.base_url, replica_header="x-goodbench-replica", replicas=fleet.names)
        run = gb.run(spec, target, result_dir=str(tmp_path), scrape_metrics=False)
        after = fleet.hits()
    recs = [r for r in run.records() if r.status == "ok"]
    assert len(recs) == 30 and all(r.replica in ("w0", "w1") for r in recs)
    assert sum(r.cached_tokens for r in recs) == sum(after.values()) - sum(before.values())
    for w in ("w0", "w1"):  # each worker's own counter against the requests attributed to it
        assert sum(r.cached_tokens for r in recs if r.replica == w) == after[w] - before[w]
    block = run.summary["replicas"]
    assert block["attributed"] == 30 and block["hit_rate"] > 0.05  # the system prompts and documents recur
    # the balance is over both workers, one that served nothing included (--replicas names them)
    assert set(block["per_replica"]) == {"w0", "w1"} and block["balance_over"] == "fleet"
    if policy == "round_robin":  # in turn
        assert sorted(v["requests"] for v in block["per_replica"].values()) == [15, 15]
    # the simulated fleet (engine/router.py's model of the policy) predicts the hit rate the router got:
    # cache_aware keeps a re-asked document on its worker (the render endpoints give it the token ids)
    sim = gb.simulate(spec, cfg, result_dir=str(tmp_path), cluster=ClusterSpec(replicas=2, router=policy))
    assert abs(sim.summary["replicas"]["hit_rate"] - block["hit_rate"]) <= 0.05


def test_without_a_header_the_workers_counters_say_who_served_each_request(tmp_path):
    """--worker-metrics: the replica from each worker's finished-request counters and token sums, sampled 5 times
    a second. With the header too, the counters' choice is checked against it; without it, every request still
    gets a replica and each replica's requests are what its own counter counted."""
    spec = gb.load_workload("shared-documents", num_prompts=30)
    with RouterFleet(gb.EngineConfig(enable_prefix_caching=True), "round_robin", log_dir=str(tmp_path)) as fleet:
        both = gb.Target(
            base_url=fleet.base_url, replica_header="x-goodbench-replica", worker_metrics=fleet.worker_metrics
        )
        checked = gb.run(spec, both, result_dir=str(tmp_path), scrape_metrics=False)
        alone = gb.Target(base_url=fleet.base_url, worker_metrics=fleet.worker_metrics)
        run = gb.run(spec, alone, result_dir=str(tmp_path), scrape_metrics=False)
    how = checked.summary["replicas"]["attribution"]
    assert how["method"] == "worker counters" and how["unattributed"] == 0
    assert how["agrees_with_header"] >= 0.9, how  # distinct prompt sizes: nearly every choice is the only fit
    recs = [r for r in run.records() if r.status == "ok"]
    assert len(recs) == 30 and all(r.replica in ("w0", "w1") for r in recs)
    rows = read_jsonl(os.path.join(run.dir, "worker_metrics.jsonl"))  # sampled from before the first request
    for i, w in enumerate(("w0", "w1")):  # to after the last: the workers' own count of what they finished
        done = [r["metrics"]["vllm:request_success_total"] for r in rows if r["source"] == i]
        assert sum(r.replica == w for r in recs) == done[-1] - done[0]
    block = run.summary["replicas"]
    assert block["attributed"] == 30 and block["attribution"]["exact"] + block["attribution"]["ambiguous"] >= 27
