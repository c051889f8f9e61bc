"""Recorded agent jobs (workloads/agenttrace.py): goodbench's own format and the Weka / kv-cache-tester
Claude Code trace format, replayed as the same graphs."""

import json

import pytest

from goodbench import api
from goodbench.engine.config import EngineConfig
from goodbench.errors import InputError, UsageError
from goodbench.workloads import build_plan
from goodbench.workloads.agent import node_request
from goodbench.workloads.agenttrace import read_agent_trace

WEKA = {
    "id": "sess01",
    "block_size": 64,
    "hash_id_scope": "local",
    "requests": [
        {"t": 0.0, "type": "s", "in": 180, "out": 25, "hash_ids": [1, 2], "stop": "tool_use", "think_time": 0.0},
        {
            "t": 1.0,
            "type": "subagent",
            "status": "completed",
            "requests": [
                {"t": 1.2, "type": "n", "in": 200, "out": 30, "hash_ids": [10, 11], "think_time": 0.0},
                {"t": 2.4, "type": "n", "in": 260, "out": 40, "hash_ids": [10, 11, 12], "think_time": 0.2},
            ],
        },
        {"t": 3.0, "type": "subagent", "status": "async_launched", "requests": [{"in": 90, "out": 5}]},
        {"t": 6.0, "type": "s", "in": 280, "out": 45, "hash_ids": [1, 2, 3, 4], "think_time": 0.5},
    ],
}


def test_weka_subagents_fork_after_the_preceding_call_and_join_the_next(tmp_path):
    p = tmp_path / "s.json"
    p.write_text(json.dumps(WEKA))
    (job,), timed = read_agent_trace(str(p))
    assert not timed  # sessions carry no start time
    assert [n.parents for n in job.nodes] == [(), (0,), (1,), (0,), (0, 2)]  # async_launched: no join
    assert [n.depth for n in job.nodes] == [0, 1, 2, 1, 3]
    assert job.nodes[4].delay_s == 0.5 and job.nodes[2].delay_s == 0.2
    assert job.nodes[0].tools and not job.nodes[4].tools  # stop = tool_use: the reply was a tool call
    segs = job.nodes[4].segments
    assert [n for _, n in segs] == [64, 64, 64, 64, 24]  # 4 recorded blocks and the rest of 280 tokens
    assert segs[:2] == job.nodes[0].segments[:2]  # equal hash ids: equal blocks


def test_the_shipped_sample_replays_at_its_arrivals_in_simulate():
    spec = api.load_workload("agent-trace-sample")
    plan = build_plan(spec, None)
    assert len(plan.jobs) == 24 and plan.jobs[0].arrival_s == 0.0
    r = node_request(spec, plan.jobs[0], 1)
    assert r.tools and r.prompt_tokens == 1543 and r.parents == (0,)
    s = api.simulate("agent-trace-sample", EngineConfig(fixed_step_ms=5), result_dir="/tmp/gb-agent-trace-test").summary
    assert s["jobs"]["started"] == s["jobs"]["completed"] == 24
    assert s["prefix_cache"]["hit_rate"] > 0.5  # jobs share the system prompt's recorded blocks
    src = s["jobs"]["prefix_sources"]  # most of it from other jobs (that system prompt), some from a job's own calls
    assert src["other_jobs"] > src["own_job"] > 0
    assert src["own_job"] + src["other_jobs"] == pytest.approx(s["prefix_cache"]["expected_hit_rate"])


def test_a_trace_without_arrival_times_needs_an_arrival_process(tmp_path):
    p = tmp_path / "s.jsonl"
    p.write_text(json.dumps(WEKA) + "\n" + json.dumps({**WEKA, "id": "sess02"}) + "\n")
    w = tmp_path / "w.toml"
    w.write_text(f'generator = "agent"\n[agent]\ntrace = "{p}"\n')
    with pytest.raises(UsageError, match="no arrival times"):
        build_plan(api.load_workload(str(w)), None)
    w.write_text(f'generator = "agent"\n[arrival]\nrate = 2\n[agent]\ntrace = "{p}"\n')
    plan = build_plan(api.load_workload(str(w)), None)
    assert [j.id for j in plan.jobs] == ["sess01", "sess02"] and plan.jobs[1].arrival_s > 0


@pytest.mark.parametrize(
    "line,needle",
    [
        ('{"job": "a", "node": 1, "parents": [], "in": 5, "out": 2}', "numbered 0, 1"),
        ('{"job": "a", "node": 0, "parents": [], "in": 0, "out": 2}', "'in'"),
        ('{"job": "a", "node": 0, "parents": [], "in": 100000000000, "out": 2}', "'in'"),  # past MAX_TOKENS
        ('{"node": 0}', "string 'job'"),
        ("{not json", "not JSON"),
    ],
)
def test_bad_goodbench_traces_name_the_line(tmp_path, line, needle):
    p = tmp_path / "t.jsonl"
    p.write_text(line + "\n")
    with pytest.raises(InputError, match=f"t.jsonl:1: .*{needle}" if "JSON" not in needle else needle):
        read_agent_trace(str(p), "goodbench")


def test_inferencex_weka_sessions_with_parallel_sub_agents_and_1024_token_blocks(tmp_path):
    """SemiAnalysis InferenceX's agentic corpus (cc-traces-weka-with-subagents) is the Weka format with more
    fields per request (model, input_types, api_time) and 1,024-token blocks; two sub-agent groups in a row
    run side by side, and the next main call waits for both."""
    extra = {"model": "m", "input_types": ["text"], "output_types": ["text"], "api_time": 0.4}
    sess = {
        "id": "ix1",
        "models": ["m"],
        "block_size": 1024,
        "hash_id_scope": "local",
        "requests": [
            {"t": 0.0, "type": "n", "in": 3000, "out": 20, "hash_ids": [1, 2], "stop": "tool_use", **extra},
            {"t": 0.5, "type": "subagent", "status": "completed", "requests": [{"in": 1500, "out": 10, **extra}]},
            {"t": 0.5, "type": "subagent", "status": "completed", "requests": [{"in": 1800, "out": 12, **extra}]},
            {"t": 2.0, "type": "n", "in": 4100, "out": 30, "hash_ids": [1, 2, 3], "think_time": 0.1, **extra},
        ],
    }
    p = tmp_path / "ix.jsonl"
    p.write_text(json.dumps(sess) + "\n")
    (job,), timed = read_agent_trace(str(p))
    assert [n.parents for n in job.nodes] == [(), (0,), (0,), (0, 1, 2)]
    assert [n for _, n in job.nodes[3].segments] == [1024, 1024, 1024, 1028]
    assert job.nodes[3].segments[:2] == job.nodes[0].segments[:2]
