"""The reference engine's HTTP server on a real loopback socket (aiohttp TestServer)."""

import asyncio
import json

import aiohttp
import pytest
from conftest import drive
from realclock import median, on_time_gaps, read_steps, token_stamps, way_out

from goodbench.engine.config import EngineConfig
from goodbench.engine.costmodel import CostModel
from goodbench.engine.serve.server import EngineServer, ServeOptions


def serve(fn, tok, api_key=None, step_ms=2.0, step_trace=None, **cfgkw):
    cfg = EngineConfig(max_model_len=4096, **cfgkw).resolved()
    opts = ServeOptions(api_key=api_key, step_trace=step_trace and str(step_trace))
    srv = EngineServer(cfg, opts, tok, CostModel.for_config(cfg, fixed_step_ms=step_ms))
    out = drive(srv, fn)
    return (out, read_steps(step_trace, srv.t0)) if step_trace else out


async def sse_events(resp):
    text = (await resp.read()).decode()
    return [e[6:] for e in text.split("\n\n") if e.startswith("data: ")]


def test_streaming_completion_round_trip(tok):
    async def fn(s, srv):
        body = {
            "model": "llama-3.1-8b",
            "prompt": "hello there",
            "max_tokens": 5,
            "stream": True,
            "stream_options": {"include_usage": True},
            "ignore_eos": True,
        }
        async with s.post("/v1/completions", json=body) as r:
            assert r.status == 200 and r.headers["Content-Type"].startswith("text/event-stream")
            return await sse_events(r)

    ev = serve(fn, tok)
    assert ev[-1] == "[DONE]"
    chunks = [json.loads(e) for e in ev[:-1]]
    content = [c for c in chunks if c["choices"]]
    assert len(content) == 5 and content[-1]["choices"][0]["finish_reason"] == "length"
    assert chunks[-1]["usage"] == {"prompt_tokens": 2, "completion_tokens": 5, "total_tokens": 7}


