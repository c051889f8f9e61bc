"""Incremental server-sent-events parser and OpenAI chunk classifier. Pure; no I/O.

Correct for events split across reads, several events per read, CRLF and lone CR line ends,
comments/keep-alives, multi-line `data:`, and arbitrarily large events (no line-length cap)."""

from __future__ import annotations

import json

import msgspec

from ..limits import MAX_TOKENS

_scan = json.JSONDecoder().scan_once
_JSON_SPACE = (" ", "\t", "\n", "\r")


class SSEParser:
    __slots__ = ("_pending", "_data", "_cr")

    def __init__(self):
        self._pending: list[bytes] = []  # pieces of the current, unfinished line
        self._data: list[bytes] = []  # data lines of the current event
        self._cr = False  # the previous read ended in CR: a following LF belongs to it

    def feed(self, chunk: bytes) -> list[bytes]:
        """Returns the data payloads of every event completed by this chunk."""
        if chunk[:6] == b"data: " and chunk[-2:] == b"\n\n" and not (self._pending or self._data or self._cr):
            body = chunk[6:-2]  # the common read: exactly one whole one-line event
            if 10 not in body and 13 not in body:  # LF, CR: an int needle is a memchr, ~9x a bytes one
                return [body]
        if self._cr and chunk[:1] == b"\n":
            chunk = chunk[1:]
        self._cr = chunk[-1:] == b"\r"
        if 13 in chunk:
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if 10 not in chunk:
            if chunk:
                self._pending.append(chunk)
            return []
        lines = chunk.split(b"\n")
        if self._pending:
            self._pending.append(lines[0])
            lines[0] = b"".join(self._pending)
            self._pending = []
        tail = lines.pop()
        if tail:
            self._pending.append(tail)
        out: list[bytes] = []
        data = self._data
        for line in lines:
            if not line:
                if data:
                    out.append(data[0] if len(data) == 1 else b"\n".join(data))
                    data = self._data = []
            elif line[0] == 58:  # ':' comment / keep-alive
                continue
            elif line[:5] == b"data:":
                v = line[5:]
                data.append(v[1:] if v[:1] == b" " else v)
            # event:, id:, retry: and unknown fields carry nothing goodbench needs
        return out

    def close(self) -> list[bytes]:
        """End of stream: an event not followed by a blank line is still dispatched."""
        if self._pending:
            self.feed(b"\n")
        if self._data:
            ev = b"\n".join(self._data)
            self._data = []
            return [ev]
        return []


class Chunk(msgspec.Struct, gc=False):
    """What one OpenAI stream event says. kind: content | meta | done | error | bad. reasoning: the
    content is a reasoning model's thinking (`reasoning_content` / `reasoning` deltas), not its answer.
    A msgspec Struct, built in C: one is made per chunk per stream (~0.1 us against a dataclass's ~0.4);
    it holds only strings, numbers and None, so it stays out of the garbage collector."""

    kind: str
    text: str = ""
    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    error: str | None = None
    reasoning: bool = False
    reasoning_tokens: int | None = None  # usage.completion_tokens_details.reasoning_tokens
    cached_tokens: int | None = None  # prompt tokens the server found in its prefix cache (its usage says)


DONE = Chunk("done")


def _count(v) -> int | None:
    """A token count as servers send it; anything else (a string, a float, a bool, a number beyond any
    request's tokens: limits.MAX_TOKENS) is ignored, and the tokenizer counts instead."""
    return v if type(v) is int and 0 <= v <= MAX_TOKENS else None


def _tool_text(calls) -> str | None:
    """Tool-call deltas are output too: their function names and argument fragments."""
    if not isinstance(calls, list):
        return None
    out = []
    for c in calls:
        fn = c.get("function") if isinstance(c, dict) else None
        if not isinstance(fn, dict):
            return None
        for k in ("name", "arguments"):
            v = fn.get(k)
            if v is not None and not isinstance(v, str):
                return None
            out.append(v or "")
    return "".join(out)


def _text(c0) -> tuple[str, bool] | None:
    """(text, is reasoning) of one choice: completions `text`; chat `delta.content`, tool-call deltas, or
    reasoning deltas. None when the choice is not shaped like OpenAI's (the stream is then malformed)."""
    if not isinstance(c0, dict):
        return None
    delta = c0.get("delta")
    if delta is None:
        text = c0.get("text") or ""
        return (text, False) if isinstance(text, str) else None
    if not isinstance(delta, dict):
        return None
    text = delta.get("content") or ""
    if not isinstance(text, str):
        return None
    if text:
        return text, False
    calls = delta.get("tool_calls")
    if calls:
        tool = _tool_text(calls)
        return (tool, False) if tool is not None else None
    thought = delta.get("reasoning_content") or delta.get("reasoning") or ""
    return (thought, True) if isinstance(thought, str) else None


