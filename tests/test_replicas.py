"""A fleet seen per request (issue 44): cached prompt tokens from every API's usage, the replica from a
response header, the summary's `replicas` block (one judge for live runs and simulations), the served
engine's cached tokens and replica header, and the routers' policies under vllm-router's names."""

import asyncio
import json
import time
from dataclasses import replace

import numpy as np
import pytest
from aiohttp.test_utils import TestServer

from goodbench.client.aiohttp_client import AiohttpClient
from goodbench.client.config import ClientConfig
from goodbench.client.events import classify_messages, classify_responses
from goodbench.client.lean import LeanClient
from goodbench.client.sse import classify, classify_json
from goodbench.columnar import RecordArrays
from goodbench.engine.config import EngineConfig
from goodbench.engine.costmodel import CostModel
from goodbench.engine.layout import ClusterSpec
from goodbench.engine.router import ROUTERS, Router, canonical
from goodbench.engine.serve.render import REPLICA_HEADER
from goodbench.engine.serve.server import RUNNER_OPTIONS, EngineServer, ServeOptions
from goodbench.engine.virtual import simulate
from goodbench.errors import UsageError
from goodbench.metrics.derived import RequestMetrics
from goodbench.metrics.replicas import describe, fleet_names, jain_index, peak_in_flight, replica_block
from goodbench.records import RequestRecord, RequestSpec
from goodbench.workloads import Plan

DOC = "the quarterly report says revenue grew in every region " * 40  # ~400 tokens: 25 full blocks


# ---------------------------------------------------------------- what the usage says
def test_cached_tokens_from_every_api_usage():
    chat = b'{"choices":[],"usage":{"prompt_tokens":300,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":288}}}'
    assert classify(chat).cached_tokens == classify_json(chat).cached_tokens == 288
    odd = b'{"choices":[],"usage":{"prompt_tokens":300,"prompt_tokens_details":{"cached_tokens":"288"}}}'
    assert classify(odd).cached_tokens is None and classify(odd).prompt_tokens == 300  # not a count: ignored
    assert classify(b'{"choices":[],"usage":{"prompt_tokens":3,"prompt_tokens_details":null}}').cached_tokens is None
    done = {"type": "response.completed", "response": {"usage": {"input_tokens": 300, "output_tokens": 2,
            "input_tokens_details": {"cached_tokens": 256}}}}  # fmt: skip
    assert classify_responses(json.dumps(done).encode()).cached_tokens == 256
    delta = {"type": "message_delta", "usage": {"input_tokens": 12, "cache_read_input_tokens": 288, "output_tokens": 2}}
    c = classify_messages(json.dumps(delta).encode())
    assert c.cached_tokens == 288 and c.prompt_tokens == 300  # Anthropic's input_tokens leaves the cache out


def rec(i, replica=None, cached=None, sent=0.0, first=0.1, end=1.0, prompt=100, status="ok"):
    return RequestRecord(
        f"r{i}", "c", sent, sent, first, end, chunk_times=(first, end), chunk_tokens=(1, 1), output_tokens=2,
        prompt_tokens=prompt, status=status, cached_tokens=cached, replica=replica,
    )  # fmt: skip


def test_records_keep_cached_tokens_and_replica_through_json_and_columns():
    a, b = rec(0, "w0", 64), rec(1)
    line = json.loads(a.to_json())
    assert line["cached_tokens"] == 64 and line["replica"] == "w0"
    assert "cached_tokens" not in json.loads(b.to_json()) and "replica" not in json.loads(b.to_json())
    assert RequestRecord.from_dict(line) == a
    back = RecordArrays.from_records([a, b, rec(2, "w1", 0)]).to_records()
    assert [(r.replica, r.cached_tokens) for r in back] == [("w0", 64), (None, None), ("w1", 0)]


# ---------------------------------------------------------------- the summary's block
def test_jain_and_peak_in_flight():
    assert jain_index([5, 5]) == 1.0 and jain_index([10, 0]) == 0.5 and jain_index([]) is None
    s, e = np.array([0.0, 0.5, 1.0, 3.0]), np.array([1.0, 2.0, 1.5, 4.0])
    assert peak_in_flight(s, e) == 2  # 0.5-1.0 and 1.0-1.5 overlap [0.5, 2]; touching ends do not add


