"""Drive one run on the real clock: workload + arrivals -> schedule -> dispatch -> records on disk.

Open loop: every request leaves at its scheduled time whatever is outstanding (an optional
--max-concurrency cap shows up as schedule lag). Closed loop: N users, each sending its next request
when the previous ends (plus think time). Records go to the sink (a RunDir) as each request ends;
Ctrl-C stops dispatch, gives in-flight requests a grace period, then records them as `cancelled`."""

from __future__ import annotations

import asyncio

import numpy as np

from ..client.config import ClientConfig
from ..client.target import probe_metrics
from ..workloads import Plan
from .dispatch import Progress, RunOptions
from .share import CLIENTS, Share, run_share
from .workers import run_workers

__all__ = ["CLIENTS", "Progress", "RunOptions", "run_plan"]


def run_plan(
    plan: Plan, cfg: ClientConfig, sink, opts: RunOptions, tok, tok_name: str | None, progress: Progress, on_tick=None
) -> bool:
    """Run the plan on the real clock; records go to sink (a RunDir). Returns True if interrupted."""
    n = len(plan.requests)
    scrape = opts.scrape_metrics
    if scrape is None:
        scrape = asyncio.run(probe_metrics(cfg.base_url))
    progress.total = n if not (plan.closed and plan.duration_s) else 0
    if opts.workers <= 1:
        return asyncio.run(
            run_share(
                Share(
                    plan,
                    np.arange(n),
                    plan.arrival.concurrency,
                    cfg,
                    sink,
                    progress,
                    opts,
                    tok=tok,
                    on_tick=on_tick,
                    scrape=scrape,
                )
            )
        )
    return run_workers(plan, cfg, sink, opts, tok_name, progress, on_tick, scrape)
