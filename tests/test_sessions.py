"""Multi-turn sessions (workloads.sessions, metrics.sessions, the simulator's and the runner's session
dispatch) and prompts with a known prefix structure (workloads.segments)."""

import asyncio
import json
import os

import pytest
from conftest import run_cli

from goodbench import api
from goodbench.engine.config import EngineConfig
from goodbench.workloads.segments import block_hashes, reuse_ratio, text_of, tokens_of
from goodbench.workloads.sessions import turn_request

SESSIONS = """generator = "sessions"
endpoint = "chat"
seed = 3
[arrival]
rate = 2
[slo]
ttft = 300
[session]
sessions = 60
turns = {{ dist = "uniform", min = 3, max = 5 }}
user = {{ dist = "uniform", min = 30, max = 90 }}
output = {{ dist = "uniform", min = 80, max = 200 }}
think_s = {think}
system_tokens = 600
max_concurrent = {cap}
"""


def workload(tmp_path, think=3, cap=0):
    w = tmp_path / "s.toml"
    w.write_text(SESSIONS.format(think=think, cap=cap))
    return str(w)


def test_segments_give_exact_text_and_shared_leading_blocks(tok):
    a = ((("sys",), 40), (("u", 1), 20))
    b = ((("sys",), 40), (("u", 2), 20))
    ha, hb = block_hashes(a, 16), block_hashes(b, 16)
    assert len(ha) == 3 and ha[:2] == hb[:2] and ha[2] != hb[2]  # 40 shared tokens: 2 whole blocks
    assert tok.count(text_of(a, tok)) == tokens_of(a) == 60
    assert text_of(a, tok).startswith(text_of(((("sys",), 40),), tok))
    assert reuse_ratio([a, b, a]) == pytest.approx((32 + 48) / 180)


def test_each_turn_resends_the_whole_history(tmp_path, tok):
    spec = api.load_workload(workload(tmp_path))
    from goodbench.workloads import build_plan

    plan = build_plan(spec, tok)
    s = plan.sessions[0]
    t1, t2 = turn_request(spec, s, 1, tok), turn_request(spec, s, 2, tok, replies=["the reply"], reply_tokens=[2])
    assert [m["role"] for m in t2.prompt] == ["system", "user", "assistant", "user"]
    assert t2.prompt[:2] == t1.prompt and t2.prompt[2]["content"] == "the reply"
    assert t2.prompt_tokens == 600 + s.turns[0].user_tokens + 2 + s.turns[1].user_tokens
    assert (t2.session, t2.turn, t2.session_turns) == ("s0", 2, len(s.turns))
    assert len(plan.requests) == sum(len(x.turns) for x in plan.sessions) and plan.planned is None


def test_simulated_sessions_with_and_without_prefix_caching(tmp_path):
    w = workload(tmp_path)
    on, off = (
        api.simulate(w, EngineConfig(gpu="l40s", enable_prefix_caching=pc), result_dir=str(tmp_path)).summary
        for pc in (True, False)
    )
    assert on["sessions"]["started"] == on["sessions"]["completed"] == 60
    assert on["prefix_cache"]["hit_rate"] > 0.6
    assert on["prefix_cache"]["hit_rate"] == pytest.approx(on["prefix_cache"]["expected_hit_rate"], abs=0.05)
    assert off["prefix_cache"]["hit_rate"] is None and off["prefix_cache"]["enabled"] is False
    assert off["prefix_cache"]["expected_hit_rate"] == on["prefix_cache"]["expected_hit_rate"]  # the reuse left unused
    last = max(on["per_turn"], key=int)
    # without the cache every turn re-prefills the whole history: late turns wait longer for their first token
    assert off["per_turn"][last]["ttft_ms"]["p50"] > 1.5 * on["per_turn"][last]["ttft_ms"]["p50"]
    assert on["sessions"]["attainment"] >= off["sessions"]["attainment"]


