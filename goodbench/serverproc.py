"""A server in a child process: start a command, wait for /health, stop it gracefully.

Used for the auto-started reference engine and for live sweeps of real servers (`--server-cmd`).
The child gets its own session (a terminal's Ctrl-C reaches only goodbench, which then stops it) and,
on Linux, dies with its parent."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request

from .errors import TargetError


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    """Linux: SIGTERM this (child) process when its parent dies, so a killed run leaves no server."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class ServerProcess:
    def __init__(self, cmd: list[str], port: int, log_path: str, cpus: set[int] | None = None):
        self.port = port
        self.base_url = f"http://127.0.0.1:{port}"
        self.log_path = log_path
        self.log = open(log_path, "wb")

        def child_setup():
            if cpus and hasattr(os, "sched_setaffinity"):
                os.sched_setaffinity(0, cpus)
            _die_with_parent()

        try:
            self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         preexec_fn=child_setup if os.name == "posix" else None,
                                         start_new_session=True)
        except OSError as e:
            self.log.close()
            raise TargetError(f"cannot start {cmd[0]!r}: {e.strerror or e}") from None

    def wait_ready(self, timeout: float = 60.0, path: str = "/health") -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise TargetError(f"the server exited with code {self.proc.returncode}: {self.tail()}")
            try:
                with urllib.request.urlopen(self.base_url + path, timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise TargetError(f"the server did not become healthy within {timeout:.0f}s: {self.tail()}")

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self, n: int = 400) -> str:
        try:
            self.log.flush()
            with open(self.log_path, "rb") as f:
                return f.read()[-n:].decode("utf-8", "replace").strip().replace("\n", " | ")
        except (OSError, ValueError):
            return ""

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGINT, wait, SIGKILL only after the grace period."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if not self.log.closed:
            self.log.close()
