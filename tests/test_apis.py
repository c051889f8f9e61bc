"""The APIs' request shapes (client/apis.py, client/config.request_body)."""

import pytest

from goodbench.client.apis import api_headers, api_of, split_items, tools_for
from goodbench.client.config import DEFAULT_TOOLS, ClientConfig, request_body, resolve_api
from goodbench.records import RequestSpec

MSGS = [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi"}, {"role": "assistant", "content": "a"}]


@pytest.mark.parametrize(
    "path,api",
    [
        ("/v1/chat/completions", "chat"),
        ("/v1/completions", "completions"),
        ("/proxy/v1/responses", "responses"),
        ("/v1/messages/", "messages"),
        ("/v1/embeddings", "embeddings"),
        ("/rerank", "rerank"),
        ("/v1/score", "score"),
        ("/generate", "completions"),
    ],
)
def test_the_api_is_inferred_from_the_path(path, api):
    assert api_of(path) == api


def test_a_path_that_names_no_api_takes_the_workloads():
    assert resolve_api("/generate", "messages") == "messages"
    assert resolve_api("/v1/responses", "chat") is None  # the path says it


def body(endpoint, spec=None, **kw):
    cfg = ClientConfig("http://h", endpoint=endpoint, model="m", **kw)
    return request_body(cfg, spec or RequestSpec("r", "c", MSGS, 5, 7, priority=2))


def test_responses_body_has_instructions_input_and_no_stream_options():
    b = body("/v1/responses")
    assert b["instructions"] == "sys" and [m["role"] for m in b["input"]] == ["user", "assistant"]
    assert b["max_output_tokens"] == 7 and b["stream"] and "stream_options" not in b
    assert b["ignore_eos"] and b["priority"] == 2


def test_messages_body_has_system_max_tokens_and_no_ignore_eos():
    b = body("/v1/messages")
    assert b["system"] == "sys" and b["max_tokens"] == 7 and "ignore_eos" not in b
    assert [m["role"] for m in b["messages"]] == ["user", "assistant"]


@pytest.mark.parametrize("endpoint,choice", [("/v1/chat/completions", "required"), ("/v1/responses", "required")])
def test_tool_steps_offer_the_tools_in_each_apis_shape(endpoint, choice):
    b = body(endpoint, RequestSpec("r", "c", MSGS, 5, 7, tools=True))
    assert b["tool_choice"] == choice and b["tools"]
    assert body("/v1/messages", RequestSpec("r", "c", MSGS, 5, 7, tools=True))["tool_choice"] == {"type": "any"}
    flat, anthropic = tools_for("responses", list(DEFAULT_TOOLS)), tools_for("messages", list(DEFAULT_TOOLS))
    assert flat[0]["type"] == "function" and flat[0]["name"] == "lookup" and "function" not in flat[0]
    assert anthropic[0]["input_schema"]["required"] == ["query"]


def test_one_body_apis_carry_their_batch():
    spec = RequestSpec("r", "c", "a b c d e f g h", 8, 1)
    assert len(body("/v1/embeddings", spec, pool_batch=3)["input"]) == 3
    rr = body("/v1/rerank", spec, pool_batch=3)
    assert rr["query"] and len(rr["documents"]) == 3
    assert set(body("/v1/score", spec)) >= {"text_1", "text_2"}
    assert split_items("a b c", 5) == ["a", "b", "c"] and split_items("", 2) == [""]


def test_headers():
    assert api_headers("chat", None) == {}
    h = api_headers("messages", "k")
    assert h == {"Authorization": "Bearer k", "anthropic-version": "2023-06-01", "x-api-key": "k"}
