"""One keep-alive HTTP/1.1 connection of the lean client and the exchange (request/response) on it.

Two ways to read a socket: `Conn` is an asyncio Protocol (its transport reads; TLS, and platforms
without kernel receive stamps), stamped with the loop's clock when the loop gets to the bytes;
`KernelConn` reads a plain TCP socket itself with recvmsg and takes each read's time from the kernel
(SO_TIMESTAMPNS: when the bytes reached the host). Under a burst (hundreds of streams whose chunks
arrive in the same instant, users finishing together) the loop reads some sockets tens of ms late;
the kernel's stamp is the same however late the read. The read lag (loop - kernel) goes into the
client's LagMeter: evidence, no longer error."""

from __future__ import annotations

import asyncio
import socket
import struct
import sys
import time

import httptools

from .config import ERROR_BODY_LIMIT, describe_reply, wanted_body
from .stream import StreamState

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux: the module does not always export it
KERNEL_STAMPS = sys.platform.startswith("linux")
CMSG_BYTES = socket.CMSG_SPACE(16) if hasattr(socket, "CMSG_SPACE") else 0
READ_BYTES = 65536  # below glibc's mmap threshold (128 KiB): a bigger buffer costs an mmap per read
_TIMESPEC = struct.Struct("qq").unpack_from
_KEPT_HEADERS = frozenset((b"location", b"content-encoding"))
# a stamp later than the read, or more than this before it: perhaps the realtime clock stepped (NTP, a
# VM resumed) since the offset was read; the client reads it again (rate-limited) before trusting it
SUSPECT_LAG_S = 0.002


class StampsRefused(OSError):
    """SO_TIMESTAMPNS refused on a new socket: the client reads with the loop's clock instead."""


def _numeric(host: str, port: int) -> tuple[int, tuple] | None:
    """(family, address) of an IP literal host, without a resolver round trip; None for a name."""
    host = host[1:-1] if host[:1] == "[" and host[-1:] == "]" else host
    for family, addr in ((socket.AF_INET, (host, port)), (socket.AF_INET6, (host, port, 0, 0))):
        try:
            socket.inet_pton(family, host)
        except OSError:
            continue
        return family, addr
    return None


async def addresses(host: str, port: int) -> list[tuple[int, tuple]]:
    """(family, address) of each address to try for host:port, in the resolver's order. An IP literal
    needs no lookup: a closed loop's wave opens hundreds of connections at once."""
    numeric = _numeric(host, port)
    if numeric is not None:
        return [numeric]
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [(family, addr) for family, _, _, _, addr in infos]


async def rx_stamps_ready(timeout_s: float = 0.2) -> tuple[bool, list[socket.socket]]:
    """Whether the kernel stamps received segments yet: (ready, the probe's sockets, to close or hold).
    Linux turns receive stamping on host-wide for the first socket that asks, but later, from a
    kernel worker thread; until it has run, TCP reads carry no stamp (and goodbench falls back to the
    loop's clock, `client_lag.stamps` "mixed"). On a saturated host (or under SCHED_FIFO load) that
    worker can wait long enough for the first wave of a run to go unstamped, so a run's connections
    are opened, then this probe waits (before the clock) until a loopback segment comes back stamped.
    Holding the probe's sockets keeps stamping on while a caller's own sockets come and go."""
    lsock = socket.socket()
    socks = [lsock]
    try:
        lsock.bind(("127.0.0.1", 0))
        lsock.listen(1)
        a = socket.create_connection(lsock.getsockname(), timeout=1.0)
        socks.append(a)
        b, _ = lsock.accept()
        socks.append(b)
        b.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        b.settimeout(1.0)
        deadline = time.monotonic() + timeout_s
        while True:
            a.sendall(b"x")
            _, anc, _, _ = b.recvmsg(16, CMSG_BYTES)
            if anc or time.monotonic() >= deadline:
                return bool(anc), socks
            await asyncio.sleep(0.001)
    except OSError:
        return False, socks


class Exchange:
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


