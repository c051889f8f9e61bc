"""A router in front of engine workers on loopback, for checking a live fleet against the simulated one:
`goodbench serve` workers (each naming itself in x-goodbench-replica and reporting cached prompt tokens
in its usage, as vLLM with --enable-prompt-tokens-details) behind vllm-router (PyPI, a Rust binary),
and the workers' prefix-cache hit counters read before and after a run."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import urllib.request
from contextlib import ExitStack

from ..engine.config import EngineConfig
from ..engine.serve.launch import serve_command
from ..errors import TargetError
from ..prometheus import parse, total
from ..serverproc import ServerProcess, free_port

HITS = "vllm:prefix_cache_hits_total"


def router_binary() -> str | None:
    """vllm-router's launcher: on PATH, or beside this Python (a virtual environment's bin/)."""
    here = os.path.join(os.path.dirname(sys.executable), "vllm-router")
    return shutil.which("vllm-router") or (here if os.access(here, os.X_OK) else None)


def prefix_hits(base_url: str) -> float:
    """A worker's vllm:prefix_cache_hits_total now (summed over its series)."""
    with urllib.request.urlopen(base_url + "/metrics", timeout=5) as r:
        v = total(parse(r.read().decode()), HITS)
    if v is None:
        raise TargetError(f"{base_url}/metrics has no {HITS}")
    return v


def router_process(urls: list[str], policy: str, log_dir: str, port: int | None = None) -> ServerProcess:
    """`vllm-router --policy POLICY --worker-urls ...` on loopback (started, not yet waited for)."""
    binary = router_binary()
    if binary is None:
        raise TargetError("vllm-router is not installed (pip install vllm-router)")
    port = port or free_port()
    cmd = [binary, "--host", "127.0.0.1", "--port", str(port), "--policy", policy, "--worker-urls", *urls]
    cmd += ["--prometheus-port", str(free_port()), "--log-level", "warning"]  # its own, not 29000
    return ServerProcess(cmd, port, os.path.join(log_dir, f"router-{policy}.log"))


class RouterFleet:
    """n `goodbench serve` workers (cfg, prefix caching on) behind `vllm-router --policy POLICY`; a
    context manager whose base_url is the router's. Logs go to log_dir (a temporary folder by default)."""

    def __init__(
        self,
        cfg: EngineConfig,
        policy: str,
        n: int = 2,
        log_dir: str | None = None,
        timeout: float = 60.0,
        port: int | None = None,
    ):
        self.cfg, self.policy, self.n, self.timeout, self.port = cfg, policy, n, timeout, port
        self.log_dir = log_dir or tempfile.mkdtemp(prefix="goodbench-fleet-")
        self.workers: list[ServerProcess] = []
        self.router: ServerProcess | None = None
        self._stack = ExitStack()

    def __enter__(self) -> RouterFleet:
        if router_binary() is None:  # before any worker starts
            raise TargetError("vllm-router is not installed (pip install vllm-router)")
        try:
            for i in range(self.n):
                port = free_port()
                cmd = serve_command(self.cfg, port) + ["--enable-prompt-tokens-details", "--replica-name", f"w{i}"]
                self.workers.append(self._start(cmd, port, f"worker{i}.log"))
            self.router = router_process([w.base_url for w in self.workers], self.policy, self.log_dir, self.port)
            self._stack.callback(_stop, self.router)
            self.router.wait_ready(self.timeout)
        except BaseException:
            self._stack.close()
            raise
        return self

    def _start(self, cmd: list[str], port: int, log: str) -> ServerProcess:
        proc = ServerProcess(cmd, port, os.path.join(self.log_dir, log))
        self._stack.callback(_stop, proc)
        proc.wait_ready(self.timeout)
        return proc

    def __exit__(self, *exc) -> None:
        self._stack.close()

    @property
    def base_url(self) -> str:
        return self.router.base_url

    @property
    def names(self) -> tuple[str, ...]:
        """The workers' replica names, as their x-goodbench-replica header says them (`goodbench run --replicas`)."""
        return tuple(f"w{i}" for i in range(len(self.workers)))

    @property
    def worker_metrics(self) -> tuple[str, ...]:
        """Each worker as `goodbench run --worker-metrics` takes it: NAME=URL."""
        return tuple(f"{name}={w.base_url}" for name, w in zip(self.names, self.workers))

    def hits(self) -> dict[str, float]:
        """Each worker's prefix-cache hit counter (by its replica name)."""
        return dict(zip(self.names, (prefix_hits(w.base_url) for w in self.workers)))


def _stop(proc: ServerProcess) -> None:
    proc.stop()
    proc.close()
