"""Drive one run on the real clock: workload + arrivals -> schedule -> dispatch -> records on disk.

Open loop: every request leaves at its scheduled time whatever is outstanding (an optional
--max-concurrency cap shows up as schedule lag). Closed loop: N users, each sending its next request
when the previous ends (plus think time). Records are appended to the store as each request ends;
Ctrl-C stops dispatch, gives in-flight requests a grace period, then records them as `cancelled`."""

from __future__ import annotations

import asyncio
import json
import math
import multiprocessing as mp
import os
import re
import signal
import sys
import time
from dataclasses import dataclass

import numpy as np

from .arrivals import ArrivalSpec, offsets as arrival_offsets
from .client.openai import Client, ClientConfig
from .gcquiet import quiet_gc, watchdog as gc_watchdog
from .records import RequestRecord, RequestSpec
from .store import RunStore
from .workloads import build_requests
from .workloads.spec import WorkloadSpec

CLOSED_POOL = 5000  # requests generated for a duration-bounded closed loop (cycled)


@dataclass
class Plan:
    requests: list[RequestSpec]
    offsets: np.ndarray | None  # open loop: scheduled send offsets, same length as requests
    arrival: ArrivalSpec
    duration_s: float | None = None

    @property
    def closed(self) -> bool:
        return self.arrival.kind == "closed"


def build_plan(spec: WorkloadSpec, tok) -> Plan:
    a = spec.arrival
    if spec.generator == "hol" and a.kind == "workload":
        from .workloads import hol_count

        n = hol_count(spec) if spec.num_requests is None else min(spec.num_requests, hol_count(spec))
        reqs = build_requests(spec, tok, n)
        return Plan(reqs, np.array([r.arrival_s for r in reqs], float), a, spec.duration_s)
    if a.kind == "workload":
        raise ValueError("arrival process 'workload' is only for generators that time their own requests (hol)")
    if a.kind == "closed":
        n = spec.num_requests or CLOSED_POOL
        return Plan(build_requests(spec, tok, n), None, a, spec.duration_s)
    offs = arrival_offsets(a, n=spec.num_requests, duration_s=spec.duration_s, seed=spec.seed)
    return Plan(build_requests(spec, tok, len(offs)), offs, a, spec.duration_s)


def _counter(i: int):
    return property(lambda s: s._a[s._b + i], lambda s, v: s._a.__setitem__(s._b + i, v))


async def _run_timed(d, client, plan, idx, users, store, cfg, t0, progress, on_tick, scrape, loop) -> bool:
    """The timed part of a run: set the clock origin, dispatch, drain."""
    gc_dog = asyncio.ensure_future(gc_watchdog())
    # the clock starts after set-up: schedule offsets are relative to this instant
    if t0 < 0:
        t0 = time.monotonic()
    client.t0 = t0
    progress.t0 = t0
    scrape_stop = asyncio.Event()
    scraper = asyncio.ensure_future(scrape_loop(cfg.base_url, os.path.join(store.dir, "server_metrics.jsonl"),
                                                t0, scrape_stop)) if scrape else None
    ticker = None
    if on_tick is not None:
        async def tick():
            while True:
                on_tick()
                await asyncio.sleep(0.5)
        ticker = asyncio.ensure_future(tick())
    reqs = [plan.requests[i] for i in idx]
    try:
        if plan.closed:
            await d.dispatch(d.closed_loop(reqs, users, plan.arrival.think_time_s, plan.duration_s,
                                           cycle=plan.duration_s is not None))
        else:
            await d.dispatch(d.open_loop(reqs, plan.offsets[idx]))
        return await d.drain()
    finally:
        gc_dog.cancel()
        if ticker:
            ticker.cancel()
        scrape_stop.set()
        if scraper:
            await asyncio.wait([scraper], timeout=3)
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.remove_signal_handler(sig)
            except (NotImplementedError, RuntimeError):
                pass