def test_chat_stream_and_unary(tok):
    async def fn(s, srv):
        body = {"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 3, "stream": True}
        async with s.post("/v1/chat/completions", json=body) as r:
            ev = await sse_events(r)
        async with s.post("/v1/chat/completions", json={**body, "stream": False}) as r:
            full = await r.json()
        return ev, full

    ev, full = serve(fn, tok)
    first = json.loads(ev[0])
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert sum(1 for e in ev[1:-1] if json.loads(e)["choices"][0]["delta"].get("content")) == 3
    assert full["usage"]["completion_tokens"] == 3 and full["choices"][0]["message"]["content"]


@pytest.mark.parametrize(
    "path,body,needle",
    [
        ("/v1/completions", {"max_tokens": 5}, "prompt"),
        ("/v1/completions", {"prompt": "x", "max_tokens": 0}, "max_tokens"),
        ("/v1/completions", {"prompt": "x", "max_tokens": 5000}, "maximum context length"),
        ("/v1/completions", {"prompt": "x", "model": "gpt-4"}, "does not exist"),
        ("/v1/chat/completions", {"messages": []}, "messages"),
    ],
)
def test_bad_requests_get_openai_errors(tok, path, body, needle):
    async def fn(s, srv):
        async with s.post(path, json=body) as r:
            return r.status, await r.json()

    status, err = serve(fn, tok)
    assert status == 400 and err["object"] == "error" and needle in err["message"]


def test_invalid_json_body(tok):
    async def fn(s, srv):
        async with s.post("/v1/completions", data=b"{nope", headers={"Content-Type": "application/json"}) as r:
            return r.status

    assert serve(fn, tok) == 400


def test_api_key(tok):
    async def fn(s, srv):
        async with s.post("/v1/completions", json={"prompt": "x", "max_tokens": 1}) as r:
            a = r.status
        async with s.post(
            "/v1/completions", json={"prompt": "x", "max_tokens": 1}, headers={"Authorization": "Bearer k1"}
        ) as r:
            b = r.status
        async with s.get("/health") as r:
            c = r.status
        return a, b, c

    assert serve(fn, tok, api_key="k1") == (401, 200, 200)


def test_metrics_use_vllm_names(tok):
    async def fn(s, srv):
        async with s.post("/v1/completions", json={"prompt": "a b c", "max_tokens": 4}) as r:
            await r.read()
        async with s.get("/metrics") as r:
            return await r.text()

    text = serve(fn, tok)
    for name in (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:time_to_first_token_seconds_bucket",
        "vllm:inter_token_latency_seconds_count",
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
        "vllm:num_preemptions_total",
        "vllm:iteration_tokens_total_bucket",
        "goodbench:step_lateness_seconds_bucket",
        "goodbench:step_lateness_p99_seconds",
    ):
        assert name in text, name
    assert 'vllm:generation_tokens_total{model_name="llama-3.1-8b"} 4' in text


def test_metrics_split_ttft_into_queue_and_prefill_like_vllm(tok, tmp_path):
    """One running sequence at a time, 20 ms steps: the second request waits out the first's 3 steps
    (~60 ms); each prompt fits one step (prefill ~20 ms). As in vLLM, whose engine core takes requests in
    between steps, queue time starts at the end of the step in progress at the arrival: TTFT = that
    wait (under one step) + queue + prefill. The figures are held to the loop's own step record
    (tests/realclock.py); the margins are the measured way in, from the client's send to the first step."""
    import time

    from goodbench.metrics.servertiming import histogram_totals
    from goodbench.prometheus import parse as parse_prometheus

    async def fn(s, srv):
        async def one():
            async with s.post(
                "/v1/completions", json={"prompt": "a b c", "max_tokens": 3, "stream": True, "ignore_eos": True}
            ) as r:
                await r.read()

        sent = time.monotonic()
        await asyncio.gather(one(), one())
        async with s.get("/metrics") as r:
            return sent, parse_prometheus(await r.text())

    (sent, m), steps = serve(fn, tok, step_ms=20.0, max_num_seqs=1, step_trace=tmp_path / "steps.jsonl")
    q, nq = histogram_totals(m, "vllm:request_queue_time_seconds")
    p, n_p = histogram_totals(m, "vllm:request_prefill_time_seconds")
    t, nt = histogram_totals(m, "vllm:time_to_first_token_seconds")
    assert nq == n_p == nt == 2
    # the plan: the first's prompt and 2 more steps, then the second's; 20 ms each, never compressed
    assert [st.prefill > 0 for st in steps] == [True, False, False, True, False, False]
    assert all(st.duration == pytest.approx(0.020, abs=1e-6) for st in steps)
    first, second = steps[0], steps[3]
    assert second.start - first.start >= 0.060 - 1e-5
    # prefill: each request's prefill step, start to actual end (its lateness measured), 40 ms and up
    assert p == pytest.approx((first.end - first.start) + (second.end - second.start), abs=1e-5)
    # both arrived between the send and the first step's end: the first is queued before its step
    # starts, the second by the end of the step in progress (the first's prefill)
    way_in = first.start - sent
    wait = t - (q + p)
    assert -1e-9 <= wait <= way_in + (first.end - sent)  # 20 ms + way in x 2 + its lateness
    assert second.start - first.end - 1e-5 <= q + wait <= way_in + (second.start - sent)  # 40..60 ms + way in x 2


def test_async_scheduling_puts_the_extra_step_in_prefill_time_like_vllm(tok, tmp_path):
    """With async scheduling a request arriving during a step is taken in at its end, while the next
    step (built at its start) runs, and is prefilled in the step after: vLLM stamps it scheduled when
    that step is built, so its queue time is ~0 and its prefill time two steps (one without). Held to
    the loop's own step record (tests/realclock.py), so late steps on a loaded machine move no margin."""
    import time

    from goodbench.metrics.servertiming import histogram_totals
    from goodbench.prometheus import parse as parse_prometheus

    async def fn(s, srv):
        async def one(delay):
            await asyncio.sleep(delay)
            body = {"prompt": "a b c", "max_tokens": 6, "stream": True, "ignore_eos": True}
            async with s.post("/v1/completions", json=body) as r:
                await r.read()

        sent = time.monotonic()
        await asyncio.gather(one(0.0), one(0.05))  # the second lands in the first's third 20 ms step
        async with s.get("/metrics") as r:
            return sent, parse_prometheus(await r.text())

    for held in (False, True):
        (sent, m), steps = serve(fn, tok, step_ms=20.0, async_scheduling=held, step_trace=tmp_path / f"{held}.jsonl")
        q, p = [histogram_totals(m, f"vllm:request_{k}_time_seconds")[0] for k in ("queue", "prefill")]
        a, b = [i for i, st in enumerate(steps) if st.prefill]  # the two prompts' steps
        assert a == 0 and b >= 2 and all(st.duration == pytest.approx(0.020, abs=1e-6) for st in steps)
        # the second was taken in at the end of the step in progress, `taken`, and stamped scheduled when
        # its prefill step was built: at that step's start, or (async) at the start of the one before
        taken, built = (steps[b - 2], steps[b - 1]) if held else (steps[b - 1], steps[b])
        scheduled = max(built.start, taken.end)
        first, second = steps[a], steps[b]
        # prefill: from there to the step's actual end, two steps with async scheduling, one without
        assert p == pytest.approx((first.end - first.start) + (second.end - scheduled), abs=1e-5)
        assert second.end - scheduled >= (0.040 if held else 0.020) - taken.late - 1e-5
        # queue: the second's ~0 (what the loop waited past the step end), the first's within its way in
        assert -1e-5 <= q - (scheduled - taken.end) <= first.start - sent + 1e-5


def test_client_disconnect_frees_its_sequence(tok):
    async def fn(s, srv):
        r = await s.post("/v1/completions", json={"prompt": "x", "max_tokens": 2000, "stream": True})
        await r.content.readany()
        assert srv.engine.num_running == 1
        r.close()  # go away mid-stream
        for _ in range(200):
            await asyncio.sleep(0.01)
            if srv.engine.num_running == 0:
                break
        return srv.engine.num_running, srv.engine.kv.num_free == srv.engine.kv.num_blocks

    assert serve(fn, tok, step_ms=5.0) == (0, True)


def test_tokens_arrive_on_step_deadlines(tok, tmp_path):
    """One token per 20 ms step, each streamed when its step ends. Held against the loop's own record
    (tests/realclock.py), so a loaded machine's late steps move no margin: every step is planned at
    20 ms, no token reaches the client before its step ended, most within 2 ms of it, and the gaps less
    the steps' measured lateness are 20 ms (a step of another length, tokens held back and sent
    together, or streamed a step late all fail, loaded or not)."""

    async def fn(s, srv):
        return (await token_stamps(s, {"prompt": "x", "max_tokens": 20}))[1]

    stamps, steps = serve(fn, tok, step_ms=20.0, step_trace=tmp_path / "steps.jsonl")
    assert len(stamps) == len(steps) == 20 and all(st.duration == pytest.approx(0.020, abs=1e-6) for st in steps)
    out = way_out(stamps, steps)
    assert min(out) >= -1e-5 and median(out) <= 0.002
    assert median(on_time_gaps(stamps, steps)) == pytest.approx(0.020, abs=0.001)


@pytest.mark.parametrize(
    "body,needle",
    [
        ({"prompt": "x", "stream_options": "yes"}, "stream_options"),
        ({"prompt": "x", "stream_options": 5, "stream": True}, "stream_options"),
        ({"prompt": "x", "stream_options": [1]}, "stream_options"),
        ({"prompt": "x", "stream_options": {"include_usage": "yes"}}, "include_usage"),
        ({"prompt": "x", "priority": float("nan")}, "priority"),
        ({"prompt": "x", "priority": 1e400}, "priority"),
        ({"prompt": "x", "n": 3}, "n = 1"),
        ({"prompt": "x", "stream": "true"}, "stream"),
        ({"prompt": [1, -5]}, "prompt"),
        ({"messages": [{"role": "user", "content": 5}]}, "content"),
    ],
)
def test_a_bad_request_is_refused_before_it_reaches_the_engine(tok, body, needle):
    async def fn(s, srv):
        async with s.post(
            "/v1/completions" if "prompt" in body else "/v1/chat/completions",
            data=json.dumps(body),
            headers={"Content-Type": "application/json"},
        ) as r:
            bad = r.status, await r.json()
        async with s.post("/v1/completions", json={"prompt": "and now", "max_tokens": 2, "stream": True}) as r:
            after = r.status, await sse_events(r)
        return bad, after, srv.engine.num_running + srv.engine.sched.num_waiting()

    (status, err), (ok, events), left = serve(fn, tok)
    assert status == 400 and err["object"] == "error" and needle in err["message"]
    assert ok == 200 and events[-1] == "[DONE]" and left == 0


def test_a_non_streaming_client_that_goes_away_frees_its_request(tok):
    async def fn(s, srv):
        task = asyncio.ensure_future(s.post("/v1/completions", json={"prompt": "x", "max_tokens": 4000}))
        for _ in range(100):
            await asyncio.sleep(0.01)
            if srv.engine.num_running:
                break
        assert srv.engine.num_running == 1
        task.cancel()  # the client gives up: its connection closes
        for _ in range(300):
            await asyncio.sleep(0.01)
            if srv.engine.num_running == 0:
                break
        return srv.engine.num_running

    assert serve(fn, tok, step_ms=5.0) == 0


def test_a_dead_engine_loop_makes_health_fail_and_requests_end(tok):
    async def fn(s, srv):
        def boom():
            raise RuntimeError("simulated engine fault")

        srv.engine.step = boom
        async with s.post("/v1/completions", json={"prompt": "x", "max_tokens": 3, "stream": True}) as r:
            events = await sse_events(r)
        async with s.get("/health") as r:
            health = r.status, await r.text()
        async with s.post("/v1/completions", json={"prompt": "x", "max_tokens": 3}) as r:
            later = r.status
        return events, health, later, srv.failed

    events, (code, text), later, failed = serve(fn, tok)
    assert "simulated engine fault" in events[-1] and code == 503 and "simulated engine fault" in text
    assert later == 503 and failed.startswith("RuntimeError")


def test_serve_stops_instead_of_hanging_when_the_engine_loop_dies(tok):
    from goodbench.engine.serve.main import serve_forever
    from goodbench.serverproc import free_port

    cfg = EngineConfig(max_model_len=4096).resolved()
    srv = EngineServer(cfg, ServeOptions(port=free_port()), tok, CostModel.for_config(cfg, fixed_step_ms=2))

    def boom():
        raise RuntimeError("simulated engine fault")

    srv.engine.step = boom

    async def go():
        serving = asyncio.ensure_future(serve_forever(srv))
        await asyncio.sleep(0.3)
        async with aiohttp.ClientSession() as s:
            async with s.post(
                f"http://127.0.0.1:{srv.opts.port}/v1/completions",
                json={"prompt": "x", "max_tokens": 2, "stream": True},
            ) as r:
                await r.read()
        await asyncio.wait_for(serving, 10)  # serve_forever returns by itself: run_server then exits 1

    asyncio.run(go())
    assert srv.failed.startswith("RuntimeError")


def test_the_engine_can_think_before_it_answers(tok):
    async def fn(s, srv):
        body = {
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 5,
            "stream": True,
            "stream_options": {"include_usage": True},
            "goodbench_reasoning_tokens": 3,
        }
        async with s.post("/v1/chat/completions", json=body) as r:
            return await sse_events(r)

    ev = [json.loads(e) for e in serve(fn, tok)[:-1]]
    deltas = [e["choices"][0]["delta"] for e in ev if e["choices"]][1:]  # after the role chunk
    assert [("reasoning_content" in d) for d in deltas] == [True, True, True, False, False]
    assert ev[-1]["usage"]["completion_tokens_details"] == {"reasoning_tokens": 3}


def test_request_success_counts_finished_requests_not_submitted_ones(tok):
    """vllm:request_success_total counts requests that finished (it used to count each on arrival)."""

    def success(text):
        return sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("vllm:request_success_total{")
        )

    async def fn(s, srv):
        async with s.post("/v1/completions", json={"prompt": "a b c", "max_tokens": 40, "stream": True}) as r:
            await r.content.readline()  # the stream has started
            async with s.get("/metrics") as m:
                during = success(await m.text())
            await r.read()
        async with s.get("/metrics") as m:
            after = success(await m.text())
        return during, after

    assert serve(fn, tok, step_ms=10) == (0, 1)


