"""A server in a child process: start a command, wait for /health, stop it gracefully.

Used for the auto-started reference engine and for live sweeps of real servers (`--server-cmd`).
Started through proctree: its own session (a terminal's Ctrl-C reaches only goodbench, which then stops
it, with whatever children it started) and, on Linux, death with its parent."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request

from .errors import TargetError
from .proctree import kill_leftovers, signal_group, spawn


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """log_path: where the child's output goes. anonymous=True unlinks it once the child has it open,
    so that nothing is left behind if this process is killed; copy_log() keeps it where it is wanted."""

    def __init__(self, cmd: list[str], port: int, log_path: str, cpus: set[int] | None = None, anonymous: bool = False):
        self.port = port
        self.base_url = f"http://127.0.0.1:{port}"
        self.log_path = log_path
        self.log = open(log_path, "w+b")

        try:
            self.proc = spawn(cmd, cpus, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        except OSError as e:
            self.log.close()
            raise TargetError(f"cannot start {cmd[0]!r}: {e.strerror or e}") from None
        finally:
            if anonymous:
                os.unlink(log_path)

    def wait_ready(self, timeout: float = 60.0, path: str = "/health") -> None:
        """Wait for a 200 from path; on failure the child is stopped, its log released, and the
        TargetError carries the log's tail."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                why = f"the server exited with code {self.proc.returncode}: {self.tail()}"
                self.close()
                raise TargetError(why)
            try:
                with urllib.request.urlopen(self.base_url + path, timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        self.stop()
        why = f"the server did not become healthy within {timeout:.0f}s: {self.tail()}"
        self.close()
        raise TargetError(why)

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def _read(self) -> bytes:
        self.log.flush()
        return os.pread(self.log.fileno(), os.fstat(self.log.fileno()).st_size, 0)

    def tail(self, n: int = 400) -> str:
        try:
            return self._read()[-n:].decode("utf-8", "replace").strip().replace("\n", " | ")
        except (OSError, ValueError):
            return ""

    def copy_log(self, path: str) -> None:
        """Write everything the child printed to path (works for an anonymous log too)."""
        with open(path, "wb") as f:
            f.write(self._read())

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGINT to its process group, wait, SIGKILL only after the grace period."""
        if self.proc.poll() is None:
            signal_group(self.proc, signal.SIGINT)
            try:
                self.proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                signal_group(self.proc, signal.SIGKILL)
                self.proc.wait()
        kill_leftovers(self.proc)

    def close(self) -> None:
        """Stop the child and release its log."""
        self.stop()
        if not self.log.closed:
            self.log.close()