class Progress:
    """Live counters. In worker mode each worker owns one slot of a shared-memory array
    (one writer per slot, so no locks); the parent sums the slots."""

    FIELDS = ("sent", "done", "failed", "good", "lag_max_ms")
    sent, done, failed, good, lag_max_ms = (_counter(i) for i in range(5))

    def __init__(self, arr=None, slot: int = 0):
        self._a = arr if arr is not None else [0] * len(self.FIELDS)
        self._b = slot * len(self.FIELDS)
        self.total = 0
        self.started = time.monotonic()
        self.t0: float | None = None  # the run's clock origin (monotonic), once set-up is done

    @property
    def in_flight(self) -> int:
        return int(self.sent - self.done)


@dataclass
class RunOptions:
    max_concurrency: int | None = None
    workers: int = 1
    grace_s: float = 5.0
    scrape_metrics: bool | None = None  # None = on when the target serves /metrics
    prewarm: int | None = None
    slo: dict | None = None


def _meets(rec: RequestRecord, slo: dict | None) -> bool:
    if rec.status != "ok" or rec.first_token_at is None or rec.sent_at is None:
        return False
    if not slo:
        return True
    ttft = (rec.first_token_at - rec.sent_at) * 1000
    e2e = (rec.chunk_times[-1] - rec.sent_at) * 1000
    tpot = (e2e - ttft) / (rec.output_tokens - 1) if rec.output_tokens >= 2 else 0.0
    gaps = np.diff(rec.chunk_times) * 1000 if len(rec.chunk_times) > 1 else (0.0,)
    vals = {"ttft": ttft, "tpot": tpot, "e2el": e2e, "max_itl": max(gaps)}
    return all(vals[k] <= v for k, v in slo.items())


async def _sleep_until(deadline: float, clock=time.monotonic) -> None:
    d = deadline - clock()
    if d > 0:
        await asyncio.sleep(d)


class _Dispatch:
    """One event loop's share of a run."""

    def __init__(self, client: Client, store: RunStore, progress: Progress, opts: RunOptions):
        self.client, self.store, self.p, self.opts = client, store, progress, opts
        self.stop = asyncio.Event()
        self.idle = asyncio.Event()  # set whenever no request is in flight
        self.tasks: set[asyncio.Task] = set()
        self.sem = asyncio.Semaphore(opts.max_concurrency) if opts.max_concurrency else None

    async def _one(self, spec: RequestSpec, scheduled_at: float) -> RequestRecord:
        p = self.p

        def sent():
            p.sent += 1

        try:
            rec = await self.client.send(spec, scheduled_at, sent)
        finally:
            if self.sem is not None:
                self.sem.release()
        self.store.append(rec)
        p.done += 1
        if rec.status != "ok":
            p.failed += 1
        elif _meets(rec, self.opts.slo):
            p.good += 1
        if rec.sent_at is not None:
            p.lag_max_ms = max(p.lag_max_ms, (rec.sent_at - scheduled_at) * 1000)
        return rec

    def _spawn(self, spec, scheduled_at):
        t = asyncio.ensure_future(self._one(spec, scheduled_at))
        self.tasks.add(t)
        t.add_done_callback(self._task_done)
        return t

    def _task_done(self, t) -> None:
        self.tasks.discard(t)
        if not self.tasks:
            self.idle.set()

    async def open_loop(self, reqs: list[RequestSpec], offs: np.ndarray) -> None:
        """Runs as its own task: a stop cancels it, so there is nothing to check per request."""
        t0 = self.client.t0
        clock = self.client.clock
        sem = self.sem
        for spec, off in zip(reqs, offs):
            off = float(off)
            d = t0 + off - clock()
            if d > 0:
                await asyncio.sleep(d)
            if sem is not None:
                await sem.acquire()
            self._spawn(spec, off)

    async def closed_loop(self, reqs: list[RequestSpec], users: int, think_s: float,
                          duration_s: float | None, cycle: bool) -> None:
        clock, t0 = self.client.clock, self.client.t0
        state = {"i": 0}

        def next_req():
            i = state["i"]
            if i >= len(reqs) and not cycle:
                return None
            state["i"] = i + 1
            r = reqs[i % len(reqs)]
            return r if i < len(reqs) else RequestSpec(**{**r.__dict__, "id": f"r{i}"})

        async def user():
            while not self.stop.is_set():
                if duration_s is not None and clock() - t0 >= duration_s:
                    return
                spec = next_req()
                if spec is None:
                    return
                # shielded: stopping the users must not cancel requests in flight (they get a grace)
                await asyncio.shield(self._spawn(spec, clock() - t0))
                if think_s > 0:
                    await asyncio.sleep(think_s)

        users_t = [asyncio.ensure_future(user()) for _ in range(users)]
        try:
            await asyncio.gather(*users_t)
        finally:
            for u in users_t:
                u.cancel()

    async def dispatch(self, coro) -> None:
        """Run a dispatch coroutine until it ends or a stop (Ctrl-C) cancels it."""
        task = asyncio.ensure_future(coro)
        await _first(task, self.stop.wait())
        if not task.done():
            task.cancel()
            await asyncio.wait([task])

    async def drain(self) -> bool:
        """Wait for in-flight requests; after a stop, only for the grace period. True if interrupted."""
        if self.tasks and not self.stop.is_set():
            self.idle.clear()
            if self.tasks:
                await _first(self.idle.wait(), self.stop.wait())
        if not self.stop.is_set():
            return False
        if self.tasks:
            await asyncio.wait(list(self.tasks), timeout=self.opts.grace_s)
        for t in list(self.tasks):
            t.cancel()
        if self.tasks:
            await asyncio.wait(list(self.tasks), timeout=5)
        return True


