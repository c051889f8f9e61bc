"""`--gpu-telemetry`: which sources a run samples GPU power and energy from (DCGM exporter URLs, or this host's
NVML / AMD SMI), checked before the clock starts, and the samplers the run's lead process reads every second
(runner/scrape.sample_loop writes them to gpu_telemetry.jsonl; metrics/energy.py reads them back)."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit, urlunsplit

from ..errors import UsageError
from ..metrics.energy import ENERGY, POWER
from ..redact import scrub_url

LOCAL = ("nvml", "amdsmi")
FILE = "gpu_telemetry.jsonl"
EXPECTED = "a DCGM exporter URL (http://host:9400), nvml or amdsmi"


def metrics_url(src: str, flag: str = "--gpu-telemetry", expected: str = EXPECTED) -> str:
    """An exporter's address as given (host:port, http://host:port or its /metrics URL) -> its /metrics URL."""
    u = urlsplit(src if "://" in src else "http://" + src)
    if u.scheme not in ("http", "https") or not u.hostname:
        raise UsageError(f"{flag} {scrub_url(src)!r}: expected {expected}")
    return urlunsplit((u.scheme, u.netloc, u.path if u.path not in ("", "/") else "/metrics", u.query, ""))


def check_sources(sources: list[str]) -> list[str]:
    """The sources as the run will read them, each checked now: a local library that loads and sees GPUs, an
    exporter that answers with DCGM power or energy metrics (UsageError naming the one that does not)."""
    from .gpulocal import local_sampler

    out = []
    for src in sources:
        if src in LOCAL:
            try:
                sample = local_sampler(src)()  # one sample now: a library that loads but cannot read fails here
            except UsageError:
                raise
            except Exception as e:
                raise UsageError(f"--gpu-telemetry {src}: reading the GPUs failed: {e}") from None
            if not any(k.split("{", 1)[0] in (ENERGY, POWER) for k in sample):
                raise UsageError(f"--gpu-telemetry {src}: no power or energy reading on any GPU")
            out.append(src)
            continue
        url = metrics_url(src)
        sample = asyncio.run(_probe(url))
        if sample is None:
            raise UsageError(f"--gpu-telemetry {scrub_url(url)}: no answer (is the DCGM exporter running there?)")
        if not any(k.split("{", 1)[0] in (ENERGY, POWER) for k in sample):
            raise UsageError(f"--gpu-telemetry {scrub_url(url)}: its /metrics has no {ENERGY} or {POWER}")
        out.append(url)
    return out


async def _probe(url: str) -> dict | None:
    import aiohttp

    from .scrape import _read

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=3)) as s:
        return (await _read(s, url))[1]


def samplers(sources: tuple[str, ...]) -> list:
    """What sample_loop reads: URLs as they are, local libraries as sampler functions (made in the sampling
    process: NVML's handles do not survive a fork)."""
    from .gpulocal import local_sampler

    return [local_sampler(s) if s in LOCAL else s for s in sources]
