"""The load generator's default client: HTTP/1.1 streaming on asyncio's Protocol layer, responses parsed
by llhttp (httptools: status line, headers, chunked transfer encoding) as the bytes arrive, SSE framing
by sse.py. Per request it costs one write and one future; per socket read one timestamp and one parser
call, with no task wake-up per chunk — about half of what aiohttp's client path costs (benchmarks/
generator_accuracy.py measures both side by side).

Connection hygiene against real servers, which close idle keep-alive connections (uvicorn after 5 s): a
connection idle longer than `keepalive_s` is never reused, and a request written on a reused connection
that closes before any byte of the response arrived is sent once more on a fresh connection (the
record says so: `retries`). Timeouts are checked by one sweeper per client, not a timer per read; the
same sweeper ends a stream whose body does not end after `[DONE]` (the record ends at `[DONE]`).
A reply that is not an event stream keeps its body as the error, whether its end is framed or is the
connection's close (HTTP/1.0, `Connection: close`); 1xx replies are skipped; redirects are not followed."""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections import deque
from urllib.parse import urlsplit

import httptools

from ..errors import UsageError
from ..pacing import TurnPacer
from ..records import RequestRecord, RequestSpec
from ..version import __version__
from .config import ERROR_BODY_LIMIT, ClientConfig, describe_reply, request_body, secret_free, wanted_body
from .stream import StreamState, local_count_due
from .unary import new_state

SWEEP_S = 0.05  # how often timeouts and stale pooled connections are checked
CONNECT_TIMEOUT_S = 10.0
LINGER_S = 0.2  # after [DONE], how long the body may take to end before the connection is dropped
_KEPT_HEADERS = frozenset((b"location", b"content-encoding"))


class _Exchange:
    """One request/response on one connection: what the parser callbacks fill in."""

    __slots__ = ("st", "done", "status", "ctype", "body", "got_bytes", "last", "deadline", "outcome", "sent", "kept")

    def __init__(self, st: StreamState, done: asyncio.Future, deadline: float):
        self.st, self.done, self.deadline = st, done, deadline
        self.status = self.ctype = self.kept = None  # kept: the _KEPT_HEADERS the reply had
        self.body: list[bytes] | None = None  # error or non-stream body, kept up to a limit
        self.got_bytes = False
        self.last = self.sent = 0.0
        self.outcome = ""  # "", "retry"

    def finish(self, outcome: str = "") -> None:
        if not self.done.done():
            self.outcome = outcome
            self.done.set_result(None)


class _Conn(asyncio.Protocol):
    """A keep-alive connection; also the target of the response parser's callbacks."""

    def __init__(self, client: LeanClient):
        self.client = client
        self.clock = client.clock
        self.transport = None
        self.parser = httptools.HttpResponseParser(self)
        self.ex: _Exchange | None = None
        self.idle_since = self.clock()
        self.reused = False
        self.now = 0.0
        self.closed = False

    # ---------------------------------------------------------------- transport events
    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        ex = self.ex
        if ex is None:  # bytes nobody asked for: the connection cannot be trusted any more
            self.close()
            return
        self.now = now = self.clock()
        ex.last = now
        ex.got_bytes = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as e:
            ex.st.fail("bad_stream", f"malformed HTTP response: {e}")
            self.close()
            ex.finish()

    def eof_received(self):
        return False  # close the transport: connection_lost follows

    def connection_lost(self, exc) -> None:
        self.closed = True
        self.client.forget(self)
        ex, self.ex = self.ex, None
        if ex is None or ex.done.done():
            return
        if not ex.got_bytes and self.reused:
            ex.finish("retry")  # the server closed a kept-alive connection as we reused it
            return
        if ex.body is not None and ex.status is not None and ex.status >= 200:
            self._body_ended(ex)  # a close-delimited error or non-stream body ends here
            ex.finish()
            return
        if ex.status is not None and ex.body is None:
            ex.st.on_eof()  # a close-delimited stream ends here; a stream that saw [DONE] is whole
        why = f"{type(exc).__name__}: {exc}" if exc else "the server closed the connection"
        ex.st.fail("disconnected", f"connection lost{' mid-stream' if ex.status else ''}: {why}"[:240])
        ex.finish()

    # ---------------------------------------------------------------- parser callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name == b"content-type":
            self.ex.ctype = value.decode("latin-1")
        elif name in _KEPT_HEADERS:
            ex = self.ex
            ex.kept = {**(ex.kept or {}), name: value}

    def on_headers_complete(self) -> None:
        ex = self.ex
        ex.status = self.parser.get_status_code()
        if (
            ex.status >= 300
            or not wanted_body(ex.ctype, getattr(ex.st, "unary", False))
            or (ex.kept is not None and b"content-encoding" in ex.kept)
        ):
            ex.body = []

    def on_body(self, body: bytes) -> None:
        ex = self.ex
        if ex.body is None:
            ex.st.feed(body, self.now - ex.st.t0)
        elif sum(map(len, ex.body)) < ERROR_BODY_LIMIT * 4:
            ex.body.append(body)

    def on_message_complete(self) -> None:
        ex = self.ex
        if ex.body is None:
            ex.st.on_eof()
            if not ex.st.done:
                ex.st.fail("bad_stream", "stream ended without [DONE]")
        elif ex.status < 200:  # 1xx (100 Continue, 103 Early Hints): the reply follows
            ex.status = ex.ctype = ex.body = ex.kept = None
            return
        else:
            self._body_ended(ex)
        self.ex = None
        if self.parser.should_keep_alive():
            self.client.release(self)
        else:
            self.close()
        ex.finish()

    # ---------------------------------------------------------------- own
    @staticmethod
    def _body_ended(ex: _Exchange) -> None:
        """A reply that is not an event stream ended: its status and body become the record's error."""
        kept = ex.kept or {}
        status, why = describe_reply(
            ex.status, ex.ctype, b"".join(ex.body), kept.get(b"location"), kept.get(b"content-encoding")
        )
        ex.st.fail(status, why)

    def start(self, ex: _Exchange, data: bytes) -> None:
        self.ex = ex
        self.transport.write(data)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.client.forget(self)
            if self.transport is not None:
                self.transport.close()