def test_session_cap_and_think_time_in_virtual_time(tmp_path):
    s = api.simulate(workload(tmp_path, think=2, cap=4), EngineConfig(fixed_step_ms=5), result_dir=str(tmp_path))
    recs = s.records()
    by_session: dict = {}
    for r in recs:
        by_session.setdefault(r.session, []).append(r)
    for turns in by_session.values():
        turns.sort(key=lambda r: r.turn)
        for a, b in zip(turns, turns[1:]):
            assert b.sent_at >= a.chunk_times[-1] - 1e-9  # the next turn only after the reply
    spans = sorted((min(r.sent_at for r in t), max(r.chunk_times[-1] for r in t)) for t in by_session.values())
    assert max(sum(1 for a, b in spans if a <= x < b - 1e-6) for x, _ in spans) <= 4  # times kept to 0.1 us


def run_sessions(tmp_path, num_prompts: int, seen=None):
    """A live session run against a tiny aiohttp chat server that answers " ok" (and notes each request's
    session header, `user` and number of messages in `seen`)."""
    from aiohttp import web
    from aiohttp.test_utils import TestServer

    async def handler(request):
        body = await request.json()
        if seen is not None:
            seen.append((request.headers.get("X-Session-ID"), body.get("user"), len(body["messages"])))
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(b'data: {"choices":[{"delta":{"content":" ok"}}]}\n\ndata: [DONE]\n\n')
        return resp

    async def go():
        app = web.Application()
        app.router.add_post("/v1/chat/completions", handler)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        try:
            spec = api.load_workload(workload(tmp_path, think=0.01), num_prompts=num_prompts)
            return await asyncio.get_running_loop().run_in_executor(
                None, lambda: api.run(spec, f"http://127.0.0.1:{server.port}", result_dir=str(tmp_path / "r"))
            )
        finally:
            await server.close()

    from goodbench.errors import GoodbenchWarning

    with pytest.warns(GoodbenchWarning, match="lists no models"):  # this server has no /v1/models: said once
        return asyncio.run(go())


def test_a_live_session_run_sends_the_session_id_and_resends_replies(tmp_path):
    seen = []
    run = run_sessions(tmp_path, 3, seen)
    assert run.summary["sessions"]["completed"] == 3
    assert seen[0] == (None, None, 1)  # the preflight's one tiny request, before the clock starts
    seen = seen[1:]
    assert all(h == u and h.startswith("s") for h, u, _ in seen)
    per_session = {}
    for h, _, n in seen:
        per_session.setdefault(h, []).append(n)
    assert all(n == [2 * k for k in range(1, len(n) + 1)] for n in per_session.values())  # system + history


def test_sharegpt_conversations_replay_as_sessions(tmp_path):
    r = run_cli(
        "simulate",
        "--dataset-name",
        "sharegpt",
        "--multi-turn",
        "--num-prompts",
        "20",
        "--result-dir",
        str(tmp_path),
        "--goodput",
        "ttft:500",
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    (run,) = os.listdir(tmp_path)
    s = json.loads((tmp_path / run / "summary.json").read_text())
    assert s["sessions"]["started"] == 20 and s["sessions"]["turns_per_session"] >= 2
    assert "1" in s["per_turn"] and "2" in s["per_turn"] and "TTFT p50 by turn" in r.stdout


def test_session_first_turns_are_built_before_the_clock_starts(tmp_path):
    """Each session's first prompt (and the tokenizer's word list it is drawn from) is built before the
    clock starts, so first requests leave on time (the issue saw session 0's leave 240-430 ms late)."""
    from goodbench.tokenizer import load

    load(None).__dict__.pop("words", None)  # as in a fresh process: the word list not built yet
    run = run_sessions(tmp_path, 4)
    with open(os.path.join(run.dir, "records.jsonl")) as f:
        recs = [json.loads(line) for line in f]
    first = [r["sent_at"] - r["scheduled_at"] for r in recs if r["turn"] == 1]
    assert len(first) == 4 and max(first) < 0.1, first
