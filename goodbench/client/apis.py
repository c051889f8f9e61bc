"""The APIs beyond OpenAI's completions and chat: which one an endpoint speaks, and the request body
and headers each wants. Responses (OpenAI) and Messages (Anthropic) stream their own events
(client/events.py parses them into the same per-chunk records); embeddings, rerank and score answer
with one JSON body (client/unary.py). Pure."""

from __future__ import annotations

API_PATHS = {
    "completions": "/v1/completions",
    "chat": "/v1/chat/completions",
    "responses": "/v1/responses",
    "messages": "/v1/messages",
    "embeddings": "/v1/embeddings",
    "rerank": "/v1/rerank",
    "score": "/v1/score",
}
APIS = tuple(API_PATHS)
MESSAGE_APIS = ("chat", "responses", "messages")  # prompts are lists of messages
UNARY_APIS = ("embeddings", "rerank", "score")  # one JSON body back: latency and items, no tokens
ANTHROPIC_VERSION = "2023-06-01"


def api_of(path: str) -> str:
    """The API an endpoint path speaks, from its last segments (a proxy prefix does not matter)."""
    p = path.rstrip("/")
    for api in (a for a in APIS if a != "completions"):  # completions: what any other path falls back to
        tail = API_PATHS[api].removeprefix("/v1")
        if p.endswith(tail) or p.endswith(tail.removeprefix("/")):
            return api
    return "completions"


def as_messages(prompt) -> list[dict]:
    return prompt if isinstance(prompt, list) else [{"role": "user", "content": prompt}]


def as_text(prompt) -> str:
    if isinstance(prompt, list):
        return "\n".join(str(m.get("content", "")) for m in prompt)
    return prompt


def tools_for(api: str, tools: list[dict]) -> list[dict]:
    """Chat-shaped tools (`{"type":"function","function":{...}}`) in the API's own shape: Responses
    wants them flat, Messages as `{name, description, input_schema}`."""
    out = []
    for t in tools:
        fn = t.get("function", t)
        if api == "responses":
            out.append({"type": "function", **fn})
        elif api == "messages":
            out.append(
                {"name": fn["name"], "description": fn.get("description", ""), "input_schema": fn.get("parameters")}
            )
        else:
            out.append(t)
    return out


def responses_body(model: str, prompt, max_tokens: int) -> dict:
    """OpenAI Responses: `input` items (a system message becomes `instructions`), usage in the
    terminal event (no stream_options)."""
    msgs = as_messages(prompt)
    body: dict = {"model": model, "stream": True, "temperature": 0.0, "max_output_tokens": max_tokens}
    system = [str(m.get("content") or "") for m in msgs if m.get("role") in ("system", "developer")]
    if system:
        body["instructions"] = "\n".join(system)
    body["input"] = [
        {"role": m["role"], "content": m.get("content") or ""}
        for m in msgs
        if m.get("role") not in ("system", "developer")
    ]
    return body


def messages_body(model: str, prompt, max_tokens: int) -> dict:
    """Anthropic Messages: `system` at the top level; `max_tokens` is required."""
    msgs = as_messages(prompt)
    body: dict = {"model": model, "stream": True, "temperature": 0.0, "max_tokens": max_tokens}
    system = [str(m.get("content") or "") for m in msgs if m.get("role") == "system"]
    if system:
        body["system"] = "\n".join(system)
    body["messages"] = [
        {"role": "assistant" if m.get("role") == "assistant" else "user", "content": m.get("content") or ""}
        for m in msgs
        if m.get("role") != "system"
    ]
    return body


def split_items(text: str, n: int) -> list[str]:
    """A prompt cut into n pieces of about equal word counts (each non-empty while words last)."""
    words = text.split()
    n = max(1, min(n, len(words) or 1))
    k, r = divmod(len(words), n)
    out, i = [], 0
    for j in range(n):
        step = k + (j < r)
        out.append(" ".join(words[i : i + step]) or text)
        i += step
    return out


def unary_body(api: str, model: str, prompt, batch: int) -> dict:
    """Embeddings: `input` is `batch` texts. Rerank and score: the first piece is the query, the next
    `batch` pieces the documents (what one request ranks)."""
    text = as_text(prompt)
    if api == "embeddings":
        return {"model": model, "input": split_items(text, batch), "encoding_format": "float"}
    pieces = split_items(text, batch + 1)
    query, docs = pieces[0], pieces[1:] or [pieces[0]]
    if api == "rerank":
        return {"model": model, "query": query, "documents": docs}
    return {"model": model, "text_1": query, "text_2": docs}


def api_headers(api: str, api_key: str | None) -> dict[str, str]:
    """Headers besides the content type: the key as a bearer token (OpenAI; vLLM checks it on every
    path) and, for Messages, also as `x-api-key` with `anthropic-version` (Anthropic's own)."""
    h = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    if api == "messages":
        h["anthropic-version"] = ANTHROPIC_VERSION
        if api_key:
            h["x-api-key"] = api_key
    return h
