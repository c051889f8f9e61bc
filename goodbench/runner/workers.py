"""--workers N: several load-generator processes on the shared monotonic clock, each taking every N-th
request (or its share of the users); all append to one records.jsonl (O_APPEND writes).

Signals (proctree): a worker ignores SIGINT and SIGTERM, which reach every process of the foreground
group (a terminal's Ctrl-C, `kill -TERM -PGID`); the parent sends it PRESS once per press it gets, so
one press stops dispatch and gives in-flight requests the grace period, and a second cancels them. A
worker gets PRESS when its parent dies (even by SIGKILL): it stops the same way and keeps what
finished. A worker that cannot write its records (a full disk) stops, and the parent stops the others."""

from __future__ import annotations

import asyncio
import math
import multiprocessing as mp
import os
import signal
import sys
import time

import numpy as np

from ..client.config import ClientConfig
from ..eventloop import install_uvloop
from ..proctree import forward, worker_init
from ..store import RunStore, records_lost
from ..workloads import Plan
from .dispatch import Progress, RunOptions
from .share import Share, run_share, stop_notice

PRESS = signal.SIGUSR1  # the parent's "Ctrl-C was pressed", one per press


def _worker_main(share: Share, run_dir: str, tok_name, arr, slot, parent: int, lags) -> None:
    if not worker_init(parent, PRESS):
        return  # the parent died before we could ask to be told
    install_uvloop()
    from .. import tokenizer as tokmod

    sink = RunStore.at(run_dir)
    sink.open_records()
    share.sink = sink
    share.tok = tokmod.load(tok_name) if tok_name is not None else None
    share.progress = Progress(arr, slot)
    share.stop_signals = (PRESS,)
    try:
        asyncio.run(run_share(share))
        lags.put(share.progress.lag_states)  # the parent adds them up (client_lag)
    finally:
        sink.close()


def _shares(plan: Plan, cfg: ClientConfig, opts: RunOptions, t0: float, scrape: bool) -> list[Share]:
    w = opts.workers
    n = len(plan.requests)
    wopts = RunOptions(
        **{**opts.__dict__, "max_concurrency": (math.ceil(opts.max_concurrency / w) if opts.max_concurrency else None)}
    )
    out = []
    for k in range(w):
        idx = np.arange(n) if plan.closed and plan.duration_s else np.arange(k, n, w)
        users = 0
        if plan.closed:
            users = plan.arrival.concurrency // w + (1 if k < plan.arrival.concurrency % w else 0)
            if users == 0:
                continue
        out.append(
            Share(
                plan, idx, users, cfg, None, None, wopts, t0=t0, scrape=scrape and k == 0, announce=False, lead=k == 0
            )
        )
    return out


def _sum_progress(progress: Progress, arr, w: int) -> None:
    n = len(Progress.FIELDS)
    for i, f in enumerate(Progress.FIELDS):
        vals = [arr[k * n + i] for k in range(w)]
        setattr(progress, f, max(vals) if f in ("lag_max_ms", "write_errno") else int(sum(vals)))


def run_workers(
    plan: Plan, cfg: ClientConfig, sink, opts: RunOptions, tok_name, progress: Progress, on_tick, scrape: bool
) -> bool:
    """Returns True if interrupted (each SIGINT or SIGTERM reaches the workers as one PRESS; they stop
    dispatch, let in-flight requests finish within the grace period, and exit; the caller summarizes).
    A worker's failed write is set on sink.store.write_error."""
    w = opts.workers
    ctx = mp.get_context("fork" if sys.platform.startswith("linux") else "spawn")
    arr = ctx.Array("d", w * len(Progress.FIELDS), lock=False)
    lags = ctx.SimpleQueue()
    t0 = time.monotonic() + 1.0 + 0.2 * w  # leave the workers time to start and prewarm
    procs = []
    for k, share in enumerate(_shares(plan, cfg, opts, t0, scrape)):
        p = ctx.Process(target=_worker_main, args=(share, sink.dir, tok_name, arr, k, os.getpid(), lags), daemon=True)
        p.start()
        procs.append(p)

    def stop_workers(presses=0):
        if presses:  # a Ctrl-C (not a worker's failed write): said at once
            print("\n" + stop_notice(presses, progress.in_flight, opts.grace_s), file=sys.stderr, flush=True)
        for p in procs:
            if p.is_alive():
                os.kill(p.pid, PRESS)

    stopped = False
    try:
        with forward(stop_workers) as presses:
            while any(p.is_alive() for p in procs):
                _sum_progress(progress, arr, w)
                if progress.write_errno and not stopped:
                    stopped = True
                    stop_workers()  # one worker cannot write: nothing the others record could be kept
                if on_tick:
                    on_tick()
                for p in procs:
                    p.join(timeout=0.25 / len(procs))
                while not lags.empty():  # read as they come: a full pipe would block a finishing worker
                    progress.lag_states += lags.get()
    finally:
        for p in procs:  # only after a failure in this loop: they ignore SIGTERM, so no one is left waiting
            if p.is_alive():
                p.kill()
    _sum_progress(progress, arr, w)
    while not lags.empty():
        progress.lag_states += lags.get()
    if progress.write_errno:
        code = int(progress.write_errno)
        store = getattr(sink, "store", sink)  # a RunDir, or a bare RunStore
        store.write_error = records_lost(store.records_path, code, os.strerror(code))
    return presses[0] > 0 or bool(progress.write_errno)
