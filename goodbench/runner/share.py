"""One event loop's share of a run: its client, its requests (or users), the clock origin, the scraper
of the server's metrics, the progress tick and Ctrl-C. `goodbench run` has one share; --workers N
gives each worker process one (workers.py)."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..client.aiohttp_client import AiohttpClient
from ..client.config import ClientConfig
from ..client.lag import loop_probe
from ..client.lean import LeanClient
from ..gcquiet import quiet_gc, watchdog as gc_watchdog
from ..metrics.saturation import GROWTH, MIN_GROWTH, MIN_SENT, overdue
from ..workloads import Plan
from .dispatch import Dispatch, Progress, RunOptions
from .scrape import read_round, sample_loop, sample_now, scrape_loop
from .telemetry import FILE as TELEMETRY_FILE, samplers
from .workermetrics import FILE as WORKERS_FILE, INTERVAL_S as WORKER_INTERVAL_S, KEEP

CLIENTS = {"lean": LeanClient, "aiohttp": AiohttpClient}


@dataclass
class Share:
    """One event loop's part of a run: the requests at positions idx of the plan (all of them in a
    single process), or `users` of a closed loop."""

    plan: Plan
    idx: np.ndarray
    users: int
    cfg: ClientConfig
    sink: object  # where finished records go: .append(record); .dir for server_metrics.jsonl
    progress: Progress
    opts: RunOptions
    t0: float = -1.0  # the clock origin (monotonic); < 0: set once set-up is done
    tok: object = None
    on_tick: Callable | None = None
    scrape: bool = False
    stop_signals: tuple = (signal.SIGINT, signal.SIGTERM)  # a --workers process: the parent's PRESS alone
    announce: bool = True  # say on stderr that Ctrl-C was heard (a worker process leaves it to its parent)
    lead: bool = True  # the share that samples GPU telemetry and the workers' counters (the first, with --workers)


async def _ticker(d: Dispatch, on_tick) -> None:
    """Every half second: count what finished against the SLO, then the progress display's tick."""
    while True:
        while d.judge():  # a batch at a time, the loop between batches
            await asyncio.sleep(0)
        if on_tick is not None:
            on_tick()
        await asyncio.sleep(0.5)


async def _watch_saturation(d: Dispatch, p: Progress, every: float = 0.5, min_s: float = 3.0) -> None:
    """Stop dispatch once more requests are overdue (in flight past the end their planned tokens and
    the service times so far predict: metrics.saturation.overdue) and that count has grown faster than
    GROWTH of the send rate over the last half of the run so far. A backlog that only fills up to rate x
    service time (long requests at a rate the server carries) is predicted, so it never stops a probe."""
    ts, late, sent = [], [], []
    while not d.stop.is_set():
        await asyncio.sleep(every)
        now = time.monotonic()
        n = overdue(now, d.inflight.values(), d.service)
        if n is None:
            continue
        ts.append(now)
        late.append(n)
        sent.append(p.sent)
        half = len(ts) // 2
        if now - ts[0] < min_s or sent[-1] < MIN_SENT or len(ts) - half < 4:
            continue
        t, b = np.array(ts[half:]), np.array(late[half:], float)
        rate = (sent[-1] - sent[half]) / (t[-1] - t[0])
        growth = float(np.polyfit(t, b, 1)[0])
        if rate > 0 and growth > GROWTH * rate and b[-1] - b[0] >= MIN_GROWTH and b[-1] >= MIN_GROWTH:
            d.saturated = p.stopped_early = True
            d.stop.set()


async def _baseline(sh: Share):
    """The server's counters just before the clock starts; None when not scraping, or when a clock origin
    shared with other workers leaves no time for it (the first timed sample then stands in)."""
    if not sh.scrape:
        return None
    budget = 2.0 if sh.t0 < 0 else sh.t0 - time.monotonic() - 0.05
    if budget <= 0:
        return None
    try:
        return await asyncio.wait_for(sample_now(sh.cfg.base_url), budget)
    except asyncio.TimeoutError:
        return None


def _side_sources(sh: Share) -> list[tuple]:
    """The lead share's tagged samplers: GPU telemetry every second (gpu_telemetry.jsonl) and each replica's
    counters behind a router several times a second (worker_metrics.jsonl): (sources, file, interval, keep)."""
    if not sh.lead:
        return []
    out = []
    if sh.opts.gpu_telemetry:
        out.append((samplers(sh.opts.gpu_telemetry), TELEMETRY_FILE, 1.0, None))
    if sh.opts.worker_metrics:
        out.append((list(sh.opts.worker_metrics), WORKERS_FILE, WORKER_INTERVAL_S, KEEP))
    return out


def _samplers(sh: Share, t0: float, stop: asyncio.Event, baseline, sides: list, firsts: list) -> list:
    """The run's side samplers, started: the server's /metrics (server_metrics.jsonl) and the tagged ones
    (_side_sources), all through runner/scrape.py's one loop."""
    out = []
    if sh.scrape:
        path = os.path.join(sh.sink.dir, "server_metrics.jsonl")
        out.append(asyncio.ensure_future(scrape_loop(sh.cfg.base_url, path, t0, stop, baseline=baseline)))
    for (sources, name, every, keep), first in zip(sides, firsts):
        path = os.path.join(sh.sink.dir, name)
        out.append(asyncio.ensure_future(sample_loop(sources, path, t0, stop, every, tag=True, first=first, keep=keep)))
    return out


