"""A real loopback server that scripts SSE streams: chunk payloads with controlled delays, stalls,
malformed events, HTTP errors and disconnects (in-process ASGI transports would buffer and hide this)."""

import asyncio
import json
import time

from aiohttp import web
from aiohttp.test_utils import TestServer


def chunk(text):
    return ("data: " + json.dumps({"choices": [{"index": 0, "text": text, "finish_reason": None}]}) + "\n\n").encode()


USAGE_DONE = (b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":%d}}\n\ndata: [DONE]\n\n')


SENT_LOG = web.AppKey("sent_log", dict)


def script_app(steps_by_name):
    """steps: list of (delay_s, bytes) written in order, or ("status", code, body), or ("close",)."""
    sent_log = {}

    async def handler(request):
        body = await request.json()
        name = body["prompt"]
        steps = steps_by_name[name]
        if steps and steps[0][0] == "status":
            return web.Response(status=steps[0][1], text=steps[0][2])
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        t0 = time.monotonic()
        sent_log[name] = [t0]
        for step in steps:
            if step[0] == "close":
                request.transport.close()
                return resp
            delay, data = step
            await asyncio.sleep(delay)
            await resp.write(data)
            sent_log[name].append(time.monotonic())
        await resp.write_eof()
        return resp

    async def models(request):
        return web.json_response({"data": [{"id": "m"}]})

    app = web.Application()
    app.router.add_post("/v1/completions", handler)
    app.router.add_get("/v1/models", models)
    app[SENT_LOG] = sent_log
    return app


async def with_server(app, fn):
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        return await fn(f"http://127.0.0.1:{server.port}")
    finally:
        await server.close()
