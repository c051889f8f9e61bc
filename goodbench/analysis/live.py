"""Live sweeps: each cell against a real server on the real clock, one after another. The server is
the reference engine with the cell's config, or any command (`--server-cmd`) with {port} and the
cell's knobs filled in."""

from __future__ import annotations

import asyncio
import os
import shlex

from ..client.openai import ClientConfig, resolve_endpoint
from ..client.target import resolve_model
from ..engine.config import EngineConfig
from ..engine.launch import serve_command
from ..errors import TargetError, UsageError
from ..rundir import RunDir
from ..runner import Progress, RunOptions, run_plan
from ..serverproc import ServerProcess, free_port
from .grid import Cell, layout_spec
from .sweep import SweepSetup, cell_meta, config_row, start_row, summary_row, write_results


def server_command(cfg: EngineConfig, port: int, server_cmd: str | None, cluster=None) -> list[str]:
    """The cell's server: `server_cmd` with {port}, {gpu}, {model} and every knob filled in, else the
    reference engine (with the cell's instances: replicas or prefill/decode)."""
    if not server_cmd:
        return serve_command(cfg, port, cluster=cluster)
    try:
        return shlex.split(server_cmd.format(**{**cfg.to_dict(), "port": port}))
    except (KeyError, IndexError, ValueError) as e:
        raise UsageError(f"--server-cmd: cannot fill the placeholders ({e})") from None


def start_server(cfg: EngineConfig, server_cmd: str | None, log_path: str, timeout: float,
                 cluster=None) -> ServerProcess:
    port = free_port()
    proc = ServerProcess(server_command(cfg, port, server_cmd, cluster), port, log_path)
    proc.wait_ready(timeout)
    return proc


def _live_cell(s: SweepSetup, cell: Cell, server_cmd: str | None, timeout: float) -> dict:
    row, cfg = start_row(s, cell)
    if cfg is None:
        return row
    rd = RunDir.open(os.path.join(s.out_dir, "cells"), cell_meta(s, cell, None if server_cmd else cfg, "open"))
    try:
        proc = start_server(cfg, server_cmd, os.path.join(rd.dir, "server.log"), timeout,
                            layout_spec(cell.layout, s.cluster))
    except (TargetError, UsageError) as e:
        row["error"] = f"server failed to start: {e}" if isinstance(e, TargetError) else str(e)
        rd.finish(summarized=False)
        return row
    try:
        model = asyncio.run(resolve_model(proc.base_url, None))
        endpoint = resolve_endpoint(None, s.meta.get("endpoint", "completions"))
        rd.meta.target = {"base_url": proc.base_url, "endpoint": endpoint, "model": model}
        run_plan(s.plan, ClientConfig(base_url=proc.base_url, endpoint=endpoint, model=model), rd,
                 RunOptions(slo=s.slo), None, None, Progress())
        died = not proc.alive
    finally:
        proc.stop()
    summary = rd.finish(slo=s.slo, ci=False)
    if died:
        row["error"] = f"server died during the run: {proc.tail()}"
    proc.close()
    row.update(summary_row(summary))
    row.update(config_row(cfg, rd.dir))
    return row


def run_live_sweep(s: SweepSetup, server_cmd: str | None = None, startup_timeout: float = 600.0,
                   on_done=None) -> list[dict]:
    """Cells in turn: start the server, wait for /health, run the workload, stop it (SIGINT, then SIGKILL
    after a grace). A server that fails to start or dies makes a failed row with its log tail."""
    os.makedirs(s.out_dir, exist_ok=True)
    rows = []
    for cell in s.cells:
        rows.append(_live_cell(s, cell, server_cmd, startup_timeout))
        if on_done:
            on_done(rows[-1])
    write_results(rows, s.out_dir, s.meta)
    return rows
