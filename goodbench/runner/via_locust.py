"""`goodbench run --via locust`: the same workload driven by locust (one process, or a local master and
N workers) in subprocesses; the locust master writes the results directory and its exit code is the
verdict. This module only starts processes: locust itself is imported by integrations/locust.py alone.

The processes are goodbench's (proctree): each in its own session, dying with goodbench. A Ctrl-C or
SIGTERM reaches the master once, as SIGTERM (locust handles it in its event loop; a SIGINT would raise
KeyboardInterrupt in whichever user happened to run): it stops and writes the summary of what arrived,
marked interrupted; goodbench waits for that, bounded by STOP_GRACE_S, and exits 130."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

from ..errors import UsageError
from ..limits import TARGET_ATTAINMENT
from ..proctree import EXIT_INTERRUPTED, forward, signal_group, spawn, stop
from ..records import format_slo
from ..serverproc import free_port
from ..workloads import WorkloadSpec

STOP_GRACE_S = 30.0  # after a forwarded Ctrl-C, how long the master may take to write its summary
WORKERS_WAIT_S = 120.0  # how long a master waits for its workers to connect before it gives up

LOCUSTFILE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "integrations", "locustfile.py")


@dataclass
class LocustRun:
    base_url: str
    result_dir: str = "results"
    run_id: str = ""
    users: int = 16
    spawn_rate: float = 16.0
    workers: int = 0  # 0: one locust process; N: a master and N workers
    open_loop: bool = False
    min_attainment: float = TARGET_ATTAINMENT
    api_key_env: str = "OPENAI_API_KEY"
    model: str | None = None
    endpoint: str | None = None
    server: dict | None = None  # run.json's server block (api/runs.py asks the target before the load)
    gate: dict | None = None  # the gate the master judges by ([gate] table form, gating.GateSpec.to_table)


def locust_command(spec: WorkloadSpec, r: LocustRun) -> list[str]:
    cmd = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        LOCUSTFILE,
        "--headless",
        "--only-summary",  # locust's tables once at the end, not every 2 s; goodbench's summary comes last
        "-u",
        str(r.users),
        "-r",
        str(r.spawn_rate),
        "--host",
        r.base_url,
        "-t",
        f"{int(spec.duration_s + 60) if spec.duration_s else 86400}s",
        "--goodbench-result-dir",
        r.result_dir,
        "--goodbench-run-id",
        r.run_id,
        "--goodbench-min-attainment",
        str(r.min_attainment),
        "--goodbench-api-key-env",
        r.api_key_env,
    ]
    if spec.slo:
        cmd += ["--goodbench-slo", format_slo(spec.slo)]
    if r.model:
        cmd += ["--goodbench-model", r.model]
    if r.endpoint:
        cmd += ["--goodbench-endpoint", r.endpoint]
    if r.open_loop:
        cmd += ["--goodbench-open-loop"]
    return cmd


def run_locust(spec: WorkloadSpec, r: LocustRun) -> int:
    """The master's exit code; 130 when interrupted (the master's summary of what arrived is written); 2
    when a worker died before the run ended (the master's summary of what arrived is written)."""
    if importlib.util.find_spec("locust") is None or importlib.util.find_spec("httpx") is None:
        raise UsageError("--via locust needs locust and httpx: pip install 'goodbench[locust]'")
    env = dict(os.environ, GOODBENCH_SPEC_JSON=spec.to_json(), GOODBENCH_SERVER_JSON=json.dumps(r.server or {}))
    env["GOODBENCH_GATE_JSON"] = json.dumps(r.gate or {"min_attainment": r.min_attainment})
    cmd = locust_command(spec, r)
    procs: list[subprocess.Popen] = []
    if r.workers > 0:
        port = free_port()
        cmd += ["--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port)]
        cmd += ["--expect-workers", str(r.workers), "--expect-workers-max-wait", str(int(WORKERS_WAIT_S))]
        worker_cmd = [sys.executable, "-m", "locust", "-f", LOCUSTFILE, "--worker"]
        worker_cmd += ["--master-host", "127.0.0.1", "--master-port", str(port)]
    state = {"presses": 0, "sent": 0, "at": 0.0, "lost": None}

    def on_signal(presses: int) -> None:
        state["presses"], state["at"] = presses, state["at"] or time.monotonic()

    try:
        with forward(on_signal):
            procs.append(spawn(cmd, env=env, stdin=subprocess.DEVNULL))
            quiet = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
            procs += [spawn(worker_cmd, env=env, **quiet) for _ in range(r.workers)]
            _watch(procs, state)
    finally:
        stop(procs, signal.SIGTERM, grace_s=10.0)
    if state["presses"]:
        return EXIT_INTERRUPTED
    return 2 if state["lost"] is not None else procs[0].returncode


def _watch(procs: list[subprocess.Popen], state: dict) -> None:
    """Wait for the master. A press is forwarded to it once (it stops and writes). A worker that dies
    before the master (killed, crashed) leaves its share of the plan undone, and locust would wait for it
    until its time limit: the master is stopped the same way, with one line saying why."""
    master, workers = procs[0], procs[1:]
    while master.poll() is None:
        dead = next((w for w in workers if w.poll() not in (None, 0)), None)
        if dead is not None and state["lost"] is None and not state["sent"]:
            state["lost"], state["at"] = dead.returncode, time.monotonic()
            print(
                f"goodbench: a locust worker exited (code {dead.returncode}) before the run ended: "
                "stopping with the records that arrived (the run is incomplete)",
                file=sys.stderr,
            )
        if (state["presses"] or state["lost"] is not None) and not state["sent"]:  # once: it stops and writes
            state["sent"] = 1
            signal_group(master, signal.SIGTERM)
        if state["at"] and time.monotonic() - state["at"] > STOP_GRACE_S:
            break
        try:
            master.wait(0.2)
        except subprocess.TimeoutExpired:
            pass