class LeanClient:
    """One connection pool and one sweeper for a whole run (same interface as the aiohttp Client)."""

    def __init__(self, cfg: ClientConfig, t0: float, tok=None, clock=time.monotonic):
        self.cfg, self.t0, self.tok, self.clock = cfg, t0, tok, clock
        u = urlsplit(cfg.base_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise UsageError(f"base URL {cfg.base_url!r} must be http:// or https:// with a host")
        self.host, self.port = u.hostname, u.port or (443 if u.scheme == "https" else 80)
        self.ssl = ssl.create_default_context() if u.scheme == "https" else None
        path = (u.path.rstrip("/") + cfg.endpoint) or "/"
        head = [
            f"POST {path} HTTP/1.1",
            f"Host: {u.netloc}",
            f"User-Agent: goodbench/{__version__}",
            "Accept: " + ("application/json" if cfg.unary else "text/event-stream"),
            "Accept-Encoding: identity",
            "Content-Type: application/json",
        ]
        head += [f"{k}: {v}" for k, v in cfg.headers().items()]
        self._head = ("\r\n".join(head) + "\r\n").encode("latin-1")
        self.idle: deque[_Conn] = deque()
        self.active: set[_Conn] = set()
        self._pacer = TurnPacer()
        self._sweeper: asyncio.Task | None = None
        self._dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
        self.finished = 0

    async def __aenter__(self):
        self._sweeper = asyncio.ensure_future(self._sweep())
        return self

    async def __aexit__(self, *exc):
        if self._sweeper is not None:
            self._sweeper.cancel()
        for c in list(self.idle) + list(self.active):
            c.close()

    async def wait_turn(self) -> None:
        """One request leaves per event-loop iteration (see pacing)."""
        await self._pacer.turn()

    def payload(self, spec: RequestSpec) -> dict:
        return request_body(self.cfg, spec)

    def encode(self, spec: RequestSpec) -> bytes:
        body = self._dumps(request_body(self.cfg, spec)).encode("utf-8")
        head = self._head
        if spec.session is not None:
            head += f"{self.cfg.session_header}: {spec.session}\r\n".encode("latin-1")
        return head + b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body

    # ---------------------------------------------------------------- pool
    async def _connect(self) -> _Conn:
        loop = asyncio.get_running_loop()
        coro = loop.create_connection(
            lambda: _Conn(self), self.host, self.port, ssl=self.ssl, server_hostname=self.host if self.ssl else None
        )
        try:
            _, conn = await asyncio.wait_for(coro, CONNECT_TIMEOUT_S)
        except asyncio.TimeoutError:
            raise OSError(f"no connection within {CONNECT_TIMEOUT_S:g}s") from None
        return conn

    async def acquire(self) -> _Conn:
        """The most recently used idle connection still inside the keep-alive limit, or a new one."""
        limit = self.clock() - self.cfg.keepalive_s
        while self.idle:
            c = self.idle.pop()
            if not c.closed and c.idle_since >= limit:
                c.reused = True
                self.active.add(c)
                return c
            c.close()
        c = await self._connect()
        self.active.add(c)
        return c

    def release(self, c: _Conn) -> None:
        self.active.discard(c)
        if not c.closed:
            c.idle_since = self.clock()
            self.idle.append(c)

    def forget(self, c: _Conn) -> None:
        self.active.discard(c)
        try:
            self.idle.remove(c)
        except ValueError:
            pass

    async def prewarm(self, n: int) -> None:
        """Open n connections before the clock starts, so TTFT excludes TCP (and TLS) set-up. They are
        subject to the same keep-alive limit as any other idle connection."""
        conns = await asyncio.gather(*(self._connect() for _ in range(max(0, n))), return_exceptions=True)
        for c in conns:
            if isinstance(c, _Conn):
                self.idle.append(c)

    async def _sweep(self) -> None:
        """Every SWEEP_S: end exchanges past their idle or total deadline; close stale idle connections."""
        cfg = self.cfg
        while True:
            await asyncio.sleep(SWEEP_S)
            now = self.clock()
            for c in list(self.active):
                ex = c.ex
                if ex is None or ex.done.done():
                    continue
                if ex.st.done:  # [DONE] came; the body has not ended: the stream ended at [DONE]
                    if now - ex.st.t0 - ex.st.done_at < LINGER_S:
                        continue
                elif now >= ex.deadline:
                    ex.st.fail("timeout", f"total timeout after {now - ex.sent:.1f}s")
                elif now - max(ex.last, ex.sent) >= cfg.idle_timeout_s:
                    ex.st.fail(
                        "timeout",
                        f"idle timeout after {now - ex.sent:.1f}s (nothing for {now - max(ex.last, ex.sent):.1f}s)",
                    )
                else:
                    continue
                c.ex = None
                c.close()
                ex.finish()
            limit = now - cfg.keepalive_s
            while self.idle and self.idle[0].idle_since < limit:
                self.idle.popleft().close()

    # ---------------------------------------------------------------- one request
    async def send(self, spec: RequestSpec, scheduled_at: float, sent_cb=None, on_text=None) -> RequestRecord:
        """One request, streamed to its end, as a record. Never raises (but for cancellation of the
        caller itself): every fault becomes the record's status. on_text gets the reply's answer text."""
        clock, t0 = self.clock, self.t0
        st = new_state(self.cfg, clock, t0)
        sent_at, http, retries, c = clock() - t0, None, 0, None
        try:
            await self.wait_turn()
            data = self.encode(spec)
            deadline = clock() + self.cfg.timeout_s
            for attempt in (0, 1):
                c = await self.acquire()
                ex = _Exchange(st, asyncio.get_running_loop().create_future(), deadline)
                c.start(ex, data)
                ex.sent = ex.last = clock()
                if attempt == 0:
                    sent_at = ex.sent - t0
                    if sent_cb is not None:
                        sent_cb()
                await ex.done
                http = ex.status
                if ex.outcome != "retry" or attempt:
                    break
                retries = 1
        except asyncio.CancelledError:
            if c is not None:
                c.close()
            st.fail("cancelled", "cancelled before completion")
        except OSError as e:  # connecting failed (refused, unresolvable, timed out)
            st.fail("disconnected", f"cannot connect to {self.cfg.base_url}: {e.strerror or e}")
        except Exception as e:  # a surprise in the client must not lose the record (its text says what)
            if c is not None:
                c.close()
            st.fail("bad_stream", f"client error: {type(e).__name__}: {str(e)[:200]}")
        if retries and st.status == "ok" and not st.done and http is None:
            st.fail("disconnected", "connection lost twice before any response byte")
        self.finished += 1
        if on_text is not None:
            on_text(st.answer_text())
        end, local = clock() - t0, local_count_due(self.finished - 1)
        error = st.error if st.error is None else secret_free(st.error, self.cfg)
        if self.tok is not None and st.heavy():  # tokenising it here would stall every other stream
            args = (spec, scheduled_at, sent_at, end, st.status, http, error, self.tok, "", retries, local)
            return await asyncio.to_thread(st.record, *args)
        return st.record(
            spec, scheduled_at, sent_at, end, st.status, http, error, self.tok, retries=retries, local_count=local
        )