def test_hostile_bodies_are_400s_or_answers_never_500s(tok):
    """A lone surrogate in the prompt (valid JSON, not UTF-8) is served; JSON nested 100,000 deep is a
    400, not a RecursionError's 500."""

    async def fn(s, srv):
        surrogate = json.dumps({"prompt": "a\ud800b", "max_tokens": 2})  # \\ud800 on the wire
        r1 = await s.post("/v1/completions", data=surrogate, headers={"Content-Type": "application/json"})
        deep = "[" * 100_000 + "]" * 100_000
        r2 = await s.post("/v1/completions", data=deep, headers={"Content-Type": "application/json"})
        ok = await s.post("/v1/completions", json={"prompt": "x", "max_tokens": 2})
        return r1.status, r2.status, (await r2.json())["message"], ok.status

    s1, s2, msg, after = serve(fn, tok)
    assert (s1, s2, after) == (200, 400, 200) and "not valid JSON" in msg


@pytest.mark.parametrize(
    "dist", ["uniform:5:1", "uniform:0:3", "lognormal:0:1", "lognormal:100:nan", "lognormal:5:1e9"]
)
def test_an_eos_length_distribution_that_cannot_draw_is_refused_at_start(tok, dist):
    from goodbench.errors import UsageError

    cfg = EngineConfig(max_model_len=4096).resolved()
    with pytest.raises(UsageError, match="--eos-length-dist"):
        EngineServer(cfg, ServeOptions(eos_dist=dist), tok, CostModel.for_config(cfg, fixed_step_ms=2.0))


