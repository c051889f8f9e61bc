"""The owner of goodbench's child processes (proctree.py): death with the parent, signals forwarded once,
SIGTERM as Ctrl-C. The whole matrix through the CLI: test_signals.py."""

import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import ROOT

from goodbench.proctree import forward, sigterm_interrupts, spawn, stop


def test_a_spawned_child_dies_with_its_parent_even_by_sigkill(tmp_path):
    pidfile = tmp_path / "child"
    code = (
        "import sys, time; sys.path.insert(0, sys.argv[1]); from goodbench.proctree import spawn; "
        f"p = spawn([sys.executable, '-c', 'import time; time.sleep(60)']); open({str(pidfile)!r}, 'w').write(str(p.pid)); "
        "time.sleep(60)"
    )
    parent = subprocess.Popen([sys.executable, "-c", code, ROOT])
    deadline = time.monotonic() + 20
    while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    child = int(pidfile.read_text())
    assert os.getpgid(child) == child  # its own session: a terminal's Ctrl-C does not reach it
    parent.kill()
    parent.wait(10)
    for _ in range(100):
        try:
            with open(f"/proc/{child}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
        except OSError:
            break
        time.sleep(0.05)
    else:
        raise AssertionError("the child outlived its SIGKILLed parent")


def test_presses_are_counted_and_the_old_handlers_come_back():
    seen = []
    before = signal.getsignal(signal.SIGINT)
    with forward(seen.append) as presses:
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
    assert seen == [1, 2] and presses == [2] and signal.getsignal(signal.SIGINT) is before


def test_sigterm_is_a_ctrl_c():
    with pytest.raises(KeyboardInterrupt), sigterm_interrupts():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(1)


def test_stop_kills_what_does_not_stop_in_time():
    p = spawn(
        [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); time.sleep(60)"]
    )
    time.sleep(0.3)
    t = time.monotonic()
    stop([p], signal.SIGINT, grace_s=0.5)
    assert p.returncode == -signal.SIGKILL and time.monotonic() - t < 5
