"""The fault probe's server modes (tests/faultserver.py) against both clients: every request ends as one
record with the right status and a message that says what happened; nothing is lost after the last
byte; the stream ends at [DONE] or at the end of the body, whichever comes first."""

import asyncio
import time

import pytest
from faultserver import fault_server

from goodbench.client import conn as conn_mod
from goodbench.client.aiohttp_client import AiohttpClient
from goodbench.client.config import ClientConfig
from goodbench.client.conn import KERNEL_STAMPS
from goodbench.client.lean import LeanClient
from goodbench.records import RequestSpec

CLIENTS = {"lean": LeanClient, "aiohttp": AiohttpClient}
KEY = "sk-test-0123456789abcdef"


def send(client: str, modes, tok=None, stale_after=None, gap_s: float = 0.0, **cfg_kw):
    """Send one request per mode (in turn, gap_s apart) through one client; (records, server stats)."""

    async def go():
        server, base, stats = await fault_server(stale_after)
        cfg = ClientConfig(base_url=base, model="m", timeout_s=10, idle_timeout_s=5, client=client, **cfg_kw)
        try:
            async with CLIENTS[client](cfg, time.monotonic(), tok) as c:
                recs = []
                for i, m in enumerate(modes):
                    if i and gap_s:
                        await asyncio.sleep(gap_s)
                    recs.append(await c.send(RequestSpec(f"r{i}", "c", m, 3, 8), 0.0))
                return recs, stats
        finally:
            server.close()

    return asyncio.run(go())


# mode: (status, http status, what the error says)
EXPECTED = {
    "ok": ("ok", 200, None),
    "split-bytes": ("ok", 200, None),
    "http10-500": ("http_error", 500, "boom: the model crashed"),
    "error-close": ("http_error", 500, "upstream failed"),
    "html-close": ("bad_stream", 200, "got text/html (an HTML page"),
    "sse-close": ("ok", 200, None),
    "gzip": ("bad_stream", 200, "gzip-compressed body"),
    "redirect": ("http_error", 307, "redirect to https://elsewhere.example/v1/completions"),
    "continue": ("ok", 200, None),
    "capital-type": ("ok", 200, None),
}


@pytest.mark.parametrize("client", CLIENTS)
def test_every_fault_mode_is_one_record_that_says_what_happened(client):
    recs, _ = send(client, list(EXPECTED))
    for rec, (mode, (status, http, needle)) in zip(recs, EXPECTED.items()):
        assert (rec.status, rec.http_status) == (status, http), (mode, rec.status, rec.http_status, rec.error)
        assert needle is None or needle in rec.error, (mode, rec.error)
        if status == "ok":
            assert rec.output_tokens == 2 and len(rec.chunk_times) == 2, mode


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("mode", ["done-no-end", "done-then-tokens"])
def test_the_stream_ends_at_done_when_the_body_does_not(client, mode):
    t = time.monotonic()
    (rec,), _ = send(client, [mode])
    assert rec.status == "ok" and len(rec.chunk_times) in (1, 2)
    assert rec.finished_at - rec.sent_at < 0.1  # [DONE] came at once; not the idle (5 s) or total timeout
    assert time.monotonic() - t < 3


@pytest.mark.parametrize("client", CLIENTS)
def test_usage_beyond_any_count_is_ignored_and_records_are_kept(client, tok):
    recs, _ = send(client, ["huge-usage", "usage-1e23", "per-chunk-overflow"], tok)
    assert [r.status for r in recs] == ["ok"] * 3, [r.error for r in recs]
    assert all(r.output_tokens < 10 for r in recs), [r.output_tokens for r in recs]
    assert [r.output_tokens_source for r in recs[:2]] == ["tokenizer", "tokenizer"]


@pytest.mark.parametrize("client", CLIENTS)
def test_a_lone_surrogate_in_the_text_is_counted(client, tok):
    (rec,), _ = send(client, ["surrogate"], tok)
    assert rec.status == "ok" and rec.output_tokens >= 2 and rec.output_tokens_source == "tokenizer"


