"""Small questions asked of the target before a run: does it answer, which model does it serve, does
it expose Prometheus metrics, and the preflight (the model checked against /v1/models, one tiny request
to the endpoint) that turns a wrong URL, model or endpoint into one line before the clock starts.
aiohttp, outside the timed path."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import replace

import aiohttp

from ..errors import TargetError
from ..records import RequestSpec
from ..redact import visible
from .config import ClientConfig, model_from_listing, not_a_stream, request_body, wanted_body

PREFLIGHT_S = 2.0  # the whole preflight: /v1/models and one tiny request


async def check_reachable(base_url: str) -> str | None:
    """None when something answers HTTP at base_url; else the reason, for a one-line error."""
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as s:
            async with s.get(base_url.rstrip("/") + "/v1/models", allow_redirects=False) as r:
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
            async with s.get(base_url.rstrip("/") + "/v1/models", allow_redirects=False) as r:
                if r.status != 200:  # a redirect is not followed: the key stays with the base URL
                    return "default"
                return model_from_listing(await r.json(content_type=None)) or "default"
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError, RecursionError):
        return "default"


async def probe_metrics(base_url: str) -> bool:
    """Whether base_url/metrics serves Prometheus text (then the run scrapes it every second)."""
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as s:
            async with s.get(base_url.rstrip("/") + "/metrics", allow_redirects=False) as r:
                return r.status == 200 and "# TYPE" in (await r.text())[:20000]
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError):
        return False


def _no_redirect(url: str, r) -> None:
    """A redirect is refused before the run, as the run's own requests would be (the preflight followed
    one to another host without a word, the API key with it)."""
    if 300 <= r.status < 400:
        where = r.headers.get("Location") or "(no Location header)"
        raise TargetError(
            f"{url} answered HTTP {r.status}, a redirect to {where}: goodbench follows no redirect (the API key "
            "stays with the base URL); give the final URL as --base-url"
        )


def _served(data) -> list[str]:
    """Every model id of a /v1/models reply (none when it is not shaped like OpenAI's). An id with
    control characters is no name to print or send (ESC sequences would clear a terminal or set its
    clipboard): skipped."""
    items = data.get("data") if isinstance(data, dict) else None
    items = items if isinstance(items, list) else []
    ids = [m["id"] for m in items if isinstance(m, dict) and isinstance(m.get("id"), str) and m["id"]]
    return [i for i in ids if visible(i) == i]


async def _models(s: aiohttp.ClientSession, base: str, model: str | None, timeout: float) -> tuple[str, list[str]]:
    """(the model to send, notes): the server's first /v1/models entry unless given; a given model
    the server does not list is refused with the names it does."""
    url = base + "/v1/models"
    try:
        async with s.get(url, timeout=aiohttp.ClientTimeout(total=timeout), allow_redirects=False) as r:
            _no_redirect(url, r)
            if r.status in (401, 403):
                raise TargetError(f"{url} answered HTTP {r.status}: the server wants an API key (--api-key-env VAR)")
            body = await r.content.read(1 << 20) if r.status == 200 else b""
    except aiohttp.InvalidURL:
        raise TargetError(f"invalid URL {base!r}") from None
    except aiohttp.ClientConnectorError as e:
        raise TargetError(f"target unreachable: cannot connect to {base}: {e.os_error or e}") from None
    except (aiohttp.ClientError, asyncio.TimeoutError) as e:
        raise TargetError(f"{url} did not answer within {timeout:.1f} s: {type(e).__name__} {e}".rstrip()) from None
    try:
        served = _served(json.loads(body)) if body else []
    except (ValueError, RecursionError):  # not JSON (or absurdly nested): the server lists nothing usable
        served = []
    if not served:  # nothing to check against; a model the user named is tried by the tiny request
        return (model, []) if model else ("default", [f"{url} lists no models: sending model=default"])
    if model and model not in served:
        names = ", ".join(served[:5]) + (" ..." if len(served) > 5 else "")
        raise TargetError(f"model {model!r} is not served at {base} (it serves {names}): give --model {served[0]}")
    return model or served[0], []


async def _tiny(s: aiohttp.ClientSession, cfg: ClientConfig, timeout: float) -> list[str]:
    """One request of one output token to the endpoint: its status and content type, not its answer."""
    body = request_body(cfg, RequestSpec("preflight", "preflight", "Hi", 1, 1))
    try:
        async with s.post(cfg.url, json=body, timeout=aiohttp.ClientTimeout(total=timeout), allow_redirects=False) as r:
            _no_redirect(cfg.url, r)
            if r.status == 404:
                if cfg.api in ("chat", "completions"):  # most servers speak the other one
                    other = "/v1/completions" if cfg.is_chat else "/v1/chat/completions"
                    fix = f"try --endpoint {other}, or check --base-url"
                else:  # not a server of this API, or it serves it at another path
                    fix = f"does it speak the {cfg.api} API? check --base-url, or give --endpoint PATH"
                raise TargetError(f"POST {cfg.url} answered 404: the server has no {cfg.endpoint} ({fix})")
            if r.status != 200:
                text = (await r.content.read(300)).decode("utf-8", "replace").strip()
                hint = " (try --no-ignore-eos)" if "ignore_eos" in text else ""
                raise TargetError(f"POST {cfg.url} answered HTTP {r.status}{hint}: {text}")
            ctype = r.headers.get("Content-Type", "")
            if not wanted_body(ctype, cfg.unary):
                raise TargetError(f"POST {cfg.url}: {not_a_stream(ctype, await r.content.read(300), cfg.unary)}")
            return []
    except (aiohttp.ClientError, asyncio.TimeoutError) as e:
        return [f"the test request to {cfg.url} got no answer within {timeout:.1f} s ({type(e).__name__}): going on"]


async def preflight(cfg: ClientConfig, budget_s: float = PREFLIGHT_S) -> tuple[str, list[str]]:
    """Before any timed request: the model (checked against /v1/models, or its first entry when
    cfg.model is None) and one tiny request to the endpoint, all within budget_s. Returns (the model,
    notes for the user); raises TargetError with the fix for a target that cannot work."""
    t0 = time.monotonic()
    async with aiohttp.ClientSession(headers=cfg.headers()) as s:
        model, notes = await _models(s, cfg.base_url.rstrip("/"), cfg.model or None, budget_s / 2)
        left = max(0.2, budget_s - (time.monotonic() - t0))
        cfg = replace(cfg, model=model)
        notes += await _tiny(s, cfg, left)
    return model, notes
