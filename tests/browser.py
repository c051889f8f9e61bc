"""Load a local HTML file in headless Chromium over the DevTools protocol (aiohttp's websocket client)
and report console errors, page exceptions, failed network loads and images that did not decode; then
run scripted steps (JavaScript expressions, e.g. choosing a filter and reading what the page shows)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    env = os.environ.get("GOODBENCH_CHROMIUM")
    if env and os.path.exists(env):
        return env
    for name in CANDIDATES:
        p = shutil.which(name)
        if p:
            return p
    return None


def require_chromium() -> str:
    """Chromium's path. Under CI (.ci/run installs it) a missing browser fails the test; elsewhere it skips,
    saying what to install."""
    import pytest

    chromium = find_chromium()
    if chromium is None:
        looked = f"no Chromium found (looked for {', '.join(CANDIDATES)} and $GOODBENCH_CHROMIUM)"
        if os.environ.get("CI"):
            pytest.fail(looked, pytrace=False)
        pytest.skip(f"{looked}; install Debian's `chromium` package to run the browser check")
    return chromium


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _inspect(ws_url: str, file_url: str, timeout: float, steps=()) -> dict:
    import aiohttp

    out = {
        "console_errors": [],
        "exceptions": [],
        "failed_requests": [],
        "images": None,
        "title": None,
        "network_requests": [],
    }
    async with aiohttp.ClientSession() as s, s.ws_connect(ws_url, max_msg_size=0) as ws:
        ids = iter(range(1, 10_000))
        pending: dict[int, asyncio.Future] = {}
        loaded = asyncio.Event()

        async def reader():
            async for msg in ws:
                m = json.loads(msg.data)
                if "id" in m and m["id"] in pending:
                    pending.pop(m["id"]).set_result(m)
                    continue
                meth, p = m.get("method"), m.get("params", {})
                if meth == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                    out["console_errors"].append(
                        " ".join(str(a.get("value", a.get("description"))) for a in p.get("args", []))
                    )
                elif meth == "Runtime.exceptionThrown":
                    out["exceptions"].append(p.get("exceptionDetails", {}).get("text"))
                elif meth == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                    out["console_errors"].append(p["entry"].get("text"))
                elif meth == "Network.requestWillBeSent":
                    url = p.get("request", {}).get("url", "")
                    if not url.startswith(("data:", "file:")):
                        out["network_requests"].append(url)
                elif meth == "Network.loadingFailed":
                    out["failed_requests"].append(p.get("errorText"))
                elif meth == "Page.loadEventFired":
                    loaded.set()

        task = asyncio.create_task(reader())

        async def call(method, **params):
            i = next(ids)
            fut = asyncio.get_running_loop().create_future()
            pending[i] = fut
            await ws.send_str(json.dumps({"id": i, "method": method, "params": params}))
            return await asyncio.wait_for(fut, timeout)

        for dom in ("Page", "Runtime", "Log", "Network"):
            await call(f"{dom}.enable")
        await call("Page.navigate", url=file_url)
        await asyncio.wait_for(loaded.wait(), timeout)
        expr = (
            "JSON.stringify({title: document.title, text: document.body.innerText, images: Array.from(document.images).map(i => "
            "({alt: i.alt, complete: i.complete, w: i.naturalWidth, h: i.naturalHeight}))})"
        )
        r = await call("Runtime.evaluate", expression=expr, returnByValue=True)
        val = json.loads(r["result"]["result"]["value"])
        out["title"], out["images"], out["text"] = val["title"], val["images"], val["text"]
        out["steps"] = []
        for step in steps:  # each an expression whose value comes back as JSON
            r = await call("Runtime.evaluate", expression=f"JSON.stringify({step})", returnByValue=True)
            res = r["result"]
            if "exceptionDetails" in res:
                out["exceptions"].append(res["exceptionDetails"].get("text"))
                out["steps"].append(None)
            else:
                out["steps"].append(json.loads(res["result"].get("value") or "null"))
        await asyncio.sleep(0.2)  # late console messages
        task.cancel()
    return out


def inspect_page(path: str, chromium: str, timeout: float = 60.0, steps=(), fragment: str = "") -> dict:
    """What the page did on load, and the value of each step (a JavaScript expression) run after it, in
    order. fragment: appended to the URL after '#' (pages that keep their state there)."""
    import urllib.request

    port = _port()
    profile = tempfile.mkdtemp(prefix="gb-chromium-")
    proc = subprocess.Popen(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            f"--user-data-dir={profile}",
            f"--remote-debugging-port={port}",
            "--remote-debugging-address=127.0.0.1",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + timeout
        ws_url = None
        while time.monotonic() < deadline and ws_url is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=2) as r:
                    pages = [t for t in json.load(r) if t.get("type") == "page"]
                    ws_url = pages[0]["webSocketDebuggerUrl"] if pages else None
            except OSError:
                time.sleep(0.2)
        if ws_url is None:
            raise RuntimeError("chromium did not open its DevTools endpoint")
        url = "file://" + os.path.abspath(path) + (f"#{fragment}" if fragment else "")
        return asyncio.run(_inspect(ws_url, url, timeout, steps))
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(profile, ignore_errors=True)
