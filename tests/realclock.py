"""Live-server tests on the real clock, with margins that hold on a loaded machine (issue 39).

The reference engine's step loop is never early, and it records how late each step ended against its
own plan (`serve --step-trace`). A test can hold the plan to exact figures (a step's duration, the gap
between deadlines) and the client to the server's actual step ends. What is left to a margin is what
nobody measured: the request's way in (HTTP, intake, the loop's wake) and a token's way out. Where the
noise is one-sided (the server and client can only be late), a floor holds on every sample and a
ceiling on the best of several: a defect in the plan moves every sample, load moves some."""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    """One step of the step trace, on the absolute clock (time.monotonic, the server's and the test's)."""

    engine: int
    start: float
    duration: float  # the cost model's: the plan
    late: float  # actual end minus planned end, as the loop measured it
    prefill: int
    batch: int

    @property
    def deadline(self) -> float:
        return self.start + self.duration

    @property
    def end(self) -> float:
        return self.deadline + self.late


def read_steps(path, t0: float) -> list[Step]:
    """The steps a server wrote to its step trace, in order (t0: the server's `t0`)."""
    with open(path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    return [
        Step(r.get("engine", 0), t0 + r["start"], r["duration"], r["lateness"], r["prefill_tokens"], r["batch_size"])
        for r in rows
    ]


async def token_stamps(s, body) -> tuple[float, list[float]]:
    """When the request was sent and when each streamed token event was read (time.monotonic)."""
    t0 = time.monotonic()
    out = []
    async with s.post("/v1/completions", json={**body, "stream": True}) as r:
        assert r.status == 200
        buf = b""
        async for data in r.content.iter_any():
            now = time.monotonic()
            buf += data
            while b"\n\n" in buf:
                ev, buf = buf.split(b"\n\n", 1)
                if ev.startswith(b'data: {"id"'):
                    out.append(now)
    return t0, out


def on_time_gaps(stamps: list[float], steps: list[Step]) -> list[float]:
    """Gaps between tokens as the client saw them, less the change in their steps' measured lateness:
    the gaps between the steps' deadlines plus the change in each token's way out (step k streams
    token k)."""
    assert len(stamps) == len(steps)
    return [(b - sb.late) - (a - sa.late) for a, b, sa, sb in zip(stamps, stamps[1:], steps, steps[1:])]


def way_out(stamps: list[float], steps: list[Step]) -> list[float]:
    """Each token's way out: from its step's actual end (when the loop hands it to the connection) to
    the client's read. Never negative: a token is streamed when its step ends, not before."""
    assert len(stamps) == len(steps)
    return [t - s.end for t, s in zip(stamps, steps)]


median = statistics.median