@pytest.mark.parametrize("client", CLIENTS)
def test_the_api_key_never_reaches_a_record(client):
    (rec,), stats = send(client, ["echo-key"], api_key=KEY)
    assert stats["headers"][0]["authorization"] == f"Bearer {KEY}"  # it was sent, and echoed back
    assert rec.status == "http_error" and KEY not in rec.to_json() and "[redacted]" in rec.error


@pytest.mark.parametrize("client", CLIENTS)
def test_no_compression_is_asked_for(client):
    _, stats = send(client, ["ok"])
    assert stats["headers"][0].get("accept-encoding") == "identity"


@pytest.mark.parametrize("client", CLIENTS)
def test_idle_connections_past_keepalive_are_not_reused(client):
    # the server closes a reused connection idle > 0.08 s as the request arrives (its keep-alive timeout
    # racing the client); a client that never reuses a connection idle longer than --keepalive never meets it
    recs, stats = send(client, ["ok"] * 8, stale_after=0.08, gap_s=0.1, keepalive_s=0.05)
    assert [r.status for r in recs] == ["ok"] * 8 and not stats.get("dropped")


def test_a_huge_text_chunk_is_tokenised_off_the_event_loop(tok):
    """A 3 MB text chunk (about a second to tokenise) must not stall another stream's timestamps."""

    async def go():
        server, base, _ = await fault_server()
        try:
            async with LeanClient(ClientConfig(base_url=base, model="m"), time.monotonic(), tok) as c:
                steady = asyncio.ensure_future(c.send(RequestSpec("s", "c", "steady", 3, 8), 0.0))
                await asyncio.sleep(0.1)
                big = await c.send(RequestSpec("big", "c", "big-text", 3, 8), 0.0)
                return big, await steady
        finally:
            server.close()

    big, steady = asyncio.run(go())
    assert big.status == "ok" and big.output_tokens > 500_000
    gaps = [b - a for a, b in zip(steady.chunk_times, steady.chunk_times[1:])]
    assert steady.status == "ok" and len(gaps) == 59 and max(gaps) < 0.25, max(gaps)


@pytest.mark.parametrize("client", CLIENTS)
def test_a_failure_after_the_last_byte_is_kept_in_the_record(client):
    """Counting tokens that fails (a tokenizer error, an overflow) used to lose the record: "DONE 0/0"."""

    class BrokenTokenizer:
        def count_batch(self, texts):
            raise OverflowError("cannot count that")

        count = count_batch

    (rec,), _ = send(client, ["ok"])  # with the server's usage: no counting needed
    assert rec.status == "ok"
    (rec,), _ = send(client, ["surrogate"], BrokenTokenizer())  # no usage: the tokenizer must count
    assert rec.status == "bad_stream" and "client error while recording: OverflowError" in rec.error
    assert len(rec.chunk_times) == 2 and rec.output_tokens == 2  # what arrived is kept, one token a chunk


def test_a_models_listing_of_the_wrong_shape_means_the_default_model():
    from aiohttp import web

    from goodbench.client.config import model_from_listing
    from goodbench.client.target import resolve_model

    assert model_from_listing({"data": 5}) is None and model_from_listing({"data": [{"id": "m"}]}) == "m"

    async def listing(request):
        return web.json_response({"data": 5})

    async def go():
        app = web.Application()
        app.router.add_get("/v1/models", listing)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        try:
            port = site._server.sockets[0].getsockname()[1]
            return await resolve_model(f"http://127.0.0.1:{port}", None)
        finally:
            await runner.cleanup()

    assert asyncio.run(go()) == "default"