def test_serve_logs_a_stats_line_per_interval_and_each_request(tok, capsys):
    """`goodbench serve` said nothing per request or per interval: now a line every --log-interval while
    busy (finished, tokens/s, running, waiting, KV use) and, with --log-requests, one per request."""
    from goodbench.engine.serve.main import serve_forever
    from goodbench.serverproc import free_port

    cfg = EngineConfig(max_model_len=4096).resolved()
    opts = ServeOptions(port=free_port(), log_interval_s=0.2, log_requests=True)
    srv = EngineServer(cfg, opts, tok, CostModel.for_config(cfg, fixed_step_ms=2))

    async def go():
        serving = asyncio.ensure_future(serve_forever(srv))
        await asyncio.sleep(0.2)
        async with aiohttp.ClientSession() as s:
            url = f"http://127.0.0.1:{opts.port}/v1/completions"
            async with s.post(url, json={"prompt": "hi there", "max_tokens": 40, "ignore_eos": True}) as r:
                await r.read()
        await asyncio.sleep(0.5)  # an interval with the request, then idle ones (no lines)
        srv.on_failure()  # stop serving
        await asyncio.wait_for(serving, 10)

    asyncio.run(go())
    out = capsys.readouterr().out.splitlines()
    stats = [line for line in out if "requests finished in" in line]
    assert stats and "generation" in stats[0] and "running" in stats[0] and "KV cache" in stats[0]
    assert sum(int(line.split(": ")[1].split()[0]) for line in stats) == 1  # the one request, counted once
    assert len(stats) <= 3  # idle intervals log nothing
    assert any(line.startswith("request cmpl-0: 2 prompt + 40 output tokens, finished") for line in out), out


