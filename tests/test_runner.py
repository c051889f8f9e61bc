"""The real-clock runner (runner): open loops keep the schedule, closed loops keep their users, the
concurrency cap shows as lag, and every request ends as exactly one record in the sink."""

import asyncio
import threading

import numpy as np
import pytest
from aiohttp import web

from goodbench.arrivals import ArrivalSpec
from goodbench.client.config import ClientConfig
from goodbench.records import RequestSpec
from goodbench.runner import Plan, Progress, RunOptions, run_plan

CHUNK = b'data: {"choices":[{"index":0,"text":"x"}]}\n\n'


class Server:
    """A loopback SSE server in its own thread: `tokens` chunks `gap_s` apart per request; it counts
    requests in flight at once."""

    def __init__(self, tokens=3, gap_s=0.01):
        self.tokens, self.gap_s = tokens, gap_s
        self.in_flight = self.max_in_flight = self.seen = 0
        self.loop = asyncio.new_event_loop()
        self.ready, self.done = threading.Event(), threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()
        self.ready.wait(10)

    async def _handler(self, request):
        await request.read()
        self.seen += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        try:
            for _ in range(self.tokens):
                await asyncio.sleep(self.gap_s)
                await resp.write(CHUNK)
            await resp.write(b"data: [DONE]\n\n")
        finally:
            self.in_flight -= 1
        return resp

    def _serve(self):
        asyncio.set_event_loop(self.loop)
        app = web.Application()
        app.router.add_post("/v1/completions", self._handler)
        self.runner = web.AppRunner(app)
        self.loop.run_until_complete(self.runner.setup())
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        self.loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]
        self.ready.set()
        self.loop.run_forever()
        self.loop.run_until_complete(self.runner.cleanup())
        self.loop.close()
        self.done.set()

    def stop(self):
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.done.wait(10)


class Sink:
    def __init__(self, d):
        self.dir, self.records = str(d), []

    def append(self, rec):
        self.records.append(rec)


@pytest.fixture
def server():
    s = Server()
    yield s
    s.stop()


def requests(n):
    return [RequestSpec(f"r{i}", "a", "hi", 1, 3) for i in range(n)]


def go(server, plan, tmp_path, **opts):
    sink = Sink(tmp_path)
    cfg = ClientConfig(base_url=f"http://127.0.0.1:{server.port}", model="m")
    interrupted = run_plan(plan, cfg, sink, RunOptions(scrape_metrics=False, **opts), None, None, Progress())
    return interrupted, sink.records


def test_open_loop_sends_on_schedule_and_records_everything(server, tmp_path):
    offs = np.arange(20) * 0.01
    interrupted, recs = go(server, Plan(requests(20), offs, ArrivalSpec(rate=100.0)), tmp_path)
    assert not interrupted and sorted(r.id for r in recs) == sorted(f"r{i}" for i in range(20))
    assert all(r.status == "ok" and len(r.chunk_times) == 3 for r in recs)
    assert sorted(r.scheduled_at for r in recs) == pytest.approx(list(offs))
    assert max(r.sent_at - r.scheduled_at for r in recs) < 0.05


def test_closed_loop_keeps_its_users(server, tmp_path):
    plan = Plan(requests(12), None, ArrivalSpec("closed", concurrency=3))
    _, recs = go(server, plan, tmp_path)
    assert len(recs) == 12 and server.max_in_flight == 3


def test_a_duration_bounded_closed_loop_cycles_the_requests(server, tmp_path):
    plan = Plan(requests(2), None, ArrivalSpec("closed", concurrency=2), duration_s=0.5)
    _, recs = go(server, plan, tmp_path)
    assert len(recs) > 4 and len({r.id for r in recs}) == len(recs)  # cycled requests get fresh ids


def test_the_concurrency_cap_holds_requests_back_as_lag(server, tmp_path):
    plan = Plan(requests(10), np.zeros(10), ArrivalSpec(rate=float("inf")))
    _, recs = go(server, plan, tmp_path, max_concurrency=2)
    assert len(recs) == 10 and server.max_in_flight <= 2
    assert max(r.sent_at - r.scheduled_at for r in recs) > 0.05  # waited for a free slot


def test_a_ttfo_clause_counts_in_the_live_progress(server, tmp_path):
    """The live counter of requests meeting the SLO uses the summary's definition, ttfo included
    (it used to recompute TTFT/TPOT itself and raised KeyError on ttfo)."""
    sink = Sink(tmp_path)
    cfg = ClientConfig(base_url=f"http://127.0.0.1:{server.port}", model="m")
    p = Progress()
    run_plan(
        Plan(requests(6), np.zeros(6), ArrivalSpec(rate=float("inf"))),
        cfg,
        sink,
        RunOptions(scrape_metrics=False, slo={"ttfo": 5000, "tpot": 5000}),
        None,
        None,
        p,
    )
    assert len(sink.records) == 6 and p.good == 6


def test_a_failure_inside_dispatch_is_raised_not_taken_for_a_run_that_sent_nothing():
    """A MemoryError (or any bug) in the dispatch task used to end the run as "DONE 0/0", exit 0."""
    from goodbench.runner.dispatch import Dispatch

    class NoSink:
        def append(self, rec):
            pass

    async def broken():
        raise MemoryError("cannot allocate the users")

    async def go():
        d = Dispatch(client=None, sink=NoSink(), progress=Progress(), opts=RunOptions())
        await d.dispatch(broken())

    with pytest.raises(MemoryError):
        asyncio.run(go())
