"""The OpenAI request and response shapes the engine server speaks. Pure: a request body is validated
completely here, before anything reaches the engine (a request that fails validation gets a 400 and
never touches it), and responses are pre-rendered SSE bytes (a token costs one concatenation)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

REASONING_FIELD = "goodbench_reasoning_tokens"  # real servers ignore it; the reference engine thinks first


class BadRequest(Exception):
    """A 400 with OpenAI's error shape; `param` names the offending field."""

    def __init__(self, msg: str, param: str | None = None):
        super().__init__(msg)
        self.param = param


@dataclass(frozen=True)
class Parsed:
    """A validated request. Exactly one of text / token_ids is set."""

    chat: bool
    text: str | None
    token_ids: tuple | None
    overhead: int  # template tokens around chat messages
    max_tokens: int | None  # None: as much as the context allows (vLLM's chat default)
    stream: bool
    include_usage: bool
    continuous_usage: bool
    ignore_eos: bool
    priority: int
    reasoning_tokens: int = 0  # goodbench extension: stream this many reasoning tokens first (chat)
    session: str | None = None  # OpenAI's `user`: the session key of `serve --router session`
    tool: str | None = None  # the function the reply calls (tools offered and a call required)


def json_body(raw: bytes):
    """A request body as JSON; BadRequest for one that is not (or is nested beyond any use)."""
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise BadRequest("request body is not valid JSON (or nested too deeply)") from None


def _bool(body: dict, key: str, default: bool = False) -> bool:
    v = body.get(key, default)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise BadRequest(f"'{key}' must be true or false, got {v!r}"[:200], key)
    return v


def _int(body: dict, key: str, lo: int, default: int | None) -> int | None:
    v = body.get(key, default)
    if v is None:
        return default
    if isinstance(v, float) and math.isfinite(v) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int) or v < lo or v > 2**62:
        raise BadRequest(f"'{key}' must be an integer >= {lo}, got {v!r}"[:200], key)
    return v


def _message_text(m) -> str:
    """A chat message's text: a string content, or the text parts of a content list."""
    if not isinstance(m, dict):
        raise BadRequest("each message must be an object with 'role' and 'content'", "messages")
    c = m.get("content")
    if c is None or isinstance(c, str):
        return c or ""
    if isinstance(c, list):
        parts = [p.get("text", "") for p in c if isinstance(p, dict) and p.get("type") == "text"]
        if all(isinstance(p, str) for p in parts):
            return "".join(parts)
    raise BadRequest("message 'content' must be a string or a list of text parts", "messages")


def tool_call_name(body: dict) -> str | None:
    """The function a reply must call: the request offers tools and requires one (OpenAI
    `tool_choice` "required" or named; Anthropic `{"type": "any" | "tool"}`); else None."""
    tools, choice = body.get("tools"), body.get("tool_choice")
    if not isinstance(tools, list) or not tools or choice is None:
        return None
    first = tools[0] if isinstance(tools[0], dict) else {}
    fn = first.get("function")
    name = fn.get("name") if isinstance(fn, dict) else first.get("name")
    name = name if isinstance(name, str) else "tool"
    if isinstance(choice, dict):
        kind = choice.get("type")
        if kind in ("function", "tool"):
            named = choice.get("name") or (choice.get("function") or {}).get("name")
            return named if isinstance(named, str) else name
        return name if kind == "any" else None
    return name if choice == "required" else None


def _prompt(body: dict, chat: bool) -> tuple[str | None, tuple | None, int]:
    if chat:
        msgs = body.get("messages")
        if not isinstance(msgs, list) or not msgs:
            raise BadRequest("'messages' must be a non-empty list", "messages")
        return "\n".join(_message_text(m) for m in msgs), None, 4 * len(msgs) + 1  # Llama-3-style role headers
    p = body.get("prompt")
    if isinstance(p, list) and p and all(type(x) is int and 0 <= x < 2**31 for x in p):
        return None, tuple(p), 0
    if isinstance(p, list) and len(p) == 1 and isinstance(p[0], str) and p[0]:
        return p[0], None, 0
    if isinstance(p, str) and p:
        return p, None, 0
    raise BadRequest("'prompt' must be a non-empty string or list of token ids", "prompt")


def check_body(body, model_names: tuple) -> None:
    """A JSON object naming a served model (or none): what every endpoint checks first."""
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object")
    model = body.get("model")
    if model is not None and model not in model_names:
        raise BadRequest(f"The model `{str(model)[:100]}` does not exist.", "model")


def parse_request(body, chat: bool, model_names: tuple) -> Parsed:
    """Validate every field the engine uses; unknown fields are ignored, as OpenAI servers do."""
    check_body(body, model_names)
    if _int(body, "n", 1, 1) != 1:
        raise BadRequest("only n = 1 is supported", "n")
    text, ids, overhead = _prompt(body, chat)
    so = body.get("stream_options")
    if so is not None and not isinstance(so, dict):
        raise BadRequest(f"'stream_options' must be an object, got {so!r}"[:200], "stream_options")
    so = so or {}
    key = "max_completion_tokens" if chat and body.get("max_completion_tokens") is not None else "max_tokens"
    return Parsed(
        chat=chat,
        text=text,
        token_ids=ids,
        overhead=overhead,
        max_tokens=_int(body, key, 1, None if chat else 16),
        stream=_bool(body, "stream"),
        include_usage=_bool(so, "include_usage"),
        continuous_usage=_bool(so, "continuous_usage_stats"),
        ignore_eos=_bool(body, "ignore_eos"),
        priority=_int(body, "priority", -(2**62), 0),
        reasoning_tokens=_int(body, REASONING_FIELD, 0, 0),
        session=body.get("user") if isinstance(body.get("user"), str) else None,
        tool=tool_call_name(body) if chat else None,
    )


