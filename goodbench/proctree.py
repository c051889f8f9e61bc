"""The one owner of goodbench's process tree. Every child goodbench starts (the auto-started engine, a
live sweep's servers, locust's master and workers, --workers processes, sweep pool workers) is started
through here, so that it
- dies with goodbench: on Linux PR_SET_PDEATHSIG sends it SIGTERM when goodbench dies, even by SIGKILL;
- is out of the terminal's reach: commands run in their own session (process group), so a Ctrl-C
  reaches goodbench alone, which forwards it once (`forward`); in-process workers ignore SIGINT and
  take the parent's SIGTERM instead;
- is stopped as a group: a signal goes to the child's whole process group (a server's own children).
SIGTERM to goodbench means what Ctrl-C means (`sigterm_interrupts`): the summary of what finished is
written and the exit code is 130. Stdlib only."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time

EXIT_INTERRUPTED = 130


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """Linux: send this (child) process `sig` when its parent dies, so a killed run leaves nothing."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, int(sig))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def worker_init(parent: int | None = None, press: int | None = None) -> bool:
    """First thing in a forked worker (multiprocessing, a process pool): SIGINT ignored (the parent
    decides; a terminal's Ctrl-C reaches the whole foreground group). Without `press`, SIGTERM stops it
    and it gets SIGTERM when its parent dies. With `press` (a signal the worker handles as one press of
    Ctrl-C), SIGTERM to the group is ignored too: the parent sends `press` once per press it received,
    and the worker gets `press` when its parent dies. False when the parent died before the worker
    could ask to be told."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN if press else signal.SIG_DFL)
    die_with_parent(press or signal.SIGTERM)
    return parent is None or os.getppid() == parent


def pool_init(parent: int) -> None:
    """ProcessPoolExecutor initializer: worker_init, and exit at once when the parent is already gone."""
    if not worker_init(parent):
        os._exit(1)


def spawn(cmd: list[str], cpus: set[int] | None = None, **popen_kw) -> subprocess.Popen:
    """Start a command in its own session that dies with this process (cpus: pin it to these CPUs)."""

    def child_setup():
        if cpus and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, cpus)
        die_with_parent()

    return subprocess.Popen(
        cmd, preexec_fn=child_setup if os.name == "posix" else None, start_new_session=True, **popen_kw
    )


def signal_group(proc: subprocess.Popen, sig: int) -> None:
    """Send sig to proc's process group (its own session: spawn), or to proc alone where there is none."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError, OSError):
        with contextlib.suppress(OSError):
            proc.send_signal(sig)


def kill_leftovers(proc: subprocess.Popen) -> None:
    """After proc (a session leader from spawn) exited: SIGKILL what is left of its process group (the
    children it did not take down with it)."""
    if proc.poll() is not None:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)


def stop(procs, sig: int = signal.SIGINT, grace_s: float = 10.0) -> None:
    """Signal each process group, wait up to grace_s for all of them, then SIGKILL what is left."""
    procs = [p for p in procs if p is not None]
    for p in procs:
        signal_group(p, sig)
    deadline = time.monotonic() + grace_s
    for p in procs:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for p in procs:
        if p.poll() is None:
            signal_group(p, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(5)
        kill_leftovers(p)


@contextlib.contextmanager
def sigterm_interrupts():
    """SIGTERM raises KeyboardInterrupt, as Ctrl-C does (the CLI's exit code 130 for both); SIGXFSZ (a
    file-size limit) becomes an EFBIG error on the write instead of killing the process."""
    old = {}
    for sig, handler in ((signal.SIGTERM, _raise_interrupt), (getattr(signal, "SIGXFSZ", None), signal.SIG_IGN)):
        if sig is None:
            continue
        try:
            old[sig] = signal.signal(sig, handler)
        except (ValueError, OSError):  # not the main thread
            pass
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


@contextlib.contextmanager
def forward(on_signal):
    """Inside: SIGINT and SIGTERM call on_signal(count) (1 on the first, 2 on the second, ...) instead of
    interrupting; the handlers in place before are restored after."""
    presses = [0]

    def handler(signum, frame):
        presses[0] += 1
        on_signal(presses[0])

    old = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            old[sig] = signal.signal(sig, handler)
        except (ValueError, OSError):
            pass
    try:
        yield presses
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)
