"""Where a sweep's cells run, as a value chosen once (by the CLI or the caller) instead of flags
threaded through every layer:

    Simulated(jobs)                     the reference engine in virtual time, cells in parallel processes
    Live(server_cmd, startup_timeout_s) a real server per cell on the real clock: the reference engine
                                        with the cell's config, or `server_cmd` with its knobs filled in
    External(base_url)                  a server already running (rate searches only)

Each runs a sweep's cells (run_cells) and gives a rate evaluator per cell for the max-rate search
(evaluator: a context manager, so a live server started for a search is stopped after it)."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

from ..client.config import resolve_endpoint
from ..errors import UsageError
from . import live, simcells
from .grid import Cell, cell_config
from .rates import rate_evaluator
from .sweep import SweepSetup


@dataclass(frozen=True)
class Simulated:
    jobs: int = 0  # parallel processes (0: one per CPU)
    slo_scales: tuple = ()  # also report attainment with the SLO scaled by each of these
    keep_summaries: bool = False  # rows carry their cell's whole summary (advise's check)

    live = False

    def run_cells(self, s: SweepSetup, on_done=None) -> list[dict]:
        return simcells.run_cells(s, self.jobs, on_done, self.slo_scales, self.keep_summaries)

    @contextlib.contextmanager
    def evaluator(self, s: SweepSetup, cell: Cell, probes_dir: str):
        yield rate_evaluator(cell_config(s.base, cell), s.plan, s.slo, s.spec.seed, s.layout(cell))


@dataclass(frozen=True)
class Live:
    server_cmd: str | None = None  # None: `goodbench serve` with each cell's config
    startup_timeout_s: float = 600.0

    live = True

    def run_cells(self, s: SweepSetup, on_done=None) -> list[dict]:
        return live.live_cells(s, self.server_cmd, self.startup_timeout_s, on_done)

    @contextlib.contextmanager
    def evaluator(self, s: SweepSetup, cell: Cell, probes_dir: str):
        os.makedirs(probes_dir, exist_ok=True)
        proc = live.start_server(
            cell_config(s.base, cell),
            self.server_cmd,
            os.path.join(probes_dir, "server.log"),
            self.startup_timeout_s,
            s.layout(cell),
        )
        try:
            yield live.live_rate_evaluator(
                proc.base_url, s.plan, s.slo, s.spec.seed, probes_dir, resolve_endpoint(None, s.spec.endpoint)
            )
        finally:
            proc.close()


@dataclass(frozen=True)
class External:
    base_url: str
    api_key: str | None = None
    endpoint: str | None = None  # from a pasted endpoint URL (client.config.normalize_base_url); else the workload's

    live = True

    def run_cells(self, s: SweepSetup, on_done=None) -> list[dict]:
        raise UsageError(
            "--base-url searches a running server's max rate (--find-max-rate); a grid of engine "
            "knobs needs servers it can start (--live or --server-cmd)"
        )

    @contextlib.contextmanager
    def evaluator(self, s: SweepSetup, cell: Cell | None, probes_dir: str):
        yield live.live_rate_evaluator(
            self.base_url,
            s.plan,
            s.slo,
            s.spec.seed,
            probes_dir,
            resolve_endpoint(self.endpoint, s.spec.endpoint),
            api_key=self.api_key,
        )


def backend_for(
    *,
    live: bool = False,
    server_cmd: str | None = None,
    startup_timeout_s: float = 600.0,
    base_url: str | None = None,
    jobs: int = 0,
    slo_scales=(),
    api_key: str | None = None,
):
    """The backend a command line asks for (a base URL normalised as `run`'s: client.config, the
    endpoint a pasted endpoint URL names kept)."""
    if base_url:
        from ..client.config import normalize_base_url
        from ..errors import warn

        base_url, endpoint, notes = normalize_base_url(base_url, None)
        for note in notes:
            warn(note)
        return External(base_url, api_key, endpoint)
    if live or server_cmd:
        return Live(server_cmd, startup_timeout_s)
    return Simulated(jobs, tuple(slo_scales))
