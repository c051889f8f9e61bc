import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="session", autouse=True)
def _session_history(tmp_path_factory):
    """Runs made by module- and session-scoped fixtures index into the session's catalogue, never the user's."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GOODBENCH_HISTORY_DB", str(tmp_path_factory.getbasetemp() / "history-session.sqlite"))
        yield


@pytest.fixture(autouse=True)
def _cache_dir(tmp_path_factory, monkeypatch):
    # keep the ShareGPT length cache out of the user's home during tests (shared across the session),
    # and give each test its own history catalogue (runs index themselves as they finish)
    monkeypatch.setenv("GOODBENCH_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))
    monkeypatch.setenv("GOODBENCH_HISTORY_DB", str(tmp_path_factory.mktemp("history") / "history.sqlite"))


@pytest.fixture(scope="session")
def tok():
    from goodbench import tokenizer

    return tokenizer.load()


def drive(srv, fn):
    """Serve an engine server's app on a loopback port and run `await fn(session, srv)` against it."""
    import asyncio

    import aiohttp
    from aiohttp.test_utils import TestServer

    from goodbench.engine.serve.server import RUNNER_OPTIONS

    async def go():
        server = TestServer(srv.app(), host="127.0.0.1", **RUNNER_OPTIONS)
        await server.start_server()
        try:
            async with aiohttp.ClientSession(f"http://127.0.0.1:{server.port}") as s:
                return await fn(s, srv)
        finally:
            await server.close()

    return asyncio.run(go())


def reference_engine(step_ms: float = 5.0):
    """`goodbench serve` on a free loopback port with fixed steps, in a subprocess (a fixture's body:
    yields its base URL, stops it afterwards)."""
    import socket
    import subprocess
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = subprocess.Popen(
        [sys.executable, "-m", "goodbench", "serve", "--port", str(port), "--fixed-step-ms", str(step_ms)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            urllib.request.urlopen(url + "/health", timeout=0.5)
            break
        except OSError:
            time.sleep(0.1)
    yield url
    p.terminate()
    p.wait(10)


def require_router() -> None:
    """vllm-router (the dev extra installs it). Under CI a missing router fails the test, as a missing
    Chromium does (tests/browser.py); elsewhere it skips, saying what to install."""
    import pytest

    from goodbench.analysis.fleet import router_binary

    if router_binary() is None:
        why = "vllm-router is not installed (pip install -e '.[dev]' or 'goodbench[router]')"
        if os.environ.get("CI"):
            pytest.fail(why, pytrace=False)
        pytest.skip(why)


def run_cli(*args, cwd=None, timeout=120, env=None):
    """Run the goodbench CLI in a subprocess (what a user types)."""
    import subprocess

    e = dict(os.environ)
    e.update(env or {})
    e.setdefault("GOODBENCH_CACHE_DIR", os.path.join(cwd or ROOT, ".cache-test"))
    return subprocess.run(
        [sys.executable, "-m", "goodbench", *args],
        capture_output=True,
        text=True,
        cwd=cwd or ROOT,
        timeout=timeout,
        env=e,
    )


# Fuzz tests (tests/test_fuzz.py) run a bounded number of examples in CI; for a long local run:
#   GOODBENCH_FUZZ=long python -m pytest -q tests/test_fuzz.py      (docs/reliability.md)
from hypothesis import settings  # noqa: E402

settings.register_profile("fuzz", max_examples=60, deadline=None)
settings.register_profile("fuzz-long", max_examples=5000, deadline=None)
FUZZ = settings.get_profile("fuzz-long" if os.environ.get("GOODBENCH_FUZZ") == "long" else "fuzz")


# The real_vllm tests are deselected by default (pyproject addopts); say so at the end of every session
# that left them out, so that nothing is skipped silently.
_DESELECTED_REAL_VLLM = []


def pytest_deselected(items):
    _DESELECTED_REAL_VLLM.extend(i for i in items if i.get_closest_marker("real_vllm"))


def pytest_terminal_summary(terminalreporter):
    if _DESELECTED_REAL_VLLM:
        terminalreporter.write_line(
            f"note: {len(_DESELECTED_REAL_VLLM)} real_vllm tests deselected (they need vLLM): "
            "bash ci/real_vllm/setup.sh && python -m pytest -q -m real_vllm (docs/real-vllm.md)"
        )
