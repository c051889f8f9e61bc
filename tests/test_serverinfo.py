"""What a target says about itself before a run: vLLM, TGI, SGLang and servers that say nothing."""

import asyncio

from aiohttp import web
from aiohttp.test_utils import TestServer

from goodbench.client.serverinfo import server_info


def _app(routes: dict, header: str | None = None):
    app = web.Application()

    def answer(body):
        async def h(request):
            resp = web.json_response(body) if not isinstance(body, str) else web.Response(text=body)
            if header:
                resp.headers["Server"] = header
            return resp

        return h

    for path, body in routes.items():
        app.router.add_get(path, answer(body))
    return app


def _info(routes, header=None, **kw):
    async def go():
        server = TestServer(_app(routes, header), host="127.0.0.1")
        await server.start_server()
        try:
            return await server_info(f"http://127.0.0.1:{server.port}", **kw)
        finally:
            await server.close()

    return asyncio.run(go())


def test_vllm():
    models = {
        "data": [
            {"id": "other", "owned_by": "x"},
            {"id": "m", "owned_by": "vllm", "max_model_len": 4096, "root": "/w/m"},
        ]
    }
    info = _info({"/v1/models": models, "/version": {"version": "0.11.2"}}, header="uvicorn", model="m")
    assert info == {
        "name": "vllm",
        "version": "0.11.2",
        "owned_by": "vllm",
        "header": "uvicorn",
        "max_model_len": 4096,
        "root": "/w/m",
    }


def test_tgi_and_sglang():
    info = _info(
        {"/v1/models": {"data": [{"id": "m", "owned_by": "system"}]}, "/info": {"model_id": "m", "version": "3.1.0"}}
    )
    assert info["name"] == "tgi" and info["version"] == "3.1.0"
    info = _info(
        {"/v1/models": {"data": [{"id": "m", "owned_by": "sglang"}]}, "/get_server_info": {"version": "0.5.1"}}
    )
    assert info["name"] == "sglang" and info["version"] == "0.5.1"


def test_a_server_that_says_nothing_or_nonsense():
    for routes in ({}, {"/v1/models": "not json", "/version": ["a list"]}):
        assert set(_info(routes)) == {"header"}  # aiohttp's Server header, on the 404s too
    assert asyncio.run(server_info("http://127.0.0.1:9")) == {}  # nothing listening


def _fault_info(get_mode: str, **kw) -> dict:
    from faultserver import fault_server

    async def go():
        server, base, _ = await fault_server(get_mode=get_mode)
        try:
            return await server_info(base, **kw)
        finally:
            server.close()

    return asyncio.run(go())


def test_a_gateway_quoting_the_key_never_gets_it_into_the_server_block():
    """Issue 42: /version, the model's root and the Server header quoting the Authorization header put
    the key into run.json, the history and the dashboard."""
    key = "sk-Probe-0123456789abcdef"
    info = _fault_info("echo-everywhere", api_key=key, model="m")
    assert info["version"] == "Bearer [redacted]" and info["root"] == "/models/Bearer [redacted]"
    assert info["header"] == "gw/1.0 (Bearer [redacted])"
    assert key.lower() not in repr(info).lower()


def test_a_listing_whose_data_is_not_a_list_is_no_listing():
    """Issue 42: /v1/models answering {"data": 5} was a traceback (exit 1) before the run."""
    assert _fault_info("models-data-int", model="m") == {}


def test_a_key_quoted_in_another_case_is_scrubbed():
    from goodbench.redact import scrub

    assert (
        scrub("key=SK-PROBE-0123 (lower-cased: sk-probe-0123)", ("sk-Probe-0123",))
        == "key=[redacted] (lower-cased: [redacted])"
    )
