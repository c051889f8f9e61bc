"""Deterministic streaming server for measuring the load generator (run in its own process,
ideally pinned: `taskset -c 0 python benchmarks/stub_server.py --port 8100 --log /tmp/truth.bin`).

Each request streams `max_tokens` OpenAI completion chunks: the first after --ttft-ms, then one every
--itl-ms (every --stall-every-th gap lasts --stall-ms instead), on absolute deadlines. It logs the
monotonic time at which it read each request and sent each chunk: that log is the truth goodbench's
own measurements are compared with. The log is binary (request id, kind, time) written at exit."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import struct
import time

from aiohttp import web

LOG: list[tuple[int, int, float]] = []  # (request number, kind 0=read 1=chunk, monotonic time)


def make_app(ttft: float, itl: float, stall_every: int, stall: float) -> web.Application:
    counter = {"n": 0}

    async def completions(request: web.Request) -> web.StreamResponse:
        t_read = time.monotonic()
        body = await request.json()
        rid = counter["n"]
        counter["n"] += 1
        LOG.append((rid, 0, t_read))
        n = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        deadline = t_read + ttft
        pre = b'data: {"id":"x","object":"text_completion","choices":[{"index":0,"text":" tok","finish_reason":null}]}\n\n'
        for i in range(n):
            d = deadline - time.monotonic()
            if d > 0:
                await asyncio.sleep(d)
            await resp.write(pre)
            LOG.append((rid, 1, time.monotonic()))
            gap = stall if (stall_every and (i + 1) % stall_every == 0) else itl
            deadline += gap
        usage = {"id": "x", "object": "text_completion", "choices": [],
                 "usage": {"prompt_tokens": 8, "completion_tokens": n, "total_tokens": n + 8}}
        await resp.write(b"data: " + json.dumps(usage).encode() + b"\n\ndata: [DONE]\n\n")
        await resp.write_eof()
        return resp

    async def models(request):
        return web.json_response({"object": "list", "data": [{"id": "stub", "object": "model"}]})

    app = web.Application()
    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/chat/completions", completions)
    app.router.add_get("/v1/models", models)
    async def health(request):
        return web.Response(text="ok")

    app.router.add_get("/health", health)
    return app


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=8100)
    ap.add_argument("--ttft-ms", type=float, default=50.0)
    ap.add_argument("--itl-ms", type=float, default=20.0)
    ap.add_argument("--stall-every", type=int, default=0)
    ap.add_argument("--stall-ms", type=float, default=200.0)
    ap.add_argument("--log", default=None)
    a = ap.parse_args()
    try:
        import uvloop
        uvloop.install()
    except ImportError:
        pass
    app = make_app(a.ttft_ms / 1000, a.itl_ms / 1000, a.stall_every, a.stall_ms / 1000)

    def dump(*_):
        if a.log:
            with open(a.log, "wb") as f:
                for rec in LOG:
                    f.write(struct.pack("<iid", *rec))
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, dump)
    try:
        web.run_app(app, host="127.0.0.1", port=a.port, print=None, access_log=None, backlog=4096,
                    handle_signals=False)
    finally:
        dump()


if __name__ == "__main__":
    main()