def test_a_calibrated_front_end_delays_a_request_by_the_requests_already_in_flight(tok):
    """`serve --calibration` with a profile whose front end grows with the load (engine/frontend.py):
    a request sent while another is in flight waits flight_s more before the engine sees it."""
    from dataclasses import replace

    cfg = EngineConfig(max_model_len=4096).resolved()
    cost = replace(CostModel.for_config(cfg, fixed_step_ms=2.0), frontend_flight_s=0.2)
    srv = EngineServer(cfg, ServeOptions(), tok, cost)

    async def ttft(s, delay):
        import time

        await asyncio.sleep(delay)
        t0 = time.monotonic()
        body = {"prompt": "x", "max_tokens": 150, "stream": True, "ignore_eos": True}
        async with s.post("/v1/completions", json=body) as r:
            first = None
            async for _ in r.content.iter_any():
                first = first or time.monotonic() - t0
        return first

    async def fn(s, srv):
        return await asyncio.gather(ttft(s, 0.0), ttft(s, 0.05))

    alone, second = drive(srv, fn)
    assert alone < 0.1 and 0.2 <= second < 0.35 and srv.in_flight == 0


def test_the_engine_says_what_it_is_as_vllm_does(tok):
    """/v1/models' owned_by and vLLM's /version: a run against the engine records its name and version."""
    from goodbench import __version__
    from goodbench.client.serverinfo import server_info

    async def fn(s, srv):
        async with s.get("/health") as r:
            base = str(r.url.origin())
        return await server_info(base, model="llama-3.1-8b")

    info = serve(fn, tok)
    assert info["name"] == "goodbench" and info["version"] == __version__, info