def test_replica_block_splits_hits_and_balance():
    recs = [rec(0, "w0", 96, first=0.05), rec(1, "w0", 0, first=0.30), rec(2, "w1", 64, first=0.06)]
    recs += [rec(3, "w1", 0, first=0.40, sent=0.2), rec(4, "w1", None, status="http_error")]
    b = replica_block(RequestMetrics(recs), fleet=["w0", "w1", "w2"])
    assert b["attributed"] == 5 and b["cache_reported"] == 4 and b["hit_requests"] == 2
    assert b["cached_tokens"] == 160 and b["prompt_tokens"] == 400 and b["hit_rate"] == pytest.approx(0.4)
    assert b["ttft_ms_hit"]["p50"] == pytest.approx(55.0) and b["ttft_ms_miss"]["p50"] == pytest.approx(250.0)
    assert b["per_replica"]["w1"]["requests"] == 3 and b["per_replica"]["w1"]["hit_rate"] == pytest.approx(0.32)
    assert b["per_replica"]["w2"]["requests"] == 0  # in the fleet, served nothing: it counts in the balance
    assert b["jain_index"] == pytest.approx(25 / (3 * 13))
    line = describe(b, expected=0.5)
    assert "3 replicas" in line and "hit rate 40.0% (the workload allows 50.0%)" in line and "hit 55 ms" in line
    assert replica_block(RequestMetrics([rec(0), rec(1)])) is None
    turns = [replace(rec(i, w, 0), session=s, turn=t) for i, (s, t, w) in enumerate(
        [("a", 1, "w0"), ("a", 2, "w0"), ("b", 1, "w0"), ("b", 2, "w1"), ("c", 1, "w1")])]  # fmt: skip
    b = replica_block(RequestMetrics(turns))
    assert (b["sessions"], b["sessions_split"]) == (3, 1) and "1 of 3 sessions moved" in describe(b)
    # a live run not told the fleet balances over the replicas seen, and says so: all on one reads 1.00
    alone = replica_block(RequestMetrics([rec(0, "w0", 0), rec(1, "w0", 0)]))
    assert alone["jain_index"] == 1.0 and alone["balance_over"] == "seen" and "replicas seen" in describe(alone)
    told = replica_block(
        RequestMetrics([rec(0, "w0", 0), rec(1, "w0", 0)]), fleet_names(None, {"replicas": ["w0", "w1"]})
    )
    assert told["jain_index"] == 0.5 and told["balance_over"] == "fleet" and "replicas seen" not in describe(told)


# ---------------------------------------------------------------- routers
def test_router_names_and_the_live_routers_policies():
    assert canonical("round_robin") == "round-robin" and canonical("kv_aware") == "prefix"
    assert canonical("sticky_least_loaded") == "session" and set(ROUTERS) >= {"cache-aware", "power-of-two"}
    with pytest.raises(UsageError, match="vllm-router"):
        canonical("bogus")
    ch = Router("consistent_hash", 4)
    assert len({ch.pick([0] * 4, session="s1") for _ in range(5)}) == 1  # the same key, the same instance
    assert len({ch.pick([0] * 4, session=f"s{i}") for i in range(40)}) == 4
    picks = [Router("power-of-two", 2, seed=s).pick([0, 7]) for s in range(10)]
    assert picks == [0] * 10  # of two instances, both are drawn: always the less loaded
    ca = Router("cache_aware", 2)
    a, b = (1, 2, 3, 4), (9, 8, 7, 6)
    assert ca.pick([0, 0], a) == 0  # nothing sent yet: the least loaded, the first among ties
    assert ca.pick([0, 0], b) == 0  # no match above the threshold: the least loaded again (not the emptier)
    assert ca.pick([1, 0], (9, 8, 7, 5)) == 0  # 3 of 4 blocks were sent to 0: there, though it is busier
    assert ca.pick([1, 0], (11, 12, 13, 14)) == 1  # no match: the least loaded
    assert ca.pick([100, 10], (1, 2, 3, 4)) == 1  # unbalanced (90 > 64 and 100 > 1.5 x 10): least loaded
    assert ca.pick([0, 0], (7,), session="s") == 0 and ca.pick([0, 5], (1, 2, 3, 4), session="s") == 0


