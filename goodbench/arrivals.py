"""Arrival processes: pure functions from (process parameters, seed) to send offsets in seconds.

Every process is generated as a renewal process in "operational time" (expected-arrival units) and
mapped to wall time through the cumulative intensity, so a linear ramp-up applies to all of them the
same way. The schedule is exactly what the process says: it is never rescaled to end at a chosen time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from .errors import InputError, UsageError
from .limits import MAX_SECONDS

KINDS = ("poisson", "gamma", "constant", "onoff", "trace", "closed", "workload")


@dataclass(frozen=True)
class ArrivalSpec:
    kind: str = "poisson"
    rate: float = 1.0  # req/s; math.inf = everything at t=0
    burstiness: float = 1.0  # gamma shape; 1.0 = Poisson (vLLM --burstiness)
    ramp_up_s: float = 0.0  # linear ramp of the rate from 0 to `rate`
    # on/off: Markov-modulated Poisson with exponential phase lengths
    on_rate: float = 0.0
    off_rate: float = 0.0
    on_mean_s: float = 1.0
    off_mean_s: float = 1.0
    # trace replay: timestamps (seconds, any origin) times time_scale
    trace: tuple[float, ...] = ()
    time_scale: float = 1.0
    # closed loop
    concurrency: int = 0
    think_time_s: float = 0.0

    def __post_init__(self):
        if self.kind not in KINDS:
            raise UsageError(f"arrival kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.kind in ("poisson", "gamma", "constant") and not self.rate > 0:
            raise UsageError("arrival rate must be > 0 (use inf to send everything at once)")
        if self.burstiness <= 0:
            raise UsageError("burstiness must be > 0")
        if self.ramp_up_s < 0:
            raise UsageError("ramp_up_s must be >= 0")
        if self.kind == "onoff" and not (
            self.on_rate > 0 and self.off_rate >= 0 and self.on_mean_s > 0 and self.off_mean_s > 0
        ):
            raise UsageError("on/off arrivals need on_rate > 0, off_rate >= 0 and positive phase means")
        if self.kind == "closed" and self.concurrency < 1:
            raise UsageError("closed-loop arrivals need concurrency >= 1")
        if self.time_scale <= 0:
            raise UsageError("time_scale must be > 0")

    @property
    def label(self) -> str:
        if self.kind == "closed":
            return f"concurrency@{self.concurrency}"
        if self.kind in ("poisson", "gamma", "constant"):
            r = "inf" if math.isinf(self.rate) else f"{self.rate:.2f}"
            kind = "poisson" if self.kind == "gamma" and self.burstiness == 1.0 else self.kind
            extra = f",b={self.burstiness:g}" if kind == "gamma" else ""
            return f"{kind}@{r}{extra}"
        if self.kind == "onoff":
            return f"onoff@{self.on_rate:g}/{self.off_rate:g}"
        return self.kind

    @property
    def mean_rate(self) -> float | None:
        if self.kind in ("poisson", "gamma", "constant"):
            return self.rate
        if self.kind == "onoff":
            return (self.on_rate * self.on_mean_s + self.off_rate * self.off_mean_s) / (
                self.on_mean_s + self.off_mean_s
            )
        return None


def _unit_gaps(kind: str, burstiness: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """Inter-arrival gaps with mean 1 in operational time."""
    if kind == "poisson" or (kind == "gamma" and burstiness == 1.0):
        return rng.exponential(1.0, n)
    if kind == "gamma":
        return rng.gamma(burstiness, 1.0 / burstiness, n)
    return np.ones(n)


def _ramp_inverse(u: np.ndarray, rate: float, ramp: float) -> np.ndarray:
    """Invert Lambda(t) = rate*t^2/(2 ramp) for t < ramp, rate*(t - ramp/2) after."""
    if ramp <= 0:
        return u / rate
    knee = rate * ramp / 2.0
    return np.where(u < knee, np.sqrt(2.0 * ramp * np.maximum(u, 0.0) / rate), u / rate + ramp / 2.0)


def offsets(spec: ArrivalSpec, n: int | None = None, duration_s: float | None = None, seed: int = 0) -> np.ndarray:
    """Send offsets (seconds from start, sorted) for `n` requests and/or within `duration_s`.

    At least one of n / duration_s must be given; with both, whichever ends first wins."""
    if n is None and duration_s is None:
        raise UsageError("give a request count or a duration")
    if spec.kind in ("closed", "workload"):
        raise UsageError(f"{spec.kind} arrivals have no precomputed schedule")
    rng = np.random.default_rng(seed)
    if spec.kind == "trace":
        t = np.sort(np.asarray(spec.trace, dtype=float))
        if t.size == 0:
            raise UsageError("trace has no timestamps")
        out = (t - t[0]) * spec.time_scale
    elif math.isinf(spec.rate) and spec.kind != "onoff":
        if n is None:
            raise UsageError("an infinite rate needs a request count")
        out = np.zeros(n)
    elif spec.kind == "onoff":
        out = _onoff(spec, n, duration_s, rng)
    else:
        out = _renewal(spec, n, duration_s, rng)
    if duration_s is not None:
        out = out[out < duration_s]
    if n is not None:
        out = out[:n]
    return out


def _renewal(spec, n, duration_s, rng) -> np.ndarray:
    """Renewal arrivals drawn block by block until n of them or the duration's horizon is reached, so
    a huge count with a short duration costs what the duration needs (blocks continue one random
    stream: the schedule is the same whatever the block sizes)."""
    kind = spec.kind
    horizon_u = math.inf if duration_s is None else spec.rate * (duration_s + spec.ramp_up_s) + 10
    block = n if duration_s is None else int(min(n or math.inf, horizon_u * 1.1 + 64))
    chunks, total, count = [], 0.0, 0
    while (n is None or count < n) and total <= horizon_u:
        g = _unit_gaps(kind, spec.burstiness, min(block, n - count) if n is not None else block, rng)
        if count == 0:
            g[0] = 0.0 if kind != "constant" else g[0] - 1.0  # first request at t=0, like vLLM
        c = total + np.cumsum(g)
        chunks.append(c)
        total, count = c[-1], count + c.size
    return _ramp_inverse(np.concatenate(chunks), spec.rate, spec.ramp_up_s)


def _onoff(spec: ArrivalSpec, n, duration_s, rng) -> np.ndarray:
    """Alternate on/off phases (exponential lengths); Poisson at the phase's rate within each."""
    out: list[np.ndarray] = []
    t, on, count = 0.0, True, 0
    while True:
        length = rng.exponential(spec.on_mean_s if on else spec.off_mean_s)
        rate = spec.on_rate if on else spec.off_rate
        if rate > 0:
            k = rng.poisson(rate * length)
            pts = np.sort(rng.uniform(t, t + length, k))
            out.append(pts)
            count += k
        t += length
        on = not on
        if (n is not None and count >= n) or (duration_s is not None and t >= duration_s):
            break
    res = np.concatenate(out) if out else np.zeros(0)
    return res - res[0] if res.size else res


