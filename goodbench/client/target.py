"""Small questions asked of the target before a run: does it answer, which model does it serve, does
it expose Prometheus metrics. aiohttp, outside the timed path."""

from __future__ import annotations

import asyncio

import aiohttp

from .config import model_from_listing


async def check_reachable(base_url: str) -> str | None:
    """None when something answers HTTP at base_url; else the reason, for a one-line error."""
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as s:
            async with s.get(base_url.rstrip("/") + "/v1/models") as r:
                await r.read()
                return None
    except aiohttp.InvalidURL:
        return f"invalid URL {base_url!r}"
    except aiohttp.ClientConnectorError as e:
        return f"cannot connect to {base_url}: {e.os_error or e}"
    except (aiohttp.ClientError, asyncio.TimeoutError) as e:
        return f"{base_url} did not answer: {type(e).__name__} {e}"


async def resolve_model(base_url: str, api_key: str | None) -> str:
    """The server's first /v1/models entry (as `vllm bench serve` does), else "default"."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10), headers=headers) as s:
            async with s.get(base_url.rstrip("/") + "/v1/models") as r:
                if r.status != 200:
                    return "default"
                return model_from_listing(await r.json(content_type=None)) or "default"
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError, RecursionError):
        return "default"


async def probe_metrics(base_url: str) -> bool:
    """Whether base_url/metrics serves Prometheus text (then the run scrapes it every second)."""
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as s:
            async with s.get(base_url.rstrip("/") + "/metrics") as r:
                return r.status == 200 and "# TYPE" in (await r.text())[:20000]
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError):
        return False
