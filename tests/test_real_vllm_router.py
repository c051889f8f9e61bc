"""vllm-router (PyPI) in front of two real vLLM workers (CPU build, the tiny model, one core each), as
issue 44 asks: every request's cached prompt tokens from vLLM's usage (--enable-prompt-tokens-details),
every request attributed to the worker that served it (each worker names itself in x-goodbench-replica
through ci/real_vllm/replica_header.py, vLLM's --middleware; `--worker-metrics` attributes it again from vLLM's
own counters, checked against the header), and the policy comparison a sweep prints."""

import os

import pytest
from conftest import ROOT
from realvllm import SERVED_NAME, VllmServer

import goodbench as gb
from goodbench.analysis.fleet import prefix_hits, router_process
from goodbench.analysis.routers import router_verdicts
from goodbench.analysis.sweep import summary_row
from goodbench.store import read_jsonl

pytestmark = pytest.mark.real_vllm
MIDDLEWARE = ("--enable-prompt-tokens-details", "--middleware", "replica_header.ReplicaHeader")


@pytest.fixture(scope="module")
def workers(tmp_path_factory):
    logs = str(tmp_path_factory.mktemp("vllm-router-logs"))
    env = {"PYTHONPATH": os.path.join(ROOT, "ci", "real_vllm"), "OMP_NUM_THREADS": "1"}
    ws = [
        VllmServer(logs, 512, MIDDLEWARE, f"w{i}", env=env | {"GOODBENCH_REPLICA": f"w{i}"}).spawn() for i in range(2)
    ]
    try:
        for w in ws:
            w._wait_healthy()
        yield ws, logs
    finally:
        for w in ws:
            w.stop()


def test_vllm_router_in_front_of_two_real_vllm_workers(workers):
    ws, logs = workers
    spec = gb.load_workload("sessions", num_prompts=3)  # 3 sessions of 2-8 turns sharing a 600-token system prompt
    rows = []
    for policy in ("round_robin", "cache_aware"):
        before = sum(prefix_hits(w.base_url) for w in ws)
        router = router_process([w.base_url for w in ws], policy, logs)
        try:
            router.wait_ready(60)
            counters = tuple(f"w{i}={w.base_url}" for i, w in enumerate(ws))  # checked against the header
            target = gb.Target(
                base_url=router.base_url,
                model=SERVED_NAME,
                replica_header="x-goodbench-replica",
                worker_metrics=counters,
            )
            run = gb.run(spec, target, result_dir=logs, scrape_metrics=False)
        finally:
            router.stop()
            router.close()
        recs = run.records()
        assert all(r.status == "ok" for r in recs), [r.error for r in recs if r.status != "ok"][:2]
        assert all(r.replica in ("w0", "w1") for r in recs)  # every request attributed
        assert all(r.cached_tokens is not None for r in recs)  # vLLM's usage said each one's cache hits
        delta = sum(prefix_hits(w.base_url) for w in ws) - before
        cached = sum(r.cached_tokens for r in recs)
        print(f"{policy}: cached tokens per request sum {cached}, the workers' hit counters moved {delta:.0f}")
        assert cached == delta  # vLLM's usage, request by request, is what its counters count
        how = run.summary["replicas"]["attribution"]  # vLLM's own counters, sampled 5 times a second
        reads = read_jsonl(os.path.join(run.dir, "worker_metrics.jsonl"))
        slowest = max(2 * r.get("dt", 0) for r in reads)  # a busy worker answers /metrics late: the span bounds it
        print(f"{policy}: attribution by the workers' counters: {how}; slowest /metrics read {slowest:.3f} s")
        assert how["unattributed"] == 0 and how["agrees_with_header"] >= 0.9
        rows.append({"router": policy, "gpu": "cpu", "cell": f"cpu,router={policy}"} | summary_row(run.summary))
    lines = router_verdicts(rows)
    print("\n".join(lines))
    assert len(lines) == 1 and lines[0].startswith("cache_aware vs round_robin: hit rate ")
