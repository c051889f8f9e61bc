"""A real `vllm serve` (CPU, the tiny random-weight Llama) on a loopback port, for the tests marked
`real_vllm`. ci/real_vllm/setup.sh installs both pieces; when they are missing the tests fail (they
are deselected unless asked for, so asking for them without vLLM is an error, not a skip)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest
from conftest import ROOT

_CACHE = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "goodbench")
VENV = os.environ.get("GOODBENCH_VLLM_VENV") or os.path.join(_CACHE, "vllm-venv")
MODEL = os.environ.get("GOODBENCH_VLLM_MODEL") or os.path.join(_CACHE, "tiny-llama")
# the tiny Qwen2-VL (ci/real_vllm/tiny_vlm.py) and the torchvision vLLM needs to load it, kept apart from the venv
VLM = os.environ.get("GOODBENCH_VLLM_VLM") or os.path.join(os.path.dirname(MODEL), "tiny-qwen2-vl")
TORCHVISION = os.environ.get("GOODBENCH_VLLM_TORCHVISION") or os.path.join(os.path.dirname(VENV), "vllm-torchvision")
CHAT_TEMPLATE = os.path.join(ROOT, "ci", "real_vllm", "chatml.jinja")
SERVED_NAME = "tiny-llama"
STARTUP_DEADLINE_S = 240.0  # ~45 s alone with --enforce-eager; more while the machine is busy
ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_CPU_KVCACHE_SPACE": "2",
    "VLLM_TARGET_DEVICE": "cpu",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}


def require_installed(vlm: bool = False) -> None:
    need = [
        os.path.join(VENV, ".goodbench-stamp"),
        os.path.join(VENV, "bin", "vllm"),
        os.path.join(MODEL, ".goodbench-stamp"),
    ]
    if vlm:
        need += [os.path.join(VLM, ".goodbench-stamp"), os.path.join(TORCHVISION, ".goodbench-stamp")]
    missing = [p for p in need if not os.path.exists(p)]
    if missing:
        pytest.fail(
            f"real_vllm tests need vLLM and the tiny model: run `bash ci/real_vllm/setup.sh` "
            f"(missing: {', '.join(missing)})",
            pytrace=False,
        )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class VllmServer:
    """One `vllm serve` child in its own process group (vLLM forks an engine-core process)."""

    def __init__(
        self, log_dir: str, chunked_budget: int | None, extra: tuple = (), tag: str = "", env=None, vlm: bool = False
    ):
        self.env = dict(env or {})  # more environment for the child (a worker's name, its CPU)
        self.vlm = vlm  # serve the tiny Qwen2-VL (its own chat template; torchvision on the path) instead
        if vlm:
            self.env["PYTHONPATH"] = TORCHVISION
        self.chunked_budget = chunked_budget  # None: chunked prefill off (budget = max_model_len)
        self.extra = tuple(extra)  # more `vllm serve` flags (tool-call parser, a pooling runner)
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.log_path = os.path.join(log_dir, f"vllm-{tag or chunked_budget or 'unchunked'}.log")
        self.proc: subprocess.Popen | None = None
        self.warms = 0

    def argv(self) -> list[str]:
        chunk = (
            ["--enable-chunked-prefill", "--max-num-batched-tokens", str(self.chunked_budget)]
            if self.chunked_budget
            else ["--no-enable-chunked-prefill", "--max-num-batched-tokens", "8192"]
        )
        return [
            os.path.join(VENV, "bin", "vllm"),
            "serve",
            VLM if self.vlm else MODEL,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--served-model-name",
            SERVED_NAME,
            "--max-model-len",
            "8192",
            "--max-num-seqs",
            "16",
            "--dtype",
            "float32",
            "--enforce-eager",
            *([] if self.vlm else ["--chat-template", CHAT_TEMPLATE]),  # the VLM's own: ChatML with image parts
            *chunk,
            *self.extra,
        ]

    def start(self) -> VllmServer:
        self.spawn()
        self._wait_healthy()
        return self

    def spawn(self) -> VllmServer:
        """Start the child without waiting for it (several workers start side by side; then wait_healthy)."""
        require_installed(self.vlm)
        env = dict(os.environ, **ENV, **self.env)
        env.pop("VIRTUAL_ENV", None)
        env["PATH"] = os.path.join(VENV, "bin") + os.pathsep + env.get("PATH", "")
        log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            self.argv(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True
        )
        log.close()
        return self

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + STARTUP_DEADLINE_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.stop()
                pytest.fail(
                    f"vllm serve exited with {self.proc.returncode} while starting:\n{self.log_tail()}", pytrace=False
                )
            try:
                with urllib.request.urlopen(self.base_url + "/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.5)
        self.stop()
        pytest.fail(f"vllm serve not healthy after {STARTUP_DEADLINE_S:.0f} s:\n{self.log_tail()}", pytrace=False)

    def warm(self, prompt_tokens: int) -> float:
        """One completion of a prompt this long, one token out, before a timed run: a fresh server's first
        long prefill pays one-time costs (a CI run measured 6.7 s for a 4,096-token prefill that takes 4
        s warm), which moves when a test's later requests find it busy. Returns its seconds (on a warm
        server: what such a prefill takes on this machine, 0.9 s on one 2-core machine, 4 s on another)."""
        self.warms += 1  # a prompt of its own each time: a repeated one is a prefix-cache hit, no prefill
        prompt = [100 + self.warms] + [100] * (prompt_tokens - 1)
        body = json.dumps({"model": SERVED_NAME, "prompt": prompt, "max_tokens": 1}).encode()
        req = urllib.request.Request(
            self.base_url + "/v1/completions", data=body, headers={"Content-Type": "application/json"}
        )
        t = time.monotonic()
        with urllib.request.urlopen(req, timeout=120) as r:
            r.read()
        return time.monotonic() - t

    def log_tail(self, n: int = 30) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        """SIGTERM to the group (vLLM stops in 2-3 s), SIGKILL whatever is left after 30 s."""
        if self.proc is None:
            return
        pgid = self.proc.pid
        _signal_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (self.proc.poll() is None or _group_alive(pgid)):
            time.sleep(0.2)
        if self.proc.poll() is None or _group_alive(pgid):
            _signal_group(pgid, signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None


def _signal_group(pgid: int, sig) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
