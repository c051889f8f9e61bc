"""When each request reaches the engine in virtual time, as a plan says: at fixed offsets (open loop),
when a user's previous request finished (closed loop), when a session's previous turn was answered,
or when an agent job's call has every parent answered.
One interface for the one-instance loop and the cluster: `heap` holds (time, request index, kind)
events, a request's send and then its arrival at the engine, so heap[0][0] is the next time anything
happens; `pop(now)` hands over the next arrival due by `now` (sends due on the way are turned into
arrivals); `finished(ids, t, failed)` tells the arrivals that requests ended at t (closed loops and
sessions then schedule what follows); `dynamic` says whether a finish can change an arrival the heap
does not show yet (the cluster then keeps its instances in step).

Between a request's send and its arrival lies the server's front end (HTTP, tokenizing; FrontEnd): a
constant, or, for a server calibrated to one whose front end shares a CPU with its engine, a delay that
grows with the requests in flight at the send and the prompt's length. That is why a send is an event
of its own: its delay is known only once the loop has reached the send and knows what finished before
it. `sent[k]` and `load[k]` keep each request's send time and the requests in flight when it was sent.
A vision-language model's front end then preprocesses a request's images (frontend.MediaQueue): decoded in a
pool of threads (an event, DECODED), then on its one processor in the order decoding finished: the request
reaches the engine when that is done (PREPPED)."""

from __future__ import annotations

import bisect
import heapq
import math

from ..frontend import MediaQueue, front_end

SEND, ARRIVE, PREPPED, DECODED = 0, 1, 2, 3


class _Arrivals:
    """What every kind of arrivals shares: the event heap, the sends turned into arrivals, the finishes
    counted (a request is in flight from its send until it ends). With a constant front end a send's
    arrival is known at once and goes on the heap as it is (one event per request, as fast as before);
    its load is counted when it arrives, by which time every finish before its send is known."""

    dynamic = False

    def __init__(self, prompts, front):
        n = len(prompts)
        self.front, self.prompts = front_end(front), prompts
        self.constant = self.front.constant
        self.dynamic = type(self).dynamic or not self.constant
        self.heap: list = []
        self.sent = [math.nan] * n
        self.load = [0] * n  # where finishes are reported: one instance, or a cluster with dynamic arrivals
        self._ends: list[float] = []
        self._sends = 0
        self.media: list | None = None  # per request its images' preprocessing (frontend.MediaWork; None: no images)
        self.queue = MediaQueue()

    def _send(self, t: float, k: int) -> None:
        if self.constant:
            self.sent[k] = t
            heapq.heappush(self.heap, (t + self.front.base_s, k, ARRIVE))
        else:
            heapq.heappush(self.heap, (t, k, SEND))

    def _count(self, t: float, k: int) -> int:
        """Request k, sent at t: the requests in flight then (sent before it, not ended by t)."""
        self.load[k] = n = self._sends - bisect.bisect_right(self._ends, t)
        self._sends += 1
        return n

    def pop(self, now: float):
        """The next arrival due by `now` as (time, request index), or None."""
        heap = self.heap
        while heap and heap[0][0] <= now:
            t, k, kind = heapq.heappop(heap)
            if kind == PREPPED:
                return t, k
            if kind == DECODED:
                heapq.heappush(heap, (self.queue.done(t, self.media[k]), k, PREPPED))
                continue
            if kind == ARRIVE:
                if self.constant:
                    self._count(self.sent[k], k)
                if self.media and self.media[k] is not None:
                    heapq.heappush(heap, (self.queue.decoded(t, self.media[k]), k, DECODED))
                    continue
                return t, k
            self.sent[k] = t
            heapq.heappush(heap, (t + self.front.delay(self._count(t, k), self.prompts[k]), k, ARRIVE))
        return None

    def finished(self, ids, t: float, failed: bool = False) -> None:
        for _ in ids:
            bisect.insort(self._ends, t)
        self._follow(ids, t, failed)

    def _follow(self, ids, t: float, failed: bool) -> None:
        """What follows these requests' end (closed loops, sessions, jobs)."""


class OpenArrivals(_Arrivals):
    """Request k is sent at offsets[k]."""

    def __init__(self, offsets, front=0.0, prompts=None):
        super().__init__(prompts if prompts is not None else [0] * len(offsets), front)
        for k, t in enumerate(offsets):
            self._send(float(t), k)


class ClosedArrivals(_Arrivals):
    """`users` users; each one's next request is sent think_s after its previous one finished, until the
    requests (or duration_s of virtual time) run out."""

    dynamic = True

    def __init__(self, prompts, users: int, think_s: float = 0.0, duration_s: float | None = None, front=0.0):
        super().__init__(prompts, front)
        self.n, self.think_s, self.duration_s = len(prompts), think_s, duration_s
        self.next = min(users, self.n)
        for k in range(self.next):
            self._send(0.0, k)

    def _follow(self, ids, t: float, failed: bool) -> None:
        for _ in ids:
            if self.next < self.n and (self.duration_s is None or t + self.think_s < self.duration_s):
                self._send(t + self.think_s, self.next)
                self.next += 1


