"""--workers N: several load-generator processes on the shared monotonic clock, each taking every N-th
request (or its share of the users); all append to one records.jsonl (O_APPEND writes)."""

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
from ..serverproc import die_with_parent
from ..store import RunStore
from ..workloads import Plan
from .dispatch import Progress, RunOptions
from .share import Share, run_share


def _worker_main(share: Share, run_dir: str, tok_name, arr, slot, parent: int, lags) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent forwards SIGTERM instead
    die_with_parent()  # a killed parent (even SIGKILL) stops its workers: they keep what finished
    if os.getppid() != parent:
        return  # the parent died before we could ask to be told
    install_uvloop()
    from .. import tokenizer as tokmod

    sink = RunStore.at(run_dir)
    sink.open_records()
    share.sink = sink
    share.tok = tokmod.load(tok_name) if tok_name is not None else None
    share.progress = Progress(arr, slot)
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
        out.append(Share(plan, idx, users, cfg, None, None, wopts, t0=t0, scrape=scrape and k == 0))
    return out


def run_workers(
    plan: Plan, cfg: ClientConfig, run_dir: str, opts: RunOptions, tok_name, progress: Progress, on_tick, scrape: bool
) -> bool:
    """Returns True if interrupted (SIGINT or SIGTERM is forwarded to the workers as SIGTERM; they stop
    dispatch, let in-flight requests finish within the grace period, and exit; the caller summarizes)."""
    w = opts.workers
    ctx = mp.get_context("fork" if sys.platform.startswith("linux") else "spawn")
    arr = ctx.Array("d", w * len(Progress.FIELDS), lock=False)
    lags = ctx.SimpleQueue()
    t0 = time.monotonic() + 1.0 + 0.2 * w  # leave the workers time to start and prewarm
    procs = []
    for k, share in enumerate(_shares(plan, cfg, opts, t0, scrape)):
        p = ctx.Process(target=_worker_main, args=(share, run_dir, tok_name, arr, k, os.getpid(), lags), daemon=True)
        p.start()
        procs.append(p)
    interrupted = False

    def fwd(signum, frame):
        nonlocal interrupted
        interrupted = True
        for p in procs:
            if p.is_alive():
                os.kill(p.pid, signal.SIGTERM)

    old = {sig: signal.signal(sig, fwd) for sig in (signal.SIGINT, signal.SIGTERM)}
    fields_ = Progress.FIELDS
    try:
        while any(p.is_alive() for p in procs):
            for i, f in enumerate(fields_):
                vals = [arr[k * len(fields_) + i] for k in range(w)]
                setattr(progress, f, max(vals) if f == "lag_max_ms" else int(sum(vals)))
            if on_tick:
                on_tick()
            for p in procs:
                p.join(timeout=0.25 / len(procs))
            while not lags.empty():  # read as they come: a full pipe would block a finishing worker
                progress.lag_states += lags.get()
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    while not lags.empty():
        progress.lag_states += lags.get()
    return interrupted
