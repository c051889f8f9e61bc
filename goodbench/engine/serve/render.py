"""What a router asks the server besides generation, answered as vLLM answers it: the render endpoints
(`POST /v1/completions/render`, `/v1/chat/completions/render`, `/v1/responses/render`,
`/v1/messages/render`: the prompt's token ids, which vllm-router's cache_aware policy matches prefixes
on; without them it falls back to the least-loaded worker) and the replica header every reply carries
when the server has a name (`serve --replica-name`, or a cluster's instance)."""

from __future__ import annotations

from aiohttp import web

from .openai_api import BadRequest

REPLICA_HEADER = "x-goodbench-replica"
RENDER_PATHS = {
    "completions": "/v1/completions/render",
    "chat": "/v1/chat/completions/render",
    "responses": "/v1/responses/render",
    "messages": "/v1/messages/render",
}


def replica_header(stream) -> dict:
    """The reply's REPLICA_HEADER (`goodbench run --replica-header x-goodbench-replica` reads it)."""
    return {REPLICA_HEADER: stream.replica} if stream.replica is not None else {}


async def render(server, request: web.Request, api: str) -> web.Response:
    """vLLM's GenerateRequest for the prompt (a list of one for completions): its token ids as this
    server tokenizes them (so the blocks a router matches are the blocks the prefix cache holds)."""
    try:
        req, ids, n_prompt, max_tokens = await server._prepare(request, api)
    except BadRequest as e:
        body = {"error": {"message": e.args[0], "type": "BadRequestError", "param": e.param, "code": 400}}
        return web.json_response(body, status=400)
    out = {
        "request_id": f"render-{next(server.ids)}",
        "token_ids": list(ids),
        "sampling_params": {"max_tokens": max_tokens},
        "model": server.model_name,
    }
    return web.json_response([out] if api == "completions" else out)
