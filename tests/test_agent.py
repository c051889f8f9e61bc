"""Agent jobs (workloads/agent.py): the graph each job is, the prompt each call gets (its parents'
replies, live or planned), and the same graph semantics in virtual time (simulate) and live (run)."""

import pytest

from goodbench import api
from goodbench.engine.config import EngineConfig
from goodbench.errors import InputError
from goodbench.workloads import build_plan
from goodbench.workloads.agent import critical_path_s, node_request

AGENT = """generator = "agent"
endpoint = "{endpoint}"
seed = 5
[arrival]
rate = {rate}
[slo]
ttft = 2000
jct = {jct}
[agent]
jobs = {jobs}
depth = {depth}
fanout = {fanout}
task = 60
output = 12
tool_result = 40
tool_ms = {{ dist = "uniform", min = 50, max = 500 }}
system_tokens = 400
max_concurrent = {cap}
"""


def workload(tmp_path, endpoint="chat", rate=4, jct=60000, jobs=6, depth=4, fanout=3, cap=0):
    w = tmp_path / "agent.toml"
    w.write_text(AGENT.format(endpoint=endpoint, rate=rate, jct=jct, jobs=jobs, depth=depth, fanout=fanout, cap=cap))
    return str(w)


def test_a_job_is_plan_then_parallel_subagents_with_tool_steps_then_a_final_fan_in(tmp_path, tok):
    plan = build_plan(api.load_workload(workload(tmp_path)), tok)
    job = plan.jobs[0]
    nodes = job.nodes
    assert len(nodes) == 8 and len(plan.requests) == 6 * 8 and plan.planned is None
    assert [n.depth for n in nodes] == [0, 1, 2, 1, 2, 1, 2, 3]
    assert [n.parents for n in nodes] == [(), (0,), (1,), (0,), (3,), (0,), (5,), (2, 4, 6)]
    steps = [n for n in nodes if n.kind == "step"]
    # the first step of each sub-agent calls a tool; the next one waits for its latency
    assert [n.tool_result_tokens > 0 for n in steps] == [True, False] * 3
    for a, b in zip(steps[::2], steps[1::2]):
        assert 0.05 <= a.tool_s <= 0.5 and b.delay_s == a.tool_s
    assert critical_path_s(job) == max(n.tool_s for n in steps)
    reqs = plan.requests[:8]
    assert [r.tools for r in reqs] == [False, True, False, True, False, True, False, False]
    assert (reqs[7].job, reqs[7].node, reqs[7].parents, reqs[7].depth) == ("j0", 7, (2, 4, 6), 3)


def test_a_call_reads_its_parents_actual_replies(tmp_path, tok):
    spec = api.load_workload(workload(tmp_path))
    job = build_plan(spec, tok).jobs[0]
    replies = {0: "THE PLAN", 1: "TOOLCALL", 2: "A2", 4: "B2", 6: "C2"}
    counts = {0: 3, 1: 2, 2: 1, 4: 1, 6: 1}
    step = node_request(spec, job, 2, tok, replies, counts)
    roles = [m["role"] for m in step.prompt]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user"]
    assert step.prompt[2]["content"] == "THE PLAN" and step.prompt[4]["content"] == "TOOLCALL"
    assert step.prompt_tokens == 400 + job.task_tokens + 3 + job.sub_tokens[0] + 2 + job.nodes[1].tool_result_tokens
    final = node_request(spec, job, 7, tok, replies, counts)
    assert [m["content"] for m in final.prompt[-3:]] == ["A2", "B2", "C2"]
    planned = node_request(spec, job, 7)  # the simulator's: no text, planned lengths
    assert planned.prompt == "" and planned.prompt_tokens == 400 + job.task_tokens + 12 * 4
    # sub-agents share the job's leading context: their first steps' segments start alike
    assert node_request(spec, job, 1).segments[:3] == node_request(spec, job, 3).segments[:3]


def test_completions_prompts_are_the_context_as_one_text(tmp_path, tok):
    spec = api.load_workload(workload(tmp_path, endpoint="completions"))
    job = build_plan(spec, tok).jobs[0]
    r = node_request(spec, job, 1, tok, {0: " PLANTEXT"}, {0: 1})
    assert isinstance(r.prompt, str) and " PLANTEXT" in r.prompt


@pytest.mark.parametrize(
    "extra,needle",
    [
        ("[agent]\ndepth = 1\n", "agent.depth"),
        ("[agent]\nfanout_k = 2\n", "fanout_k"),
        ("[agent]\ntools = 3\n", "agent.tools"),
        ('[arrival]\nprocess = "closed"\nconcurrency = 2\n', "arrival.process"),
    ],
)
def test_bad_agent_tables_are_refused_with_the_key(tmp_path, extra, needle):
    w = tmp_path / "bad.toml"
    w.write_text('generator = "agent"\n' + extra)
    with pytest.raises(InputError, match=needle):
        api.load_workload(str(w))


