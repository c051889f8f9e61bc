"""The bytes `goodbench serve` streams, read the way vLLM's own benchmark client reads them (issue 42): each
read stripped of its surrounding whitespace, appended to a buffer, split on a blank line. A stream that
opened with an SSE comment, or a chat role chunk sent when the request arrived, measured wrongly there."""

import asyncio
import json
import time

import aiohttp
import pytest
from aiohttp.test_utils import TestServer

from goodbench.engine.config import EngineConfig
from goodbench.engine.costmodel import CostModel
from goodbench.engine.serve.openai_api import Formatter
from goodbench.engine.serve.server import RUNNER_OPTIONS, EngineServer, ServeOptions

STEP_MS = 20.0


class VllmSplitter:
    """vLLM 0.32's StreamedResponseHandler (vllm/benchmarks/lib/endpoint_request_func.py), with its
    caller's strip of every read: what that client makes of a stream, message by message."""

    def __init__(self):
        self.buffer = ""

    def add_read(self, read: bytes) -> list[str]:
        read = read.strip()
        if not read:
            return []
        self.buffer += read.decode()
        out = []
        while "\n\n" in self.buffer:
            msg, self.buffer = self.buffer.split("\n\n", 1)
            if msg.strip():
                out.append(msg.strip())
        if self.buffer.startswith("data: "):
            rest = self.buffer.removeprefix("data: ").strip()
            if rest == "[DONE]":
                out.append(self.buffer.strip())
                self.buffer = ""
            elif rest:
                try:
                    json.loads(rest)
                except json.JSONDecodeError:
                    pass
                else:
                    out.append(self.buffer.strip())
                    self.buffer = ""
        return out


def vllm_client_view(reads: list[bytes]) -> tuple[list, int]:
    """(every message's JSON or "[DONE]", the index of the read that vLLM's client takes for the first
    token). A message that is not `data: <JSON>`, `data: [DONE]` or a comment fails the test, as it fails
    the client; so does a stream that leaves bytes in its buffer (events it never saw)."""
    split, msgs, first = VllmSplitter(), [], None
    for i, read in enumerate(reads):
        for m in split.add_read(read):
            if m.startswith(":"):  # the client skips a comment that arrives as a message of its own
                continue
            assert m.startswith("data: "), f"vLLM's client cannot read {m[:80]!r}"
            body = m.removeprefix("data: ")
            msgs.append(body if body == "[DONE]" else json.loads(body))
            if first is None and body != "[DONE]" and msgs[-1].get("choices"):
                first = i
    assert split.buffer == "", f"left unread: {split.buffer[:80]!r}"
    return msgs, first


def test_the_splitter_rejects_the_old_leading_comment():
    """The rule this file checks against is the one that failed: a comment in its own read glues onto the
    next event (60 of 60 requests failed with `vllm bench serve`)."""
    split = VllmSplitter()
    ev = b'data: {"choices":[{"text":" a"}]}\n\n'
    assert split.add_read(b": ok\n\n") == [] and split.add_read(ev) == []
    with pytest.raises(AssertionError):
        vllm_client_view([b": ok\n\n", ev])


def serve(tok, requests):
    """Each (path, body) streamed from a fresh engine on loopback: (seconds to the headers, [(seconds to
    each HTTP chunk, its bytes)]) per request; an HTTP chunk is one write of the server."""

    async def one(session, url, body):
        t0 = time.monotonic()
        async with session.post(url, json=body) as r:
            assert r.status == 200, await r.text()
            t_head, reads = time.monotonic() - t0, []
            async for data, _ in r.content.iter_chunks():
                reads.append((time.monotonic() - t0, data))
            return t_head, reads

    async def go():
        cfg = EngineConfig(max_model_len=4096).resolved()
        srv = EngineServer(cfg, ServeOptions(), tok, CostModel.for_config(cfg, fixed_step_ms=STEP_MS))
        server = TestServer(srv.app(), host="127.0.0.1", **RUNNER_OPTIONS)
        await server.start_server()
        try:
            base = f"http://127.0.0.1:{server.port}"
            async with aiohttp.ClientSession() as s:
                return await asyncio.gather(*(one(s, base + p, b) for p, b in requests))
        finally:
            await server.close()

    return asyncio.run(go())


COMPLETION = {"prompt": "the quick brown fox", "max_tokens": 5, "stream": True, "ignore_eos": True}
CHAT = {"messages": [{"role": "user", "content": "hi there"}], "max_tokens": 5, "stream": True}
USAGE = {"stream_options": {"include_usage": True}}


