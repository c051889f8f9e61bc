"""`goodbench run --via locust`: the same workload driven by locust (one process, or a local master and
N workers) in subprocesses; the locust master writes the results directory and its exit code is the
verdict. This module only starts processes: locust itself is imported by integrations/locust.py alone."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from dataclasses import dataclass

from ..errors import UsageError
from ..limits import TARGET_ATTAINMENT
from ..records import format_slo
from ..serverproc import free_port
from ..workloads import WorkloadSpec

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
    if importlib.util.find_spec("locust") is None or importlib.util.find_spec("httpx") is None:
        raise UsageError("--via locust needs locust and httpx: pip install 'goodbench[locust]'")
    env = dict(os.environ, GOODBENCH_SPEC_JSON=spec.to_json())
    cmd = locust_command(spec, r)
    workers = []
    try:
        if r.workers > 0:
            port = free_port()
            cmd += [
                "--master",
                "--master-bind-host",
                "127.0.0.1",
                "--master-bind-port",
                str(port),
                "--expect-workers",
                str(r.workers),
            ]
            worker_cmd = [
                sys.executable,
                "-m",
                "locust",
                "-f",
                LOCUSTFILE,
                "--worker",
                "--master-host",
                "127.0.0.1",
                "--master-port",
                str(port),
            ]
            workers = [
                subprocess.Popen(worker_cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                for _ in range(r.workers)
            ]
        return subprocess.run(cmd, env=env).returncode
    finally:
        for w in workers:
            try:
                w.wait(15)
            except subprocess.TimeoutExpired:
                w.kill()
