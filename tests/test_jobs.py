"""Job-level metrics (metrics/jobs.py) on hand-built records: JCT, the critical path through the
parent that finished last, the client's share, completion and the jct SLO."""

import dataclasses

import pytest
from recs import rec

from goodbench.columnar import RecordArrays
from goodbench.metrics.derived import RequestMetrics
from goodbench.metrics.jobs import job_block


def call(i, job, node, parents, sent, end, delay=0.0, sched=None, status="ok", depth=None):
    r = rec(i, sent=sent, chunks=(sent + 0.01, end), sched=sent if sched is None else sched, status=status)
    depth = len(parents) and 1 if depth is None else depth
    return dataclasses.replace(r, job=job, node=node, parents=tuple(parents), depth=depth, delay_s=delay)


def fan_job(job="j", t=0.0, slow=2.0, fail=False):
    """plan 0 (0..1 s); children 1, 2 sent 0.1 s after it (tool latency) ending at 2 s and at `slow`;
    final 3 sent 0.2 s after the last child, ending 1 s later; the client sent it 0.05 s late."""
    return [
        call(0, job, 0, (), t, t + 1.0, depth=0),
        call(1, job, 1, (0,), t + 1.1, t + 2.0, delay=0.1, depth=1),
        call(2, job, 2, (0,), t + 1.1, t + slow, delay=0.1, depth=1, status="http_error" if fail else "ok"),
        call(3, job, 3, (1, 2), t + slow + 0.25, t + slow + 1.25, delay=0.2, sched=t + slow + 0.2, depth=2),
    ][: 3 if fail else 4]


def block(recs, slo=None):
    return job_block(RequestMetrics(RecordArrays.from_records(recs)), slo, 10.0)


def test_jct_and_the_critical_path_through_the_slowest_child():
    b = block(fan_job(slow=3.0))
    assert b["started"] == b["completed"] == 1 and b["calls_per_job"] == 4
    assert b["jct_ms"]["p50"] == pytest.approx(4250.0)
    # plan 1.0 + (tool 0.1 + slow child 1.9) + (think 0.2 + final 1.0) = 4.2 s; the client's 0.05 s is the rest
    assert b["critical_path_ms"]["p50"] == pytest.approx(4200.0)
    assert b["tool_think_on_path_ms"]["p50"] == pytest.approx(300.0)
    assert b["client_overhead_ms"]["p50"] == pytest.approx(50.0)
    assert b["critical_path_share"]["min"] == pytest.approx(4.2 / 4.25)
    assert b["per_depth"]["1"]["calls"] == 2 and b["throughput"] == pytest.approx(0.1)
    assert b["attainment"] is None  # nothing to judge without an SLO


def test_a_failed_branch_leaves_its_job_incomplete_and_not_good():
    b = block(fan_job() + fan_job("k", t=5.0, fail=True), {"jct": 10_000})
    assert b["started"] == 2 and b["completed"] == 1
    assert b["met_slo"] == 1 and b["attainment"] == 0.5 and b["jct_ms"]["n"] == 1


def test_jct_and_per_call_clauses_judge_a_job_together():
    jobs = fan_job() + fan_job("k", t=5.0, slow=6.0)  # k: JCT 7.25 s
    assert block(jobs, {"jct": 5000})["met_slo"] == 1
    assert block(jobs, {"jct": 9000})["met_slo"] == 2
    assert block(jobs, {"jct": 9000, "ttft": 5})["met_slo"] == 0  # every call's TTFT is 10 ms


def test_runs_without_jobs_have_no_block():
    assert block([rec(0, chunks=(0.1, 0.2))]) is None


def test_job_fields_round_trip_through_records_json_and_columns():
    from goodbench.records import RequestRecord

    recs = fan_job()
    back = [RequestRecord.from_dict(__import__("json").loads(r.to_json())) for r in recs]
    assert back == recs
    assert RecordArrays.from_records(recs).to_records() == [dataclasses.replace(r) for r in recs]
    plain = rec(0, chunks=(0.1,))
    assert '"job"' not in plain.to_json() and '"items"' not in plain.to_json()  # sparse: nothing when unused
