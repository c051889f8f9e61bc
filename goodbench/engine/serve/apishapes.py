"""The reference engine's other APIs: OpenAI Responses and Anthropic Messages (validated into the same
`Parsed` request as chat, streamed by their own formatters with the event shapes vLLM 0.32 emits),
tool-call replies (chat, responses, messages) when a request offers tools and requires a call, and
the one-body embeddings / rerank / score replies. Pure, like openai_api.py: a token costs a few bytes
concatenations; every output event is written when its token is produced, never before (a client's
TTFT is the first token's step, whatever the API)."""

from __future__ import annotations

import hashlib
import json

import numpy as np

from ..kvcache import block_hashes
from .openai_api import (
    REASONING_FIELD,
    BadRequest,
    Parsed,
    _bool,
    _int,
    _message_text,
    check_body,
    json_body,
    tool_call_name,
)

UNIT_BLOCK = 512  # stand-in vectors computed per block (apishapes._units)
EMBED_DIM = 64  # the reference engine's vectors: a stand-in, deterministic per text


def _items_text(items, key: str) -> str:
    if isinstance(items, str):
        return items
    if not isinstance(items, list) or not items:
        raise BadRequest(f"'{key}' must be a string or a non-empty list of messages", key)
    out = []
    for m in items:
        if isinstance(m, dict) and m.get("type") == "function_call_output":
            out.append(str(m.get("output", "")))
        elif isinstance(m, dict) and isinstance(m.get("content"), list):
            parts = m["content"]
            out.append("".join(str(p.get("text") or p.get("content") or "") for p in parts if isinstance(p, dict)))
        else:
            out.append(_message_text(m))
    return "\n".join(out)


def parse_api(body, api: str, model_names: tuple) -> Parsed:
    """A Responses or Messages request, validated into the engine's Parsed request."""
    check_body(body, model_names)
    if api == "responses":
        text, n = _items_text(body.get("input"), "input"), body.get("input")
        system, cap = body.get("instructions"), _int(body, "max_output_tokens", 1, None)
    else:
        if body.get("max_tokens") is None:
            raise BadRequest("'max_tokens' is required", "max_tokens")
        text, n = _items_text(body.get("messages"), "messages"), body.get("messages")
        system, cap = body.get("system"), _int(body, "max_tokens", 1, None)
    if isinstance(system, list):
        system = "".join(str(p.get("text", "")) for p in system if isinstance(p, dict))
    if system is not None and not isinstance(system, str):
        raise BadRequest("the system prompt must be a string", "system")
    turns = len(n) if isinstance(n, list) else 1
    user = body.get("user") or (body.get("metadata") or {}).get("user_id")
    return Parsed(
        chat=True,
        text=(system + "\n" + text) if system else text,
        token_ids=None,
        overhead=4 * (turns + bool(system)) + 1,
        max_tokens=cap,
        stream=_bool(body, "stream"),
        include_usage=True,
        continuous_usage=False,
        ignore_eos=_bool(body, "ignore_eos"),
        priority=_int(body, "priority", -(2**62), 0),
        reasoning_tokens=_int(body, REASONING_FIELD, 0, 0),
        session=user if isinstance(user, str) else None,
        tool=tool_call_name(body),
    )


def pool_inputs(body, api: str, model_names: tuple) -> list:
    """The texts (or token-id lists) an embeddings, rerank or score request carries: each is one
    prefill for the engine. Rerank / score: the query joined to each document (a cross-encoder's work)."""
    check_body(body, model_names)
    if api == "embeddings":
        inp = body.get("input")
        items = [inp] if isinstance(inp, str) or (isinstance(inp, list) and inp and type(inp[0]) is int) else inp
        key = "input"
    else:
        q = body.get("query", body.get("text_1", body.get("queries")))
        items = body.get("documents", body.get("text_2", body.get("items")))
        items = [items] if isinstance(items, str) else items
        if not isinstance(q, str) or not q:
            raise BadRequest("'query' (or 'text_1') must be a non-empty string", "query")
        if isinstance(items, list) and all(isinstance(d, str) for d in items):
            items = [q + "\n" + d for d in items]
        key = "documents"
    ok = (
        isinstance(items, list)
        and items
        and all(
            (isinstance(x, str) and x) or (isinstance(x, list) and x and all(type(t) is int for t in x)) for x in items
        )
    )
    if not ok:
        raise BadRequest(f"'{key}' must be a non-empty string or a non-empty list of non-empty texts", key)
    return items