def _starts(groups) -> tuple[list[int], list[int]]:
    """Requests laid out group after group (a session's turns, a job's calls): each group's first
    request index, and each request's group."""
    start, owner = [], []
    for i, g in enumerate(groups):
        start.append(len(owner))
        owner += [i] * len(g)
    return start, owner


class _Groups(_Arrivals):
    """Groups of requests (sessions, agent jobs) that start at their arrival or when one of `cap` slots
    frees; what follows a group's first request is the subclass's."""

    dynamic = True

    def __init__(self, groups, units, cap: int, prompts, front):
        super().__init__(prompts, front)
        self.start, self.owner = _starts(units)
        self.groups, self.cap = groups, cap or len(groups)
        self.waiting = list(range(len(groups)))[::-1]  # next group to start at the end
        self.active = 0

    def _started(self, i: int) -> None:
        """Group i took a slot (subclasses note it)."""

    def _fill(self, t: float) -> None:
        while self.waiting and self.active < self.cap:
            i = self.waiting.pop()
            self.active += 1
            self._started(i)
            self._send(max(t, self.groups[i].arrival_s), self.start[i])


class SessionArrivals(_Groups):
    """Multi-turn sessions: requests are the sessions' turns back to back (workloads.sessions). A session
    starts at its arrival (or when one of `cap` slots frees); each next turn arrives its think time after
    the previous one ended; a failed turn ends its session."""

    def __init__(self, sessions, cap: int = 0, prompts=None, front=0.0):
        units = [s.turns for s in sessions]
        super().__init__(sessions, units, cap, _prompts(prompts, units), front)
        self.sessions = sessions
        self._fill(0.0)

    def _follow(self, ids, t: float, failed: bool) -> None:
        for k in ids:
            i = self.owner[k]
            turn = k - self.start[i]  # 0-based
            turns = self.sessions[i].turns
            if not failed and turn + 1 < len(turns):
                self._send(t + turns[turn + 1].think_s, k + 1)
            else:
                self.active -= 1
                self._fill(t)


class JobArrivals(_Groups):
    """Agent jobs (workloads.agent): requests are the jobs' calls back to back, each job's in node order.
    A job starts at its arrival (or when one of `cap` slots frees); a call arrives its planned delay
    after the last of its parents ended; a failed call ends its job (nothing after it is sent)."""

    def __init__(self, jobs, cap: int = 0, prompts=None, front=0.0):
        units = [j.nodes for j in jobs]
        super().__init__(jobs, units, cap, _prompts(prompts, units), front)
        self.jobs = jobs
        self.children = [j.children for j in jobs]
        self.pending = [[len(n.parents) for n in j.nodes] for j in jobs]
        self.latest = [[0.0] * len(j.nodes) for j in jobs]
        self.inflight = [0] * len(jobs)
        self.dead = [False] * len(jobs)
        self._fill(0.0)

    def _started(self, i: int) -> None:
        self.inflight[i] = 1

    def _follow(self, ids, t: float, failed: bool) -> None:
        for k in ids:
            i = self.owner[k]
            self.dead[i] = self.dead[i] or failed
            if not self.dead[i]:
                self._release_children(i, k - self.start[i], t)
            self.inflight[i] -= 1
            if self.inflight[i] == 0:
                self.active -= 1
                self._fill(t)

    def _release_children(self, i: int, node: int, t: float) -> None:
        """Node `node` of job i ended at t: its children whose parents have all ended arrive."""
        for c in self.children[i][node]:
            self.pending[i][c] -= 1
            self.latest[i][c] = max(self.latest[i][c], t)
            if self.pending[i][c] == 0:
                self.inflight[i] += 1
                self._send(self.latest[i][c] + self.jobs[i].nodes[c].delay_s, self.start[i] + c)


def _prompts(prompts, units) -> list:
    return prompts if prompts is not None else [0] * sum(len(u) for u in units)


def arrivals_for(plan, front=0.0, processors: int = 1):
    """The arrivals a plan describes (workloads.plan.Plan), each reaching the engine through the front
    end (a FrontEnd, or a constant in seconds) after its send, and its images' preprocessing on the front
    ends' processors (one per replica's API server)."""
    prompts = [r.prompt_tokens for r in plan.requests]
    if plan.jobs:
        arr = JobArrivals(plan.jobs, plan.job_cap, prompts, front)
    elif plan.sessions:
        arr = SessionArrivals(plan.sessions, plan.session_cap, prompts, front)
    elif plan.closed:
        a = plan.arrival
        arr = ClosedArrivals(prompts, a.concurrency, a.think_time_s, plan.duration_s, front)
    else:
        arr = OpenArrivals(plan.offsets, front, prompts)
    if arr.front.preprocesses and any(r.media for r in plan.requests):
        arr.media = [arr.front.media(r.media["sizes"]) if r.media else None for r in plan.requests]
        arr.queue = MediaQueue(processors)
    return arr
