"""Streams of the reference engine's other reply shapes, one formatter each, with Formatter's
interface (opening, token, full_response): a tool call in a chat reply, the Responses API's events
and the Messages API's (the shapes and order vLLM 0.32 emits; docs/definitions.md). The preamble
(opening) carries no output: an output event (an item's opening included) is written with the token
that produced it, so a client's TTFT is the first token's step. Pure."""

from __future__ import annotations

import json

from .openai_api import Formatter


def _j(obj) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _tool_fragment(word: bytes, n: int, done: bool) -> str:
    """The n-th argument fragment: together they are the JSON object {"query": "<words>"}."""
    frag = json.loads(word).strip()
    return ('{"query":"' if n == 1 else " ") + frag + ('"}' if done else "")


class ChatToolFormatter(Formatter):
    """A chat reply that calls a tool: the first token's chunk names the function, every token is an
    argument fragment, the last chunk's finish_reason is tool_calls (OpenAI's stream)."""

    __slots__ = ("tool",)

    def __init__(self, *args, tool: str, **kw):
        super().__init__(*args, **kw)
        self.tool = tool

    def _token(self, n: int, done: bool) -> bytes:
        if n <= self.thinking:
            return super()._token(n, done)
        call: dict = {"index": 0, "function": {"arguments": _tool_fragment(self.word(n), n - self.thinking, done)}}
        if n == self.thinking + 1:
            call = {"index": 0, "id": f"call_{self.off}_{n}", "type": "function", "function": {"name": self.tool}}
            call["function"]["arguments"] = _tool_fragment(self.word(n), 1, done)
        chunk = b"data: " + self.head + b'[{"index":0,"delta":{"tool_calls":[' + _j(call) + b"]}"
        chunk += b',"logprobs":null,"finish_reason":' + (b'"tool_calls"' if done else b"null") + b"}]}\n\n"
        if done:
            if self.include_usage:
                chunk += b"data: " + self.head + b'[],"usage":' + self._usage(n) + b"}\n\n"
            chunk += b"data: [DONE]\n\n"
        return chunk


class _EventFormatter:
    """What Responses and Messages share: named events, a reasoning part then an answer part (text
    or a tool call), the reply's text kept for the closing events."""

    chat = True

    def __init__(self, rid: int, created: int, model: str, n_prompt: int, words, seed: int, thinking=0, tool=None):
        self.rid, self.created, self.model, self.n_prompt = rid, created, model, n_prompt
        self.words, self.off = words, (seed * 7919) % len(words)
        self.thinking, self.tool = thinking, tool
        self.seq = 0
        self.cached = 0  # prompt tokens the prefix cache held (set when the request is first scheduled)
        self.details = False  # Messages: usage carries the cache fields (vLLM's --enable-prompt-tokens-details)
        self.parts: list[str] = []
        self.done_items: list[dict] = []

    def word(self, i: int) -> bytes:
        return self.words[(self.off + i) % len(self.words)]

    def ev(self, name: str, obj: dict) -> bytes:
        obj["type"] = name
        return f"event: {name}\ndata: ".encode() + _j(obj) + b"\n\n"

    def token(self, n: int, done: bool) -> bytes:
        out = b""
        if n == 1 and self.thinking:
            out += self.open_part(0, "reasoning")
        if n == self.thinking + 1:
            if self.thinking:
                out += self.close_part(0, "reasoning")
            out += self.open_part(1 if self.thinking else 0, "tool" if self.tool else "text")
        kind = "reasoning" if n <= self.thinking else "tool" if self.tool else "text"
        frag = _tool_fragment(self.word(n), n - self.thinking, done) if kind == "tool" else json.loads(self.word(n))
        self.parts.append(frag)
        out += self.delta(kind, 1 if n > self.thinking and self.thinking else 0, frag)
        if done:
            idx = 1 if self.thinking and n > self.thinking else 0
            out += self.close_part(idx, kind) + self.finish(n)
        return out

    def text(self) -> str:
        t = "".join(self.parts)
        self.parts = []
        return t