def span_rate(t: np.ndarray) -> float | None:
    """(count - 1) / span of send times: the rate a schedule (or a generator) actually offered."""
    return (t.size - 1) / float(t.max() - t.min()) if t.size > 1 and t.max() > t.min() else None


def at_offered_rate(spec: ArrivalSpec, rate: float, n: int, seed: int = 0) -> tuple[ArrivalSpec, np.ndarray]:
    """The process at the nominal rate whose n-request schedule (this seed) offers `rate` over its span,
    and that schedule. A short seeded Poisson draw is not its nominal rate (seed 0's first 300 gaps run
    long: asked 4 req/s, it offers 3.45), so a rate search asks for the rate it means. The schedule is
    still the process's own draw, at another rate parameter: its gaps are the seed's, never reshaped.
    Exact in one step without a ramp (every gap scales as 1 / rate); a ramp takes a few."""
    if spec.kind not in ("poisson", "gamma", "constant") or math.isinf(rate) or n < 2:
        return spec, offsets(spec, n=n, seed=seed)
    nominal = rate
    for _ in range(6):
        s = replace(spec, rate=nominal)
        t = offsets(s, n=n, seed=seed)
        got = span_rate(t)
        if got is None or abs(got / rate - 1) < 1e-9:
            break
        nominal *= rate / got
    return s, t


def parse_trace(text: str, fmt: str) -> tuple[float, ...]:
    """Timestamps from a CSV (first numeric column or a 'timestamp' column) or JSONL
    ({"timestamp": s} or {"t": s} per line). Raises InputError naming the bad line."""
    import csv
    import io
    import json

    ts: list[float] = []
    if fmt == "jsonl":
        for i, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                v = (
                    obj
                    if isinstance(obj, (int, float))
                    else next(obj[k] for k in ("timestamp", "t", "time", "arrival_s") if k in obj)
                )
                ts.append(float(v))
            except (ValueError, StopIteration, TypeError) as e:
                raise InputError(f"line {i}: expected a timestamp, got {line[:80]!r} ({e})") from None
    else:
        rows = list(csv.reader(io.StringIO(text)))
        col = 0
        if rows and rows[0] and not _is_number(rows[0][0]):
            header = [h.strip().lower() for h in rows[0]]
            col = next((header.index(k) for k in ("timestamp", "t", "time", "arrival_s") if k in header), 0)
            rows = rows[1:]
        for i, row in enumerate(rows, 2 if col or rows else 1):
            if not row:
                continue
            try:
                ts.append(float(row[col]))
            except (ValueError, IndexError):
                raise InputError(f"row {i}: expected a timestamp in column {col + 1}, got {row!r}") from None
    if not ts:
        raise InputError("no timestamps found")
    bad = next((i for i, t in enumerate(ts) if not math.isfinite(t) or abs(t) > MAX_SECONDS), None)
    if bad is not None:
        raise InputError(f"timestamp {ts[bad]!r} (entry {bad + 1}) is not a time: finite, at most {MAX_SECONDS:g} s")
    return tuple(ts)


def _is_number(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False
