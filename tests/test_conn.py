"""The lean client's connections (client/conn.py): on plain TCP each read's time is the kernel's receive
stamp, so a chunk that arrives while the event loop is busy keeps the time it reached the host; the
loop-stamped Conn (TLS, or kernel_stamps off) shows the same chunk late by as long as the loop was busy."""

import asyncio
import socket
import sys
import threading
import time

import pytest

from goodbench.client.config import ClientConfig
from goodbench.client.lean import LeanClient
from goodbench.records import RequestSpec

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SO_TIMESTAMPNS is Linux's")

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def frame(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def chunk_frame(i: int) -> bytes:
    return frame(b'data: {"choices":[{"index":0,"text":" t%d"}]}\n\n' % i)


def serve_once(sock: socket.socket, sent: list, held: threading.Event) -> None:
    """One request on one connection: three chunks 50 ms apart, each one's (before, after) send times in
    `sent`; the second waits until the client's loop is held (`held`), so it arrives while it is."""
    conn, _ = sock.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    data = b""
    while b"\r\n\r\n" not in data or not data.endswith(b"}"):
        data += conn.recv(65536)
    conn.sendall(HEAD)
    for i, gap in enumerate((0.02, 0.05, 0.05)):
        time.sleep(gap)
        if i == 1:
            held.wait(5)
        before = time.monotonic()
        conn.sendall(chunk_frame(i))
        sent.append((before, time.monotonic()))
    time.sleep(0.02)
    conn.sendall(frame(b"data: [DONE]\n\n") + b"0\r\n\r\n")
    conn.recv(1)
    conn.close()


def run(kernel: bool, block_s: float, offset_error: float = 0.0, host: str = "127.0.0.1", over: int = 1):
    """The client reads three chunks while its loop is held over the arrival of `over` of them, from the
    second, and block_s beyond the last (offset_error: 10 ms in, the realtime clock steps by minus that
    much since the client read its offset). Returns each chunk's time and its (before, after) send times."""
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(4)
    sent: list[tuple[float, float]] = []
    held = threading.Event()
    th = threading.Thread(target=serve_once, args=(lsock, sent, held), daemon=True)
    th.start()

    def hold():  # the loop is busy from before the second chunk is sent until block_s after the last
        held.set()
        t = time.monotonic()
        while len(sent) < 1 + over and time.monotonic() - t < 5:
            time.sleep(0.001)
        time.sleep(block_s)

    async def go():
        cfg = ClientConfig(base_url=f"http://{host}:{lsock.getsockname()[1]}", model="m", kernel_stamps=kernel)
        t0 = time.monotonic()
        async with LeanClient(cfg, t0) as c:
            loop = asyncio.get_running_loop()
            if offset_error:
                loop.call_later(0.01, setattr, c, "rt_offset", c.rt_offset + offset_error)
            if block_s:
                loop.call_later(0.06, hold)
            else:
                held.set()
            rec = await c.send(RequestSpec("r", "c", "p", 1, 3), 0.0)
            return rec, t0, c.kernel, c.meter

    try:
        rec, t0, used_kernel, meter = asyncio.run(go())
    finally:
        th.join(5)
        lsock.close()
    return [t0 + t for t in rec.chunk_times], sent, used_kernel, meter, rec


def near(got, sent, eps=0.002) -> bool:
    """Each chunk's time within eps of its send (between the times read before and after it)."""
    return all(b - eps < g < a + eps for g, (b, a) in zip(got, sent))


def test_kernel_stamps_keep_a_chunks_time_while_the_loop_is_busy():
    got, sent, used, meter, rec = run(kernel=True, block_s=0.03)
    assert used and rec.status == "ok" and len(got) == len(sent) == 3
    assert meter.fold() is None and meter.reads.n >= 3 and meter.user_reads == 0
    # the second chunk arrived while the loop slept: its stamp is still within 2 ms of its send
    assert near(got, sent), [g - s for g, (s, _) in zip(got, sent)]
    assert meter.reads.max > 0.01  # ... though the loop read it >10 ms later (the read lag it reports)


@pytest.mark.parametrize("step_s", [2.0, -2.0], ids=["realtime-back", "realtime-forward"])
def test_a_realtime_clock_step_moves_no_chunk(step_s):
    """Kernel stamps are realtime, the run's clock monotonic: a step of the realtime clock (NTP, a VM
    resumed) after the offset was read would put every chunk early (clamped to its send, then a false
    stall) or late (the loop's time) until the next reading; a suspect stamp makes the client read the
    offset again, so each chunk keeps its time."""
    got, sent, used, meter, rec = run(kernel=True, block_s=0.03, offset_error=step_s)
    assert used and rec.status == "ok" and len(got) == len(sent) == 3
    assert near(got, sent), [g - s for g, (s, _) in zip(got, sent)]
    assert meter.fold() is None and meter.reads.max < 0.5  # the lag measured against the right offset


def test_each_address_of_a_name_is_tried_in_turn(monkeypatch):
    """`localhost` may resolve to ::1 first where the server listens on 127.0.0.1 only (vLLM's default
    0.0.0.0 is IPv4): the kernel-stamped connection tries the next address, as create_connection does,
    instead of failing every request."""
    from goodbench.client import conn

    async def addresses(host, port):
        assert host == "dual-stack.test"
        return [(socket.AF_INET6, ("::1", port, 0, 0)), (socket.AF_INET, ("127.0.0.1", port))]

    monkeypatch.setattr(conn, "addresses", addresses)
    got, sent, used, meter, rec = run(kernel=True, block_s=0.0, host="dual-stack.test")
    assert used and rec.status == "ok" and len(got) == 3, rec.error


def test_loop_stamps_show_the_same_chunk_late():
    got, sent, used, meter, rec = run(kernel=False, block_s=0.03)
    assert not used and rec.status == "ok"
    assert got[1] - sent[1][0] > 0.02  # what the kernel stamp avoids
    assert meter.fold() is None and meter.reads.n == 0


def test_a_read_that_brings_two_chunks_of_a_stream_is_counted_as_merged():
    # the loop blocked over two chunk arrivals: the kernel merged them, the earlier takes the later stamp
    got, sent, used, meter, rec = run(kernel=True, block_s=0.03, over=2)
    assert used and rec.status == "ok"
    assert meter.merged.n >= 1 and meter.merged.max > 0.03


def test_kernel_stamps_only_on_plain_tcp():
    def kernel(url, **kw):
        return LeanClient(ClientConfig(base_url=url, model="m", **kw), 0.0).kernel

    assert kernel("http://127.0.0.1:8000")
    assert not kernel("https://127.0.0.1:8000")  # TLS: the loop's stamps, and client_lag's loop lag
    assert not kernel("http://127.0.0.1:8000", kernel_stamps=False)  # --no-kernel-timestamps


def test_the_probe_sees_stamping_on_before_a_run_starts_its_clock():
    """Linux turns receive stamping on from a worker thread after the first socket asks; the probe a
    kernel-stamped client runs after prewarming waits for it, and holding its sockets keeps it on."""
    from goodbench.client.conn import rx_stamps_ready

    ok, socks = asyncio.run(rx_stamps_ready(2.0))
    try:
        assert ok and len(socks) == 3
    finally:
        for s in socks:
            s.close()