@pytest.mark.parametrize(
    "path,body",
    [
        ("/v1/completions", COMPLETION),
        ("/v1/completions", COMPLETION | USAGE),
        ("/v1/chat/completions", CHAT),
        ("/v1/chat/completions", CHAT | USAGE),
    ],
)
def test_vllm_client_reads_every_event_and_the_first_token_on_its_step(tok, path, body):
    ((t_head, timed),) = serve(tok, [(path, body)])
    times, reads = zip(*timed)
    chat = path.endswith("chat/completions")
    for view in (list(reads), [e + b"\n\n" for e in b"".join(reads).split(b"\n\n") if e]):  # as sent; per event
        msgs, first = vllm_client_view(view)
        assert msgs[-1] == "[DONE]"
        tokens = [m for m in msgs[:-1] if m.get("choices")]
        assert len(tokens) == 5 + chat  # vLLM's chat stream: the role chunk, then one chunk per token
        usage = [m for m in msgs[:-1] if not m.get("choices")]
        assert [u["usage"]["completion_tokens"] for u in usage] == ([5] if "stream_options" in body else [])
    # nothing before the first token: the headers come at once, the first body bytes on the first step
    assert t_head < times[0] and times[0] > 0.5 * STEP_MS / 1000, (t_head, times)
    first = vllm_client_view(list(reads[:1]))[0]
    if chat:  # the role chunk travels with the first token, as vLLM's server sends it
        assert first[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
        assert first[1]["choices"][0]["delta"]["content"]
    else:
        assert first[0]["choices"][0]["text"] and first[0]["object"] == "text_completion"


def test_formatters_open_with_nothing_and_send_the_role_with_the_first_token(tok):
    words = [json.dumps(" w").encode()]
    chat = Formatter("chatcmpl-1", 0, "m", True, 7, False, True, words, seed=1)
    assert chat.opening() == b""
    one, two = chat.token(1, False), chat.token(2, True)
    events = [json.loads(e.removeprefix(b"data: ")) for e in one.split(b"\n\n") if e]
    assert [list(e["choices"][0]["delta"]) for e in events] == [["role", "content"], ["content"]]
    assert events[0]["usage"]["completion_tokens"] == 0 and events[1]["usage"]["completion_tokens"] == 1
    assert b'"role"' not in two and two.endswith(b"data: [DONE]\n\n")
    cmpl = Formatter("cmpl-1", 0, "m", False, 7, False, False, words, seed=1)
    assert cmpl.opening() == b"" and cmpl.token(1, False).count(b"data: ") == 1
    # vLLM's choice fields: stop_reason on every completions chunk, on chat's last only
    (c1,) = [json.loads(e.removeprefix(b"data: ")) for e in cmpl.token(1, False).split(b"\n\n") if e]
    assert list(c1["choices"][0]) == ["index", "text", "logprobs", "finish_reason", "stop_reason"]
    assert "stop_reason" not in events[1]["choices"][0]
    assert json.loads(two.split(b"\n\n")[0].removeprefix(b"data: "))["choices"][0]["stop_reason"] is None


def test_models_lists_vllms_fields(tok):
    async def go():
        cfg = EngineConfig(max_model_len=4096).resolved()
        srv = EngineServer(cfg, ServeOptions(served_model_name="tiny"), tok, CostModel.for_config(cfg))
        server = TestServer(srv.app(), host="127.0.0.1", **RUNNER_OPTIONS)
        await server.start_server()
        try:
            async with aiohttp.ClientSession() as s:
                async with s.get(f"http://127.0.0.1:{server.port}/v1/models") as r:
                    return cfg, await r.json()
        finally:
            await server.close()

    cfg, body = asyncio.run(go())
    assert body["object"] == "list" and len(body["data"]) == 1
    card = body["data"][0]
    keys = {"id", "object", "created", "owned_by", "root", "parent", "max_model_len", "permission"}
    assert set(card) == keys
    assert (card["id"], card["root"], card["parent"], card["max_model_len"]) == ("tiny", cfg.model, None, 4096)
    assert card["object"] == "model" and isinstance(card["created"], int)
    (perm,) = card["permission"]
    assert perm["object"] == "model_permission" and perm["allow_sampling"] is True


def test_messages_start_with_the_first_token_and_responses_open_on_arrival(tok):
    """vLLM's Messages stream is its chat stream converted: message_start comes of the role chunk, so with
    the first token. Its Responses stream sends created / in_progress before generating."""
    msgs = {"messages": [{"role": "user", "content": "hi there"}], "max_tokens": 5, "stream": True}
    (_, msg), (_, resp) = serve(
        tok, [("/v1/messages", msgs), ("/v1/responses", {"input": "hi", "max_output_tokens": 5, "stream": True})]
    )
    first = msg[0][1]
    assert msg[0][0] > 0.5 * STEP_MS / 1000, msg[0]
    assert first.startswith(b"event: message_start\n") and b"event: content_block_delta\n" in first
    assert resp[0][1].startswith(b"event: response.created\n") and b".delta\n" not in resp[0][1]
