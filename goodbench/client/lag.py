"""How late the load generator itself was: the client's self-check behind summary.json's `client_lag`.

Two measurements, both cheap enough for every read:
  read lag   the time between the kernel receiving a socket's bytes (SO_TIMESTAMPNS, CLOCK_REALTIME)
             and the event loop reading them. With kernel stamps (plain TCP on Linux, the lean client's
             default) chunk times are the kernel's, so this lag no longer moves any percentile; it is
             reported as evidence of how busy the client was.
  loop lag   a probe that asks to wake every PROBE_S and records how much later it woke: the delay any
             callback (a read, a send) waited for the loop. Where chunk times are the loop's own stamps
             (TLS, the aiohttp client) it bounds their error.

Lags go into fixed histograms (10 us bins to 10 ms, 1 ms bins to 1 s), so a long run costs no memory,
and several worker processes' histograms add up. Pure but for the probe (asyncio) and the clocks."""

from __future__ import annotations

import asyncio
import gc
import time
from array import array

import numpy as np

try:
    import resource  # POSIX: involuntary context switches
except ImportError:  # pragma: no cover - Windows
    resource = None

FINE_S, FINE_BINS = 1e-5, 1000  # 10 us bins up to 10 ms
COARSE_S, COARSE_BINS = 1e-3, 1000  # then 1 ms bins up to 1 s (and one bin beyond)
PROBE_S = 0.01
FOLD_AT = 8192  # read lags kept raw (64 KiB) before they are binned: ~0.2 ms of the loop's time


class LagHistogram:
    """Counts of lags (seconds) in fixed bins, with the exact maximum."""

    __slots__ = ("bins", "n", "max")

    def __init__(self):
        self.bins = array("q", bytes(8 * (FINE_BINS + COARSE_BINS + 1)))
        self.n, self.max = 0, 0.0

    def add(self, lag: float, n: int = 1) -> None:
        """n lags of this size (one add for a read's merged chunks: no work per chunk when late)."""
        if lag < 0.0:
            lag = 0.0
        k = int(lag / FINE_S)
        if k >= FINE_BINS:
            k = min(FINE_BINS + int(lag / COARSE_S) - int(FINE_S * FINE_BINS / COARSE_S), FINE_BINS + COARSE_BINS)
        self.bins[k] += n
        self.n += n
        if lag > self.max:
            self.max = lag

    def add_many(self, lags: array) -> None:
        """add() for each of many lags at once (numpy; the same bins to the last bit)."""
        if not len(lags):
            return
        x = np.frombuffer(lags, dtype=np.float64).clip(0.0)  # a copy: `lags` may be cleared after
        k = (x / FINE_S).astype(np.int64)
        far = k >= FINE_BINS
        if far.any():
            k[far] = np.minimum(
                FINE_BINS + (x[far] / COARSE_S).astype(np.int64) - int(FINE_S * FINE_BINS / COARSE_S),
                FINE_BINS + COARSE_BINS,
            )
        np.frombuffer(self.bins, dtype=np.int64)[:] += np.bincount(k, minlength=len(self.bins))
        self.n += len(x)
        self.max = max(self.max, float(x.max()))

    def merge(self, other: LagHistogram) -> None:
        for k, v in enumerate(other.bins):
            if v:
                self.bins[k] += v
        self.n += other.n
        self.max = max(self.max, other.max)

    def quantile_ms(self, q: float) -> float | None:
        """The upper edge of the bin holding the q-quantile (ms, never above the maximum); None if empty."""
        if not self.n:
            return None
        need, seen = q * self.n, 0
        for k, v in enumerate(self.bins):
            seen += v
            if v and seen >= need:
                if k == FINE_BINS + COARSE_BINS:  # beyond the last bin: only the maximum is known
                    break
                edge = (k + 1) * FINE_S if k < FINE_BINS else FINE_S * FINE_BINS + (k - FINE_BINS + 1) * COARSE_S
                return round(min(edge, self.max) * 1000, 3)
        return round(self.max * 1000, 3)

    def state(self) -> tuple:
        """What crosses a process boundary (a worker's histogram to the parent): the non-empty bins."""
        return ({k: v for k, v in enumerate(self.bins) if v}, self.n, self.max)

    @classmethod
    def from_state(cls, st: tuple) -> LagHistogram:
        h = cls()
        for k, v in st[0].items():
            h.bins[int(k)] = v
        h.n, h.max = st[1], st[2]
        return h


def realtime_offset(tries: int = 20) -> float:
    """CLOCK_REALTIME - CLOCK_MONOTONIC from the tightest of a few paired readings: kernel receive stamps
    are realtime, the run's clock is monotonic. Re-read now and then (NTP slews realtime)."""
    best_w, best = 1.0, 0.0
    for _ in range(tries):
        a = time.monotonic()
        r = time.time()
        b = time.monotonic()
        if b - a < best_w:
            best_w, best = b - a, r - (a + b) / 2
    return best


async def loop_probe(meter: LagMeter, period_s: float = PROBE_S) -> None:
    """Run beside a run's dispatch: every period_s, how much later than asked the loop woke us (and the
    raw read lags binned once there are FOLD_AT of them, so a long run's memory stays flat)."""
    clock, hist, raw = time.monotonic, meter.loop, meter.read_lags
    while True:
        due = clock() + period_s
        await asyncio.sleep(period_s)
        hist.add(clock() - due)
        if len(raw) >= FOLD_AT:
            meter.fold()


def _preemptions() -> int:
    """The process's involuntary context switches so far (0 where the platform does not count them)."""
    if resource is None:
        return 0
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_nivcsw)


