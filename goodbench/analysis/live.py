"""Live sweeps and live rate probes: each cell against a real server on the real clock, one after
another. The server is the reference engine with the cell's config (and instances), or any command
(`--server-cmd`) with {port} and the cell's knobs filled in; a rate probe runs against it (or against
a server already running) as a real-time run kept as a run directory."""

from __future__ import annotations

import asyncio
import os
import shlex

from ..client.config import ClientConfig, resolve_endpoint
from ..client.target import resolve_model
from ..engine.config import EngineConfig
from ..engine.layout import ClusterSpec
from ..engine.prices import price_table
from ..engine.serve.launch import serve_command
from ..engine.serve.render import REPLICA_HEADER
from ..errors import TargetError, UsageError
from ..records import RunMeta
from ..redact import scrub_url
from ..rundir import RunDir
from ..runner import Progress, RunOptions, run_plan
from ..serverproc import ServerProcess, free_port
from ..store import load
from ..workloads import Plan
from .grid import Cell
from .rates import probe_facts, probe_plan
from .sweep import SweepInterrupted, SweepSetup, cell_meta, config_row, stall_row, start_row, summary_row, verdict_row


def server_command(
    cfg: EngineConfig, port: int, server_cmd: str | None, cluster: ClusterSpec | None = None
) -> list[str]:
    """The cell's server: `server_cmd` with {port}, {gpu}, {model}, every knob and the instances' {router}
    filled in (a router's command: `vllm-router --policy {router} ...`), else the reference engine (with
    the cell's instances: replicas or prefill/decode)."""
    if not server_cmd:
        return serve_command(cfg, port, cluster=cluster)
    fill = {**cfg.to_dict(), **((cluster or ClusterSpec()).to_dict()), "port": port}
    try:
        return shlex.split(server_cmd.format(**fill))
    except (KeyError, IndexError, ValueError) as e:
        raise UsageError(f"--server-cmd: cannot fill the placeholders ({e})") from None


def start_server(
    cfg: EngineConfig, server_cmd: str | None, log_path: str, timeout: float, cluster: ClusterSpec | None = None
) -> ServerProcess:
    port = free_port()
    proc = ServerProcess(server_command(cfg, port, server_cmd, cluster), port, log_path)
    try:
        proc.wait_ready(timeout)
    except BaseException:  # Ctrl-C while it starts: it does not outlive us
        proc.close()
        raise
    return proc


def external_gpu(cell: Cell, server_cmd: str | None) -> str:
    """What a cell's server ran on, as far as goodbench knows: the tier filled into --server-cmd's {gpu},
    else "external" (the command chose its own; the grid's tier is only a default)."""
    return cell.gpu if not server_cmd or "{gpu}" in server_cmd else "external"


