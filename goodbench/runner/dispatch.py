"""One event loop's share of a run: open-loop sends at their scheduled times, closed-loop users, and
the drain with a grace period after a stop (Ctrl-C)."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass

import numpy as np

from ..client.stream import unsent_record
from ..errors import RunDirError
from ..metrics import RequestMetrics
from ..records import RequestRecord, RequestSpec
from ..workloads.sessions import turn_request

UNSENT_AFTER_DURATION = "not sent: due after the run's --duration ended (its parents' tool or think time ran past it)"

FLUSH_S = 0.01  # how often finished records are considered for writing
FLUSH_SLICE_S = 0.001  # the most time one write of finished records may hold the loop
BUSY_S = 0.002  # a wake-up later than this: the loop is busy, the write waits
FLUSH_MAX_S = 1.0  # ... but never longer than this (a killed process loses at most this much)
JUDGE_BATCH = 64  # finished requests judged against the SLO per turn of the loop


def _record(r) -> RequestRecord:
    """A record, or a client's Finished stream built into one (client/stream.Finished)."""
    return r if isinstance(r, RequestRecord) else r.record()


def _counter(i: int):
    return property(lambda s: s._a[s._b + i], lambda s, v: s._a.__setitem__(s._b + i, v))


class Progress:
    """Live counters. In worker mode each worker owns one slot of a shared-memory array
    (one writer per slot, so no locks); the parent sums the slots."""

    FIELDS = ("sent", "done", "failed", "good", "lag_max_ms", "write_errno")
    sent, done, failed, good, lag_max_ms, write_errno = (_counter(i) for i in range(6))

    def __init__(self, arr=None, slot: int = 0):
        self._a = arr if arr is not None else [0] * len(self.FIELDS)
        self._b = slot * len(self.FIELDS)
        self.total = 0
        self.started = time.monotonic()
        self.t0: float | None = None  # the run's clock origin (monotonic), once set-up is done
        self.lag_states: list[dict] = []  # each load-generator process's LagMeter state (client/lag.py)
        self.stopped_early = False  # a rate probe's dispatch stopped: the server could not keep up

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
    stop_when_saturated: bool = False  # end the run early once the server clearly cannot keep up (rate probes)
    gpu_telemetry: tuple = ()  # DCGM exporter /metrics URLs, "nvml" or "amdsmi" (runner/telemetry.py), checked
    worker_metrics: tuple = ()  # each replica's /metrics URL behind a router (runner/workermetrics.py), checked