async def _first(*aws) -> None:
    """Wait until the first of a few awaitables is done; cancel the others."""
    futs = [asyncio.ensure_future(a) for a in aws]
    try:
        await asyncio.wait(futs, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for f in futs:
            if not f.done():
                f.cancel()


async def scrape_loop(base_url: str, path: str, t0: float, stop: asyncio.Event, interval: float = 1.0) -> None:
    """Append the target's Prometheus gauges and counters to server_metrics.jsonl every interval."""
    import aiohttp

    url = base_url.rstrip("/") + "/metrics"
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as s:
        with open(path, "a", encoding="utf-8") as f:
            while not stop.is_set():
                t = time.monotonic() - t0
                try:
                    async with s.get(url) as r:
                        text = await r.text() if r.status == 200 else ""
                except (aiohttp.ClientError, asyncio.TimeoutError):
                    text = ""
                if text:
                    f.write(json.dumps({"t": round(t, 4), "metrics": parse_prometheus(text)}) + "\n")
                    f.flush()
                try:
                    await asyncio.wait_for(stop.wait(), interval)
                except asyncio.TimeoutError:
                    pass


_PROM = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[^}]*\})?)\s+(\S+)")


def parse_prometheus(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        m = _PROM.match(line)
        if not m or "_bucket" in m.group(1):
            continue
        try:
            out[m.group(1)] = float(m.group(2))
        except ValueError:
            continue
    return out


async def probe_metrics(base_url: str) -> bool:
    import aiohttp

    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as s:
            async with s.get(base_url.rstrip("/") + "/metrics") as r:
                return r.status == 200 and "# TYPE" in (await r.text())[:20000]
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError):
        return False


async def check_reachable(base_url: str) -> str | None:
    """None when something answers HTTP at base_url; else the reason, for a one-line error."""
    import aiohttp

    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as s:
            async with s.get(base_url.rstrip("/") + "/v1/models") as r:
                await r.read()
                return None
    except aiohttp.InvalidURL:
        return f"invalid URL {base_url!r}"
    except aiohttp.ClientConnectorError as e:
        return f"cannot connect to {base_url}: {e.os_error or e}"
    except (aiohttp.ClientError, asyncio.TimeoutError) as e:
        return f"{base_url} did not answer: {type(e).__name__} {e}"


async def resolve_model(base_url: str, api_key: str | None) -> str:
    """The server's first /v1/models entry (as `vllm bench serve` does), else "default"."""
    import aiohttp

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10), headers=headers) as s:
            async with s.get(base_url.rstrip("/") + "/v1/models") as r:
                if r.status != 200:
                    return "default"
                data = await r.json(content_type=None)
                items = data.get("data") or []
                return (items[0].get("id") if items else None) or "default"
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError, AttributeError):
        return "default"


def install_uvloop() -> bool:
    try:
        import uvloop
    except ImportError:
        return False
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return True


