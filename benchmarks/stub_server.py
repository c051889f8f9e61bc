"""Deterministic streaming server for measuring the load generator. Run it in its own process, pinned:
`taskset -c 0 python benchmarks/stub_server.py --port 8100 --log /tmp/truth.bin`.

Raw sockets on the event loop (no HTTP framework), so that its own overhead is small and its timestamps
are the wire's: a request's time is the kernel's receive stamp of its last bytes (SO_TIMESTAMPNS, read
with recvmsg: when the POST reached the host, however late this process read it), each chunk's time
right after it is handed to the socket (on loopback the client's kernel has it then). Each request
streams `max_tokens` OpenAI completion chunks, the first after --ttft-ms, then one every --itl-ms
(every --stall-every-th gap lasts --stall-ms instead), on absolute deadlines. --sync-tick puts every
deadline on one global grid of --itl-ms, so every stream's chunk is due at the same instant, as a real
engine's decode step emits them. The log (request number from the prompt, kind 0=read 1=chunk 2=new
connection, monotonic time) is written as packed binary at exit (SIGTERM)."""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import re
import signal
import socket
import struct
import time

LOG: list[tuple[int, int, float]] = []
_CL = re.compile(rb"content-length:\s*(\d+)", re.I)
_PROMPT = re.compile(rb'"prompt"\s*:\s*"(\d+)"')
_MAXTOK = re.compile(rb'"max_(?:completion_)?tokens"\s*:\s*(\d+)')
CHUNK = b'data: {"id":"x","object":"text_completion","choices":[{"index":0,"text":" tok","finish_reason":null}]}\n\n'
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
MODELS = json.dumps({"object": "list", "data": [{"id": "stub", "object": "model"}]}).encode()


def frame(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
CMSG = socket.CMSG_SPACE(16)
OFFSET = [0.0]  # CLOCK_REALTIME - CLOCK_MONOTONIC


def _offset() -> float:
    best = (1.0, 0.0)
    for _ in range(50):
        a = time.monotonic()
        r = time.time()
        b = time.monotonic()
        best = min(best, (b - a, r - (a + b) / 2))
    return best[1]


class Conn:
    """One accepted connection: reads with recvmsg (kernel stamps), writes straight to the socket."""

    def __init__(self, sock, cfg):
        self.cfg, self.sock, self.fd = cfg, sock, sock.fileno()
        self.loop = asyncio.get_running_loop()
        self.buf = self.out = b""
        self.busy = self.closed = False
        self.t = 0.0
        LOG.append((-1, 2, time.monotonic()))  # kind 2: a new connection
        self.loop.add_reader(self.fd, self.readable)

    def readable(self):
        try:
            data, anc, _, _ = self.sock.recvmsg(65536, CMSG)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self.close()
            return
        t = time.monotonic()
        for level, kind, raw in anc:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                sec, nsec = struct.unpack("qq", raw[:16])
                t = min(t, sec + nsec * 1e-9 - OFFSET[0])
        self.t = t
        self.buf += data
        self.parse()

    def parse(self):
        while not self.busy and not self.closed:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buf[:end]
            m = _CL.search(head)
            n = int(m.group(1)) if m else 0
            if len(self.buf) < end + 4 + n:
                return
            body = self.buf[end + 4 : end + 4 + n]
            self.buf = self.buf[end + 4 + n :]
            line = head.split(b"\r\n", 1)[0]
            if line.startswith(b"GET"):
                payload = MODELS if b"/v1/models" in line else b"ok"
                self.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                    % (len(payload), payload)
                )
                continue
            pm, mm = _PROMPT.search(body), _MAXTOK.search(body)
            rid = int(pm.group(1)) if pm else -1
            LOG.append((rid, 0, self.t))
            self.busy = True
            asyncio.ensure_future(self.stream(rid, int(mm.group(1)) if mm else 16, self.t))

    def write(self, data: bytes):
        if self.closed:
            return
        if not self.out:
            try:
                k = self.sock.send(data)
            except (BlockingIOError, InterruptedError):
                k = 0
            except OSError:
                self.close()
                return
            if k == len(data):
                return
            data = data[k:]
            self.loop.add_writer(self.fd, self.writable)
        self.out += data

    def writable(self):
        try:
            k = self.sock.send(self.out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self.close()
            return
        self.out = self.out[k:]
        if not self.out:
            self.loop.remove_writer(self.fd)

    def close(self):
        if not self.closed:
            self.closed = True
            self.loop.remove_reader(self.fd)
            self.loop.remove_writer(self.fd)
            self.sock.close()

    async def stream(self, rid, n, t_read):
        ttft, itl, every, stall, sync = self.cfg
        self.write(HEAD)
        deadline = t_read + ttft
        if sync:  # the next instant on the global grid: every stream's chunk is due together
            deadline = math.ceil(deadline / itl) * itl
        for i in range(n):
            d = deadline - time.monotonic()
            if d > 0:
                await asyncio.sleep(d)
            if self.closed:
                return
            self.write(frame(CHUNK))
            LOG.append((rid, 1, time.monotonic()))
            deadline += stall if (every and (i + 1) % every == 0) else itl
        usage = b'data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":%d}}\n\ndata: [DONE]\n\n' % n
        self.write(frame(usage) + b"0\r\n\r\n")
        self.busy = False
        if self.buf:
            self.parse()


def accept(lsock, cfg):
    while True:
        try:
            s, _ = lsock.accept()
        except (BlockingIOError, InterruptedError):
            return
        s.setblocking(False)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        Conn(s, cfg)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=8100)
    ap.add_argument("--ttft-ms", type=float, default=50.0)
    ap.add_argument("--itl-ms", type=float, default=20.0)
    ap.add_argument("--stall-every", type=int, default=0)
    ap.add_argument("--stall-ms", type=float, default=200.0)
    ap.add_argument("--log", default=None)
    ap.add_argument("--sync-tick", action="store_true", help="every stream's chunks on one global --itl-ms grid")
    a = ap.parse_args()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    cfg = (a.ttft_ms / 1000, a.itl_ms / 1000, a.stall_every, a.stall_ms / 1000, a.sync_tick)
    OFFSET[0] = _offset()

    async def serve():
        loop = asyncio.get_running_loop()
        lsock = socket.socket()
        lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lsock.bind(("127.0.0.1", a.port))
        lsock.listen(4096)
        lsock.setblocking(False)
        loop.add_reader(lsock.fileno(), accept, lsock, cfg)
        stop = asyncio.Event()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        loop.add_signal_handler(signal.SIGINT, stop.set)
        await stop.wait()
        lsock.close()

    asyncio.run(serve())
    if a.log:
        with open(a.log, "wb") as f:
            for rec in LOG:
                f.write(struct.pack("<iid", *rec))


if __name__ == "__main__":
    main()
