"""A run's plan: the workload's requests and how they are sent (each one's offset in an open loop,
users in a closed loop, or multi-turn sessions). Built once from a WorkloadSpec and shared by every
driver: the real-clock runner, locust, the simulator and sweeps."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..arrivals import ArrivalSpec, offsets as arrival_offsets
from ..errors import UsageError
from ..records import RequestSpec
from .generate import build_requests
from .hol import hol_count
from .lora import assign
from .spec import MESSAGE_APIS, WorkloadSpec

CLOSED_POOL = 5000  # requests generated for a duration-bounded closed loop (cycled)


@dataclass
class Plan:
    requests: list[RequestSpec]
    offsets: np.ndarray | None  # open loop: scheduled send offsets, same length as requests
    arrival: ArrivalSpec
    duration_s: float | None = None
    sessions: list | None = None  # multi-turn sessions (workloads.sessions); requests are their planned turns
    spec: WorkloadSpec | None = None
    tok: object = None  # the tokenizer sessions build their turns' text with
    jobs: list | None = None  # agent jobs (workloads.agent); requests are their planned calls
    primes: list = field(default_factory=list)  # sent before the clock: a controlled hit rate (workloads.priming)
    target_hit_rate: float | None = None  # the hit rate the workload states for its measured requests

    @classmethod
    def at(cls, requests: list[RequestSpec], offsets, arrival: ArrivalSpec | None = None) -> Plan:
        """An open loop: request k sent at offsets[k] seconds."""
        offs = np.asarray(offsets, float)
        return cls(list(requests), offs, arrival or ArrivalSpec("trace", trace=()))

    @classmethod
    def closed_loop(
        cls, requests: list[RequestSpec], users: int, think_s: float = 0.0, duration_s: float | None = None
    ) -> Plan:
        """`users` users, each sending its next request think_s after its previous one finished."""
        return cls(list(requests), None, ArrivalSpec("closed", concurrency=users, think_time_s=think_s), duration_s)

    @property
    def closed(self) -> bool:
        return self.arrival.kind == "closed"

    @property
    def job_cap(self) -> int:
        """Agent jobs in flight at once (0: no cap)."""
        return self.spec.agent.max_concurrent if self.jobs and self.spec is not None else 0

    @property
    def session_cap(self) -> int:
        """Sessions in flight at once (0: no cap)."""
        return self.spec.session.max_concurrent if self.sessions and self.spec is not None else 0

    def expected_reuse(self, block_size: int = 16) -> float | None:
        """The prefix-cache hit rate the workload's structure allows (None when no request declares
        one): prompts without segments count as unique."""
        if not any(r.segments for r in self.requests):
            return None
        from ..workloads.segments import reuse_ratio

        primes = [p.segments for p in self.primes]
        return reuse_ratio(primes + self._prompt_segments(), block_size, seen_first=len(primes))

    def expected_sources(self, block_size: int = 16) -> dict | None:
        """Agent jobs: where the workload's reusable prefixes come from (segments.reuse_by_source: a job's own
        earlier calls, or other jobs); None for other workloads or prompts without structure."""
        if not self.jobs or not any(r.segments for r in self.requests):
            return None
        from ..workloads.segments import reuse_by_source

        return reuse_by_source(self._prompt_segments(), [r.job for r in self.requests], block_size)

    def _prompt_segments(self) -> list:
        """Every request's prompt as segments; one without structure is its own unique run."""
        return [r.segments or ((("unique", r.id), r.prompt_tokens),) for r in self.requests]

    @property
    def planned(self) -> int | None:
        """How many requests the schedule sends (None: a closed loop bounded by time cycles them; sessions
        send their planned turns unless one fails, which ends its session)."""
        if self.sessions or self.jobs or (self.closed and self.duration_s):
            return None
        return len(self.requests)


def _trace_plan(spec: WorkloadSpec, tok) -> Plan:
    from ..workloads.traces import parse_window, read_trace, select, trace_requests

    t = spec.trace
    rows = select(read_trace(t.path, t.format), t.speedup, parse_window(t.window))
    if spec.duration_s is not None:
        rows = [r for r in rows if r.t < spec.duration_s]
    if spec.num_requests is not None:
        rows = rows[: spec.num_requests]
    if not rows:
        raise UsageError(f"{t.path}: no rows in the window asked for")
    reqs = assign(trace_requests(rows, tok, spec.endpoint in MESSAGE_APIS, t.max_output), spec.lora, spec.seed)
    return Plan(reqs, np.array([r.arrival_s for r in reqs], float), spec.arrival, spec.duration_s, spec=spec)