async def _run_timed(d: Dispatch, client, sh: Share) -> bool:
    """The timed part of a run: set the clock origin, dispatch, drain. True if interrupted."""
    gc_dog = asyncio.ensure_future(gc_watchdog())
    if sh.plan.sessions:
        d.prepare_sessions(sh.plan)
    baseline = await _baseline(sh)
    sides = _side_sources(sh)
    firsts = [await read_round(side[0]) for side in sides]  # a sample before the first request
    # the clock starts after set-up: schedule offsets are relative to this instant
    t0 = sh.t0 if sh.t0 >= 0 else time.monotonic()
    client.t0 = sh.progress.t0 = t0
    scrape_stop = asyncio.Event()
    side = _samplers(sh, t0, scrape_stop, baseline, sides, firsts)
    ticker = asyncio.ensure_future(_ticker(d, sh.on_tick))
    watch = asyncio.ensure_future(_watch_saturation(d, sh.progress)) if sh.opts.stop_when_saturated else None
    meter = client.meter
    meter.start()
    helpers = (asyncio.ensure_future(loop_probe(meter)), asyncio.ensure_future(d.flush_when_idle()))
    plan = sh.plan
    reqs = [plan.requests[i] for i in sh.idx]
    try:
        if plan.sessions:
            await d.dispatch(d.sessions_loop(plan))
        elif plan.jobs:
            await d.dispatch(d.jobs_loop(plan))
        elif plan.closed:
            await d.dispatch(
                d.closed_loop(
                    reqs, sh.users, plan.arrival.think_time_s, plan.duration_s, cycle=plan.duration_s is not None
                )
            )
        else:
            await d.dispatch(d.open_loop(reqs, plan.offsets[sh.idx]))
        return await d.drain()
    finally:
        meter.stop()
        gc_dog.cancel()
        for task in (ticker, watch, *helpers):
            if task:
                task.cancel()
        d.flush()
        while d.judge():
            pass
        sh.progress.lag_states.append(meter.state(client.finished, client.chunks))
        scrape_stop.set()
        if side:
            await asyncio.wait(side, timeout=3)


def stop_notice(press: int, in_flight: int, grace_s: float) -> str:
    """What Ctrl-C does, said the moment it is pressed (the run may take grace_s more to end)."""
    if press > 1:
        return f"goodbench: aborting: cancelling {in_flight} in-flight requests (recorded as cancelled)"
    return f"goodbench: stopping: finishing {in_flight} in-flight requests (up to {grace_s:g} s), Ctrl-C again to abort"


def _stop_on_signals(d: Dispatch, loop, sigs, announce: bool = True) -> dict:
    """SIGINT/SIGTERM stop dispatch (in-flight requests get the grace period); a second press cancels them.
    Each press is acknowledged on stderr at once (announce). A worker process listens to its parent's
    PRESS alone (workers.py: one per press; the SIGINT or SIGTERM sent to the whole group also reaches
    the worker, which ignores it, so one press is never counted twice)."""
    import sys

    presses = {"n": 0}

    def on_signal():
        presses["n"] += 1
        if announce:
            print("\n" + stop_notice(presses["n"], len(d.tasks), d.opts.grace_s), file=sys.stderr, flush=True)
        d.stop.set()
        if presses["n"] > 1:
            for t in list(d.tasks):
                t.cancel()

    old = {}
    for sig in sigs:
        try:
            before = signal.getsignal(sig)
            loop.add_signal_handler(sig, on_signal)
            old[sig] = before
        except (NotImplementedError, RuntimeError, ValueError):
            pass
    return old


def _forget_signals(loop, old: dict) -> None:
    """The handlers in place before the run (asyncio would leave the defaults: SIGTERM would kill)."""
    for sig, handler in old.items():
        try:
            loop.remove_signal_handler(sig)
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        except (NotImplementedError, RuntimeError, ValueError):
            pass


async def run_share(sh: Share) -> bool:
    """Connect, prewarm, then the timed part. True if interrupted."""
    loop = asyncio.get_running_loop()
    async with CLIENTS[sh.cfg.client](sh.cfg, sh.t0, sh.tok) as client:
        d = Dispatch(client, sh.sink, sh.progress, sh.opts)
        old = _stop_on_signals(d, loop, sh.stop_signals, sh.announce)
        try:
            n_warm = (
                sh.opts.prewarm
                if sh.opts.prewarm is not None
                else (sh.users if sh.plan.closed else min(len(sh.idx), sh.opts.max_concurrency or 256))
            )
            await client.prewarm(min(n_warm, 512))
            with quiet_gc():  # collector pauses would make the loop late (see gcquiet)
                interrupted = await _run_timed(d, client, sh)
        finally:
            _forget_signals(loop, old)
        if sh.on_tick is not None:
            sh.on_tick()
        return interrupted
