"""client/target.py's preflight: a wrong model, endpoint or server refused in one line within 2 s, before
the clock starts; through the command line, from an empty directory, nothing timed is sent."""

import asyncio
import os
import threading
import time

import pytest
from aiohttp import web
from conftest import run_cli

from goodbench.client.config import ClientConfig
from goodbench.client.target import PREFLIGHT_S, preflight
from goodbench.errors import TargetError


class Target:
    """A loopback OpenAI-shaped server in a thread: /v1/models lists `models`, /v1/completions streams
    (or hangs for `hang_s`); chat is absent. It counts the completions requests it gets."""

    def __init__(self, models=("m",), hang_s=0.0, status=200):
        self.models, self.hang_s, self.status, self.posts = models, hang_s, status, 0
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        threading.Thread(target=self._serve, args=(ready,), daemon=True).start()
        ready.wait(10)

    async def _models(self, request):
        return web.json_response({"data": [{"id": m} for m in self.models]})

    async def _completions(self, request):
        await request.read()
        self.posts += 1
        await asyncio.sleep(self.hang_s)
        if self.status != 200:
            return web.json_response({"error": {"message": "bad"}}, status=self.status)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(b'data: {"choices":[{"index":0,"text":"x"}]}\n\ndata: [DONE]\n\n')
        return resp

    async def _embeddings(self, request):
        await request.read()
        return web.json_response({"data": [{"index": 0, "embedding": [0.0]}], "usage": {"prompt_tokens": 1}})

    async def _messages(self, request):
        await request.read()
        if "anthropic-version" not in request.headers:  # as Anthropic's API answers without it
            return web.json_response({"error": {"message": "anthropic-version header is required"}}, status=400)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(b'event: message_stop\ndata: {"type":"message_stop"}\n\n')
        return resp

    def _serve(self, ready):
        asyncio.set_event_loop(self.loop)
        app = web.Application()
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/completions", self._completions)
        app.router.add_post("/v1/embeddings", self._embeddings)
        app.router.add_post("/v1/messages", self._messages)
        runner = web.AppRunner(app)
        self.loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        self.loop.run_until_complete(site.start())
        self.url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"
        ready.set()
        self.loop.run_forever()


@pytest.fixture(scope="module")
def server():
    return Target(models=("served-model", "other"))


def _pre(url, **kw):
    return asyncio.run(preflight(ClientConfig(base_url=url, **kw)))


def test_preflight_takes_the_first_served_model(server):
    assert _pre(server.url, model="") == ("served-model", [])


def test_preflight_refuses_a_model_the_server_does_not_serve(server):
    with pytest.raises(TargetError, match="'nope' is not served .* give --model served-model"):
        _pre(server.url, model="nope")


def test_preflight_refuses_a_missing_endpoint_with_the_fix(server):
    with pytest.raises(TargetError, match="answered 404.*try --endpoint /v1/completions"):
        _pre(server.url, model="", endpoint="/v1/chat/completions")


def test_a_missing_endpoint_of_another_api_is_not_sent_to_chat(server):
    """The fix for a 404 on /v1/responses is not /v1/chat/completions (it was, for every API)."""
    with pytest.raises(TargetError, match=r"has no /v1/responses \(does it speak the responses API\?") as e:
        _pre(server.url, model="", endpoint="/v1/responses")
    assert "chat/completions" not in str(e.value)


def test_preflight_speaks_the_endpoints_api(server):
    """A one-body API answers JSON, not an event stream; Messages needs its own headers."""
    assert _pre(server.url, model="", endpoint="/v1/embeddings") == ("served-model", [])
    assert _pre(server.url, model="", endpoint="/v1/messages") == ("served-model", [])


def test_preflight_says_what_the_server_answered():
    with pytest.raises(TargetError, match="HTTP 400: .*bad"):
        _pre(Target(status=400).url, model="")


def test_preflight_is_bounded_by_its_budget():
    slow = Target(hang_s=30)
    t = time.monotonic()
    model, notes = _pre(slow.url, model="")
    assert time.monotonic() - t < PREFLIGHT_S + 0.5
    assert model == "m" and "no answer within" in notes[0]


def test_preflight_unreachable_is_one_line():
    with pytest.raises(TargetError, match="cannot connect"):
        _pre("http://127.0.0.1:9", model="")


def test_run_with_a_wrong_url_fails_before_the_clock_starts(tmp_path, server):
    """The issue's 46.5 s: a wrong model now fails in the preflight; no timed request, no run directory."""
    before = server.posts
    t = time.monotonic()
    r = run_cli(
        "run", "--base-url", server.url + "/v1/", "--model", "nope", "--num-prompts", "200", "--request-rate", "5",
        cwd=str(tmp_path),
    )  # fmt: skip
    assert r.returncode == 2 and r.stderr.count("\n") <= 2, r.stderr
    assert "give --model served-model" in r.stderr and "read as " + server.url in r.stderr
    assert time.monotonic() - t < 15 and server.posts == before
    assert not os.path.exists(tmp_path / "results")


def test_run_with_a_trailing_v1_goes_to_the_right_endpoint(tmp_path, server):
    r = run_cli(
        "run", "--base-url", server.url + "/v1/", "--num-prompts", "3", "--request-rate", "50", "--quiet",
        cwd=str(tmp_path),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert f"{server.url}/v1/completions model=served-model" in r.stdout


def test_a_base_url_with_user_password_and_a_key_is_one_clear_error(tmp_path, server):
    """Issue 42: both are the Authorization header; aiohttp's ValueError was a traceback (exit 1)."""
    url = server.url.replace("http://", "http://user:pw@")
    r = run_cli(
        "run", "--base-url", url, "--model", "m", "--num-prompts", "2", "--no-history",
        cwd=str(tmp_path), env={"OPENAI_API_KEY": "sk-probe-0123456789"},
    )  # fmt: skip
    assert r.returncode == 2 and "carries user:password and an API key is set" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and "pw@" not in r.stderr and "sk-probe" not in r.stderr


def test_terminal_escapes_from_a_server_never_reach_the_terminal(capsys):
    """Issue 42's probe: a model id or an error text with ESC sequences (clear screen, OSC 52 clipboard)
    was printed raw. A listed id with control characters is no name to send or print; error texts and
    the server's self-description are written out (ESC as \\x1b); labels with them are refused."""
    from goodbench.errors import UsageError
    from goodbench.history.provenance import parse_labels
    from goodbench.redact import scrub

    evil = Target(models=("m\x1b[2J\x1b]52;c;ZXZpbA==\x07", "plain"))
    assert _pre(evil.url, model="") == ("plain", [])
    assert scrub("boom \x1b[2J\x9b") == "boom \\x1b[2J\\x9b"
    with pytest.raises(UsageError, match="control characters"):
        parse_labels(["gpu=h100\x1b]52;c;ZXZpbA==\x07"])


def test_the_preflight_follows_no_redirect_and_says_where_it_pointed():
    """Issue 42's probe: the preflight followed a redirect to another host without saying so (the run's
    own requests never follow one: the API key stays with the base URL)."""
    from aiohttp.test_utils import TestServer

    async def go():
        app = web.Application()

        async def moved(request):
            raise web.HTTPTemporaryRedirect("http://elsewhere.invalid:9/v1/models")

        app.router.add_get("/v1/models", moved)
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        try:
            await preflight(ClientConfig(base_url=f"http://127.0.0.1:{server.port}", model="", api_key="sk-secret-1"))
        finally:
            await server.close()

    with pytest.raises(TargetError, match=r"HTTP 307, a redirect to http://elsewhere.invalid:9/v1/models.*--base-url"):
        asyncio.run(go())