def test_a_simulated_fleet_says_who_served_what_and_what_was_cached(tok):
    cfg = EngineConfig(gpu="h100-sxm", enable_prefix_caching=True).resolved()
    reqs = [RequestSpec(f"r{i}", "c", DOC + f" question {i}", 420, 8) for i in range(24)]
    plan = Plan.at(reqs, [0.25 * i for i in range(24)])
    out = simulate(cfg, plan, ClusterSpec(replicas=3, router="cache_aware"))
    recs, stats = out.records, out.stats
    assert {r.replica for r in recs} <= {"0", "1", "2"} and all(r.cached_tokens is not None for r in recs)
    assert sum(r.cached_tokens for r in recs) == stats["prefix_cache_hits"]  # usage == the engines' counters
    assert sum(r.cached_tokens > 0 for r in recs) >= 20  # the document stays on one replica
    rr = simulate(cfg, plan, ClusterSpec(replicas=3, router="round_robin")).records
    assert [r.replica for r in rr[:6]] == ["0", "1", "2", "0", "1", "2"]
    assert sum(r.cached_tokens for r in rr) < sum(r.cached_tokens for r in recs)


# ---------------------------------------------------------------- the served engine
def served(tok, details=True, name="w7"):
    cfg = EngineConfig(max_model_len=4096, enable_prefix_caching=True).resolved()
    opts = ServeOptions(enable_prompt_tokens_details=details, replica_name=name)
    return EngineServer(cfg, opts, tok, CostModel.for_config(cfg, fixed_step_ms=5.0))


def send(tok, path, specs, client=LeanClient, details=True, name="w7", **cfgkw):
    async def go():
        srv = served(tok, details, name)
        server = TestServer(srv.app(), host="127.0.0.1", **RUNNER_OPTIONS)
        await server.start_server()
        try:
            cfg = ClientConfig(base_url=f"http://127.0.0.1:{server.port}", endpoint=path, **cfgkw)
            async with client(cfg, time.monotonic(), tok) as c:
                out = [await c.send(s, 0.0) for s in specs]  # one after another: the second finds the first's blocks
            return out, srv.loops[0].engine.kv.hits
        finally:
            await server.close()

    return asyncio.run(go())


@pytest.mark.parametrize("client", [LeanClient, AiohttpClient])
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages"])
def test_served_usage_says_cached_tokens_and_the_header_names_the_replica(tok, path, client):
    specs = [RequestSpec(f"r{i}", "c", DOC + f" q{i}", 420, 3) for i in range(3)]
    if "chat" in path or "messages" in path or "responses" in path:
        specs = [RequestSpec(s.id, "c", [{"role": "user", "content": s.prompt}], 420, 3) for s in specs]
    recs, hits = send(tok, path, specs, client=client, replica_header=REPLICA_HEADER)
    assert all(r.status == "ok" for r in recs), recs[0].error
    assert [r.replica for r in recs] == ["w7"] * 3
    assert recs[0].cached_tokens == 0 and recs[1].cached_tokens > 300  # the document's blocks
    assert sum(r.cached_tokens for r in recs) == hits  # every hit the counter saw, said per request
    assert recs[1].prompt_tokens_server == recs[0].prompt_tokens_server or "messages" not in path


def test_without_prompt_token_details_chat_usage_says_none_as_vllm(tok):
    specs = [RequestSpec(f"r{i}", "c", DOC, 420, 3) for i in range(2)]
    recs, hits = send(tok, "/v1/completions", specs, details=False, name=None, replica_header=REPLICA_HEADER)
    assert hits > 0 and [r.cached_tokens for r in recs] == [None, None] and recs[1].replica is None


def test_a_non_streamed_responses_reply_lists_its_output_once(tok):
    async def fn(s, srv):
        body = {"model": srv.model_name, "input": "hello there", "max_output_tokens": 3}
        async with s.post("/v1/responses", json=body) as r:
            return r.headers.get(REPLICA_HEADER), await r.json()

    from conftest import drive

    name, out = drive(served(tok), fn)
    assert name == "w7" and len(out["output"]) == 1 and out["usage"]["input_tokens_details"]["cached_tokens"] == 0