class ResponsesFormatter(_EventFormatter):
    """OpenAI Responses: created, in_progress; per output item added / delta... / done; completed
    with the usage (vLLM 0.32 ends with response.completed even when max_output_tokens cut it)."""

    def ev(self, name: str, obj: dict) -> bytes:
        obj["sequence_number"] = self.seq
        self.seq += 1
        return super().ev(name, obj)

    def response(self, status: str, usage: dict | None, output: list) -> dict:
        return {
            "id": f"resp_{self.rid}",
            "object": "response",
            "created_at": self.created,
            "model": self.model,
            "status": status,
            "output": output,
            "usage": usage,
        }

    def opening(self) -> bytes:
        """Sent when the request is taken in, before any token, as vLLM does."""
        r = self.response("in_progress", None, [])
        return self.ev("response.created", {"response": r}) + self.ev("response.in_progress", {"response": r})

    def _item(self, idx: int, kind: str, status: str, text: str = "") -> dict:
        iid = f"{'rs' if kind == 'reasoning' else 'fc' if kind == 'tool' else 'msg'}_{self.rid}_{idx}"
        if kind == "tool":
            return {
                "id": iid,
                "type": "function_call",
                "status": status,
                "name": self.tool,
                "arguments": text,
                "call_id": f"call_{self.rid}",
            }
        part = {"type": "reasoning_text" if kind == "reasoning" else "output_text", "text": text}
        item = {"id": iid, "type": "reasoning" if kind == "reasoning" else "message", "status": status}
        return item | (
            {"summary": [], "content": [part]} if kind == "reasoning" else {"role": "assistant", "content": [part]}
        )

    def open_part(self, idx: int, kind: str) -> bytes:
        item = self._item(idx, kind, "in_progress")
        out = self.ev("response.output_item.added", {"output_index": idx, "item": item})
        if kind != "tool":
            part = {"type": item["content"][0]["type"], "text": ""}
            out += self.ev(
                "response.content_part.added",
                {"item_id": item["id"], "output_index": idx, "content_index": 0, "part": part},
            )
        return out

    def delta(self, kind: str, idx: int, frag: str) -> bytes:
        name = {"reasoning": "reasoning_text", "tool": "function_call_arguments", "text": "output_text"}[kind]
        iid = self._item(idx, kind, "")["id"]
        obj = {"item_id": iid, "output_index": idx, "delta": frag}
        return self.ev(f"response.{name}.delta", obj if kind == "tool" else obj | {"content_index": 0})

    def close_part(self, idx: int, kind: str) -> bytes:
        text = self.text()
        item = self._item(idx, kind, "completed", text)
        if kind == "tool":
            out = self.ev(
                "response.function_call_arguments.done",
                {"item_id": item["id"], "output_index": idx, "arguments": text, "name": self.tool},
            )
        else:
            name = "reasoning_text" if kind == "reasoning" else "output_text"
            common = {"item_id": item["id"], "output_index": idx, "content_index": 0}
            out = self.ev(f"response.{name}.done", common | {"text": text})
            out += self.ev("response.content_part.done", common | {"part": item["content"][0]})
        self.done_items.append(item)
        return out + self.ev("response.output_item.done", {"output_index": idx, "item": item})

    def usage(self, n: int) -> dict:
        rt = min(n, self.thinking)
        return {
            "input_tokens": self.n_prompt,
            "input_tokens_details": {"cached_tokens": self.cached},
            "output_tokens": n,
            "output_tokens_details": {"reasoning_tokens": rt},
            "total_tokens": self.n_prompt + n,
        }

    def finish(self, n: int) -> bytes:
        r = self.response("completed", self.usage(n), self.done_items)
        return self.ev("response.completed", {"response": r})

    def full_response(self, n: int) -> dict:
        """The whole reply in one body: its events replayed from the start (the step loop already
        formatted each token into the unread stream: what that left is dropped, not added to)."""
        self.parts, self.done_items = [], []
        for i in range(1, n + 1):
            self.token(i, i == n)
        return self.response("completed", self.usage(n), self.done_items)


class MessagesFormatter(_EventFormatter):
    """Anthropic Messages: message_start (prompt tokens); per content block start / deltas / stop
    (thinking, then text or tool_use); message_delta with the output count; message_stop."""

    def opening(self) -> bytes:
        """Nothing: vLLM makes message_start of its chat stream's first chunk, sent with the first token."""
        return b""

    def token(self, n: int, done: bool) -> bytes:
        return self.message_start() + super().token(n, done) if n == 1 else super().token(n, done)

    def message_start(self) -> bytes:
        msg = {
            "id": f"msg_{self.rid}",
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": self.usage(0),
        }
        return self.ev("message_start", {"message": msg})

    def usage(self, n: int) -> dict:
        """vLLM's Anthropic usage: with prompt-token details on, the cache read is its own field and
        input_tokens is the rest of the prompt."""
        if not self.details:
            return {"input_tokens": self.n_prompt, "output_tokens": n}
        return {"input_tokens": self.n_prompt - self.cached, "cache_read_input_tokens": self.cached, "output_tokens": n}

    def open_part(self, idx: int, kind: str) -> bytes:
        block = {
            "reasoning": {"type": "thinking", "thinking": "", "signature": ""},
            "tool": {"type": "tool_use", "id": f"toolu_{self.rid}", "name": self.tool, "input": {}},
            "text": {"type": "text", "text": ""},
        }[kind]
        return self.ev("content_block_start", {"index": idx, "content_block": block})

    def delta(self, kind: str, idx: int, frag: str) -> bytes:
        d = {
            "reasoning": {"type": "thinking_delta", "thinking": frag},
            "tool": {"type": "input_json_delta", "partial_json": frag},
            "text": {"type": "text_delta", "text": frag},
        }[kind]
        return self.ev("content_block_delta", {"index": idx, "delta": d})

    def close_part(self, idx: int, kind: str) -> bytes:
        self.text()
        sig = self.ev(
            "content_block_delta", {"index": idx, "delta": {"type": "signature_delta", "signature": f"sig{self.rid}"}}
        )
        return (sig if kind == "reasoning" else b"") + self.ev("content_block_stop", {"index": idx})

    def finish(self, n: int) -> bytes:
        stop = "tool_use" if self.tool else "max_tokens"
        return self.ev(
            "message_delta", {"delta": {"stop_reason": stop, "stop_sequence": None}, "usage": self.usage(n)}
        ) + self.ev("message_stop", {})

    def full_response(self, n: int) -> dict:
        words = [json.loads(self.word(i)) for i in range(self.thinking + 1, n + 1)]
        content = [{"type": "text", "text": "".join(words)}]
        if self.tool:
            content = [
                {
                    "type": "tool_use",
                    "id": f"toolu_{self.rid}",
                    "name": self.tool,
                    "input": {"query": "".join(words).strip()},
                }
            ]
        return {
            "id": f"msg_{self.rid}",
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": "tool_use" if self.tool else "max_tokens",
            "usage": self.usage(n),
        }
