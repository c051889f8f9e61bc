"""An ASGI middleware for `vllm serve --middleware replica_header.ReplicaHeader` (this folder on
PYTHONPATH): every reply names its worker in an `x-goodbench-replica` header (GOODBENCH_REPLICA), as
`goodbench serve --replica-name` does, so that `goodbench run --replica-header x-goodbench-replica`
through a router attributes each request to the vLLM worker that served it. Standalone: vLLM's
environment imports it, not goodbench."""

import os


class ReplicaHeader:
    def __init__(self, app):
        self.app = app
        self.value = os.environ.get("GOODBENCH_REPLICA", "").encode("latin-1")

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or not self.value:
            return await self.app(scope, receive, send)

        async def named(message):
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), (b"x-goodbench-replica", self.value)]}
            await send(message)

        return await self.app(scope, receive, named)
