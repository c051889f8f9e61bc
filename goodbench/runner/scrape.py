"""The target's Prometheus metrics, scraped every second during a run into server_metrics.jsonl."""

from __future__ import annotations

import asyncio
import json
import time

from ..prometheus import parse as parse_prometheus, total


async def _fetch(session, url: str) -> str:
    import aiohttp

    try:
        async with session.get(url) as r:
            return await r.text() if r.status == 200 else ""
    except (aiohttp.ClientError, asyncio.TimeoutError):
        return ""


async def sample_now(base_url: str) -> tuple[float, dict] | None:
    """One sample (its monotonic time, the parsed metrics), or None: the counters before a run starts."""
    at, sample, _ = (await read_round([base_url.rstrip("/") + "/metrics"]))[0]
    return (at, sample) if sample else None


async def scrape_loop(
    base_url: str,
    path: str,
    t0: float,
    stop: asyncio.Event,
    interval: float = 1.0,
    baseline: tuple[float, dict] | None = None,
) -> None:
    """Append the target's gauges and counters to path every interval, timed on the run's clock, and
    once more when stopped. baseline (sample_now's, taken before the clock started) is written first,
    at its negative time: counters' deltas over the run need samples before its first request and
    after its last."""
    await sample_loop([base_url.rstrip("/") + "/metrics"], path, t0, stop, interval, baseline)


async def _read(session, src) -> tuple[float, dict | None, float]:
    """One source's sample, when it was taken (monotonic, the middle of the request) and the read's half-width
    (the sample is the source's state at some moment within it): a /metrics URL fetched and parsed, or a local
    sampler called (NVML, AMD SMI)."""
    a = time.monotonic()
    if callable(src):
        try:  # off the event loop: a driver call must not stall dispatch
            sample = await asyncio.to_thread(src)
        except Exception:  # a GPU gone or a driver call failing mid-run: this sample is missing, the run goes on
            sample = None
    else:
        text = await _fetch(session, src)
        sample = parse_prometheus(text) if text else None
    b = time.monotonic()
    return (a + b) / 2, sample, (b - a) / 2


async def read_round(sources: list) -> list:
    """One sample of every source now: [(monotonic time, sample or None, the read's half-width s)]."""
    import aiohttp

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as s:
        return await asyncio.gather(*(_read(s, src) for src in sources))


async def sample_loop(
    sources: list,
    path: str,
    t0: float,
    stop: asyncio.Event,
    interval: float = 1.0,
    baseline: tuple[float, dict] | None = None,
    tag: bool = False,
    first: list | None = None,
    keep: tuple[str, ...] | None = None,
) -> None:
    """The one sampling loop: every interval (and once more when stopped) each source's sample appended to path
        as {"t": run-clock s, "metrics": sample} (+ "source": its index with tag: GPU telemetry from several
        exporters). A source that does not answer leaves no row for that tick. first: read_round's samples taken
        before the clock started (written first: a window's start needs a sample before it). keep: only these
        metrics (summed over their label sets) go to the file, with "dt": the read's half-width (a busy worker answers
    late, and its counters are its state at some moment of the read): workers' counters sampled several times a second."""
    import aiohttp

    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as s:
            with open(path, "a", encoding="utf-8") as f:
                if baseline is not None:
                    f.write(json.dumps({"t": round(baseline[0] - t0, 4), "metrics": baseline[1]}) + "\n")
                ready = first
                while True:
                    last = stop.is_set()
                    got, ready = ready or await asyncio.gather(*(_read(s, src) for src in sources)), None
                    for i, (at, sample, half) in enumerate(got):
                        if sample and keep:
                            sample = {k: v for k in keep if (v := total(sample, k)) is not None}
                        if sample:
                            row = {"t": round(at - t0, 6), "metrics": sample} | ({"source": i} if tag else {})
                            row |= {"dt": round(half, 6)} if keep else {}  # counters sampled for attribution
                            f.write(json.dumps(row) + "\n")
                    f.flush()
                    if last:
                        break
                    try:
                        await asyncio.wait_for(stop.wait(), interval)
                    except asyncio.TimeoutError:
                        pass
    except OSError:
        pass  # a full or read-only results disk: the records' own write failure ends the run and says so