def test_render_endpoints_give_the_prompt_token_ids_as_vllm(tok):
    """vllm-router's cache_aware matches prefixes on what the worker's render endpoints return; without
    them it sends everything to the least-loaded worker (measured: benchmarks/router_live.py)."""

    async def fn(s, srv):
        out = {}
        for path, body in (
            ("/v1/completions/render", {"prompt": DOC}),
            ("/v1/chat/completions/render", {"messages": [{"role": "user", "content": DOC}]}),
            ("/v1/completions/render", {"prompt": ""}),
        ):
            async with s.post(path, json={"model": srv.model_name, "max_tokens": 3, **body}) as r:
                out[path, bool(body.get("prompt", True))] = (r.status, await r.json())
        return out

    from conftest import drive

    out = drive(served(tok), fn)
    status, (one,) = out["/v1/completions/render", True]
    assert status == 200 and one["token_ids"] == tok.encode(DOC) and one["sampling_params"]["max_tokens"] == 3
    status, chat = out["/v1/chat/completions/render", True]
    assert status == 200 and len(chat["token_ids"]) >= len(one["token_ids"]) > 300
    status, err = out["/v1/completions/render", False]
    assert status == 400 and "empty" in err["error"]["message"]


# ---------------------------------------------------------------- the simulator's measured front end
def test_a_measured_front_end_delays_every_arrival(tok):
    reqs = [RequestSpec("r0", "c", "x", 1000, 4)]
    ttft = {}
    for kw in ({}, {"frontend_ms": 50.0}, {"frontend_ms": 50.0, "frontend_token_us": 10.0}):
        cfg = EngineConfig(gpu="h100-sxm", **kw).resolved()
        (r,) = simulate(cfg, Plan.at(reqs, [0.0])).records
        ttft[len(kw)] = r.first_token_at - r.sent_at
    assert ttft[1] - ttft[0] == pytest.approx(0.050, abs=1e-6)
    assert ttft[2] - ttft[1] == pytest.approx(0.010, abs=1e-6)  # 1,000 prompt tokens x 10 us


# ---------------------------------------------------------------- a sweep over routers
def test_router_is_a_sweep_axis_of_the_cells_instances():
    from goodbench.analysis.grid import Cell, cell_config, parse_params
    from goodbench.analysis.live import server_command

    params = parse_params(["router=round_robin,cache-aware", "max_num_batched_tokens=512"])
    assert params["router"] == ["round_robin", "cache-aware"]  # kept as spelled: {router} fills a live command
    with pytest.raises(UsageError, match="vllm-router"):
        parse_params(["router=fastest"])
    cell = Cell("h100-sxm", (("router", "round_robin"), ("max_num_batched_tokens", 512)))
    cfg = cell_config(EngineConfig(), cell)  # the router is not an engine knob
    assert cfg.max_num_batched_tokens == 512
    argv = server_command(
        cfg, 9001, "goodbench fleet --port {port} --policy {router}", ClusterSpec(router="cache_aware")
    )
    assert argv == ["goodbench", "fleet", "--port", "9001", "--policy", "cache_aware"]


def test_router_verdicts_compare_each_policy_with_round_robin():
    from goodbench.analysis.routers import router_verdicts

    base = {"gpu": "h100-sxm", "max_num_batched_tokens": 512, "cell": "h100-sxm,router=..."}
    rows = [
        base | {"router": "cache_aware", "hit_rate": 0.5, "ttft_p50_ms": 60.0, "goodput": 3.3,
                "goodput_lo": 3.2, "goodput_hi": 3.4},
        base | {"router": "round_robin", "hit_rate": 0.2, "ttft_p50_ms": 100.0, "goodput": 3.0,
                "goodput_lo": 2.9, "goodput_hi": 3.1},
        base | {"router": "random", "error": "server failed to start"},
        {"gpu": "l40s", "router": "round_robin", "hit_rate": 0.1},  # alone on its tier: nothing to compare
    ]  # fmt: skip
    (line,) = router_verdicts(rows)
    assert line.startswith("cache_aware vs round_robin: hit rate 20.0% -> 50.0% (+30.0 pts), TTFT p50 -40%")
    assert "goodput +10%" in line and "overlap" not in line


def test_goodbench_fleet_serves_until_stopped(tmp_path):
    import signal
    import subprocess
    import sys
    import urllib.request

    from conftest import require_router

    from goodbench.serverproc import free_port

    require_router()
    port = free_port()
    cmd = [sys.executable, "-m", "goodbench", "fleet", "--port", str(port), "--workers", "1", "--policy", "round_robin"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path)
    try:
        line = proc.stdout.readline()
        assert line.startswith(f"fleet ready: http://127.0.0.1:{port}"), line + proc.stdout.read()[-2000:]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=10) as r:
            assert r.status == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        out = proc.communicate(timeout=60)[0]
    assert proc.returncode == 0, out[-2000:]