def live_cell(s: SweepSetup, cell: Cell, server_cmd: str | None, timeout: float) -> dict:
    """One cell on the real clock: start its server, run the plan, stop the server; its row. A cell
    interrupted by Ctrl-C or SIGTERM is summarised as interrupted, its row has an error (it is not
    ranked), and SweepInterrupted follows (live_cells)."""
    row, cfg = start_row(s, cell)
    gpu = external_gpu(cell, server_cmd)
    if gpu != cell.gpu:
        row.update(gpu=gpu, cell=gpu + cell.label[len(cell.gpu) :])
    if cfg is None:
        return row
    # the GPUs the cell's server runs on: its per-GPU figures and cost (the frontier's axes)
    gpus = {"gpus": {gpu: cfg.tensor_parallel_size}, "prices": price_table(s.prices)}
    rd = RunDir.open(os.path.join(s.out_dir, "cells"), cell_meta(s, cell, None if server_cmd else cfg, "open", **gpus))
    try:
        proc = start_server(cfg, server_cmd, os.path.join(rd.dir, "server.log"), timeout, s.layout(cell))
    except (TargetError, UsageError) as e:
        row["error"] = f"server failed to start: {e}" if isinstance(e, TargetError) else str(e)
        rd.finish(summarized=False)
        return row
    try:
        model = asyncio.run(resolve_model(proc.base_url, None))
        endpoint = resolve_endpoint(None, s.spec.endpoint)
        rd.meta.target = {"base_url": proc.base_url, "endpoint": endpoint, "model": model}
        rd.meta.gpu_telemetry = [scrub_url(g) for g in s.gpu_telemetry] or None
        rd.meta.interrupted = run_plan(
            s.plan,
            # a goodbench server (serve, fleet) names the replica of every reply: read where sent
            ClientConfig(base_url=proc.base_url, endpoint=endpoint, model=model, replica_header=REPLICA_HEADER),
            rd,
            RunOptions(slo=s.slo, gpu_telemetry=s.gpu_telemetry),
            None,
            None,
            Progress(),
        )
        died = not proc.alive
    finally:
        proc.stop()
    summary = rd.finish(ci=False)
    if died:
        row["error"] = f"server died during the run: {proc.tail()}"
    proc.close()
    row.update(summary_row(summary))
    row.update(stall_row(load(rd.dir)))
    row.update(verdict_row(summary, s.target))
    row.update(config_row(cfg, rd.dir))
    row["gpus"] = cfg.tensor_parallel_size  # one server per cell (the frontier's per-GPU figures)
    if rd.meta.interrupted:
        issued = summary["requests"]["issued"]
        row["error"] = f"interrupted after {issued} of {len(s.plan.requests)} requests (not ranked)"
        row["interrupted"] = True
    return row


def live_cells(
    s: SweepSetup, server_cmd: str | None = None, startup_timeout: float = 600.0, on_done=None
) -> list[dict]:
    """Cells in turn: start the server, wait for /health, run the workload, stop it (SIGINT, then SIGKILL
    after a grace). A server that fails to start or dies makes a failed row with its log tail."""
    rows = []
    try:
        for cell in s.cells:
            rows.append(live_cell(s, cell, server_cmd, startup_timeout))
            if on_done:
                on_done(rows[-1])
            if rows[-1].get("interrupted"):
                raise KeyboardInterrupt
    except KeyboardInterrupt:
        raise SweepInterrupted(rows) from None
    return rows


def live_rate_evaluator(
    base_url: str,
    plan: Plan,
    slo: dict,
    seed: int,
    out_dir: str,
    endpoint: str = "/v1/completions",
    model: str | None = None,
    api_key: str | None = None,
):
    """evaluate(rate, scale) for maxrate.find_max_rate against a running endpoint: each probe is a
    real-time run of the plan's requests at that rate, kept as a run directory under out_dir."""
    name = model or asyncio.run(resolve_model(base_url, api_key))
    ccfg = ClientConfig(base_url=base_url, endpoint=endpoint, model=name, api_key=api_key)

    runs: list[float] = []

    def evaluate(rate: float, scale: int = 1):
        probe, rates = probe_plan(plan, rate, scale, seed)
        runs.append(rate)  # numbered: a confirmation may probe a rate and length probed before
        run_id = f"probe-{len(runs):02d}-{rate:.4f}" + (f"-x{scale}" if scale > 1 else "")
        rd = RunDir.open(
            out_dir,
            RunMeta(
                run_id=run_id,
                label=probe.arrival.label,
                slo=slo,
                mode="open",
                requested_rate=rates["nominal_rate"],
                target={"base_url": base_url, "endpoint": endpoint, "model": name},
            ),
        )
        # a probe the server clearly cannot keep up with stops early; it is scored on what it sent (the
        # requests cut short by the stop count as missed), and says it stopped
        prog = Progress()
        run_plan(
            probe,
            ccfg,
            rd,
            RunOptions(slo=slo, scrape_metrics=False, stop_when_saturated=True, grace_s=1.0),
            None,
            None,
            prog,
        )
        met, issued, facts = probe_facts(rd.finish(ci=False), rates)
        return met, issued, facts | {"stopped_early": prog.stopped_early, "planned": len(probe.requests)}

    return evaluate
