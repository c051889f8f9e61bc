"""One engine instance on the real clock: the step loop of `goodbench serve`.

The loop runs steps back to back: it builds a step, sleeps until the step's absolute planned end
(start + cost-model duration), then hands each produced token to its stream. Step lateness (actual
end - planned end) is measured per instance. A server holds one of these (one instance) or several
(replicas, prefill/decode instances); each keeps its own clock, histograms and step trace."""

from __future__ import annotations

import asyncio
import json
import logging
import time

from ..core import Engine
from .openai_api import error_event
from .promtext import (
    ITER_BUCKETS,
    ITL_BUCKETS,
    LATENESS_BUCKETS,
    REQUEST_BUCKETS,
    TTFT_BUCKETS,
    Histogram,
    family,
    histogram_family,
)

SPIN_S = 0.0015  # sleep to this much before a deadline, then spin: asyncio timers have ~1 ms granularity
CATCH_UP_LIMIT_S = 0.05  # behind by more than this, restart the clock instead of compressing steps
LATENESS_WINDOW = 4096  # recent steps kept for the lateness quantiles


LORA_STATES = 1000  # the most vllm:lora_requests_info label sets kept


def phase_histograms() -> tuple[Histogram, Histogram]:
    """The request-phase histograms vLLM exports, under its names and buckets."""
    return (
        Histogram("vllm:request_queue_time_seconds", "Time from taken in to first scheduled.", REQUEST_BUCKETS),
        Histogram("vllm:request_prefill_time_seconds", "Time from first scheduled to first token.", REQUEST_BUCKETS),
    )


TOKEN_BUCKETS = tuple(m * 10**e for e in range(7) for m in (1, 2, 5))  # vLLM's 1-2-5 series


def token_histograms() -> tuple[Histogram, Histogram]:
    """A finished request's prompt and output tokens, as vLLM observes them when it finishes: their sums between
    two scrapes say which requests a replica finished (metrics/attribution.py)."""
    return (
        Histogram("vllm:request_prompt_tokens", "Prompt tokens of finished requests.", TOKEN_BUCKETS),
        Histogram("vllm:request_generation_tokens", "Generated tokens of finished requests.", TOKEN_BUCKETS),
    )


def note_scheduled(batch, start: float) -> None:
    """Stamp each request's first scheduling (when its step was built, never before the loop took it
    in: the step's start, or with async scheduling the one before's, when this step was built)."""
    for seq in batch.seqs:
        st = seq.payload
        if st is not None and st.scheduled is None:
            st.scheduled = max(start, queued_at(st))
            if st.fmt is not None:  # what its usage reports as cached (set once, as vLLM's num_cached_tokens)
                st.fmt.cached = max(seq.num_cached, 0)


def queued_at(st) -> float:
    """Where a request's queue time starts: when the engine loop took it in. Like vLLM's engine core,
    which reads new requests between steps, a request that arrives during a step is taken in at its
    end: the wait for the step in progress is not queue time (it is in the server's TTFT only)."""
    return st.queued if st.queued is not None else st.arrived