class Formatter:
    """Pre-rendered SSE chunks for one response: a token costs one bytes concatenation, no JSON encoding."""

    __slots__ = (
        "chat",
        "n_prompt",
        "include_usage",
        "continuous",
        "words",
        "off",
        "pre",
        "mid",
        "head",
        "thinking",
        "think_pre",
        "cached",
        "details",
    )

    def __init__(self, cid, created, model, chat, n_prompt, include_usage, continuous, words, seed, thinking=0):
        self.chat, self.n_prompt = chat, n_prompt
        self.include_usage, self.continuous = include_usage, continuous
        self.cached = 0  # prompt tokens the prefix cache held (set when the request is first scheduled)
        self.details = False  # usage carries prompt_tokens_details (vLLM's --enable-prompt-tokens-details)
        self.words, self.off = words, (seed * 7919) % len(words)
        obj = "chat.completion.chunk" if chat else "text_completion"
        self.head = (
            f'{{"id":"{cid}","object":"{obj}","created":{created},"model":{json.dumps(model)},"choices":'
        ).encode()
        self.thinking = thinking if chat else 0  # the first `thinking` tokens are reasoning (chat only)
        self.think_pre = b'[{"index":0,"delta":{"reasoning_content":'
        if chat:
            self.pre = b'[{"index":0,"delta":{"content":'
            self.mid = b'},"logprobs":null,"finish_reason":'
        else:
            self.pre = b'[{"index":0,"text":'
            self.mid = b',"logprobs":null,"finish_reason":'

    def word(self, i: int) -> bytes:
        return self.words[(self.off + i) % len(self.words)]

    def _usage(self, n: int) -> bytes:
        details = (
            f',"completion_tokens_details":{{"reasoning_tokens":{min(n, self.thinking)}}}' if self.thinking else ""
        )
        if self.details:
            details += f',"prompt_tokens_details":{{"cached_tokens":{self.cached}}}'
        return (
            f'{{"prompt_tokens":{self.n_prompt},"completion_tokens":{n},"total_tokens":{self.n_prompt + n}{details}}}'
        ).encode()

    def opening(self) -> bytes:
        """What the stream sends before its first token: nothing (vLLM's completions and chat streams
        start with the first token's step)."""
        return b""

    def role_chunk(self) -> bytes:
        """Chat's assistant-role chunk. vLLM sends it with the first token, not when the request
        arrives (issue 42: sent at arrival, vLLM's client took it for the first token)."""
        usage = b',"usage":' + self._usage(0) if self.continuous else b""
        return (
            b"data: " + self.head + b'[{"index":0,"delta":{"role":"assistant","content":""},'
            b'"logprobs":null,"finish_reason":null}]' + usage + b"}\n\n"
        )

    def token(self, n: int, done: bool) -> bytes:
        """The n-th token's SSE bytes (the first chat token's come after the role chunk; the last's
        before the usage chunk, when asked for, and [DONE])."""
        if n == 1 and self.chat:
            return self.role_chunk() + self._token(n, done)
        return self._token(n, done)

    def tokens(self, n0: int, m: int, done: bool) -> bytes:
        """Tokens n0 .. n0 + m - 1 of one step (speculative decoding) in one chunk, as vLLM streams a
        step's accepted tokens (a chunk that would cross the reasoning/answer boundary goes as one each)."""
        last = n0 + m - 1
        if m == 1 or (n0 <= self.thinking < last):
            return b"".join(self.token(n, done and n == last) for n in range(n0, last + 1))
        text = "".join(json.loads(self.word(i)) for i in range(n0, last + 1))
        return self._token(last, done, json.dumps(text).encode())

    def _token(self, n: int, done: bool, word: bytes | None = None) -> bytes:
        word = self.word(n) if word is None else word
        pre = self.think_pre if n <= self.thinking else self.pre
        # vLLM sets stop_reason on every completions chunk and on chat's last
        end = b',"stop_reason":null}]' if done or not self.chat else b"}]"
        chunk = b"data: " + self.head + pre + word + self.mid + (b'"length"' if done else b"null") + end
        if self.continuous:
            chunk += b',"usage":' + self._usage(n)
        chunk += b"}\n\n"
        if done:
            if self.include_usage:
                chunk += b"data: " + self.head + b'[],"usage":' + self._usage(n) + b"}\n\n"
            chunk += b"data: [DONE]\n\n"
        return chunk

    def full_response(self, n: int) -> dict:
        text = "".join(json.loads(self.word(i)) for i in range(1, n + 1))
        head = json.loads(self.head + b"[]}")
        head["object"] = "chat.completion" if self.chat else "text_completion"
        if self.chat:
            head["choices"] = [
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}
            ]
        else:
            head["choices"] = [{"index": 0, "text": text, "finish_reason": "length"}]
        head["usage"] = json.loads(self._usage(n))
        return head


def error_event(message: str) -> bytes:
    return b"data: " + json.dumps({"error": {"message": message}}).encode() + b"\n\n"
