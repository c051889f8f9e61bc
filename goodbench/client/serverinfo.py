"""What the target says about itself, asked once before a run (run.json's `server` block, the
history's server and version): /v1/models' owned_by, the response's Server header, vLLM's /version,
SGLang's /get_server_info and TGI's /info, concurrently, each allowed a few seconds. Whatever does not
answer is left out; nothing here can fail a run. Every string kept is scrubbed of the API key and any
credential (a gateway may quote the Authorization header in /version, a model's root or its Server
header), here, the one place the block is built, so run.json, the history and the dashboard never
hold it."""

from __future__ import annotations

import asyncio
import json

import aiohttp

from ..redact import scrub

TIMEOUT_S = 3.0
MAX_BYTES = 1 << 20
MAX_TEXT = 500  # characters of one server-provided string kept
_VERSIONED = {"vllm": "/version", "sglang": "/get_server_info", "tgi": "/info"}


async def _get(s: aiohttp.ClientSession, url: str) -> tuple[dict | None, str | None]:
    """(the JSON object, the Server header), or (None, header) for anything else."""
    header = None
    try:
        async with s.get(url) as r:
            header = r.headers.get("Server")
            if r.status != 200:
                return None, header
            data = json.loads(await r.content.read(MAX_BYTES))
            return (data if isinstance(data, dict) else None), header
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError, UnicodeDecodeError):
        return None, header


def _name(models: dict | None, model: str | None, answers: dict) -> tuple[str | None, dict]:
    """(the server's kind, its /v1/models entry for the model)."""
    items = (models or {}).get("data") or []
    items = items if isinstance(items, list) else []  # {"data": 5}: no listing
    entry = next((m for m in items if isinstance(m, dict) and m.get("id") == model), None)
    entry = entry or (items[0] if items and isinstance(items[0], dict) else {})
    owned = str(entry.get("owned_by") or "").lower()
    if owned in ("vllm", "sglang", "goodbench"):
        return owned, entry
    if isinstance(answers.get("tgi"), dict) and "model_id" in answers["tgi"]:
        return "tgi", entry
    return (owned or None), entry


async def server_info(base_url: str, api_key: str | None = None, model: str | None = None) -> dict:
    """{name, version, owned_by, header, max_model_len, root} as far as the target tells."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    base = base_url.rstrip("/")
    timeout = aiohttp.ClientTimeout(total=TIMEOUT_S)
    async with aiohttp.ClientSession(timeout=timeout, headers=headers) as s:
        paths = {"models": "/v1/models", **_VERSIONED}
        got = await asyncio.gather(*(_get(s, base + p) for p in paths.values()))
    answers = {k: g[0] for k, g in zip(paths, got)}
    name, entry = _name(answers["models"], model, answers)
    version = None
    for kind in ([name] if name in _VERSIONED else []) + list(_VERSIONED):
        v = (answers.get(kind) or {}).get("version")
        if isinstance(v, str) and v:
            version, name = v, name or kind
            break
    mml = entry.get("max_model_len")
    texts = {"name": name, "version": version, "owned_by": entry.get("owned_by"), "header": got[0][1]}
    out = {k: _text(v, api_key) for k, v in (texts | {"root": entry.get("root")}).items()}
    out["max_model_len"] = mml if isinstance(mml, int) and not isinstance(mml, bool) else None
    return {k: v for k, v in out.items() if v is not None}


def _text(v, api_key: str | None) -> str | None:
    """A server-provided string as run.json keeps it: scrubbed of the key and credentials, at most
    MAX_TEXT characters; anything but a string is left out."""
    if not isinstance(v, str) or not v:
        return None
    return scrub(v, (api_key,) if api_key else ())[:MAX_TEXT]
