"""Agent jobs from OpenTelemetry GenAI spans (workloads/oteltrace.py): the OTLP JSON an instrumented agent
framework exports, read by the GenAI semantic conventions into the same graphs the other trace formats give."""

import json

import pytest

from goodbench import api
from goodbench.engine.config import EngineConfig
from goodbench.errors import InputError
from goodbench.workloads import build_plan
from goodbench.workloads.agenttrace import read_agent_trace, sniff
from goodbench.workloads.segments import block_hashes

T0 = 1_760_000_000_000_000_000  # unix ns


def _attr(k, v):
    kind = "intValue" if isinstance(v, int) else "stringValue"
    if isinstance(v, list):
        return {"key": k, "value": {"arrayValue": {"values": [{"stringValue": x} for x in v]}}}
    return {"key": k, "value": {kind: str(v) if kind == "intValue" else v}}


def _span(trace, sid, parent, start_s, end_s, op, **attrs):
    a = [_attr("gen_ai.operation.name", op)] + [_attr(k.replace("__", "."), v) for k, v in attrs.items()]
    return {"traceId": trace, "spanId": sid, "parentSpanId": parent, "name": op,
            "startTimeUnixNano": str(T0 + int(start_s * 1e9)), "endTimeUnixNano": str(T0 + int(end_s * 1e9)),
            "attributes": a}  # fmt: skip


def _chat(trace, sid, parent, start, end, n_in, n_out, messages=None, stop="stop"):
    extra = {"gen_ai__input__messages": json.dumps(messages)} if messages else {}
    return _span(trace, sid, parent, start, end, "chat", gen_ai__usage__input_tokens=n_in,
                 gen_ai__usage__output_tokens=n_out, gen_ai__response__finish_reasons=[stop], **extra)  # fmt: skip


SYSTEM = {"role": "system", "parts": [{"type": "text", "content": "You are a planner. " * 40}]}
TASK = {"role": "user", "parts": [{"type": "text", "content": "Plan the migration of the billing service. " * 5}]}
REPLY = {"role": "assistant", "parts": [{"type": "text", "content": "First inventory the endpoints. " * 4}]}


def _export():
    """Two traces: a planner (three calls, a tool between the first two) with a researcher sub-agent (two calls)
    whose end the planner's last call waits for; and a lone call 10 s later."""
    a = "a" * 32
    spans = [
        _span(a, "p", "", 0.0, 6.5, "invoke_agent"),
        _chat(a, "c0", "p", 0.0, 1.0, 600, 40, [SYSTEM, TASK], stop="tool_calls"),
        _span(a, "t0", "p", 1.0, 1.5, "execute_tool"),
        _chat(a, "c1", "p", 1.6, 2.5, 700, 60, [SYSTEM, TASK, REPLY]),
        _span(a, "r", "p", 2.5, 5.0, "invoke_agent"),
        _chat(a, "s0", "r", 2.6, 3.5, 300, 50),
        _chat(a, "s1", "r", 3.7, 4.9, 400, 30),
        _chat(a, "c2", "p", 5.2, 6.0, 900, 80, [SYSTEM, TASK, REPLY, TASK]),
        _chat("b" * 32, "x0", "", 10.0, 10.4, 120, 10),
    ]
    return {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "agents"}, "spans": spans}]}]}


def test_otel_spans_become_jobs_with_chains_sub_agents_joins_and_waits(tmp_path):
    p = tmp_path / "spans.json"
    p.write_text(json.dumps(_export()))
    assert sniff(str(p)) == "otel"
    (job, lone), timed = read_agent_trace(str(p))
    assert timed and job.arrival_s == 0.0 and lone.arrival_s == pytest.approx(10.0)
    nodes = job.nodes  # c0, c1, s0, s1, c2 in start order
    assert [n.parents for n in nodes] == [(), (0,), (1,), (2,), (1, 3)]  # the sub-agent forks after c1; c2 joins
    assert [round(n.delay_s, 3) for n in nodes] == [0.0, 0.6, 0.1, 0.2, 0.3]  # the tool's wait, think times
    assert [n.output_tokens for n in nodes] == [40, 60, 50, 30, 80] and nodes[0].tools and not nodes[1].tools
    assert [sum(k for _, k in n.segments) for n in nodes] == [600, 700, 300, 400, 900]
    # the conversation's messages are shared segments: c1's prompt blocks start with c0's, c2's with c1's (to
    # within the block where a message's estimated tokens were cut to the call's own count)
    blocks = [block_hashes(n.segments, 16) for n in nodes]
    for a, b in ((0, 1), (1, 4)):
        shared = next((k for k, (x, y) in enumerate(zip(blocks[a], blocks[b])) if x != y), len(blocks[a]))
        assert shared >= len(blocks[a]) - 2, (a, b, shared, len(blocks[a]))
    assert not set(blocks[2]) & set(blocks[0])  # the researcher's calls carry no messages: their own prompts
    assert len(lone.nodes) == 1 and lone.nodes[0].parents == ()


def test_an_otel_trace_replays_in_simulate_at_its_recorded_times(tmp_path):
    p = tmp_path / "spans.jsonl"
    p.write_text(json.dumps(_export()) + "\n")  # the collector's file exporter: one export per line
    w = tmp_path / "w.toml"
    w.write_text(f'generator = "agent"\nendpoint = "chat"\n[agent]\ntrace = "{p}"\n')
    spec = api.load_workload(str(w))
    plan = build_plan(spec, None)
    assert len(plan.jobs) == 2 and len(plan.requests) == 6
    s = api.simulate(spec, EngineConfig(fixed_step_ms=5, enable_prefix_caching=True), result_dir=str(tmp_path)).summary
    assert s["jobs"]["started"] == s["jobs"]["completed"] == 2
    assert s["prefix_cache"]["hit_rate"] > 0.2  # the repeated system prompt and task
    # where that reuse comes from: the planner's own conversation; the two jobs share nothing
    src = s["jobs"]["prefix_sources"]
    assert src["own_job"] > 0.2 and src["other_jobs"] == 0.0
    assert src["own_job"] == pytest.approx(s["prefix_cache"]["expected_hit_rate"])
    assert s["jobs"]["per_depth"]["1"]["hit_rate"] > 0  # c1 found c0's prompt cached (the engine's usage)


@pytest.mark.parametrize(
    "doc,needle",
    [
        ({"resourceSpans": []}, "no GenAI model calls"),
        (
            {
                "resourceSpans": [
                    {"scopeSpans": [{"spans": [{**_chat("a", "c", "", 0, 1, 5, 2), "startTimeUnixNano": "x"}]}]}
                ]
            },
            "not unix nanoseconds",
        ),
        ({"resourceSpans": [{"scopeSpans": [{"spans": [_chat("a", "c", "", 0, 1, -5, 2)]}]}]}, "input_tokens"),
    ],
)
def test_bad_otel_traces_are_refused_before_the_run(tmp_path, doc, needle):
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(InputError, match=needle):
        read_agent_trace(str(p), "otel")