def test_simulated_jobs_keep_the_graph_and_their_critical_path_is_their_jct(tmp_path):
    s = api.simulate(workload(tmp_path, cap=2), EngineConfig(fixed_step_ms=5), result_dir=str(tmp_path))
    recs = s.records()
    jobs = s.summary["jobs"]
    assert jobs["started"] == jobs["completed"] == 6 and jobs["calls_per_job"] == 8
    by = {}
    for r in recs:
        by.setdefault(r.job, {})[r.node] = r
    for calls in by.values():
        for r in calls.values():
            for p in r.parents:  # a call leaves only after every parent ended, plus its planned delay
                assert r.sent_at >= calls[p].finished_at + r.delay_s - 1e-6
    spans = sorted((min(r.sent_at for r in c.values()), max(r.finished_at for r in c.values())) for c in by.values())
    assert max(sum(1 for a, b in spans if a <= x < b - 1e-6) for x, _ in spans) <= 2  # max_concurrent
    # in virtual time nothing but the server and the planned delays takes time: the path is the JCT
    assert jobs["critical_path_share"]["min"] == pytest.approx(1.0)
    assert jobs["client_overhead_ms"]["max"] == pytest.approx(0.0, abs=1e-6)
    assert jobs["tool_think_on_path_ms"]["p50"] >= 50
    assert jobs["attainment"] == 1.0 and set(jobs["per_depth"]) == {"0", "1", "2", "3"}


def test_without_prefix_caching_jct_p99_rises_and_per_depth_ttft_shows_where(tmp_path):
    w = workload(tmp_path, rate=3, jobs=30)
    on, off = (
        api.simulate(w, EngineConfig(gpu="l40s", enable_prefix_caching=pc), result_dir=str(tmp_path)).summary["jobs"]
        for pc in (True, False)
    )
    assert off["jct_ms"]["p99"] > on["jct_ms"]["p99"]
    # the sub-agents' steps and the final re-prefill the job's shared context without the cache
    for d in ("1", "2", "3"):
        assert off["per_depth"][d]["ttft_ms"]["p50"] > 1.3 * on["per_depth"][d]["ttft_ms"]["p50"]


def test_a_tight_jct_slo_fails_jobs_not_calls(tmp_path):
    s = api.simulate(workload(tmp_path, jct=1), EngineConfig(fixed_step_ms=5), result_dir=str(tmp_path)).summary
    assert s["jobs"]["attainment"] == 0.0 and s["jobs"]["met_slo"] == 0
    assert s["slo_attainment"] == 1.0 and "jct" not in s["slo_clauses"]  # every call met its own clauses


def test_a_live_agent_run_against_the_reference_engine(tmp_path):
    r = api.run(
        workload(tmp_path, jobs=4, rate=8),
        # 20 ms steps: a call then takes about a quarter second, so the client's own lag per hop on a loaded
        # 2-core machine (tens of ms: at 4 ms steps a run at load 4+ measured a job's share at 0.82) stays
        # small beside it, and a dispatcher that waited 100 ms per hop (share about 0.75) still fails
        engine=EngineConfig(fixed_step_ms=20),
        result_dir=str(tmp_path),
    )
    s = r.summary
    assert s["requests"]["failed"] == 0 and s["jobs"]["completed"] == 4
    recs = r.records()
    tools = [x for x in recs if x.cls == "agent-step" and x.node in (1, 3, 5)]
    assert len(tools) == 12
    assert s["jobs"]["critical_path_share"]["min"] > 0.9
    for x in recs:
        assert x.output_tokens == 12


def test_the_report_shows_jobs_and_their_timeline(tmp_path):
    import os

    from goodbench.report.console import render_summary
    from goodbench.report.write import write_reports

    s = api.simulate(workload(tmp_path), EngineConfig(fixed_step_ms=5), result_dir=str(tmp_path))
    ((path, nfig),) = write_reports([s.dir])
    with open(path, encoding="utf-8") as f:
        text = f.read()
    assert "Agent jobs" in text and "JCT p50" in text and "TTFT p50 by depth" in text
    assert os.path.exists(os.path.join(s.dir, "job_timeline.png"))
    from rich.console import Console

    con = Console(record=True, width=160)
    con.print(render_summary(s.summary, s.meta.to_dict()))
    assert "agent jobs: 6/6 completed" in con.export_text()


def test_a_tool_that_never_returns_ends_with_the_run_duration(tmp_path):
    """Issue 42's probe: a live agent whose tool takes hours (tool_ms 1e7) kept the run past --duration
    for as long. Calls due after the run's duration are not sent; their jobs are not completed."""
    import time

    w = tmp_path / "slow-tool.toml"
    w.write_text(
        AGENT.format(endpoint="chat", rate=4, jct=60000, jobs=2, depth=4, fanout=1, cap=0).replace(
            'tool_ms = { dist = "uniform", min = 50, max = 500 }', "tool_ms = 10000000"
        )
    )
    spec = api.load_workload(str(w), duration=1.0)
    t = time.monotonic()
    r = api.run(spec, engine=EngineConfig(fixed_step_ms=5), result_dir=str(tmp_path))
    assert time.monotonic() - t < 60
    s = r.summary
    assert s["jobs"]["started"] >= 1 and s["jobs"]["completed"] == 0
    unsent = [x for x in r.records() if x.status == "cancelled"]
    # each job's step after the tool was due 1,000 s (tool_ms's ceiling) after its parent, past the run's 1 s;
    # the final call waits on it, and, as after a failed call, is never sent
    assert len(unsent) == s["jobs"]["started"] and all("--duration" in x.error for x in unsent)
    assert all(x.sent_at is None and x.node == 2 for x in unsent)
