"""The target's Prometheus metrics, scraped every second during a run into server_metrics.jsonl."""

from __future__ import annotations

import asyncio
import json
import time

from ..prometheus import parse as parse_prometheus


async def _fetch(session, url: str) -> str:
    import aiohttp

    try:
        async with session.get(url) as r:
            return await r.text() if r.status == 200 else ""
    except (aiohttp.ClientError, asyncio.TimeoutError):
        return ""


async def sample_now(base_url: str) -> tuple[float, dict] | None:
    """One sample (its monotonic time, the parsed metrics), or None: the counters before a run starts."""
    import aiohttp

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as s:
        at = time.monotonic()
        text = await _fetch(s, base_url.rstrip("/") + "/metrics")
    return (at, parse_prometheus(text)) if text else None


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
    import aiohttp

    url = base_url.rstrip("/") + "/metrics"
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as s:
            with open(path, "a", encoding="utf-8") as f:
                if baseline is not None:
                    f.write(json.dumps({"t": round(baseline[0] - t0, 4), "metrics": baseline[1]}) + "\n")
                while True:
                    last = stop.is_set()
                    t = time.monotonic() - t0
                    text = await _fetch(s, url)
                    if text:
                        f.write(json.dumps({"t": round(t, 4), "metrics": parse_prometheus(text)}) + "\n")
                        f.flush()
                    if last:
                        break
                    try:
                        await asyncio.wait_for(stop.wait(), interval)
                    except asyncio.TimeoutError:
                        pass
    except OSError:
        pass  # a full or read-only results disk: the records' own write failure ends the run and says so
