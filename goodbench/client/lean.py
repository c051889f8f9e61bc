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
connection's close (HTTP/1.0, `Connection: close`); 1xx replies are skipped; redirects are not followed.

On plain http:// (Linux) chunk times are the kernel's receive stamps (conn.KernelConn), so ITL does not
depend on what else the client was doing when a chunk arrived; https:// reads through asyncio's TLS
transport and stamps with the loop's clock (the run's client_lag says how late the loop was)."""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections import deque
from urllib.parse import urlsplit

from ..errors import UsageError
from ..pacing import TurnPacer
from ..records import RequestRecord, RequestSpec
from ..version import __version__
from .config import ClientConfig, request_body, secret_free
from .conn import KERNEL_STAMPS, Conn, Exchange, KernelConn, StampsRefused, rx_stamps_ready
from .lag import LagMeter, realtime_offset
from .stream import Finished, local_count_due, record_off_loop
from .unary import new_state

SWEEP_S = 0.05  # how often timeouts and stale pooled connections are checked
OFFSET_EVERY = 20  # sweeps between two readings of the realtime-monotonic offset (kernel stamps)
RESTAMP_EVERY_S = 0.005  # at most this often a suspect stamp makes the client read the offset again
CONNECT_TIMEOUT_S = 10.0
LINGER_S = 0.2  # after [DONE], how long the body may take to end before the connection is dropped


class LeanClient:
    """One connection pool and one sweeper for a whole run (same interface as the aiohttp Client)."""

    def __init__(self, cfg: ClientConfig, t0: float, tok=None, clock=time.monotonic):
        self.cfg, self.t0, self.tok, self.clock = cfg, t0, tok, clock
        u = urlsplit(cfg.base_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise UsageError(f"base URL {cfg.base_url!r} must be http:// or https:// with a host")
        self.host, self.port = u.hostname, u.port or (443 if u.scheme == "https" else 80)
        self.ssl = ssl.create_default_context() if u.scheme == "https" else None
        self.kernel = cfg.kernel_stamps and self.ssl is None and KERNEL_STAMPS and clock is time.monotonic
        self.meter = LagMeter()
        self.rt_offset, self.offset_at = 0.0, 0.0
        self._read_offset(clock(), 20)
        self.chunks = 0
        rh = cfg.replica_header
        self.replica_name = rh.lower().encode("latin-1") if rh else None
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
        self.idle: deque[Conn] = deque()
        self.active: set[Conn] = set()
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
    async def _connect(self) -> Conn:
        kernel = self.kernel
        if kernel:
            coro = KernelConn.open(self, self.host, self.port)
        else:
            coro = asyncio.get_running_loop().create_connection(
                lambda: Conn(self), self.host, self.port, ssl=self.ssl, server_hostname=self.host if self.ssl else None
            )
        try:
            conn = await asyncio.wait_for(coro, CONNECT_TIMEOUT_S)
        except asyncio.TimeoutError:
            raise OSError(f"no connection within {CONNECT_TIMEOUT_S:g}s") from None
        except StampsRefused:
            self.kernel = False  # every connection from now on is stamped by the loop (client_lag says so)
            return await self._connect()
        return conn if kernel else conn[1]

    async def acquire(self) -> Conn:
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

    def release(self, c: Conn) -> None:
        self.active.discard(c)
        if not c.closed:
            c.idle_since = self.clock()
            self.idle.append(c)

    def forget(self, c: Conn) -> None:
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
            if isinstance(c, Conn):
                self.idle.append(c)
        if self.kernel:  # their stamping asked for, wait until the kernel's worker has turned it on
            _, probe = await rx_stamps_ready()
            for sock in probe:
                sock.close()

    async def _sweep(self) -> None:
        """Every SWEEP_S: end exchanges past their idle or total deadline; close stale idle connections."""
        cfg = self.cfg
        sweeps = 0
        while True:
            await asyncio.sleep(SWEEP_S)
            sweeps += 1
            if self.kernel and sweeps % OFFSET_EVERY == 0:
                self._read_offset(self.clock())
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

    def restamp(self, real: float, now: float) -> tuple[float, float]:
        """A kernel stamp (realtime, s) that looks wrong by the offset in hand, read at `now`: (its run-clock
        time, the read's lag) after reading the offset again, at most every RESTAMP_EVERY_S. A realtime
        step (NTP, a VM resumed) would otherwise shift every stamp until the next sweep's reading: early
        by a backward step (a stream's chunks bunched at its send, then a false stall), late by a forward
        one. A loop that is merely late reads the same offset again and keeps its stamp."""
        if now - self.offset_at >= RESTAMP_EVERY_S:
            self._read_offset(now)
        stamp = real - self.rt_offset
        return stamp, now - stamp

    def _read_offset(self, now: float, tries: int = 5) -> None:
        """The realtime-monotonic offset kernel stamps are converted with, and when it was read."""
        self.rt_offset, self.offset_at = realtime_offset(tries), now

    # ---------------------------------------------------------------- one request
    async def send(
        self, spec: RequestSpec, scheduled_at: float, sent_cb=None, on_text=None, later: bool = False
    ) -> RequestRecord | Finished:
        """One request, streamed to its end, as a record (later=True: a Finished whose record is built
        when asked). Never raises (but for cancellation of the caller itself): every fault becomes the
        record's status. on_text gets the reply's answer text."""
        clock, t0 = self.clock, self.t0
        st = new_state(self.cfg, clock, t0)
        sent_at, http, retries, c = clock() - t0, None, 0, None
        try:
            await self.wait_turn()
            data = self.encode(spec)
            deadline = clock() + self.cfg.timeout_s
            for attempt in (0, 1):
                c = await self.acquire()
                ex = Exchange(st, asyncio.get_running_loop().create_future(), deadline)
                ex.sent = ex.last = clock()  # before the write: a loopback reply may be stamped within it
                c.start(ex, data)
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
        self.chunks += len(st.times)
        if on_text is not None:
            on_text(st.answer_text())
        end, local = clock() - t0, local_count_due(self.finished - 1)
        error = st.error if st.error is None else secret_free(st.error, self.cfg)
        args = (spec, scheduled_at, sent_at, end, st.status, http, error, self.tok, "", retries, local)
        if self.tok is not None and st.heavy():  # tokenising it here would stall every other stream
            return await record_off_loop(st, args)
        fin = Finished(st, *args)
        return fin if later else fin.record()
