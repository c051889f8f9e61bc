"""What one socket read costs the lean client, piece by piece (issue 21: CPU per chunk).

One keep-alive connection on loopback; the other end sends a chunked SSE body one OpenAI completion
event at a time, and after each send the client's read path is called directly (no event loop
between, so only the read path's own CPU is timed, with CLOCK_PROCESS_CPUTIME_ID around each call):

  recv+feed       a plain recv() and Conn.feed_at: the loop-stamp path's work (uvloop does the read
                  in C; this is that read plus its Python call)
  recvmsg+feed    the same with recvmsg() and SO_TIMESTAMPNS's ancillary data (the kernel stamp's
                  price in the kernel and in the socket module)
  +stamp          ... and the stamp turned into the run's clock, its read lag noted
  kernel          KernelConn._readable as the client runs it (merged-read bookkeeping included)
  classify        of that, the event's classification alone (client/sse.py: classify, no read)

    python benchmarks/read_path_cost.py                    # this checkout, 60,000 reads per path x 2
    python benchmarks/read_path_cost.py --tree ../other    # another checkout's client (before/after)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import struct
import sys
import time
from array import array

EV = b'data: {"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" hello","logprobs":null,"finish_reason":null}]}\n\n'
CHUNK = b"%x\r\n" % len(EV) + EV + b"\r\n"
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
_TIMESPEC = struct.Struct("qq").unpack_from


def paths(kc) -> dict:
    """The read paths, each a no-argument call that reads once and feeds what it read."""
    lags = array("d")

    def recv_feed():
        kc.feed_at(kc.sock.recv(65536), kc.clock())

    def recvmsg_feed():
        data, _anc, _, _ = kc.sock.recvmsg(65536, 32)
        kc.feed_at(data, kc.clock())

    def stamped():
        data, anc, _, _ = kc.sock.recvmsg(65536, 32)
        now = kc.clock()
        sec, nsec = _TIMESPEC(anc[0][2])
        stamp = sec + nsec * 1e-9 - kc.client.rt_offset
        lags.append(now - stamp)
        kc.feed_at(data, stamp)

    return {"recv+feed": recv_feed, "recvmsg+feed": recvmsg_feed, "+stamp": stamped, "kernel": kc._readable}


async def measure(n: int, rounds: int) -> dict[str, list[float]]:
    from goodbench.client import conn as C
    from goodbench.client.lag import LagMeter, realtime_offset
    from goodbench.client.lean import LeanClient
    from goodbench.client.sse import classify
    from goodbench.client.stream import StreamState

    class Client:  # what a Conn asks of its client
        clock = staticmethod(time.monotonic)
        meter = LagMeter()
        rt_offset, offset_at = realtime_offset(), time.monotonic()
        restamp = getattr(LeanClient, "restamp", None)  # a suspect stamp (trees before it have none)
        _read_offset = getattr(LeanClient, "_read_offset", None)

        def forget(self, c):
            pass

        def release(self, c):
            pass

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    kc = await C.KernelConn.open(Client(), "127.0.0.1", srv.getsockname()[1])
    peer, _ = srv.accept()
    peer.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    asyncio.get_running_loop().remove_reader(kc.fd)  # we call the read path ourselves
    out: dict[str, list[float]] = {}
    for _ in range(rounds):
        for name, read in paths(kc).items():
            st = StreamState(time.monotonic, time.monotonic())
            kc.ex = C.Exchange(st, asyncio.get_running_loop().create_future(), 1e18)
            kc.ex.sent = time.monotonic()
            peer.send(HEAD)
            kc._readable()
            cpu = 0.0
            for _ in range(n):
                peer.send(CHUNK)
                t = time.process_time()
                read()
                cpu += time.process_time() - t
            assert len(st.times) == n, (name, len(st.times))
            peer.send(b"0\r\n\r\n")
            kc._readable()
            kc.ex = None
            out.setdefault(name, []).append(cpu / n * 1e6)
        payload = EV[len(b"data: ") :].strip()
        t = time.process_time()
        for _ in range(n):
            classify(payload)
        out.setdefault("classify", []).append((time.process_time() - t) / n * 1e6)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", help="measure the goodbench of another checkout")
    ap.add_argument("--reads", type=int, default=60000, help="reads per path per round")
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    sys.path.insert(
        0, os.path.abspath(a.tree) if a.tree else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    )
    if sys.platform.startswith("linux") and (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {1})
    res = asyncio.run(measure(a.reads, a.rounds))
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; us of CPU per read (each round):")
    for name, v in res.items():
        print(f"  {name:13} " + "  ".join(f"{x:6.2f}" for x in v))


if __name__ == "__main__":
    main()