async def _run_share(plan: Plan, idx: np.ndarray, users: int, cfg: ClientConfig, store: RunStore, t0: float,
                     progress: Progress, opts: RunOptions, tok, on_tick=None, scrape: bool = False) -> bool:
    """Run the part of the plan at positions idx (all of it in a single process)."""
    loop = asyncio.get_running_loop()
    async with Client(cfg, t0, tok) as client:
        d = _Dispatch(client, store, progress, opts)
        presses = {"n": 0}

        def on_sigint():
            presses["n"] += 1
            d.stop.set()
            if presses["n"] > 1:
                for t in list(d.tasks):
                    t.cancel()

        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, on_sigint)
            except (NotImplementedError, RuntimeError):
                pass
        n_warm = opts.prewarm if opts.prewarm is not None else (
            users if plan.closed else min(len(idx), opts.max_concurrency or 256))
        await client.prewarm(min(n_warm, 512))
        with quiet_gc():  # collector pauses would make the loop late (see gcquiet)
            interrupted = await _run_timed(d, client, plan, idx, users, store, cfg, t0, progress, on_tick,
                                           scrape, loop)
        if on_tick is not None:
            on_tick()
        return interrupted


def _worker_main(plan, idx, users, cfg, result_dir, run_id, t0, opts, tok_name, arr, slot):
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent forwards SIGTERM instead
    install_uvloop()
    from . import tokenizer as tokmod

    store = RunStore(result_dir, run_id)
    store.open_records()
    tok = tokmod.load(tok_name) if tok_name is not None else None
    prog = Progress(arr, slot)
    try:
        asyncio.run(_run_share(plan, idx, users, cfg, store, t0, prog, opts, tok))
    finally:
        store.close()


def run_plan(plan: Plan, cfg: ClientConfig, store: RunStore, opts: RunOptions, tok, tok_name: str | None,
             progress: Progress, on_tick=None) -> bool:
    """Run the plan on the real clock; records go to store. Returns True if interrupted."""
    n = len(plan.requests)
    users = plan.arrival.concurrency
    scrape = opts.scrape_metrics
    if scrape is None:
        scrape = asyncio.run(probe_metrics(cfg.base_url))
    progress.total = n if not (plan.closed and plan.duration_s) else 0
    if opts.workers <= 1:
        return asyncio.run(_run_share(plan, np.arange(n), users, cfg, store, -1.0, progress, opts, tok,
                                      on_tick, scrape))
    return _run_workers(plan, cfg, store, opts, tok_name, progress, on_tick, scrape)


def _run_workers(plan, cfg, store, opts, tok_name, progress, on_tick, scrape) -> bool:
    """Several processes on the shared monotonic clock, each taking every W-th request (or W-th of
    the users); all append to one records.jsonl."""
    w = opts.workers
    ctx = mp.get_context("fork" if sys.platform.startswith("linux") else "spawn")
    arr = ctx.Array("d", w * len(Progress.FIELDS), lock=False)
    n = len(plan.requests)
    t0 = time.monotonic() + 1.0 + 0.2 * w  # leave the workers time to start and prewarm
    procs = []
    for k in range(w):
        idx = np.arange(k, n, w) if not plan.closed else np.arange(n) if plan.duration_s else np.arange(k, n, w)
        users = 0
        if plan.closed:
            users = plan.arrival.concurrency // w + (1 if k < plan.arrival.concurrency % w else 0)
            if users == 0:
                continue
        wopts = RunOptions(**{**opts.__dict__, "max_concurrency": (
            math.ceil(opts.max_concurrency / w) if opts.max_concurrency else None)})
        p = ctx.Process(target=_worker_main, args=(plan, idx, users, cfg, store.dir.rsplit(os.sep, 1)[0],
                                                   os.path.basename(store.dir), t0, wopts, tok_name, arr, k),
                        daemon=True)
        p.start()
        procs.append(p)
    interrupted = False

    def fwd(signum, frame):
        nonlocal interrupted
        interrupted = True
        for p in procs:
            if p.is_alive():
                os.kill(p.pid, signal.SIGTERM)

    old = signal.signal(signal.SIGINT, fwd)
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
    finally:
        signal.signal(signal.SIGINT, old)
    return interrupted