def _units(keys: list[bytes]):
    """A deterministic unit vector per key (the stand-in embedding), rounded to 6 places, yielded in
    blocks of UNIT_BLOCK: vectorised (100k one at a time took ~10 s), and no single C call long enough
    to hold the GIL, and with it the server's event loop (6.4M floats listed at once: ~1 s)."""
    for a in range(0, len(keys), UNIT_BLOCK):
        part = keys[a : a + UNIT_BLOCK]
        raw = b"".join(hashlib.shake_128(k).digest(4 * EMBED_DIM) for k in part)
        v = np.frombuffer(raw, "<u4").reshape(len(part), EMBED_DIM) / 2**31 - 1.0
        norm = np.linalg.norm(v, axis=1, keepdims=True)
        yield from np.round(v / np.where(norm > 0, norm, 1.0), 6).tolist()


def pool_body(api: str, rid: int, created: int, model: str, items: list, n_prompt: int) -> list[bytes]:
    """The reply of an embeddings / rerank / score request as the pieces of bytes to send, in order
    (vLLM's shapes; values are stand-ins). Built in a worker thread, one small json.dumps per item, and
    sent piece by piece: one dumps, join or write of 100k vectors (72 MB) holds the GIL, and with it the
    server's event loop, for seconds."""
    usage = json.dumps({"prompt_tokens": n_prompt, "total_tokens": n_prompt, "completion_tokens": 0})
    head = f'"created": {created}, "model": {json.dumps(model)}'
    keys = [json.dumps(x).encode() for x in items]
    if api == "embeddings":
        start = f'{{"id": "embd-{rid}", "object": "list", {head}, "data": ['
        parts = (
            f'{{"index": {i}, "object": "embedding", "embedding": {json.dumps(u)}}}' for i, u in enumerate(_units(keys))
        )
        return _pieces(start, parts, f'], "usage": {usage}}}')
    scores = [round(u[0] * 0.5 + 0.5, 6) for u in _units(keys)]
    if api == "score":
        start = f'{{"id": "score-{rid}", "object": "list", {head}, "data": ['
        parts = (f'{{"index": {i}, "object": "score", "score": {s!r}}}' for i, s in enumerate(scores))
        return _pieces(start, parts, f'], "usage": {usage}}}')
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    start = f'{{"id": "rerank-{rid}", "model": {json.dumps(model)}, "usage": {usage}, "results": ['
    return _pieces(start, (f'{{"index": {i}, "relevance_score": {scores[i]!r}}}' for i in order), "]}")


def _pieces(start: str, parts, end: str) -> list[bytes]:
    """start, the parts comma-separated, end: as pieces of about UNIT_BLOCK parts each."""
    out, block = [], []
    for k, p in enumerate(parts):
        block.append(("," if k else "") + p)
        if len(block) == UNIT_BLOCK:
            out.append("".join(block).encode())
            block = []
    out.append(("".join(block) + end).encode())
    return [start.encode(), *out]


def model_card(name: str, root: str, max_model_len: int | None, created: int, parent: str | None = None) -> dict:
    """A /v1/models entry shaped as vLLM's: `root` is the model served under `name` (vLLM: the path
    or hub id it loaded), `parent` a base model (None: not a LoRA adapter), one permission record."""
    perm = {
        "id": f"modelperm-{created:x}",
        "object": "model_permission",
        "created": created,
        "allow_create_engine": False,
        "allow_sampling": True,
        "allow_logprobs": True,
        "allow_search_indices": False,
        "allow_view": True,
        "allow_fine_tuning": False,
        "organization": "*",
        "group": None,
        "is_blocking": False,
    }
    return {
        "id": name,
        "object": "model",
        "created": created,
        "owned_by": "goodbench",
        "root": root,
        "parent": parent,
        "max_model_len": max_model_len,
        "permission": [perm],
    }


def models_list(name: str, root: str, max_model_len: int, created: int, lora_modules: tuple = ()) -> list[dict]:
    """/v1/models' entries: the served model, then each LoRA adapter ((name, path), ...) with it as parent."""
    base = model_card(name, root, max_model_len, created)
    return [base] + [model_card(a, path, None, created, parent=name) for a, path in lora_modules]


def pool_prepare(raw: bytes, api: str, names: tuple, tok, block_size: int | None) -> tuple[list, list]:
    """(items, [(token ids, block hashes)]) of an embeddings / rerank / score body: what the server runs
    in a worker thread, so that parsing and tokenising 100k items does not hold the event loop (every
    other stream's tokens waited 2.4-3.8 s behind one such request). BadRequest for a bad body."""
    items = pool_inputs(json_body(raw), api, names)
    out = []
    for x in items:
        ids = tuple(x) if isinstance(x, list) else tuple(tok.encode(x))
        out.append((ids, block_hashes(ids, block_size) if block_size else ()))
    return items, out
