"""What every client shares: the request a RequestSpec becomes (ClientConfig, request_body), endpoint
names, and how a reply that is not an event stream is described (an error, a redirect, a compressed or
non-streaming body), with secrets scrubbed from what is kept. Pure."""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..records import RequestSpec
from ..redact import scrub
from .apis import API_PATHS, UNARY_APIS, api_headers, api_of, messages_body, responses_body, tools_for, unary_body

ENDPOINTS = API_PATHS
DEFAULT_TOOLS = (
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Look a fact up in the knowledge base.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string", "enum": ["status", "docs", "logs"]}},
                "required": ["query"],
                "additionalProperties": False,
            },
            "strict": True,
        },
    },
)
ERROR_BODY_LIMIT = 500


@dataclass
class ClientConfig:
    base_url: str
    endpoint: str = "/v1/completions"
    model: str = "default"
    api_key: str | None = None  # never written anywhere
    ignore_eos: bool = True
    min_tokens: bool = False
    timeout_s: float = 600.0  # whole request
    idle_timeout_s: float = 60.0  # between two reads of one stream
    extra_body: dict | None = None
    keepalive_s: float = 4.0  # never reuse a connection idle longer (uvicorn closes idle ones after 5 s)
    client: str = "lean"  # lean (asyncio + httptools, the default) | aiohttp (the baseline)
    session_header: str = "X-Session-ID"  # carries a multi-turn request's session id (also sent as `user`)
    replica_header: str | None = None  # a response header naming the replica that served it (a router's)
    endpoint_type: str | None = None  # the API the endpoint speaks (client/apis.py); None: from the path
    pool_batch: int = 1  # embeddings: texts per request; rerank / score: documents per query
    kernel_stamps: bool = True  # lean client, plain http on Linux: chunk times from the kernel (SO_TIMESTAMPNS)
    tools: tuple = DEFAULT_TOOLS  # offered by requests that ask for tools (agent tool-call steps)

    @property
    def api(self) -> str:
        return self.endpoint_type or api_of(self.endpoint)

    @property
    def is_chat(self) -> bool:
        return self.api == "chat"

    @property
    def unary(self) -> bool:
        return self.api in UNARY_APIS

    def headers(self) -> dict[str, str]:
        return api_headers(self.api, self.api_key)

    @property
    def url(self) -> str:
        return self.base_url.rstrip("/") + self.endpoint


def resolve_api(path: str, workload_endpoint: str) -> str | None:
    """The API a path speaks when its name says (/v1/messages, /proxy/v1/responses); None (the
    workload's endpoint, e.g. --endpoint-type) for a path that names none."""
    api = api_of(path)
    if api == "completions" and not path.rstrip("/").endswith("completions"):
        return workload_endpoint
    return None


def workload_fields(spec, path: str) -> dict:
    """What a workload (WorkloadSpec) sets in a ClientConfig for an endpoint path: its session header,
    the path, and the API (the path's, else the workload's). One place for `run` and locust."""
    header = {"session_header": spec.session.header} if spec.session else {}
    return {**header, "endpoint": path, "endpoint_type": resolve_api(path, spec.endpoint)}


def resolve_endpoint(endpoint: str | None, workload_endpoint: str) -> str:
    if not endpoint:
        return ENDPOINTS[workload_endpoint]
    if endpoint in ENDPOINTS:
        return ENDPOINTS[endpoint]
    return endpoint if endpoint.startswith("/") else "/" + endpoint


def api_key_from_env(var: str | None) -> str | None:
    return os.environ.get(var or "OPENAI_API_KEY") or None


def _api_body(cfg: ClientConfig, spec: RequestSpec) -> dict:
    """Responses, Messages and the one-body APIs; vLLM's extensions (ignore_eos, priority) ride along
    where they apply (vLLM accepts ignore_eos on /v1/responses; Messages has none)."""
    api = cfg.api
    if api in UNARY_APIS:
        body = unary_body(api, spec.adapter or cfg.model, spec.prompt, cfg.pool_batch)
    else:
        make = responses_body if api == "responses" else messages_body
        body = make(spec.adapter or cfg.model, spec.prompt, spec.max_tokens)
        if cfg.ignore_eos and api == "responses":
            body["ignore_eos"] = True
        if spec.tools:
            body["tools"] = tools_for(api, list(cfg.tools))
            body["tool_choice"] = {"type": "any"} if api == "messages" else "required"
        if spec.reasoning_tokens:
            body["goodbench_reasoning_tokens"] = spec.reasoning_tokens
    if spec.priority is not None:
        body["priority"] = spec.priority
    if cfg.extra_body:
        body.update(cfg.extra_body)
    return body


def request_body(cfg: ClientConfig, spec: RequestSpec) -> dict:
    """The request for a RequestSpec: streaming, usage requested, greedy (OpenAI's completions and
    chat here; the other APIs' shapes in client/apis.py)."""
    if cfg.api not in ("chat", "completions"):
        return _api_body(cfg, spec)
    body: dict = {
        "model": spec.adapter or cfg.model,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0.0,
    }
    if cfg.is_chat:
        prompt = spec.prompt if isinstance(spec.prompt, list) else [{"role": "user", "content": spec.prompt}]
        body["messages"] = prompt
        body["max_completion_tokens"] = spec.max_tokens
    else:
        prompt = spec.prompt
        if isinstance(prompt, list):
            prompt = "\n".join(str(m.get("content", "")) for m in prompt)
        body["prompt"] = prompt
        body["max_tokens"] = spec.max_tokens
    if cfg.ignore_eos:
        body["ignore_eos"] = True
    if cfg.min_tokens:
        body["min_tokens"] = spec.max_tokens
    if spec.session is not None:
        body["user"] = spec.session  # OpenAI's end-user id: routers and servers may key affinity on it
    if spec.priority is not None:
        body["priority"] = spec.priority  # vLLM: honoured with --scheduling-policy priority
    if spec.reasoning_tokens:
        body["goodbench_reasoning_tokens"] = spec.reasoning_tokens  # the reference engine thinks first
    if spec.tools and cfg.is_chat:
        body["tools"], body["tool_choice"] = list(cfg.tools), "required"
    if cfg.extra_body:
        body.update(cfg.extra_body)
    return body


