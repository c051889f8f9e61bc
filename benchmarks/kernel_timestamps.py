"""Would kernel receive timestamps make the load generator more accurate at saturation? (issue 12)

A busy client reads a socket some time after the bytes reached the host; the kernel can say when they
did (SO_TIMESTAMPNS: a CLOCK_REALTIME timespec per read, through recvmsg's ancillary data). This script
measures what that would buy, against the same deterministic stub server as generator_accuracy.py
(pinned to CPU 0, logging its own read and send times; the client pinned to CPU 1).

The client here is a minimal closed loop on the event loop goodbench uses (uvloop when installed):
raw non-blocking sockets with add_reader, one request at a time per connection, every read stamped
with the user-space clock right after the read returns and, in `recvmsg` mode, also with the kernel's
receive time. Per case it prints TTFT and ITL p50/p99 errors against the server's log for the user
stamp and the kernel stamp, how much later than the kernel the client read (p50/p99/max), and the
client's CPU per chunk in each mode (`recv` mode is the baseline cost of reading).

    python benchmarks/kernel_timestamps.py                    # c16 c512 c1000, 8 s each, both modes
    python benchmarks/kernel_timestamps.py --cases c1000 --seconds 5 --repeat 3
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import socket
import struct
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
sys.path.insert(0, ROOT)

from generator_accuracy import free_port, read_truth, start_stub  # noqa: E402

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux; the module does not export it
SCM_TIMESTAMPNS = SO_TIMESTAMPNS
CMSG = socket.CMSG_SPACE(16)
CASES = {"c16": 16, "c128": 128, "c512": 512, "c1000": 1000}
OUTPUT = 128
MARK = b'"text_completion"'  # one per content chunk frame of the stub
END = b"0\r\n\r\n"


class Stream:
    """One connection's closed loop: request, read the chunked response to its end, repeat."""

    def __init__(self, sock: socket.socket, mode: str, log: dict, deadline: float, next_id):
        self.sock, self.mode, self.log, self.deadline, self.next_id = sock, mode, log, deadline, next_id
        self.rid = -1
        self.done = asyncio.get_running_loop().create_future()

    def send(self) -> None:
        self.rid = self.next_id()
        body = b'{"model":"stub","prompt":"%d","max_tokens":%d,"stream":true}' % (self.rid, OUTPUT)
        req = (
            b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        self.sock.send(req)
        self.log[self.rid] = {"sent": time.monotonic(), "user": [], "kernel": []}
        self.tail = b""

    def readable(self) -> None:
        if self.mode == "recvmsg":
            data, anc, _, _ = self.sock.recvmsg(65536, CMSG)
            user = time.monotonic()
            kern = None
            for level, typ, raw in anc:
                if level == socket.SOL_SOCKET and typ == SCM_TIMESTAMPNS:
                    sec, nsec = struct.unpack("qq", raw[:16])
                    kern = sec + nsec * 1e-9 - OFFSET[0]  # realtime -> monotonic
        else:
            data = self.sock.recv(65536)
            user, kern = time.monotonic(), None
        if not data:
            asyncio.get_running_loop().remove_reader(self.sock.fileno())
            self.done.set_result(None)
            return
        entry = self.log[self.rid]
        k = data.count(MARK)
        entry["user"] += [user] * k
        entry["kernel"] += [kern if kern is not None else user] * k
        self.tail = (self.tail + data)[-8:]
        if self.tail.endswith(END):
            if time.monotonic() < self.deadline:
                self.send()
            else:
                asyncio.get_running_loop().remove_reader(self.sock.fileno())
                self.done.set_result(None)


OFFSET = [0.0]


def _offset() -> float:
    """CLOCK_REALTIME - CLOCK_MONOTONIC, from the tightest of a few paired readings."""
    best = None
    for _ in range(200):
        a = time.monotonic()
        r = time.time()
        b = time.monotonic()
        if best is None or b - a < best[0]:
            best = (b - a, r - (a + b) / 2)
    return best[1]


async def drive(port: int, n: int, seconds: float, mode: str) -> dict:
    loop = asyncio.get_running_loop()
    log: dict = {}
    counter = iter(range(10**9))
    streams = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.setblocking(False)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if mode == "recvmsg":
            s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        streams.append(Stream(s, mode, log, time.monotonic() + seconds, lambda: next(counter)))
    for st in streams:
        loop.add_reader(st.sock.fileno(), st.readable)
        st.send()
    await asyncio.gather(*(st.done for st in streams))
    for st in streams:
        st.sock.close()
    return log


def errors(log: dict, reads: dict, chunks: dict, key: str) -> dict:
    ttft_c, ttft_t, itl_c, itl_t = [], [], [], []
    for rid, e in log.items():
        times = e[key]
        if rid not in reads or rid not in chunks or len(times) != len(chunks[rid]) or not times:
            continue
        ttft_c.append(times[0] - e["sent"])
        ttft_t.append(chunks[rid][0] - reads[rid])
        itl_c.extend(np.diff(times))
        itl_t.extend(np.diff(chunks[rid]))
    p = lambda x, q: float(np.percentile(np.asarray(x) * 1000, q))  # noqa: E731
    return {
        "ttft50": p(ttft_c, 50) - p(ttft_t, 50),
        "ttft99": p(ttft_c, 99) - p(ttft_t, 99),
        "itl50": p(itl_c, 50) - p(itl_t, 50),
        "itl99": p(itl_c, 99) - p(itl_t, 99),
        "n": len(ttft_c),
    }


def run_case(name: str, seconds: float, mode: str) -> dict:
    port = free_port()
    tmp = tempfile.mkdtemp(prefix="gb-kts-")
    logf = os.path.join(tmp, "truth.bin")
    stub = start_stub(port, logf, 20.0, 50.0, stall_every=50, stall_ms=100)
    try:
        if sys.platform.startswith("linux") and (os.cpu_count() or 1) > 1:
            os.sched_setaffinity(0, {1})
        OFFSET[0] = _offset()
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        log = asyncio.run(drive(port, CASES[name], seconds, mode))
        r1 = resource.getrusage(resource.RUSAGE_SELF)
    finally:
        stub.terminate()
        stub.wait(10)
    reads, chunks = read_truth(logf)
    n_chunks = sum(len(e["user"]) for e in log.values())
    cpu = r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
    out = {
        "case": name,
        "mode": mode,
        "chunks": n_chunks,
        "cpu_us_per_chunk": cpu / max(n_chunks, 1) * 1e6,
        "user": errors(log, reads, chunks, "user"),
    }
    if mode == "recvmsg":
        out["kernel"] = errors(log, reads, chunks, "kernel")
        late = np.array([u - k for e in log.values() for u, k in zip(e["user"], e["kernel"])]) * 1000
        out["late"] = (float(np.percentile(late, 50)), float(np.percentile(late, 99)), float(late.max()))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", nargs="+", default=["c16", "c512", "c1000"], choices=list(CASES))
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args()
    from goodbench.eventloop import install_uvloop

    install_uvloop()
    print(
        f"{'case':6} {'mode':8} {'stamp':7} {'chunks':>7} {'TTFT p50/p99 err ms':>20} {'ITL p50/p99 err ms':>19} "
        f"{'read late p50/p99/max ms':>25} {'CPU us/chunk':>12}"
    )
    for name in a.cases:
        for _ in range(a.repeat):
            for mode in ("recv", "recvmsg"):
                r = run_case(name, a.seconds, mode)
                stamps = [("user", r["user"])] + ([("kernel", r["kernel"])] if "kernel" in r else [])
                for stamp, e in stamps:
                    late = "%7.2f/%7.2f/%7.2f" % r["late"] if "late" in r and stamp == "kernel" else ""
                    print(
                        f"{name:6} {mode:8} {stamp:7} {r['chunks']:7d} {e['ttft50']:+9.2f}/{e['ttft99']:+8.2f} "
                        f"{e['itl50']:+8.2f}/{e['itl99']:+8.2f} {late:>25} {r['cpu_us_per_chunk']:12.2f}",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
