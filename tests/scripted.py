"""A real loopback server that scripts SSE streams: chunk payloads with controlled delays, stalls,
malformed events, HTTP errors, wrong content types, endless streams and disconnects (in-process ASGI
transports would buffer and hide this). One fixture server for every client test: a request's prompt
names its script, either a list of steps or one of the named MODES."""

import asyncio
import json
import time

from aiohttp import web
from aiohttp.test_utils import TestServer


def chunk(text):
    return ("data: " + json.dumps({"choices": [{"index": 0, "text": text, "finish_reason": None}]}) + "\n\n").encode()


def event(obj) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


DONE = b"data: [DONE]\n\n"
USAGE_DONE = b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":%d}}\n\ndata: [DONE]\n\n'

# steps: (delay_s, bytes) written in order; ("status", code, body[, content type]) answers at once;
# ("close",) drops the connection; ("forever", delay_s, bytes) writes bytes every delay_s until the
# client goes away
MODES = {
    "ok": [(0.0, chunk("a")), (0.0, chunk("b")), (0.0, USAGE_DONE % 2)],
    "html": [("status", 200, "<!doctype html><html><body>Welcome to nginx!</body></html>", "text/html")],
    "json": [("status", 200, json.dumps({"choices": [{"text": "all at once"}]}), "application/json")],
    "tokens-forever": [(0.0, chunk("a")), ("forever", 0.05, chunk("x"))],
    "keepalive-forever": [(0.0, chunk("a")), ("forever", 0.05, b": keepalive\n\n")],
    "text-is-a-number": [(0.0, event({"choices": [{"text": 5}]})), (0.0, DONE)],
    "choices-is-an-object": [(0.0, chunk("a")), (0.0, event({"choices": {"text": "b"}})), (0.0, DONE)],
    "choice-is-a-string": [(0.0, event({"choices": ["b"]})), (0.0, DONE)],
    "usage-is-a-list": [(0.0, chunk("a")), (0.0, event({"choices": [], "usage": [7]})), (0.0, DONE)],
    "tokens-as-a-string": [
        (0.0, chunk("a")),
        (0.0, chunk("b")),
        (0.0, event({"choices": [], "usage": {"completion_tokens": "7"}})),
        (0.0, DONE),
    ],
}

SENT_LOG = web.AppKey("sent_log", dict)


def script_app(steps_by_name=None):
    """The fixture server: steps_by_name adds scripts to MODES (a prompt names its script)."""
    scripts = {**MODES, **(steps_by_name or {})}
    sent_log = {}

    async def handler(request):
        body = await request.json()
        name = body["prompt"] if "prompt" in body else body["messages"][-1]["content"]
        steps = scripts[name]
        if steps and steps[0][0] == "status":
            ctype = steps[0][3] if len(steps[0]) > 3 else "text/plain"
            return web.Response(status=steps[0][1], text=steps[0][2], content_type=ctype.split(";")[0])
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        sent_log[name] = [time.monotonic()]
        for step in steps:
            if step[0] == "close":
                request.transport.close()
                return resp
            if step[0] == "forever":
                while True:
                    await asyncio.sleep(step[1])
                    await resp.write(step[2])
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
    app.router.add_post("/v1/chat/completions", handler)
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


class RacyKeepAlive(asyncio.Protocol):
    """A raw HTTP/1.1 SSE server that closes each connection `idle_s()` after its last response (a
    keep-alive timeout, randomised like a busy server's), and optionally drops the n-th reused request
    on arrival (a close that races the request: no response byte is sent)."""

    def __init__(self, idle_s, drop_every: int = 0, tokens: int = 3, gap_s: float = 0.001):
        self.idle_s, self.drop_every, self.tokens, self.gap_s = idle_s, drop_every, tokens, gap_s
        self.buf, self.timer, self.transport, self.served, self.stats = b"", None, None, 0, None

    def connection_made(self, transport):
        self.transport = transport
        self._arm()

    def _arm(self):
        loop = asyncio.get_running_loop()
        self.timer = loop.call_later(self.idle_s(), self.transport.close)

    def data_received(self, data):
        self.buf += data
        head, sep, rest = self.buf.partition(b"\r\n\r\n")
        if not sep:
            return
        lengths = [ln.split(b":")[1] for ln in head.split(b"\r\n") if ln.lower().startswith(b"content-length")]
        length = int(lengths[0]) if lengths else 0
        if len(rest) < length:
            return
        self.buf = rest[length:]
        if self.timer:
            self.timer.cancel()
        self.served += 1
        if self.drop_every and self.served > 1 and self.served % self.drop_every == 0:
            self.transport.close()  # as if our idle timer had fired just as the request arrived
            return
        asyncio.ensure_future(self._respond())

    async def _respond(self):
        w = self.transport.write
        w(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        for i in range(self.tokens):
            await asyncio.sleep(self.gap_s)
            ev = chunk(f"t{i}")
            w(b"%x\r\n%s\r\n" % (len(ev), ev))
        w(b"%x\r\n%s\r\n0\r\n\r\n" % (len(DONE), DONE))
        if not self.transport.is_closing():
            self._arm()


async def racy_server(**kw):
    """(server, port) of a RacyKeepAlive server on loopback."""
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: RacyKeepAlive(**kw), "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def delta(**kw) -> bytes:
    return event({"choices": [{"index": 0, "delta": kw, "finish_reason": None}]})


MODES.update(
    {
        # a reasoning model: two thinking chunks, then the answer; usage says how many tokens were reasoning
        "reasoning": [
            (0.0, delta(role="assistant", content="")),
            (0.05, delta(reasoning_content="hmm")),
            (0.02, delta(reasoning_content=" well")),
            (0.10, delta(content="Yes")),
            (0.02, delta(content=".")),
            (
                0.0,
                event(
                    {
                        "choices": [],
                        "usage": {
                            "prompt_tokens": 3,
                            "completion_tokens": 4,
                            "completion_tokens_details": {"reasoning_tokens": 2},
                        },
                    }
                ),
            ),
            (0.0, DONE),
        ],
        # a tool call streamed as argument fragments: output like any other
        "tool-call": [
            (0.0, delta(role="assistant", content="")),
            (0.01, delta(tool_calls=[{"index": 0, "function": {"name": "get_weather", "arguments": ""}}])),
            (0.01, delta(tool_calls=[{"index": 0, "function": {"arguments": '{"city": "Paris"}'}}])),
            (0.0, DONE),
        ],
        # several tokens per chunk and no usage at all (speculative decoding, coalescing servers)
        "packed-no-usage": [
            (0.0, chunk(" the quick brown")),
            (0.02, chunk(" fox jumps over")),
            (0.02, chunk(" it")),
            (0.0, DONE),
        ],
    }
)
