"""The fault probe's misbehaving server, kept: a raw HTTP/1.1 server on loopback (asyncio Protocol, no
framework to tidy its bytes) whose every reply is scripted by the request's prompt: byte splits,
close-delimited bodies (HTTP/1.0, `Connection: close`), `[DONE]` without the end of the body, usage
beyond any count, lone surrogates, gzip, redirects, `100 Continue`, a media type in capitals, an error
body that echoes the API key, a huge text chunk, and keep-alive connections closed as they are reused.
tests/test_client_faults.py drives both clients against it."""

from __future__ import annotations

import asyncio
import gzip
import json
import time


def chunk(text: str, **usage) -> bytes:
    ev = {"choices": [{"index": 0, "text": text, "finish_reason": None}]}
    if usage:
        ev["usage"] = usage
    return b"data: " + json.dumps(ev).encode() + b"\n\n"


def usage(n) -> bytes:
    return b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":%d}}\n\n' % n


DONE = b"data: [DONE]\n\n"
OK_BODY = chunk(" hello") + chunk(" world") + usage(2) + DONE


def framed(body: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(body), body) if body else b""


def head(status: str = "200 OK", ctype: str = "text/event-stream", extra: str = "", version: str = "1.1") -> bytes:
    lines = [f"HTTP/{version} {status}", f"Content-Type: {ctype}"] if ctype else [f"HTTP/{version} {status}"]
    return ("\r\n".join(lines) + "\r\n" + extra + "\r\n").encode()


CHUNKED = "Transfer-Encoding: chunked\r\n"


async def _stream(w, body: bytes, piece: int = 0, gap: float = 0.0) -> None:
    """An event stream as a chunked body, in pieces of `piece` bytes (0: one write)."""
    w(head(extra=CHUNKED))
    data = framed(body) + b"0\r\n\r\n"
    if not piece:
        w(data)
        return
    for i in range(0, len(data), piece):
        w(data[i : i + piece])
        await asyncio.sleep(gap)


async def ok(w, close, req):
    await _stream(w, OK_BODY)


async def split_bytes(w, close, req):
    await _stream(w, OK_BODY, piece=1, gap=0.0005)


async def http10_500(w, close, req):
    w(head("500 Internal Server Error", "application/json", version="1.0") + b'{"error": "boom: the model crashed"}')
    close()


async def error_close(w, close, req):
    w(head("500 Internal Server Error", "text/plain", "Connection: close\r\n") + b"upstream failed")
    close()


async def html_close(w, close, req):
    w(head("200 OK", "text/html", "Connection: close\r\n") + b"<!doctype html><title>gateway</title>")
    close()


async def sse_close(w, close, req):
    w(head(version="1.0") + OK_BODY)
    close()


async def done_no_end(w, close, req):
    w(head(extra=CHUNKED) + framed(chunk(" a") + chunk(" b") + DONE))
    await asyncio.sleep(30)  # the body never ends


async def done_then_tokens(w, close, req):
    w(head(extra=CHUNKED) + framed(chunk(" a") + DONE))
    for _ in range(600):
        await asyncio.sleep(0.05)
        w(framed(chunk(" late")))


async def huge_usage(w, close, req):
    await _stream(w, chunk(" a") + chunk(" b") + usage(3_000_000_000) + DONE)


async def usage_1e23(w, close, req):
    await _stream(w, chunk(" a") + usage(10**23) + DONE)


async def per_chunk_overflow(w, close, req):
    await _stream(w, chunk(" a", completion_tokens=1) + chunk(" b", completion_tokens=2**31 + 5) + DONE)


async def surrogate(w, close, req):
    await _stream(w, chunk(" a\ud800b") + chunk(" c") + DONE)  # json.dumps writes the lone surrogate as \ud800


async def gzipped(w, close, req):
    body = gzip.compress(OK_BODY)
    w(head(extra=f"Content-Encoding: gzip\r\nContent-Length: {len(body)}\r\n") + body)


async def redirect(w, close, req):
    w(head("307 Temporary Redirect", "", "Location: https://elsewhere.example/v1/completions\r\nContent-Length: 0\r\n"))


async def continue_first(w, close, req):
    w(b"HTTP/1.1 100 Continue\r\n\r\n")
    await asyncio.sleep(0.01)
    await _stream(w, OK_BODY)


async def capital_type(w, close, req):
    w(head(ctype="Text/Event-Stream; charset=utf-8", extra=CHUNKED) + framed(OK_BODY) + b"0\r\n\r\n")


async def echo_key(w, close, req):
    body = json.dumps({"error": f"invalid credentials: {req['authorization']}"}).encode()
    w(head("401 Unauthorized", "application/json", f"Content-Length: {len(body)}\r\n") + body)