def is_event_stream(ctype: str | None) -> bool:
    """Media types are case-insensitive: Text/Event-Stream is an event stream too."""
    return bool(ctype) and (ctype.startswith("text/event-stream") or ctype.lower().startswith("text/event-stream"))


def wanted_body(ctype: str | None, unary: bool) -> bool:
    """The reply's media type is the one asked for: JSON from a one-body API, else an event stream."""
    if unary:
        return bool(ctype) and ctype.lower().startswith("application/json")
    return is_event_stream(ctype)


def describe_reply(
    status: int, ctype: str | None, body: bytes, location=None, encoding=None, unary: bool = False
) -> tuple[str, str]:
    """(record status, error) for a reply that is not a 200 event stream: an HTTP error with its body's
    start, a redirect (never followed: the API key stays with the base URL), a compressed body (goodbench
    asks for none), or a 200 that is not a stream."""
    if 300 <= status < 400:
        where = location.decode("latin-1") if isinstance(location, bytes) else location
        return "http_error", (
            f"HTTP {status} redirect to {where or '(no Location header)'}: goodbench does not follow redirects "
            "(the API key stays with the base URL); use the final URL as --base-url"
        )
    if status >= 400:
        return "http_error", f"HTTP {status}: {body.decode('utf-8', 'replace')[:ERROR_BODY_LIMIT]}"
    enc = encoding.decode("latin-1") if isinstance(encoding, bytes) else encoding
    if enc and enc.strip().lower() != "identity":
        return "bad_stream", (
            f"the server sent a {enc}-compressed body though goodbench asks for none (Accept-Encoding: "
            "identity): is a proxy compressing it?"
        )
    return "bad_stream", not_a_stream(ctype or "", body, unary)


def secret_free(error: str | None, cfg: ClientConfig) -> str | None:
    """A record's error text without the API key or any credential a server echoed back."""
    return scrub(error, (cfg.api_key,)) if error else error


def model_from_listing(data) -> str | None:
    """The first model id of a /v1/models reply; None when the reply is not shaped like OpenAI's."""
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list) or not items or not isinstance(items[0], dict):
        return None
    name = items[0].get("id")
    return name if isinstance(name, str) and name else None


def not_a_stream(ctype: str, body: bytes, unary: bool = False) -> str:
    """The error for a 200 that is not what was asked for (an event stream; JSON from a one-body API,
    unary): what the server sent instead, and the likely cause."""
    text = body.decode("utf-8", "replace")[:200].strip()
    why = (
        "an HTML page: is the base URL the API server's?"
        if "html" in ctype or text.lower().startswith("<")
        else "an event stream to a one-body API: is --endpoint-type right for this endpoint?"
        if unary and is_event_stream(ctype)
        else "a non-streaming body: does the server ignore stream=true?"
        if "json" in ctype and not unary
        else "not an event stream"
        if not unary
        else "not JSON"
    )
    wanted = "application/json" if unary else "text/event-stream"
    return f"expected {wanted}, got {ctype or 'no content type'} ({why}): {text}"


# what a pasted endpoint URL may end with: every API's path (client/apis.py, the one list), longest
# first so /v1/chat/completions is not read as /v1/completions; then /v1/models and a bare /v1
_ENDPOINT_PATHS = frozenset(API_PATHS.values())
_URL_SUFFIXES = (*sorted(_ENDPOINT_PATHS, key=len, reverse=True), "/v1/models", "/v1")


def normalize_base_url(url: str, endpoint: str | None) -> tuple[str, str | None, list[str]]:
    """(base URL, endpoint, notes) for what a user typed as --base-url: a scheme added, a trailing slash,
    a /v1 suffix or a whole endpoint URL taken off (the endpoint carries /v1). UsageError with the
    corrected flags for what cannot be meant (another scheme, an endpoint that contradicts --endpoint)."""
    from urllib.parse import urlsplit

    from ..errors import UsageError

    why, text = [], url.strip()
    if "://" not in text:
        text = "http://" + text
        why.append("no scheme: http:// added")
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(f"--base-url {url!r}: expected http(s)://HOST:PORT, e.g. --base-url http://127.0.0.1:8000")
    path = parts.path.rstrip("/")
    suffix = next((p for p in _URL_SUFFIXES if path.endswith(p)), None)
    if suffix:
        found = suffix if suffix in _ENDPOINT_PATHS else None
        wanted = resolve_endpoint(endpoint, "completions") if endpoint else None
        path = path[: -len(suffix)]
        base = f"{parts.scheme}://{parts.netloc}{path}"
        if found and wanted and wanted != found:
            raise UsageError(
                f"--base-url {url!r} names the endpoint {found} but --endpoint is {wanted}: give "
                f"--base-url {base} --endpoint {wanted} (or --endpoint {found})"
            )
        endpoint = endpoint or found
        why.append(f"{suffix} taken off (goodbench adds the endpoint{': ' + found if found else ''})")
    base = f"{parts.scheme}://{parts.netloc}{path}"
    return base, endpoint, [f"--base-url {url!r} read as {base}: {'; '.join(why)}"] if why else []