def replay_jobs(spec: WorkloadSpec, a: ArrivalSpec, n: int | None) -> list:
    """A recorded agent trace's jobs: at their recorded arrivals (arrival process `workload`), else
    by the arrival process; `n` of them at most (num_requests / --num-prompts, when given)."""
    from dataclasses import replace

    from ..workloads.agenttrace import read_agent_trace

    jobs, timed = read_agent_trace(spec.agent.trace, spec.agent.trace_format)
    if spec.num_requests is not None:
        jobs = jobs[: spec.num_requests]
    if a.kind == "workload":
        if not timed:
            raise UsageError(f"{spec.agent.trace}: these jobs have no arrival times: give [arrival] a process and rate")
        return sorted(jobs, key=lambda j: j.arrival_s)
    offs = arrival_offsets(a, n=len(jobs), duration_s=spec.duration_s, seed=spec.seed)
    return [replace(j, arrival_s=float(t)) for j, t in zip(jobs, offs)]


def build_plan(spec: WorkloadSpec, tok) -> Plan:
    """The requests and their schedule; with a controlled hit rate, the priming requests and the target too."""
    if any(c.hit_rate is not None for c in spec.classes) and spec.generator in ("hol", "sessions", "trace", "agent"):
        raise UsageError(f"a class's hit_rate is for class mixtures (synthetic, mixed), not {spec.generator} workloads")
    plan = _build(spec, tok)
    if any(c.hit_rate is not None for c in spec.classes):
        from .priming import primes, target_hit_rate

        plan.primes = primes(plan.requests, tok, spec.endpoint in MESSAGE_APIS)
        plan.target_hit_rate = target_hit_rate(plan.requests, spec.classes)
    return plan


def _build(spec: WorkloadSpec, tok) -> Plan:
    a = spec.arrival
    if spec.generator == "trace":
        return _trace_plan(spec, tok)
    if spec.generator == "sessions":
        from ..workloads.sessions import build_sessions, planned_requests

        n = spec.num_requests if spec.num_requests is not None and spec.duration_s is None else spec.session.sessions
        offs = arrival_offsets(a, n=n, duration_s=spec.duration_s, seed=spec.seed)
        sessions = build_sessions(spec, tok, offs)
        return Plan(planned_requests(spec, sessions, tok), None, a, spec.duration_s, sessions, spec, tok)
    if spec.generator == "agent":
        from ..workloads.agent import build_jobs, planned_requests as planned_calls

        n = spec.num_requests if spec.num_requests is not None and spec.duration_s is None else spec.agent.jobs
        jobs = (
            replay_jobs(spec, a, n)
            if spec.agent.trace
            else build_jobs(spec, arrival_offsets(a, n=n, duration_s=spec.duration_s, seed=spec.seed))
        )
        if tok is not None:
            tok.words  # noqa: B018 -- computed once here, not inside the first call's timed send
        return Plan(planned_calls(spec, jobs), None, a, spec.duration_s, spec=spec, tok=tok, jobs=jobs)
    if spec.generator == "hol" and a.kind == "workload":
        n = hol_count(spec) if spec.num_requests is None else min(spec.num_requests, hol_count(spec))
        reqs = build_requests(spec, tok, n)
        return Plan(reqs, np.array([r.arrival_s for r in reqs], float), a, spec.duration_s)
    if a.kind == "workload":
        raise UsageError("arrival process 'workload' is only for generators that time their own requests (hol)")
    if a.kind == "closed":
        n = spec.num_requests or CLOSED_POOL
        return Plan(build_requests(spec, tok, n), None, a, spec.duration_s)
    offs = arrival_offsets(a, n=spec.num_requests, duration_s=spec.duration_s, seed=spec.seed)
    return Plan(build_requests(spec, tok, len(offs)), offs, a, spec.duration_s)
