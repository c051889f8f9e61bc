"""The aiohttp client (`--client aiohttp`, the baseline the lean client is measured against):
RequestSpec -> RequestRecord. Never raises on server faults; every fault becomes a record with a status.
Timestamps are taken once per socket read, on the shared monotonic clock. As the lean client: idle
connections are not reused past `keepalive_s`, no compression is asked for, redirects are not
followed, and a body that does not end after `[DONE]` is given up after LINGER_S."""

from __future__ import annotations

import asyncio
import time

import aiohttp
from aiohttp.streams import StreamReader

from ..pacing import TurnPacer
from ..records import RequestRecord, RequestSpec
from .config import ERROR_BODY_LIMIT, ClientConfig, describe_reply, request_body, secret_free, wanted_body
from .lag import LagMeter
from .stream import Finished, StreamState, local_count_due, record_off_loop
from .unary import new_state

LINGER_S = 0.2  # after [DONE], how long the body may take to end


class _Sent:
    """Per-request trace context: when the request body actually went to the socket."""

    __slots__ = ("t",)

    def __init__(self):
        self.t: float | None = None


async def _on_chunk_sent(session, ctx, params) -> None:
    mark = ctx.trace_request_ctx
    if mark is not None:
        mark.t = time.monotonic()


_TAPS: dict[int, StreamState] = {}


class _TapReader(StreamReader):
    """aiohttp's StreamReader with the body handed straight to the stream state as the protocol
    parses it: no buffering and no coroutine wake-up per chunk (the load generator's hot path).
    EOF and errors still go through the base class, so `wait_eof()` ends or raises as usual; after
    [DONE], a body that has not ended within LINGER_S ends the wait (the connection is then closed)."""

    __slots__ = ()

    def feed_data(self, data: bytes, size: int = 0) -> bool:
        if data:
            self.total_bytes += len(data)
            st = _TAPS[id(self)]
            if not st.done:
                st.on_data(data)
                if st.done:
                    self._loop.call_later(LINGER_S, _end_wait, self)
        return False


def _end_wait(reader: StreamReader) -> None:
    """[DONE] came LINGER_S ago and the body has not ended: stop waiting for its end."""
    waiter = reader._eof_waiter
    if waiter is not None and not waiter.done():
        waiter.set_result(None)


async def _read_stream(content, st: StreamState) -> None:
    if type(content) is StreamReader:
        _TAPS[id(content)] = st
        try:
            buffered = content.read_nowait()  # whatever arrived with the headers
            content.__class__ = _TapReader
            if buffered:
                st.on_data(buffered)
                if st.done:
                    content._loop.call_later(LINGER_S, _end_wait, content)
            await content.wait_eof()
        finally:
            _TAPS.pop(id(content), None)
        st.on_eof()
        return
    while True:  # fallback for readers we do not know: the plain API
        data = await content.readany()
        if not data:
            st.on_eof()
            return
        st.on_data(data)


