"""The reference engine as a child process: the one place that builds a `goodbench serve` command line
(from EngineConfig.to_argv) and starts it. The auto-started engine of `goodbench run`, live sweeps and
live rate searches all use it."""

from __future__ import annotations

import os
import sys

from ...errors import TargetError
from ...serverproc import ServerProcess, free_port
from ..config import EngineConfig


def serve_command(
    cfg: EngineConfig, port: int, host: str = "127.0.0.1", cluster=None, lora_modules: tuple = ()
) -> list[str]:
    """`python -m goodbench serve` for cfg on host:port (cluster: an engine.layout.ClusterSpec of
    several instances, or None; lora_modules: the adapter names it serves)."""
    return (
        [sys.executable, "-m", "goodbench", "serve", "--host", host, "--port", str(port)]
        + cfg.to_argv()
        + (cluster.to_argv() if cluster is not None else [])
        + (["--lora-modules", *lora_modules] if lora_modules else [])
    )


def can_pin() -> bool:
    return hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1


def start_engine(
    cfg: EngineConfig, pin: bool = False, timeout: float = 60.0, lora_modules: tuple = ()
) -> ServerProcess:
    """Start the engine on a free loopback port and wait for /health. Its log is an unlinked temporary
    file (nothing is left behind if goodbench is killed; ServerProcess.copy_log keeps it). pin: the
    engine gets CPU 0 and this process the others (call release_cpus after stopping it), so the load
    generator and the engine do not share a core."""
    import tempfile

    port = free_port()
    pin = pin and can_pin()
    fd, log_path = tempfile.mkstemp(prefix="goodbench-engine-", suffix=".log")
    os.close(fd)
    proc = ServerProcess(
        serve_command(cfg, port, lora_modules=lora_modules), port, log_path, cpus={0} if pin else None, anonymous=True
    )
    if pin:
        os.sched_setaffinity(0, set(range(os.cpu_count())) - {0})
    try:
        proc.wait_ready(timeout)
    except TargetError as e:
        if pin:
            release_cpus()
        raise TargetError(f"the reference engine did not start: {e}") from None
    return proc


def release_cpus() -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))
