"""Stream events of the Responses API (OpenAI) and the Messages API (Anthropic), classified into the
same `Chunk`s as OpenAI chat chunks (client/sse.py), so one StreamState turns every API's stream into
the same per-chunk record. What counts as output, per event type (docs/definitions.md):

  responses  output_text / refusal / function_call_arguments deltas, a function_call item's name:
             answer; reasoning_text / reasoning_summary_text deltas: reasoning; response.completed
             (or .incomplete) ends the stream and carries the usage; response.failed and error: errors
  messages   content_block_delta text_delta / input_json_delta, a tool_use block's name: answer;
             thinking_delta: reasoning; message_start: prompt tokens; message_delta: the output count;
             message_stop ends the stream; error: an error; ping and signature_delta: nothing

An event without a `type` is not this API's: the stream is bad, with a message that says so (a
Responses parser pointed at a chat endpoint must not measure zeros). Pure."""

from __future__ import annotations

from .sse import Chunk, SSEParser, _count, detail, load_json

_RESP_ANSWER = ("response.output_text.delta", "response.refusal.delta", "response.function_call_arguments.delta")
_RESP_REASONING = ("response.reasoning_text.delta", "response.reasoning_summary_text.delta")
_RESP_END = ("response.completed", "response.incomplete")


def _load(payload: bytes, api: str) -> dict | Chunk:
    if payload == b"[DONE]":
        return Chunk("bad", error=f"not a {api} API event (OpenAI's [DONE] sentinel): is --endpoint-type right?")
    obj = load_json(payload)
    if type(obj) is Chunk:
        return obj
    if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
        if isinstance(obj, dict) and "choices" in obj:
            why = "an OpenAI chat/completions chunk"
        else:
            why = f"no event 'type': {payload[:120]!r}"
        return Chunk("bad", error=f"not a {api} API event ({why}): is --endpoint-type right for this path?")
    return obj


def _error(obj: dict) -> Chunk:
    err = obj.get("error")
    if err is None and isinstance(obj.get("response"), dict):
        err = obj["response"].get("error")
    msg = err.get("message", str(err)) if isinstance(err, dict) else str(err or obj)
    return Chunk("error", error=f"server error in stream: {str(msg)[:300]}")


def _text(v) -> str:
    return v if isinstance(v, str) else ""


def classify_responses(payload: bytes) -> Chunk:
    """One Responses API event."""
    obj = payload if isinstance(payload, dict) else _load(payload, "Responses")
    if isinstance(obj, Chunk):
        return obj
    t = obj["type"]
    if t in _RESP_ANSWER:
        d = _text(obj.get("delta"))
        return Chunk("content" if d else "meta", d)
    if t in _RESP_REASONING:
        d = _text(obj.get("delta"))
        return Chunk("content" if d else "meta", d, reasoning=True)
    if t == "response.output_item.added":
        item = obj.get("item")
        name = _text(item.get("name")) if isinstance(item, dict) and item.get("type") == "function_call" else ""
        return Chunk("content" if name else "meta", name)
    if t in _RESP_END:
        r = obj.get("response")
        u = r.get("usage") if isinstance(r, dict) else None
        if not isinstance(u, dict):
            return Chunk("done")
        return Chunk(
            "done",
            "",
            _count(u.get("output_tokens")),
            _count(u.get("input_tokens")),
            reasoning_tokens=detail(u, "output_tokens_details", "reasoning_tokens"),
            cached_tokens=detail(u, "input_tokens_details", "cached_tokens"),
        )
    if t in ("response.failed", "error"):
        return _error(obj)
    return Chunk("meta")


def _prompt_tokens(u: dict) -> int | None:
    """Anthropic's input_tokens leaves out the cached part: the prompt is all three together."""
    n = _count(u.get("input_tokens"))
    if n is None:
        return None
    return n + (_count(u.get("cache_read_input_tokens")) or 0) + (_count(u.get("cache_creation_input_tokens")) or 0)


def _block_delta(obj: dict) -> Chunk:
    d = obj.get("delta")
    if not isinstance(d, dict):
        return Chunk("bad", error=f"malformed content_block_delta: {str(obj)[:120]}")
    kind = d.get("type")
    if kind == "thinking_delta":
        text = _text(d.get("thinking"))
        return Chunk("content" if text else "meta", text, reasoning=True)
    text = _text(d.get("text")) if kind == "text_delta" else _text(d.get("partial_json"))
    return Chunk("content" if text else "meta", text)


def classify_messages(payload: bytes) -> Chunk:
    """One Messages API event."""
    obj = payload if isinstance(payload, dict) else _load(payload, "Messages")
    if isinstance(obj, Chunk):
        return obj
    t = obj["type"]
    if t == "content_block_delta":
        return _block_delta(obj)
    if t == "content_block_start":
        b = obj.get("content_block")
        name = _text(b.get("name")) if isinstance(b, dict) and b.get("type") == "tool_use" else ""
        return Chunk("content" if name else "meta", name)
    if t == "message_start":
        m = obj.get("message")
        u = m.get("usage") if isinstance(m, dict) else None
        if not isinstance(u, dict):
            return Chunk("meta")
        return Chunk("meta", prompt_tokens=_prompt_tokens(u), cached_tokens=_count(u.get("cache_read_input_tokens")))
    if t == "message_delta":
        u = obj.get("usage")
        if not isinstance(u, dict):
            return Chunk("meta")
        return Chunk(
            "meta",
            completion_tokens=_count(u.get("output_tokens")),
            prompt_tokens=_prompt_tokens(u),
            cached_tokens=_count(u.get("cache_read_input_tokens")),
        )
    if t == "message_stop":
        return Chunk("done")
    if t == "error":
        return _error(obj)
    return Chunk("meta")


CLASSIFIERS = {"responses": classify_responses, "messages": classify_messages}


class NamedEventParser(SSEParser):
    """SSEParser with a fast path for the common read of these APIs: one whole `event: NAME` +
    one-line `data:` event (the `event:` line says what the JSON's `type` says again)."""

    __slots__ = ()

    def feed(self, chunk: bytes) -> list[bytes]:
        if chunk[:7] == b"event: " and chunk[-2:] == b"\n\n" and not (self._pending or self._data or self._cr):
            nl = chunk.find(b"\n")
            rest = chunk[nl + 1 : -2]
            if rest[:6] == b"data: " and b"\n" not in rest and b"\r" not in chunk:
                return [rest[6:]]
        return super().feed(chunk)


def unary_result(api: str, obj) -> tuple[int, int | None]:
    """(items, prompt tokens) of an embeddings, rerank or score response; ValueError says what is
    wrong with a body that is not that API's."""
    key = "results" if api == "rerank" else "data"
    items = obj.get(key) if isinstance(obj, dict) else None
    if not isinstance(items, list):
        raise ValueError(f"not a {api} response (no {key!r} list): {str(obj)[:160]}")
    u = obj.get("usage")
    return len(items), _count(u.get("prompt_tokens")) if isinstance(u, dict) else None