class AiohttpClient:
    """One shared session and connection pool for a whole run."""

    def __init__(self, cfg: ClientConfig, t0: float, tok=None, clock=time.monotonic):
        self.cfg = cfg
        self.t0 = t0
        self.tok = tok
        self.clock = clock
        self.session: aiohttp.ClientSession | None = None
        accept = "application/json" if cfg.unary else "text/event-stream"
        headers = {"Content-Type": "application/json", "Accept": accept, "Accept-Encoding": "identity"}
        headers.update(cfg.headers())
        self._headers = headers
        self._pacer = TurnPacer()
        self.finished = 0
        self.chunks = 0
        self.meter = LagMeter()  # loop lags only: aiohttp's transport reads the sockets

    async def wait_turn(self) -> None:
        """One request leaves per event-loop iteration (see pacing): in a burst, sockets are polled
        between any two sends, so chunks arriving meanwhile are timestamped on time. The runner also
        waits for a turn before it stores a finished request, for the same reason."""
        await self._pacer.turn()

    async def __aenter__(self):
        conn = aiohttp.TCPConnector(
            limit=0, ttl_dns_cache=300, enable_cleanup_closed=False, keepalive_timeout=self.cfg.keepalive_s
        )
        # sent_at is when the body reached the socket: aiohttp writes it from a separate task, so the
        # time before post() would count the client's own queueing into TTFT instead of schedule lag
        trace = aiohttp.TraceConfig()
        trace.on_request_chunk_sent.append(_on_chunk_sent)
        self.session = aiohttp.ClientSession(
            connector=conn,
            headers=self._headers,
            cookie_jar=aiohttp.DummyCookieJar(),
            trace_configs=[trace],
            auto_decompress=False,
            read_bufsize=1 << 18,
            timeout=aiohttp.ClientTimeout(total=self.cfg.timeout_s, sock_connect=10, sock_read=self.cfg.idle_timeout_s),
        )
        return self

    async def __aexit__(self, *exc):
        if self.session is not None:
            await self.session.close()

    async def prewarm(self, n: int) -> None:
        """Open n keep-alive connections before the clock starts, so TTFT excludes TCP setup."""
        if n <= 0:
            return
        url = self.cfg.base_url.rstrip("/") + "/v1/models"

        async def one():
            try:
                async with self.session.get(url, timeout=aiohttp.ClientTimeout(total=10)) as r:
                    await r.read()
            except (aiohttp.ClientError, asyncio.TimeoutError):
                pass

        await asyncio.gather(*(one() for _ in range(n)))

    def payload(self, spec: RequestSpec) -> dict:
        return request_body(self.cfg, spec)

    async def send(
        self, spec: RequestSpec, scheduled_at: float, sent_cb=None, on_text=None, later: bool = False
    ) -> RequestRecord | Finished:
        """One request, streamed to its end, as a record. Never raises (but for cancellation of the
        caller itself): every fault, and any surprise in the client, becomes the record's status.
        later=True: a Finished whose record is built when asked (see stream.Finished)."""
        clock, t0 = self.clock, self.t0
        st = new_state(self.cfg, clock, t0)
        mark = _Sent()
        res = {"sent": clock() - t0, "http": None}  # sent_at is replaced by the socket-write time once known
        begun = clock()
        try:
            await self.wait_turn()
            res["sent"] = clock() - t0
            if sent_cb is not None:
                sent_cb()
            begun = clock()  # the total timeout runs from here, not from the socket write (res["sent"])
            await asyncio.wait_for(self._exchange(spec, st, mark, res), self.cfg.timeout_s)
        except asyncio.CancelledError:
            st.fail("cancelled", "cancelled before completion")
        except (asyncio.TimeoutError, aiohttp.ServerTimeoutError) as e:
            elapsed = clock() - t0 - res["sent"]
            which = "total" if clock() - begun >= self.cfg.timeout_s * 0.99 else "idle"
            st.fail("timeout", f"{which} timeout after {elapsed:.1f}s ({type(e).__name__})")
        except aiohttp.ClientConnectorError as e:
            st.fail("disconnected", f"cannot connect to {self.cfg.base_url}: {e.os_error or e}")
        except (
            aiohttp.ServerDisconnectedError,
            aiohttp.ClientPayloadError,
            aiohttp.ClientOSError,
            ConnectionResetError,
        ) as e:
            st.fail("disconnected", f"connection lost: {type(e).__name__}: {str(e)[:200]}")
        except aiohttp.ClientError as e:
            st.fail("disconnected", f"{type(e).__name__}: {str(e)[:200]}")
        except Exception as e:  # a surprise in the client must not lose the record (its text says what)
            st.fail("bad_stream", f"client error: {type(e).__name__}: {str(e)[:200]}")
        self.finished += 1
        self.chunks += len(st.times)
        if on_text is not None:
            on_text(st.answer_text())
        end, local = clock() - t0, local_count_due(self.finished - 1)
        error = st.error if st.error is None else secret_free(st.error, self.cfg)
        args = (spec, scheduled_at, res["sent"], end, st.status, res["http"], error, self.tok, "", 0, local)
        if self.tok is not None and st.heavy():  # tokenising it here would stall every other stream
            return await record_off_loop(st, args)
        fin = Finished(st, *args)
        return fin if later else fin.record()

    async def _exchange(self, spec: RequestSpec, st: StreamState, mark: _Sent, res: dict) -> None:
        """POST, then read the stream into st (or the error body); under send's total deadline."""
        headers = {self.cfg.session_header: spec.session} if spec.session is not None else None
        async with self.session.post(
            self.cfg.url, json=self.payload(spec), trace_request_ctx=mark, headers=headers, allow_redirects=False
        ) as resp:
            if mark.t is not None:
                res["sent"] = mark.t - self.t0
            res["http"] = resp.status
            h = resp.headers
            if self.cfg.replica_header:
                st.set_replica(h.get(self.cfg.replica_header))
            ctype = h.get("Content-Type", "")
            if resp.status >= 300 or not wanted_body(ctype, st.unary) or h.get("Content-Encoding"):
                raw = await resp.content.read(ERROR_BODY_LIMIT * 4)
                st.fail(
                    *describe_reply(resp.status, ctype, raw, h.get("Location"), h.get("Content-Encoding"), st.unary)
                )
                return
            await _read_stream(resp.content, st)
            if not st.done:
                st.fail("bad_stream", "stream ended without [DONE]")