@pytest.mark.parametrize("client", CLIENTS)
def test_a_record_cancelled_while_it_is_tokenised_is_kept_at_once(client):
    """Issue 42: a reply over 256K characters is counted off the loop; Ctrl-C's grace running out then
    cancelled the wait and lost the record (and the count kept the process alive). The cancelled
    request's record comes back at once, counted per chunk, and a count queued behind it is skipped."""
    import threading

    entered, release, calls = threading.Event(), threading.Event(), []

    class SlowTokenizer:  # a count that takes as long as the test says
        def count_batch(self, texts):
            calls.append(len(texts))
            entered.set()
            release.wait(10)
            return [1] * len(texts)

        def count(self, text):
            return self.count_batch([text])[0]

    async def go():
        server, base, _ = await fault_server()
        cfg = ClientConfig(base_url=base, model="m", timeout_s=10, idle_timeout_s=5, client=client)
        try:
            async with CLIENTS[client](cfg, time.monotonic(), SlowTokenizer()) as c:
                first = asyncio.ensure_future(c.send(RequestSpec("a", "c", "big-text", 3, 8), 0.0))
                while not entered.is_set():
                    await asyncio.sleep(0.01)
                second = asyncio.ensure_future(c.send(RequestSpec("b", "c", "big-text", 3, 8), 0.0))
                await asyncio.sleep(0.5)  # its stream ends: it waits behind the first count
                t = time.monotonic()
                first.cancel(), second.cancel()
                recs = await asyncio.gather(first, second)
                return recs, time.monotonic() - t
        finally:
            release.set()
            server.close()

    recs, took = asyncio.run(go())
    assert [r.status for r in recs] == ["ok", "ok"] and took < 1.0, took
    assert [(r.output_tokens, r.output_tokens_source) for r in recs] == [(1, "chunks")] * 2
    time.sleep(0.3)  # released, the builder finishes the first count (per chunk, then the whole text)
    assert calls == [1, 1], calls  # and skips the second, abandoned while it waited


def test_the_lean_clients_send_stamp_is_taken_before_the_write(monkeypatch):
    """Issue 42: stamped after the write, a loopback reply could be read as earlier than its request."""
    from goodbench.client import conn

    writes, real = [], conn.Conn.start

    def start(self, ex, data):
        writes.append(time.monotonic())
        real(self, ex, data)

    monkeypatch.setattr(conn.Conn, "start", start)
    t0 = time.monotonic()

    async def go():
        server, base, _ = await fault_server()
        try:
            async with LeanClient(ClientConfig(base_url=base, model="m"), t0, None) as c:
                return [await c.send(RequestSpec(f"r{i}", "c", "ok", 3, 8), 0.0) for i in range(3)]
        finally:
            server.close()

    recs = asyncio.run(go())
    assert [r.status for r in recs] == ["ok"] * 3 and len(writes) == 3
    assert all(t0 + r.sent_at <= w for r, w in zip(recs, writes)), (recs, writes)
    assert all(r.first_token_at >= r.sent_at for r in recs)


@pytest.mark.skipif(not KERNEL_STAMPS, reason="kernel receive stamps are Linux's")
def test_a_kernel_that_refuses_receive_stamps_falls_back_to_the_loops_clock(monkeypatch):
    """Issue 42's probe: where setsockopt(SO_TIMESTAMPNS) fails ("Protocol not available"), 0 of 40
    requests were sent ("cannot connect"). An option number no kernel has fails the same way here."""
    monkeypatch.setattr(conn_mod, "SO_TIMESTAMPNS", 12345)

    async def go():
        server, base, _ = await fault_server(None)
        cfg = ClientConfig(base_url=base, model="m", timeout_s=10, idle_timeout_s=5, client="lean")
        try:
            async with LeanClient(cfg, time.monotonic(), None) as c:
                assert c.kernel  # asked for, as on any Linux host
                await c.prewarm(2)
                recs = [await c.send(RequestSpec(f"r{i}", "c", "ok", 3, 8), 0.0) for i in range(3)]
                return recs, c.kernel, c.meter.state(3, 0)
        finally:
            server.close()

    recs, kernel, lag = asyncio.run(go())
    assert [r.status for r in recs] == ["ok"] * 3 and all(r.first_token_at is not None for r in recs)
    assert not kernel and lag["kernel_reads"] == 0
    from goodbench.client.lag import client_lag

    assert client_lag([lag])["stamps"] == "user"  # what summary.json and the console then say
