"""What only the lean client does: keep-alive hygiene against servers that close idle connections (a
reused connection closed under a request is retried once on a fresh one, and recorded), the keep-alive
limit, prewarming, and TLS. (The shared fault matrix runs against both clients in test_client.py.)"""

import asyncio
import time

from aiohttp.test_utils import TestServer
from scripted import USAGE_DONE, chunk, racy_server, script_app

from goodbench.client.aiohttp_client import AiohttpClient
from goodbench.client.config import ClientConfig
from goodbench.client.lean import LeanClient
from goodbench.records import RequestSpec


def sequential(cls, n: int, gap_s: float, **server_kw):
    """n requests `gap_s` apart, one at a time, to a RacyKeepAlive server; its records."""

    async def go():
        server, port = await racy_server(**server_kw)
        try:
            async with cls(ClientConfig(base_url=f"http://127.0.0.1:{port}", model="m"), time.monotonic()) as c:
                out = []
                for _ in range(n):
                    await asyncio.sleep(gap_s)
                    out.append(await c.send(RequestSpec("p", "c", "p", 1, 3), 0.0))
                return out
        finally:
            server.close()
            await server.wait_closed()

    return asyncio.run(go())


def test_a_reused_connection_closed_under_a_request_is_retried_once_and_recorded():
    recs = sequential(LeanClient, 12, 0.0, idle_s=lambda: 5.0, drop_every=3)
    assert [r.status for r in recs] == ["ok"] * 12
    assert sum(r.retries for r in recs) >= 3  # every third reused request was dropped, and sent again
    base = sequential(AiohttpClient, 12, 0.0, idle_s=lambda: 5.0, drop_every=3)
    assert any(r.status == "disconnected" for r in base)  # what the baseline records for the same server


def test_an_idle_timeout_near_the_arrival_gap_loses_no_request():
    # a server closing idle connections after 16-19.6 ms, requests every 20 ms: reuses race the close
    import random

    rng = random.Random(1)
    for _ in range(2):
        recs = run_open_loop(150, 0.020, idle_s=lambda: rng.uniform(0.016, 0.0196))
        assert [r.status for r in recs] == ["ok"] * 150


def run_open_loop(n: int, gap_s: float, **server_kw):
    """n requests on a constant schedule through the runner (the way `goodbench run` sends them)."""
    import numpy as np

    from goodbench.arrivals import ArrivalSpec
    from goodbench.runner import Plan, Progress, RunOptions, Share, run_share

    class Sink:
        dir, records = "", []

        def append(self, r):
            self.records.append(r)

    async def go():
        server, port = await racy_server(**server_kw)
        sink = Sink()
        sink.records = []
        try:
            plan = Plan(
                [RequestSpec(f"r{i}", "c", "p", 1, 3) for i in range(n)],
                np.arange(n) * gap_s,
                ArrivalSpec("constant", rate=1 / gap_s),
            )
            await run_share(
                Share(
                    plan,
                    np.arange(n),
                    0,
                    ClientConfig(base_url=f"http://127.0.0.1:{port}"),
                    sink,
                    Progress(),
                    RunOptions(scrape_metrics=False, prewarm=2),
                )
            )
            return sink.records
        finally:
            server.close()
            await server.wait_closed()

    return asyncio.run(go())


def test_connections_idle_past_the_keepalive_limit_are_not_reused():
    async def go():
        server, port = await racy_server(idle_s=lambda: 5.0, drop_every=2)  # drops every 2nd reuse
        try:
            cfg = ClientConfig(base_url=f"http://127.0.0.1:{port}", model="m", keepalive_s=0.02)
            async with LeanClient(cfg, time.monotonic()) as c:
                out = []
                for _ in range(6):
                    await asyncio.sleep(0.03)  # longer than the client's limit: a fresh connection each time
                    out.append(await c.send(RequestSpec("p", "c", "p", 1, 3), 0.0))
                return out
        finally:
            server.close()
            await server.wait_closed()

    recs = asyncio.run(go())
    assert [r.status for r in recs] == ["ok"] * 6 and sum(r.retries for r in recs) == 0


def test_prewarmed_connections_are_used_and_counted():
    app = script_app({"p": [(0.0, chunk("a")), (0.0, USAGE_DONE % 1)]})

    async def go():
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        try:
            async with LeanClient(ClientConfig(base_url=f"http://127.0.0.1:{server.port}"), time.monotonic()) as c:
                await c.prewarm(4)
                idle = len(c.idle)
                recs = await asyncio.gather(*(c.send(RequestSpec("p", "c", "p", 1, 1), 0.0) for _ in range(4)))
                return idle, recs, len(c.idle)
        finally:
            await server.close()

    idle, recs, after = asyncio.run(go())
    assert idle == 4 and [r.status for r in recs] == ["ok"] * 4 and after == 4


def test_tls_with_a_verified_certificate(tmp_path, monkeypatch):
    import shutil
    import ssl
    import subprocess

    import pytest

    if shutil.which("openssl") is None:
        pytest.fail("the TLS test needs the openssl command (Debian: openssl)")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # the client verifies against the default trust store
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    app = script_app({"p": [(0.0, chunk("a")), (0.0, chunk("b")), (0.0, USAGE_DONE % 2)]})

    async def go():
        server = TestServer(app, host="127.0.0.1")
        await server.start_server(ssl=server_ctx)
        try:
            async with LeanClient(ClientConfig(base_url=f"https://127.0.0.1:{server.port}"), time.monotonic()) as c:
                await c.prewarm(1)
                return await c.send(RequestSpec("p", "c", "p", 1, 2), 0.0)
        finally:
            await server.close()

    rec = asyncio.run(go())
    assert rec.status == "ok" and len(rec.chunk_times) == 2 and rec.output_tokens == 2