def load_json(payload: bytes):
    """One event's JSON value, or a `bad` Chunk saying why it is not JSON (every API's events)."""
    try:
        # the C scanner on str directly: json.loads(bytes) spends as long sniffing the encoding
        s = payload.decode("utf-8")
        start = len(s) - len(s.lstrip(" \t\n\r")) if s[:1] in _JSON_SPACE else 0  # JSON allows leading space
        obj, end = _scan(s, start)
        if end != len(s) and s[end:].strip():
            raise ValueError(f"extra data at {end}")
    except (ValueError, UnicodeDecodeError, StopIteration, RecursionError) as e:
        return Chunk("bad", error=f"malformed JSON in stream: {str(e)[:80]}: {payload[:120]!r}")
    return obj


class _Delta(msgspec.Struct):
    content: str | None = None
    tool_calls: object = None
    reasoning_content: str | None = None
    reasoning: str | None = None


class _Choice(msgspec.Struct):
    text: str | None = None
    delta: _Delta | None = None


class _Details(msgspec.Struct):
    reasoning_tokens: int | None = None


class _PromptDetails(msgspec.Struct):
    cached_tokens: int | None = None


class _Usage(msgspec.Struct):
    completion_tokens: int | None = None
    prompt_tokens: int | None = None
    completion_tokens_details: _Details | None = None
    prompt_tokens_details: _PromptDetails | None = None


class _Event(msgspec.Struct):
    """The fields of an OpenAI stream chunk that classify reads (the rest are skipped unparsed)."""

    choices: list[_Choice] | None = None
    usage: _Usage | None = None
    error: object = None


_decode_event = msgspec.json.Decoder(_Event).decode


def classify(payload: bytes) -> Chunk:
    """Classify one event's data (the hot path of a run: once per chunk per stream). An event of the
    usual shape is decoded straight into the few fields read (msgspec, ~0.4 us against ~3 us for the
    JSON value and its walk); anything else (an error, tool calls, a type or syntax surprise) goes
    to classify_json, the definition, so both give the same answer
    (tests/test_sse.py::test_the_fast_path_agrees_with_the_definition)."""
    if payload == b"[DONE]":
        return DONE
    try:
        ev = _decode_event(payload)
    except (msgspec.MsgspecError, ValueError):
        return classify_json(payload)
    if ev.error:
        return classify_json(payload)
    text, thinking = "", False
    choices = ev.choices
    if choices:
        c0 = choices[0]
        d = c0.delta
        if d is None:
            text = c0.text or ""
        else:
            text = d.content or ""
            if not text:
                if d.tool_calls:
                    return classify_json(payload)
                text, thinking = d.reasoning_content or d.reasoning or "", True
    u = ev.usage
    if u is None:
        return Chunk("content" if text else "meta", text, reasoning=thinking)
    det, pdet = u.completion_tokens_details, u.prompt_tokens_details
    return Chunk(
        "content" if text else "meta",
        text,
        _count(u.completion_tokens),
        _count(u.prompt_tokens),
        reasoning=thinking,
        reasoning_tokens=_count(det.reasoning_tokens) if det is not None else None,
        cached_tokens=_count(pdet.cached_tokens) if pdet is not None else None,
    )


def classify_json(payload: bytes) -> Chunk:
    """Classify one event's data: the definition. Content = any non-empty text, chat delta content or
    reasoning. Never raises: an event not shaped like an OpenAI chunk is `bad` with a message saying
    what was wrong; usage numbers of the wrong type are ignored (token counts then fall back to the
    tokenizer)."""
    if payload == b"[DONE]":
        return DONE
    obj = load_json(payload)
    if type(obj) is Chunk:
        return obj
    if not isinstance(obj, dict):
        return Chunk("bad", error=f"unexpected event payload: {payload[:120]!r}")
    if "error" in obj and obj.get("error"):
        err = obj["error"]
        msg = err.get("message", str(err)) if isinstance(err, dict) else str(err)
        return Chunk("error", error=f"server error in stream: {str(msg)[:300]}")
    text, thinking = "", False
    choices = obj.get("choices")
    if choices:
        if not isinstance(choices, list):
            return Chunk("bad", error=f"malformed event: 'choices' is not a list: {payload[:120]!r}")
        got = _text(choices[0])
        if got is None:
            return Chunk("bad", error=f"malformed event: choices[0] is not an OpenAI choice: {payload[:120]!r}")
        text, thinking = got
    usage = obj.get("usage")
    ct = pt = rt = cached = None
    if isinstance(usage, dict):
        ct, pt = _count(usage.get("completion_tokens")), _count(usage.get("prompt_tokens"))
        rt = detail(usage, "completion_tokens_details", "reasoning_tokens")
        cached = detail(usage, "prompt_tokens_details", "cached_tokens")
    return Chunk(
        "content" if text else "meta", text, ct, pt, reasoning=thinking, reasoning_tokens=rt, cached_tokens=cached
    )


def detail(usage: dict, group: str, key: str) -> int | None:
    """One count inside a usage's details object (usage[group][key]), when it is a count."""
    d = usage.get(group)
    return _count(d.get(key)) if isinstance(d, dict) else None