async def first_of(*aws) -> None:
    """Wait until the first of a few awaitables is done; cancel the others."""
    futs = [asyncio.ensure_future(a) for a in aws]
    try:
        await asyncio.wait(futs, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for f in futs:
            if not f.done():
                f.cancel()


class Dispatch:
    """Sends requests and hands each finished record to the sink (anything with `append`)."""

    def __init__(self, client, sink, progress: Progress, opts: RunOptions):
        self.client, self.sink, self.p, self.opts = client, sink, progress, opts
        self.stop = asyncio.Event()
        self.saturated = False  # stopped early because the server could not keep up
        self.idle = asyncio.Event()  # set whenever no request is in flight
        self.tasks: set[asyncio.Task] = set()
        self.sem = asyncio.Semaphore(opts.max_concurrency) if opts.max_concurrency else None
        self.unjudged: deque = deque()  # finished, not yet counted against the SLO (judge())
        self.unwritten: deque = deque()  # finished, not yet in the sink (flush())
        self.first_turns: dict = {}  # session id -> its first turn, built before the clock (prepare_sessions)
        self.write_error: RunDirError | None = None  # records cannot be written any more: the run ended
        # rate probes (stop_when_saturated): what is in flight (send time, planned tokens) and the
        # finished requests' (TTFT, time per further token), the evidence of share._watch_saturation
        self.track = opts.stop_when_saturated
        self.inflight: dict[str, tuple[float, int]] = {}
        self.service: list[tuple[float, float]] = []

    def _keep_unsent(self, rec: RequestRecord) -> None:
        """A request decided against (never sent) is kept as failed, written with the others."""
        if self.write_error is None:
            self.unwritten.append(rec)
        self.p.done += 1
        self.p.failed += 1

    async def _one(self, spec: RequestSpec, scheduled_at: float, on_text=None):
        """One request; its record goes to the sink in the next batch (flush). Without on_text the
        record itself is built then too (stream.Finished): a wave of streams ending together costs the
        loop only their counters. Returns the record, or the Finished one that builds it."""
        p = self.p
        track = self.track

        def sent():
            p.sent += 1
            if track:
                self.inflight[spec.id] = (time.monotonic(), spec.max_tokens)

        try:
            rec = (
                await self.client.send(spec, scheduled_at, sent, on_text=on_text)
                if on_text
                else await self.client.send(spec, scheduled_at, sent, later=True)
            )
        finally:
            if self.sem is not None:
                self.sem.release()
        if self.write_error is not None:  # records cannot be kept any more: the run is ending
            return rec
        self.unwritten.append(rec)  # written in batches when the loop is idle (flush_when_idle)
        if track:
            self._service(spec, rec)
        p.done += 1
        if rec.status != "ok":
            p.failed += 1
        else:
            self.unjudged.append(rec)
        if rec.sent_at is not None:
            p.lag_max_ms = max(p.lag_max_ms, (rec.sent_at - scheduled_at) * 1000)
        return rec

    def cannot_write(self, e: RunDirError) -> None:
        """End the run at once: stop dispatch and cancel what is in flight (its records could not be kept)."""
        if self.write_error is None:
            self.write_error = e
            self.p.write_errno = getattr(e, "errno", None) or 1  # the parent of --workers reads it
            self.stop.set()
            for t in list(self.tasks):
                t.cancel()

    def _service(self, spec: RequestSpec, rec) -> None:
        """One finished request's (TTFT, seconds per further chunk) for the backlog prediction."""
        self.inflight.pop(spec.id, None)
        r = _record(rec) if rec.status == "ok" else None
        if r is not None and r.first_token_at is not None and r.sent_at is not None:
            n = len(r.chunk_times)
            per = (r.chunk_times[-1] - r.chunk_times[0]) / (n - 1) if n > 1 else 0.0
            self.service.append((r.first_token_at - r.sent_at, per))

    def judge(self, limit: int = JUDGE_BATCH) -> bool:
        """Count up to `limit` of the requests finished since the last call that meet the SLO (the live
        progress line), with the summary's own definition (metrics.RequestMetrics), off the requests'
        own path. True when more are waiting (the caller yields to the loop, then calls again)."""
        if not self.unjudged:
            return False
        waiting = self.unjudged
        batch = [waiting.popleft() for _ in range(min(limit, len(waiting)))]  # a deque: no copy of the rest
        c = RequestMetrics([_record(r) for r in batch])
        met = c.meets(self.opts.slo)
        self.p.good += int((met if met is not None else c.ok & ~np.isnan(c.first)).sum())
        return bool(self.unjudged)

    def flush(self, budget_s: float | None = None) -> None:
        """Build and write finished records, in one write: all of them, or (budget_s) as many as fit in
        that much time, so that a wave of finished streams never holds the loop for longer."""
        if not self.unwritten:
            return
        clock, recs, lines, waiting = time.monotonic, [], [], self.unwritten
        end = clock() + budget_s if budget_s is not None else None
        write_lines = getattr(self.sink, "write_lines", None)
        while waiting and (end is None or clock() < end):
            recs.append(_record(waiting.popleft()))
            if write_lines is not None:
                lines.append(recs[-1].to_json())
        try:
            if write_lines is not None:
                write_lines(lines)
            else:  # a plain sink (tests): the records themselves
                for rec in recs:
                    self.sink.append(rec)
        except RunDirError as e:  # a full or read-only disk: nothing more can be kept, so stop now
            self.unwritten.clear()
            self.cannot_write(e)

    async def flush_when_idle(self, every_s: float = FLUSH_S) -> None:
        """Write records off the moments that matter: a slice of FLUSH_SLICE_S whenever a wake-up comes
        on time (the loop is not working through a burst of reads and sends), and a slice anyway once
        records have waited FLUSH_MAX_S (a killed process loses at most those)."""
        clock = time.monotonic
        last = clock()
        while True:
            due = clock() + every_s
            await asyncio.sleep(every_s)
            now = clock()
            if not self.unwritten:
                last = now
            elif now - due < BUSY_S or now - last >= FLUSH_MAX_S:
                self.flush(FLUSH_SLICE_S)
                last = now if not self.unwritten else last

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

    async def closed_loop(
        self, reqs: list[RequestSpec], users: int, think_s: float, duration_s: float | None, cycle: bool
    ) -> None:
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

    async def sessions_loop(self, plan) -> None:
        """Multi-turn sessions: each starts at its arrival (when a slot of session.max_concurrent is free:
        waiting shows as lag) and sends its turns one after another, each its think time after the
        previous reply, the server's replies resent as history. Runs as its own task, like open_loop."""
        await self._units(
            plan.sessions, plan.spec.session.max_concurrent, lambda s, slots: self._session(plan, s, slots)
        )

    async def _units(self, units, cap: int, run) -> None:
        """Start each unit (a session, an agent job) at its arrival_s, when one of `cap` slots is free
        (0: no cap); `run(unit, slots)` releases its slot when done."""
        slots = asyncio.Semaphore(cap) if cap else None
        t0, clock = self.client.t0, self.client.clock
        for u in sorted(units, key=lambda x: x.arrival_s):
            d = t0 + u.arrival_s - clock()
            if d > 0:
                await asyncio.sleep(d)
            if slots is not None:
                await slots.acquire()
            t = asyncio.ensure_future(run(u, slots))
            self.tasks.add(t)
            t.add_done_callback(self._task_done)

    def prepare_sessions(self, plan) -> None:
        """Build every session's first turn before the clock starts (the prompt text, the tokenizer's
        word list it is drawn from): built at its arrival, it left 240-430 ms late."""
        self.first_turns = {s.id: turn_request(plan.spec, s, 1, plan.tok) for s in plan.sessions}

    async def _session(self, plan, s, slots) -> None:
        replies, reply_tokens = [], []
        t0, clock = self.client.t0, self.client.clock
        scheduled = ended = s.arrival_s
        first = self.first_turns.pop(s.id, None)
        try:
            for k, turn in enumerate(s.turns, 1):
                if k == 1 and first is not None:
                    spec = first
                else:  # built from the replies so far, before the think time, so it leaves on time
                    spec = turn_request(plan.spec, s, k, plan.tok, replies, reply_tokens)
                if k > 1:  # its think time after the previous reply ended
                    scheduled = ended + turn.think_s
                    await asyncio.sleep(max(0.0, t0 + scheduled - clock()))
                got: list[str] = []
                rec = await self._one(spec, scheduled, on_text=got.append)
                ended = clock() - t0
                if rec.status != "ok":
                    return  # a failed turn ends its session (it is not completed)
                replies.append(got[0] if got else "")
                reply_tokens.append(rec.output_tokens)
        finally:
            if slots is not None:
                slots.release()

    async def jobs_loop(self, plan) -> None:
        """Agent jobs: each starts at its arrival (when a slot of agent.max_concurrent is free: waiting
        shows as lag) and runs its graph (workloads.agent). Runs as its own task, like open_loop."""
        await self._units(plan.jobs, plan.job_cap, lambda j, slots: self._job(plan, j, slots))

    async def _job(self, plan, job, slots) -> None:
        """One job: a call is sent when all its parents have answered, its planned delay (a tool's
        latency, think time) after the last of them, with their replies in its prompt. A failed call
        ends its branch: what depends on it is never sent (the job is not completed)."""
        from ..workloads.agent import node_request

        replies: dict[int, str] = {}
        tokens: dict[int, int] = {}
        loop = asyncio.get_running_loop()
        done = {n.index: loop.create_future() for n in job.nodes}
        t0, clock = self.client.t0, self.client.clock

        async def call(node) -> None:
            ok = True
            for p in node.parents:
                ok = await done[p] and ok
            if not ok:
                done[node.index].set_result(False)
                return
            scheduled = job.arrival_s if not node.parents else clock() - t0 + node.delay_s
            if plan.duration_s is not None and scheduled > plan.duration_s:  # a tool that never returns
                spec = node_request(plan.spec, job, node.index, plan.tok, replies, tokens)
                self._keep_unsent(unsent_record(spec, scheduled, clock() - t0, UNSENT_AFTER_DURATION))
                done[node.index].set_result(False)
                return
            if node.parents and node.delay_s > 0:
                await asyncio.sleep(node.delay_s)
            spec = node_request(plan.spec, job, node.index, plan.tok, replies, tokens)
            got: list[str] = []
            if self.sem is not None:
                await self.sem.acquire()
            rec = await self._one(spec, scheduled, on_text=got.append)
            if rec.status == "ok":
                replies[node.index], tokens[node.index] = (got[0] if got else ""), rec.output_tokens
            done[node.index].set_result(rec.status == "ok")

        calls = [asyncio.ensure_future(call(n)) for n in job.nodes]
        try:
            await asyncio.gather(*calls)
        finally:
            for c in calls:
                c.cancel()
            if slots is not None:
                slots.release()

    async def dispatch(self, coro) -> None:
        """Run a dispatch coroutine until it ends or a stop (Ctrl-C) cancels it."""
        task = asyncio.ensure_future(coro)
        await first_of(task, self.stop.wait())
        if not task.done():
            task.cancel()
            await asyncio.wait([task])
        elif not task.cancelled() and task.exception() is not None:
            raise task.exception()  # a bug in dispatch must not pass for a run that sent nothing

    async def drain(self) -> bool:
        """Wait for in-flight requests; after a stop, only for the grace period. True if interrupted."""
        if self.tasks and not self.stop.is_set():
            self.idle.clear()
            if self.tasks:
                await first_of(self.idle.wait(), self.stop.wait())
        if not self.stop.is_set():
            return False
        if self.tasks:
            await asyncio.wait(list(self.tasks), timeout=self.opts.grace_s)
        for t in list(self.tasks):
            t.cancel()
        if self.tasks:
            await asyncio.wait(list(self.tasks), timeout=5)
        return True
