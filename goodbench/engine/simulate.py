"""The engine in virtual time: arrivals + Engine -> records, with no sockets and no sleeping.

Every request is 'sent' at its scheduled offset (no client lag) and each token arrives at the end of
the step that produced it, so the records mean exactly what a perfect client would have measured."""

from __future__ import annotations

import heapq
import json
import math
from array import array

import numpy as np

from ..records import RequestRecord, RequestSpec
from ..workloads.segments import block_hashes as segment_block_hashes
from .core import Engine, RequestTooLong
from .kvcache import Seq

CHARS_PER_TOKEN = 4  # text-approximate block boundaries for prefix caching (see text_block_hashes)


def text_block_hashes(prompt, prompt_tokens: int, block_size: int) -> tuple:
    """Prefix-cache keys without tokenizing: block j covers a fixed window of characters, so prompts
    sharing a text prefix share their leading keys (hits are right to about one block; the server
    uses exact token-id hashes)."""
    text = prompt if isinstance(prompt, str) else "\n".join(str(m.get("content", "")) for m in prompt)
    w = block_size * CHARS_PER_TOKEN
    out, h = [], 0
    for j in range(prompt_tokens // block_size):
        h = hash((h, text[j * w:(j + 1) * w], j))
        out.append(h)
    return tuple(out)


def prompt_hashes(r: RequestSpec, block_size: int) -> tuple:
    """Prefix-cache keys of a request's prompt: exact block hashes from its segments when the workload
    knows its structure, else the text windows."""
    if r.segments:
        return segment_block_hashes(r.segments, block_size)
    return text_block_hashes(r.prompt, r.prompt_tokens, block_size)


def _trace_line(engine: Engine, res, start: float) -> str:
    b = res.batch
    return json.dumps({"step": engine.stats.steps, "start": round(start, 6), "duration": round(res.duration, 6),
                       "prefill_tokens": b.prefill_tokens, "decode_tokens": b.decode_tokens,
                       "batch_size": b.num_seqs, "kv_usage": round(engine.kv.usage, 4),
                       "preemptions": len(b.preempted), "lateness": 0.0}) + "\n"


def _records(requests: list[RequestSpec], sent: list[float], times: list[array], seqs: list, bad: dict):
    """One record per request that was sent: refused ones as HTTP 400, unfinished ones as cancelled."""
    out = []
    for k, r in enumerate(requests):
        off = sent[k]
        if math.isnan(off):
            continue  # never sent (closed loop ran out of time)
        if k in bad:
            out.append(RequestRecord(r.id, r.cls, off, off, None, off, status="http_error", http_status=400,
                                     error=bad[k], prompt_tokens=r.prompt_tokens, warmup=r.warmup,
                                     session=r.session, turn=r.turn, session_turns=r.session_turns))
            continue
        t = tuple(times[k])
        done = seqs[k] is not None and seqs[k].status == "finished"
        think = min(r.reasoning_tokens, max(len(t) - 1, 0))  # as the engine server: the last token answers
        out.append(RequestRecord(
            id=r.id, cls=r.cls, scheduled_at=off, sent_at=off, first_token_at=t[0] if t else None,
            finished_at=t[-1] if t else off, chunk_times=t, chunk_tokens=(1,) * len(t),
            output_tokens=len(t), output_tokens_source="usage", prompt_tokens=r.prompt_tokens,
            prompt_tokens_server=r.prompt_tokens, status="ok" if done else "cancelled",
            error=None if done else "simulation stopped before completion", warmup=r.warmup,
            first_answer_at=t[think] if len(t) > think else None, reasoning_tokens=think, priority=r.priority,
            session=r.session, turn=r.turn, session_turns=r.session_turns))
    return out


def _decode_run(engine: Engine, times: list[array], horizon: float, now: float) -> tuple[float, list] | None:
    """Take the engine's closed-form decode steps up to the next arrival (engine.decode_run) and give
    every running request its token times: (the new now, the finished requests' ids), or None."""
    run = engine.decode_run(4096, horizon, now)
    if run is None:
        return None
    ends, finished = run
    for s in engine.sched.running:  # finished ones have left running already
        times[s.id].extend(ends)
    for s in finished:
        times[s.id].extend(ends)
    return ends[-1], [s.id for s in finished]


def _admit(engine: Engine, s: Seq, seqs: list, bad: dict) -> bool:
    """Hand a request to the engine; one it refuses is recorded as an error (False)."""
    try:
        engine.add(s)
    except RequestTooLong as e:
        bad[s.id] = str(e)
        return False
    seqs[s.id] = s
    return True


class _Arrivals:
    """Requests not yet handed to the engine, by arrival time. Closed loop: each user's next request
    arrives think_s after its previous one finished, until the requests (or duration_s) run out."""

    def __init__(self, n: int, offsets, closed_users: int, think_s: float, duration_s: float | None):
        self.n, self.closed, self.think_s, self.duration_s = n, closed_users, think_s, duration_s
        self.next = min(closed_users, n) if closed_users else n
        self.heap = [(0.0, k) for k in range(self.next)] if closed_users else \
            [(float(offsets[k]), k) for k in range(n)]
        heapq.heapify(self.heap)

    def finished(self, ids, t: float, failed: bool = False) -> None:
        if not self.closed:
            return
        for _ in ids:
            if self.next < self.n and (self.duration_s is None or t + self.think_s < self.duration_s):
                heapq.heappush(self.heap, (t + self.think_s, self.next))
                self.next += 1


class _SessionArrivals:
    """Multi-turn sessions: requests are the sessions' turns back to back (workloads.sessions). A session
    starts at its arrival (or when one of `cap` slots frees); each next turn arrives its think time after
    the previous one ended; a failed turn ends its session."""

    def __init__(self, sessions, cap: int):
        self.start, k = [], 0
        for s in sessions:
            self.start.append(k)
            k += len(s.turns)
        self.sessions, self.cap = sessions, cap or len(sessions)
        self.owner = [i for i, s in enumerate(sessions) for _ in s.turns]
        self.waiting = list(range(len(sessions)))[::-1]  # next session to start at the end
        self.active = 0
        self.heap: list = []
        self._fill(0.0)

    def _fill(self, t: float) -> None:
        while self.waiting and self.active < self.cap:
            i = self.waiting.pop()
            self.active += 1
            heapq.heappush(self.heap, (max(t, self.sessions[i].arrival_s), self.start[i]))

    def finished(self, ids, t: float, failed: bool = False) -> None:
        for k in ids:
            i = self.owner[k]
            turn = k - self.start[i]  # 0-based
            turns = self.sessions[i].turns
            if not failed and turn + 1 < len(turns):
                heapq.heappush(self.heap, (t + turns[turn + 1].think_s, k + 1))
            else:
                self.active -= 1
                self._fill(t)


def _arrive(engine: Engine, requests: list[RequestSpec], arr, now: float, sent: list, seqs: list, bad: dict) -> None:
    """Admit every request whose arrival time has come (a request that can never fit fails at once)."""
    pending, bs, pc = arr.heap, engine.cfg.block_size, engine.cfg.enable_prefix_caching
    while pending and pending[0][0] <= now:
        t, k = heapq.heappop(pending)
        sent[k] = t
        r = requests[k]
        s = Seq(k, r.prompt_tokens, r.max_tokens, arrival=t, priority=r.priority or 0,
                hashes=prompt_hashes(r, bs) if pc else ())
        if not _admit(engine, s, seqs, bad):
            arr.finished((k,), t, failed=True)


def simulate(engine: Engine, requests: list[RequestSpec], offsets: np.ndarray | None,
             trace_path: str | None = None, max_virtual_s: float | None = None, fast: bool = True,
             closed_users: int = 0, think_s: float = 0.0, duration_s: float | None = None,
             sessions=None, session_cap: int = 0) -> list[RequestRecord]:
    """Run the requests through the engine in virtual time.

    Open loop: request k arrives at offsets[k]. Closed loop (closed_users > 0, offsets None): each
    user sends its next request think_s after its previous one finished, until the requests (or
    duration_s of virtual time) run out. Sessions (requests = their turns, workloads.sessions): each turn
    arrives after the previous one's reply and think time. fast=False takes every step singly (the
    decode fast path is exact; tests compare the two)."""
    n = len(requests)
    times: list[array] = [array("d") for _ in range(n)]
    sent = [math.nan] * n
    bad: dict[int, str] = {}
    seqs: list[Seq | None] = [None] * n
    arr = _SessionArrivals(sessions, session_cap) if sessions else _Arrivals(n, offsets, closed_users, think_s,
                                                                            duration_s)
    pending = arr.heap
    trace = open(trace_path, "w", encoding="utf-8") if trace_path else None
    now = 0.0
    try:
        while pending or engine.has_work:
            _arrive(engine, requests, arr, now, sent, seqs, bad)
            if not engine.has_work:
                if pending:
                    now = max(now, pending[0][0])
                continue
            if max_virtual_s is not None and now > max_virtual_s:
                break
            if trace is None and fast:
                run = _decode_run(engine, times, pending[0][0] if pending else math.inf, now)
                if run is not None:
                    now, done = run
                    arr.finished(done, now)
                    continue
            res = engine.step()
            if res is None:  # nothing schedulable and nothing running: a request can never fit
                s = engine.sched._peek()
                engine.sched.remove(s)
                bad[s.id] = "request needs more KV cache than the engine has"
                arr.finished((s.id,), now, failed=True)
                continue
            start = now
            now += res.duration
            for s in res.emitted:
                times[s.id].append(now)
            arr.finished([s.id for s in res.finished], now)
            if trace is not None:
                trace.write(_trace_line(engine, res, start))
    finally:
        if trace is not None:
            trace.close()
    return _records(requests, sent, times, seqs, bad)