class Conn(asyncio.Protocol):
    """A keep-alive connection; also the target of the response parser's callbacks."""

    def __init__(self, client):
        self.client = client
        self.clock = client.clock
        self.transport = None
        self.parser = httptools.HttpResponseParser(self)
        self.ex: Exchange | None = None
        self.idle_since = self.clock()
        self.reused = False
        self.now = 0.0
        self.closed = False
        self.replica_name = client.replica_name  # lower-case bytes of --replica-header, or None

    # ---------------------------------------------------------------- transport events
    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.feed_at(data, self.clock())

    def feed_at(self, data: bytes, now: float) -> None:
        """Bytes read from the socket, received at `now` (the loop's clock, or the kernel's stamp)."""
        ex = self.ex
        if ex is None:  # bytes nobody asked for: the connection cannot be trusted any more
            self.close()
            return
        self.now = now
        ex.last = now
        ex.got_bytes = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as e:
            self._malformed(ex, e)

    def _malformed(self, ex: Exchange, e: Exception) -> None:
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
        elif name == self.replica_name:
            self.ex.st.set_replica(value)

    def on_headers_complete(self) -> None:
        ex = self.ex
        ex.status = self.parser.get_status_code()
        if (
            ex.status >= 300
            or not wanted_body(ex.ctype, ex.st.unary)
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
    def _body_ended(ex: Exchange) -> None:
        """A reply that is not an event stream ended: its status and body become the record's error."""
        kept = ex.kept or {}
        status, why = describe_reply(
            ex.status, ex.ctype, b"".join(ex.body), kept.get(b"location"), kept.get(b"content-encoding"), ex.st.unary
        )
        ex.st.fail(status, why)

    def start(self, ex: Exchange, data: bytes) -> None:
        self.ex = ex
        self.transport.write(data)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.client.forget(self)
            if self.transport is not None:
                self.transport.close()


class KernelConn(Conn):
    """A Conn on a plain TCP socket read with recvmsg: each read's time is the kernel's receive stamp,
    converted to the run's monotonic clock (client.rt_offset). It is its own transport (write, close)."""

    def __init__(self, client, sock: socket.socket):
        super().__init__(client)
        self.sock, self.fd = sock, sock.fileno()
        self.loop = asyncio.get_running_loop()
        self.meter = client.meter
        self._recvmsg = sock.recvmsg
        self._note_lag = client.meter.read_lags.append  # a C call; binned later, off the hot path
        self.pending = b""  # bytes a full send buffer did not take yet
        self.read_at = 0.0  # the loop's time of this connection's previous read
        self.transport = self
        self.loop.add_reader(self.fd, self._readable)

    @classmethod
    async def open(cls, client, host: str, port: int) -> KernelConn:
        """Connect to host:port, each of its addresses in the resolver's order until one answers (as
        asyncio's create_connection does): `localhost` may resolve to ::1 first where the server
        listens on 127.0.0.1 only."""
        loop = asyncio.get_running_loop()
        err: OSError | None = None
        for family, addr in await addresses(host, port):
            try:
                sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
            except OSError as e:  # a family this host does not have (IPv6 off)
                err = e
                continue
            try:
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                try:
                    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
                except OSError as e:  # a kernel (or sandbox) without receive stamps: not a failed connect
                    raise StampsRefused(e.errno, f"the kernel refuses receive stamps: {e.strerror or e}") from None
                await loop.sock_connect(sock, addr)
            except OSError as e:
                sock.close()
                err = e
                continue
            except BaseException:
                sock.close()
                raise
            return cls(client, sock)
        raise err if err is not None else OSError(f"{host}: the resolver gave no address")

    def _readable(self) -> None:
        """One read, its kernel stamp (when the bytes reached the host) as the bytes' time. The hot path
        of a run (one call per chunk per stream), so written flat: every Python call here costs ~0.1 us
        x tens of thousands of chunks a second. The kernel keeps one stamp per queued segment and merges
        a segment into the one before it while the socket is unread (the later stamp wins): a read that
        brings several events gives the earlier ones a later time. Their possible error (the stamp
        minus this connection's previous read) goes into the meter's `merged` histogram."""
        try:
            data, anc, _, _ = self._recvmsg(READ_BYTES, CMSG_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            self._lost(e)
            return
        now = self.clock()
        ex = self.ex
        if not data or not anc or ex is None:
            self._odd_read(data, anc, now)
            return
        sec, nsec = _TIMESPEC(anc[0][2])
        real = sec + nsec * 1e-9
        stamp = real - self.client.rt_offset
        lag = now - stamp
        if lag < 0.0 or lag > SUSPECT_LAG_S:  # a late loop, or a realtime step: check the offset
            stamp, lag = self.client.restamp(real, now)
        self._note_lag(lag)
        last = ex.last  # a stream's times never go back (nor before its send: ex.last starts there)
        t = now if lag < 0.0 else stamp if stamp >= last else last
        times = ex.st.times
        n0 = len(times)
        self.now = ex.last = t
        ex.got_bytes = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as e:
            self._malformed(ex, e)
            return
        before, self.read_at = self.read_at, now
        merged = len(times) - n0 - 1
        if merged > 0:
            self.meter.merged.add(t - max(before, ex.sent), merged)

    def _odd_read(self, data: bytes, anc: list, now: float) -> None:
        """End of stream, a read without a stamp, or bytes nobody asked for: off the hot path."""
        if not data:
            self._lost(None)
            return
        if not anc:
            self.meter.user_reads += 1
        self.feed_at(data, now)

    # ------------------------------------------------------------ the transport's part
    def write(self, data: bytes) -> None:
        if self.closed:
            return
        if not self.pending:
            try:
                n = self.sock.send(data)
            except (BlockingIOError, InterruptedError):
                n = 0
            except OSError as e:
                self.loop.call_soon(self._lost, e)
                return
            if n == len(data):
                return
            self.loop.add_writer(self.fd, self._writable)
            data = data[n:]
        self.pending += data

    def _writable(self) -> None:
        try:
            n = self.sock.send(self.pending)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            self._lost(e)
            return
        self.pending = self.pending[n:]
        if not self.pending:
            self.loop.remove_writer(self.fd)

    def _release_socket(self) -> None:
        if self.fd >= 0:
            self.loop.remove_reader(self.fd)
            self.loop.remove_writer(self.fd)
            self.sock.close()
            self.fd = -1

    def _lost(self, exc) -> None:
        self._release_socket()
        self.connection_lost(exc)

    def close(self) -> None:
        if not self.closed:
            super().close()  # marks closed, leaves the pool, calls self.transport.close() below
            return
        if self.fd >= 0:  # as a transport's close: the socket goes, then connection_lost as asyncio would
            self._release_socket()
            self.loop.call_soon(self.connection_lost, None)
