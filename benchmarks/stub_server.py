"""Deterministic streaming server for measuring the load generator. Run it in its own process, pinned:
`taskset -c 0 python benchmarks/stub_server.py --port 8100 --log /tmp/truth.bin`.

A raw asyncio protocol (no HTTP framework), so that its own overhead is small and its timestamps are
close to the wire: a request's time is taken when its last bytes are read, each chunk's time right
after it is handed to the socket. Each request streams `max_tokens` OpenAI completion chunks, the first
after --ttft-ms, then one every --itl-ms (every --stall-every-th gap lasts --stall-ms instead), on
absolute deadlines. The log (request number from the prompt, kind 0=read 1=chunk 2=new connection, monotonic time) is
written as packed binary at exit (SIGTERM)."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import signal
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


class Conn(asyncio.Protocol):
    def __init__(self, cfg):
        self.cfg = cfg
        self.buf = b""
        self.transport = None
        self.busy = False

    def connection_made(self, transport):
        self.transport = transport
        LOG.append((-1, 2, time.monotonic()))  # kind 2: a new connection

    def data_received(self, data):
        t = time.monotonic()
        self.buf += data
        while not self.busy:
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
                self.transport.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                    % (len(payload), payload)
                )
                continue
            pm, mm = _PROMPT.search(body), _MAXTOK.search(body)
            rid = int(pm.group(1)) if pm else -1
            LOG.append((rid, 0, t))
            self.busy = True
            asyncio.ensure_future(self.stream(rid, int(mm.group(1)) if mm else 16, t))

    async def stream(self, rid, n, t_read):
        ttft, itl, every, stall = self.cfg
        tr = self.transport
        tr.write(HEAD)
        deadline = t_read + ttft
        for i in range(n):
            d = deadline - time.monotonic()
            if d > 0:
                await asyncio.sleep(d)
            if tr.is_closing():
                self.busy = False
                return
            tr.write(frame(CHUNK))
            LOG.append((rid, 1, time.monotonic()))
            deadline += stall if (every and (i + 1) % every == 0) else itl
        usage = b'data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":%d}}\n\ndata: [DONE]\n\n' % n
        tr.write(frame(usage) + b"0\r\n\r\n")
        self.busy = False
        if self.buf:
            self.data_received(b"")


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
    cfg = (a.ttft_ms / 1000, a.itl_ms / 1000, a.stall_every, a.stall_ms / 1000)

    async def serve():
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: Conn(cfg), "127.0.0.1", a.port, backlog=4096)
        stop = asyncio.Event()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        loop.add_signal_handler(signal.SIGINT, stop.set)
        async with server:
            await stop.wait()

    asyncio.run(serve())
    if a.log:
        with open(a.log, "wb") as f:
            for rec in LOG:
                f.write(struct.pack("<iid", *rec))


if __name__ == "__main__":
    main()