async def big_text(w, close, req):
    """One event carrying 3 MB of text (tokenising it takes about a second on one core)."""
    await _stream(w, chunk(" word" * 600_000) + DONE)


async def steady(w, close, req):
    """60 tokens, one every 20 ms (the stream whose timing a stalled event loop would show)."""
    w(head(extra=CHUNKED))
    for _ in range(60):
        await asyncio.sleep(0.02)
        w(framed(chunk(" tick")))
    w(framed(DONE) + b"0\r\n\r\n")


MODES = {
    "ok": ok,
    "split-bytes": split_bytes,
    "http10-500": http10_500,
    "error-close": error_close,
    "html-close": html_close,
    "sse-close": sse_close,
    "done-no-end": done_no_end,
    "done-then-tokens": done_then_tokens,
    "huge-usage": huge_usage,
    "usage-1e23": usage_1e23,
    "per-chunk-overflow": per_chunk_overflow,
    "surrogate": surrogate,
    "gzip": gzipped,
    "redirect": redirect,
    "continue": continue_first,
    "capital-type": capital_type,
    "echo-key": echo_key,
    "big-text": big_text,
    "steady": steady,
}


def _json(status: str, doc, extra: str = "") -> bytes:
    body = json.dumps(doc).encode()
    return head(status, "application/json", f"Content-Length: {len(body)}\r\n{extra}") + body


def models(path: str, req: dict) -> bytes:
    """A plain listing; every other GET (/version, /info...) is not found."""
    if path.endswith("/v1/models"):
        return _json("200 OK", {"object": "list", "data": [{"id": "m", "owned_by": "vllm"}]})
    return _json("404 Not Found", {"error": "not found"})


def echo_everywhere(path: str, req: dict) -> bytes:
    """A gateway that quotes the Authorization header in /version, the model's root and Server."""
    auth = req.get("authorization", "")
    doc = {"object": "list", "version": auth, "data": [{"id": "m", "owned_by": "vllm", "root": "/models/" + auth}]}
    return _json("200 OK", doc, f"Server: gw/1.0 ({auth})\r\n")


def models_data_int(path: str, req: dict) -> bytes:
    return _json("200 OK", {"data": 5}) if path.endswith("/v1/models") else models(path, req)


GET_MODES = {"models": models, "echo-everywhere": echo_everywhere, "models-data-int": models_data_int}


class FaultServer(asyncio.Protocol):
    """One connection. `stale_after`: a connection reused after being idle this long is closed as the
    request arrives, before any byte of a reply (a server's keep-alive timeout racing the client).
    GET requests are answered by GET_MODES[get_mode] (what the server says about itself)."""

    def __init__(self, stats: dict, stale_after: float | None = None, get_mode: str = "models"):
        self.stats, self.stale_after, self.get_mode = stats, stale_after, get_mode
        self.buf, self.transport, self.served, self.idle_since = b"", None, 0, time.monotonic()

    def connection_made(self, transport):
        self.transport = transport
        self.stats["connections"] = self.stats.get("connections", 0) + 1

    def data_received(self, data):
        self.buf += data
        while True:
            head_, sep, rest = self.buf.partition(b"\r\n\r\n")
            if not sep:
                return
            headers = {}
            for line in head_.split(b"\r\n")[1:]:
                k, _, v = line.partition(b":")
                headers[k.strip().lower().decode()] = v.strip().decode("latin-1")
            length = int(headers.get("content-length", 0))
            if len(rest) < length:
                return
            body, self.buf = rest[:length], rest[length:]
            method, _, path = head_.split(b"\r\n")[0].decode("latin-1").partition(" ")
            if method == "GET":
                self.transport.write(GET_MODES[self.get_mode](path.split(" ")[0], headers))
                continue
            self._request(headers, body)

    def _request(self, headers: dict, body: bytes) -> None:
        self.served += 1
        if self.stale_after is not None and self.served > 1 and time.monotonic() - self.idle_since > self.stale_after:
            self.stats["dropped"] = self.stats.get("dropped", 0) + 1
            self.transport.close()
            return
        doc = json.loads(body)
        name = doc["prompt"] if "prompt" in doc else doc["messages"][-1]["content"]
        self.stats.setdefault("headers", []).append(headers)
        asyncio.ensure_future(self._reply(MODES[name], headers))

    async def _reply(self, mode, headers: dict) -> None:
        tr = self.transport
        await mode(lambda b: None if tr.is_closing() else tr.write(b), tr.close, headers)
        self.idle_since = time.monotonic()


async def fault_server(stale_after: float | None = None, get_mode: str = "models"):
    """(server, base URL, stats) of a FaultServer on a free loopback port."""
    loop = asyncio.get_running_loop()
    stats: dict = {}
    server = await loop.create_server(lambda: FaultServer(stats, stale_after, get_mode), "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", stats