class LagMeter:
    """One event loop's client-lag evidence: read lags (kernel stamp to read), loop lags (the probe),
    its CPU time and wall time, and the requests and chunks it handled."""

    def __init__(self):
        self.reads, self.loop = LagHistogram(), LagHistogram()
        self.read_lags = array("d")  # kernel-stamped reads' lags, appended per read, binned by fold()
        self.merged = LagHistogram()  # per event that shared a read with a later one: its possible error
        self.user_reads = 0
        self.cpu0 = self.wall0 = 0.0
        self.cpu = self.wall = 0.0
        self.preempted0 = self.preempted = 0  # involuntary context switches: another task took the core
        self.gc_max = self.gc_total = 0.0  # the cyclic GC's pauses (s): the client holding its own loop
        self._gc_at = 0.0

    def _gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._gc_at = time.monotonic()
        elif self._gc_at:
            d = time.monotonic() - self._gc_at
            self.gc_total += d
            self.gc_max = max(self.gc_max, d)

    def start(self) -> None:
        self.cpu0, self.wall0 = time.process_time(), time.monotonic()
        self.preempted0 = _preemptions()
        if self._gc not in gc.callbacks:
            gc.callbacks.append(self._gc)

    def stop(self) -> None:
        self.cpu, self.wall = time.process_time() - self.cpu0, time.monotonic() - self.wall0
        self.preempted = _preemptions() - self.preempted0
        if self._gc in gc.callbacks:
            gc.callbacks.remove(self._gc)

    def fold(self) -> None:
        """Bin the raw read lags (the probe does it now and then; the state at the end)."""
        self.reads.add_many(self.read_lags)
        del self.read_lags[:]

    def state(self, requests: int, chunks: int) -> dict:
        self.fold()
        return {
            "reads": self.reads.state(),
            "loop": self.loop.state(),
            "merged": self.merged.state(),
            "kernel_reads": self.reads.n,
            "user_reads": self.user_reads,
            "cpu_s": self.cpu,
            "wall_s": self.wall,
            "preempted": self.preempted,
            "gc_pause_max_s": self.gc_max,
            "gc_pause_total_s": self.gc_total,
            "requests": requests,
            "chunks": chunks,
        }


def _chunk_error(merged: LagHistogram, chunks: int, q: float) -> float:
    """The q-quantile over every chunk of the possible stamp error, where only merged events have one."""
    if not chunks or merged.n <= chunks * (1 - q):
        return 0.0
    return merged.quantile_ms(1 - (1 - q) * chunks / merged.n) or 0.0


def _stamp_error(stamps: str, merged: LagHistogram, loop: LagHistogram, chunks: int, q: float) -> float | None:
    """How late a chunk's stamp can be at the q-quantile over chunks. Loop stamps: the loop's lag (every
    read waited for the loop). Kernel stamps: only merged chunks can be off, each by at most the time
    since its connection's previous read and by at most the loop's lag (a merge means the loop was away
    from the socket; the probe says for how long it is away at that quantile), whichever is less."""
    lq = loop.quantile_ms(q)
    if stamps != "kernel":
        return lq
    return min(_chunk_error(merged, chunks, q), lq if lq is not None else 0.0)


def client_lag(states: list[dict]) -> dict | None:
    """summary.json's `client_lag` from one LagMeter state per load-generator process (None if none).
    stamp_error_p50_ms / _p99_ms: how far a chunk's stamp can be from the wire, at the median and p99
    over chunks (_stamp_error)."""
    states = [s for s in states if s]
    if not states:
        return None
    reads, loop, merged = LagHistogram(), LagHistogram(), LagHistogram()
    for s in states:
        reads.merge(LagHistogram.from_state(s["reads"]))
        loop.merge(LagHistogram.from_state(s["loop"]))
        merged.merge(LagHistogram.from_state(s.get("merged") or ({}, 0, 0.0)))
    kern, user = sum(s["kernel_reads"] for s in states), sum(s["user_reads"] for s in states)
    cpu, wall = sum(s["cpu_s"] for s in states), max(s["wall_s"] for s in states)
    reqs, chunks = sum(s["requests"] for s in states), sum(s["chunks"] for s in states)
    stamps = "kernel" if kern and not user else "user" if not kern else "mixed"
    loop_p99 = loop.quantile_ms(0.99)
    return {
        "stamps": stamps,
        "processes": len(states),
        "reads": kern + user,
        "read_p50_ms": reads.quantile_ms(0.5),
        "read_p99_ms": reads.quantile_ms(0.99),
        "read_max_ms": round(reads.max * 1000, 3) if reads.n else None,
        "merged_chunks": merged.n,
        "loop_lag_p50_ms": loop.quantile_ms(0.5),
        "loop_lag_p99_ms": loop_p99,
        "loop_lag_max_ms": round(loop.max * 1000, 3) if loop.n else None,
        "loop_busy_pct": round(100 * cpu / (wall * len(states)), 1) if wall > 0 else None,
        "cpu_ms_per_request": round(cpu / reqs * 1000, 3) if reqs else None,
        "chunks_per_request": round(chunks / reqs, 1) if reqs else None,
        "stamp_error_p50_ms": _stamp_error(stamps, merged, loop, chunks, 0.5),
        "stamp_error_p99_ms": _stamp_error(stamps, merged, loop, chunks, 0.99),
        # what held the loop: another task taking the core (preemptions per second of the run), or the
        # client itself (its cyclic GC's longest pause); older states lack them
        "preempted_per_s": round(sum(s.get("preempted", 0) for s in states) / wall, 1) if wall > 0 else None,
        "gc_pause_max_ms": round(max(s.get("gc_pause_max_s", 0.0) for s in states) * 1000, 3),
        "gc_pause_total_ms": round(sum(s.get("gc_pause_total_s", 0.0) for s in states) * 1000, 3),
    }