class EngineLoop:
    """An engine, the event that wakes its loop, and what /metrics reports for it. `handoff`, when
    set (a prefill instance), receives each step's result instead of the streams getting tokens."""

    def __init__(self, engine: Engine, index: int = 0, role: str = "mixed", trace=None, t0: float = 0.0):
        self.engine, self.index, self.role = engine, index, role
        self.wake = asyncio.Event()
        self.clock = time.monotonic
        self.h_ttft = Histogram("vllm:time_to_first_token_seconds", "Time to first token.", TTFT_BUCKETS)
        self.h_itl = Histogram("vllm:inter_token_latency_seconds", "Inter-token latency.", ITL_BUCKETS)
        self.h_iter = Histogram("vllm:iteration_tokens_total", "Tokens per engine step.", ITER_BUCKETS)
        self.h_late = Histogram("goodbench:step_lateness_seconds", "Actual minus planned step end.", LATENESS_BUCKETS)
        self.h_queue, self.h_prefill = phase_histograms()
        self.h_prompt, self.h_gen = token_histograms()
        self.lateness: list[float] = []  # recent window for quantiles
        self.submitted = 0  # requests routed here
        self.finished_total = 0  # finished here (vllm:request_success_total)
        self.trace = trace
        self.t0 = t0
        self.handoff = None
        self.stepping = False  # a step is in progress: requests submitted now are taken in at its end
        self.taken_at_end: list = []  # their streams
        self.trace_tag = {} if role == "mixed" and index == 0 else {"engine": index}
        self.lora_states: dict[str, float] = {}  # vllm:lora_requests_info: every state's labels -> last time in it

    def submit(self, seq) -> None:
        """Queue a sequence (RequestTooLong when it can never fit) and wake the loop."""
        self.engine.add(seq)
        self.submitted += 1
        st = seq.payload
        if st is not None and st.queued is None:  # a disaggregated request keeps its prefill instance's
            if self.stepping:
                self.taken_at_end.append(st)
            else:
                st.queued = self.clock()
        self.wake.set()

    def open_seqs(self) -> list:
        sched = self.engine.sched
        return list(sched.running) + sched.waiting_seqs()

    @property
    def outstanding(self) -> int:
        """Requests routed here and not finished: what the least-outstanding router compares."""
        sched = self.engine.sched
        return len(sched.running) + sched.num_waiting()

    async def run(self) -> None:
        eng, clock = self.engine, self.clock
        deliver = self.deliver if self.handoff is None else self.handoff
        next_start = prev_start = None  # prev_start: the step before's, when this one follows it
        while True:
            if not eng.has_work:
                self.stepping = False
                self.wake.clear()
                await self.wake.wait()
                next_start = prev_start = None
                continue
            self.stepping = True
            now = clock()
            start = now if next_start is None or now - next_start > CATCH_UP_LIMIT_S else max(next_start, 0.0)
            res = eng.step()
            if res is None:  # the head request can never be scheduled: fail it instead of spinning
                s = eng.drop_unschedulable()
                if s.payload is not None:
                    s.payload.push(error_event("request does not fit the KV cache"), done=True)
                continue
            if res.batch.prefill_tokens:  # a request is first scheduled in a step that prefills it
                ahead = eng.cfg.async_scheduling and prev_start is not None  # built while the one before ran
                note_scheduled(res.batch, prev_start if ahead else start)
            planned = start + res.duration
            d = planned - clock()
            if d > SPIN_S:
                await asyncio.sleep(d - SPIN_S)
            while clock() < planned:
                pass
            end = clock()
            for st in self.taken_at_end:
                st.queued = end
            self.taken_at_end.clear()
            late = end - planned
            self.h_late.observe(max(late, 0.0))
            self.lateness.append(late)
            if len(self.lateness) > LATENESS_WINDOW:
                del self.lateness[: LATENESS_WINDOW // 2]
            deliver(res, end)
            b = res.batch
            self.h_iter.observe(b.num_tokens)
            if eng.slots is not None:
                self._note_lora()
            if self.trace is not None:
                self._trace_step(res, start, late)
            next_start, prev_start = planned, start

    def _note_lora(self) -> None:
        """The adapters of the running and waiting requests now, kept as vLLM's gauge keeps every label set
        it was given (the oldest states dropped past LORA_STATES)."""
        sched = self.engine.sched
        run = ",".join(dict.fromkeys(s.lora for s in sched.running if s.lora is not None))
        wait = ",".join(dict.fromkeys(s.lora for s in sched.waiting_seqs() if s.lora is not None))
        key = f'max_lora="{self.engine.cfg.max_loras}",running_lora_adapters="{run}",waiting_lora_adapters="{wait}"'
        self.lora_states.pop(key, None)
        self.lora_states[key] = round(time.time(), 3)
        if len(self.lora_states) > LORA_STATES:
            del self.lora_states[next(iter(self.lora_states))]

    def _trace_step(self, res, start: float, late: float) -> None:
        b, eng = res.batch, self.engine
        self.trace.write(
            json.dumps(
                {
                    "step": eng.stats.steps,
                    "start": round(start - self.t0, 6),
                    "duration": round(res.duration, 6),
                    "prefill_tokens": b.prefill_tokens,
                    "decode_tokens": b.decode_tokens,
                    "spec_tokens": b.spec_tokens,
                    "batch_size": b.num_seqs,
                    "kv_usage": round(eng.kv.usage, 4),
                    "preemptions": len(b.preempted),
                    "lateness": round(late, 6),
                    **self.trace_tag,
                }
            )
            + "\n"
        )

    def deliver(self, res, now: float) -> None:
        finished = set(map(id, res.finished))
        self.finished_total += len(finished)
        h_ttft, h_itl = self.h_ttft, self.h_itl
        for seq, m in res.outputs():
            st = seq.payload
            if st is None:
                continue
            if st.n == 0:
                h_ttft.observe(now - st.arrived)
                self._observe_phases(st, now)
            else:
                h_itl.observe(now - st.last)
            st.n += m
            st.last = now
            done = id(seq) in finished
            if done:
                self.h_prompt.observe(getattr(st.fmt, "n_prompt", 0))
                self.h_gen.observe(st.n)
            try:
                st.push(st.fmt.token(st.n, done) if m == 1 else chunk_bytes(st.fmt, st.n - m + 1, m, done), done)
            except Exception as e:  # one request's failure must not stop the others: abort it alone
                self.engine.abort(seq)
                st.dead = True
                if not st.finished.done():
                    st.finished.set_result(None)
                logging.getLogger("goodbench.serve").warning("request %s aborted: %s: %s", seq.id, type(e).__name__, e)

    def _observe_phases(self, st, now: float) -> None:
        """vLLM's split of TTFT: queue time (taken in to first scheduled), prefill (scheduled to first
        token). Disaggregated, the prefill instance stamps `scheduled` and the decode instance observes."""
        sched = st.scheduled if st.scheduled is not None else now
        self.h_queue.observe(sched - queued_at(st))
        self.h_prefill.observe(now - sched)

    def lateness_quantiles(self) -> list[tuple[float, float, int]]:
        """(q, lateness, window) for p50 and p99 over the recent steps."""
        lat = sorted(self.lateness[-LATENESS_WINDOW // 2 :])
        return [(q, lat[min(len(lat) - 1, int(q * len(lat)))] if lat else 0.0, len(lat)) for q in (0.5, 0.99)]


def chunk_bytes(fmt, n0: int, m: int, done: bool) -> bytes:
    """One step's m tokens for one request: one chunk where the format can (chat, completions), else
    each token's events together (Responses, Messages), in one write either way."""
    many = getattr(fmt, "tokens", None)
    if many is not None:
        return many(n0, m, done)
    last = n0 + m - 1
    return b"".join(fmt.token(n, done and n == last) for n in range(n0, last + 1))


SPEC_COUNTERS = (
    ("vllm:spec_decode_num_drafts_total", "Number of spec decoding drafts.", "drafts"),
    ("vllm:spec_decode_num_draft_tokens_total", "Number of draft tokens.", "draft_tokens"),
    ("vllm:spec_decode_num_accepted_tokens_total", "Number of accepted tokens.", "accepted"),
)


def spec_families(rows: list[tuple[str, EngineLoop]]) -> list[str]:
    """vLLM's speculative-decoding counters, per position too (only when the engine speculates)."""
    specs = [(lab, lp.engine.stats.spec, lp.engine.drafter.spec.k) for lab, lp in rows if lp.engine.stats.spec]
    if not specs:
        return []
    out = []
    for name, help, attr in SPEC_COUNTERS:
        out += family(name, "counter", help, [(lab, getattr(sc, attr)) for lab, sc, _ in specs])
    per_pos = [
        (",".join(filter(None, (lab, f'position="{i}"'))), (sc.per_pos or [0] * k)[i])
        for lab, sc, k in specs
        for i in range(k)
    ]
    return out + family(
        "vllm:spec_decode_num_accepted_tokens_per_pos_total", "counter", "Accepted tokens per draft position.", per_pos
    )


def lora_family(rows: list[tuple[str, EngineLoop]]) -> list[str]:
    """vLLM's vllm:lora_requests_info gauge: one series per state the engine was in (the adapters of its
    running and waiting requests in the labels), the last time it was in it as the value."""
    out = [(",".join(filter(None, (lab, key))), t) for lab, lp in rows for key, t in lp.lora_states.items()]
    return family("vllm:lora_requests_info", "gauge", "Running stats on lora requests.", out) if out else []


def render_metrics(rows: list[tuple[str, EngineLoop]]) -> str:
    """/metrics with vLLM's names: per (labels, instance) one series of each metric; with several
    instances the labels carry engine="i", as vLLM's do when one server fronts several engines."""
    out: list[str] = []
    gauges = (
        ("vllm:num_requests_running", "gauge", "Requests in the running batch.", lambda lp: lp.engine.num_running),
        ("vllm:num_requests_waiting", "gauge", "Requests waiting.", lambda lp: lp.engine.sched.num_waiting()),
        ("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage (1 = 100%).", lambda lp: round(lp.engine.kv.usage, 6)),
        ("vllm:prompt_tokens_total", "counter", "Prompt tokens admitted.", lambda lp: lp.engine.stats.prompt_tokens),
        ("vllm:generation_tokens_total", "counter", "Tokens generated.", lambda lp: lp.engine.stats.generation_tokens),
        ("vllm:num_preemptions_total", "counter", "Preemptions.", lambda lp: lp.engine.stats.preemptions),
        (
            "vllm:prefix_cache_queries_total",
            "counter",
            "Prompt tokens looked up in the prefix cache.",
            lambda lp: lp.engine.kv.queries,
        ),
        (
            "vllm:prefix_cache_hits_total",
            "counter",
            "Prompt tokens found in the prefix cache.",
            lambda lp: lp.engine.kv.hits,
        ),
        ("vllm:request_success_total", "counter", "Requests that finished.", lambda lp: lp.finished_total),
    )
    for name, kind, help, get in gauges:
        out += family(name, kind, help, [(lab, get(lp)) for lab, lp in rows])
    out += spec_families(rows) + lora_family(rows)
    for attr in ("h_ttft", "h_itl", "h_iter", "h_late", "h_queue", "h_prefill", "h_prompt", "h_gen"):
        out += histogram_family([(lab, getattr(lp, attr)) for lab, lp in rows])
    qs = [(lab, lp.lateness_quantiles()) for lab, lp in rows]
    for k, q in enumerate((0.5, 0.99)):
        out += family(
            f"goodbench:step_lateness_p{int(q * 100)}_seconds",
            "gauge",
            f"Step lateness p{int(q * 100)} over the last {qs[0][1][k][2]} steps.",
            [(lab, v[k][1]) for lab, v in qs],
        )
    return "\n".join(out) + "\n"
