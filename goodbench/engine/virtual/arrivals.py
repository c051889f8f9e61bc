"""When each request reaches the engine in virtual time, as a plan says: at fixed offsets (open loop),
when a user's previous request finished (closed loop), when a session's previous turn was answered,
or when an agent job's call has every parent answered.
One interface for the one-instance loop and the cluster: `heap` holds (time, request index) of known
arrivals; `finished(ids, t, failed)` tells the arrivals that requests ended at t (closed loops and
sessions then schedule what follows); `dynamic` says whether a finish can create an earlier arrival
than the heap shows (the cluster then keeps its instances in step). `delay`: the server's front end
(HTTP, tokenizing) between a request's send and its arrival at the engine; heap times are engine
arrivals, so a request was sent `delay` earlier."""

from __future__ import annotations

import heapq


class OpenArrivals:
    """Request k arrives at offsets[k] (+ delay)."""

    dynamic = False

    def __init__(self, offsets, delay: float = 0.0):
        self.delay = delay
        self.heap = [(float(t) + delay, k) for k, t in enumerate(offsets)]
        heapq.heapify(self.heap)

    def finished(self, ids, t: float, failed: bool = False) -> None:
        pass


class ClosedArrivals:
    """`users` users; each one's next request arrives think_s after its previous one finished, until the
    requests (or duration_s of virtual time) run out."""

    dynamic = True

    def __init__(self, n: int, users: int, think_s: float = 0.0, duration_s: float | None = None, delay: float = 0.0):
        self.n, self.think_s, self.duration_s, self.delay = n, think_s, duration_s, delay
        self.next = min(users, n)
        self.heap = [(delay, k) for k in range(self.next)]

    def finished(self, ids, t: float, failed: bool = False) -> None:
        for _ in ids:
            if self.next < self.n and (self.duration_s is None or t + self.think_s < self.duration_s):
                heapq.heappush(self.heap, (t + self.think_s + self.delay, self.next))
                self.next += 1


def _starts(groups) -> tuple[list[int], list[int]]:
    """Requests laid out group after group (a session's turns, a job's calls): each group's first
    request index, and each request's group."""
    start, owner = [], []
    for i, g in enumerate(groups):
        start.append(len(owner))
        owner += [i] * len(g)
    return start, owner


class _Groups:
    """Groups of requests (sessions, agent jobs) that start at their arrival or when one of `cap` slots
    frees; what follows a group's first request is the subclass's."""

    dynamic = True

    def __init__(self, groups, units, cap: int, delay: float):
        self.delay = delay
        self.start, self.owner = _starts(units)
        self.groups, self.cap = groups, cap or len(groups)
        self.waiting = list(range(len(groups)))[::-1]  # next group to start at the end
        self.active = 0
        self.heap: list = []

    def _started(self, i: int) -> None:
        """Group i took a slot (subclasses note it)."""

    def _fill(self, t: float) -> None:
        while self.waiting and self.active < self.cap:
            i = self.waiting.pop()
            self.active += 1
            self._started(i)
            heapq.heappush(self.heap, (max(t, self.groups[i].arrival_s) + self.delay, self.start[i]))


class SessionArrivals(_Groups):
    """Multi-turn sessions: requests are the sessions' turns back to back (workloads.sessions). A session
    starts at its arrival (or when one of `cap` slots frees); each next turn arrives its think time after
    the previous one ended; a failed turn ends its session."""

    def __init__(self, sessions, cap: int = 0, delay: float = 0.0):
        super().__init__(sessions, [s.turns for s in sessions], cap, delay)
        self.sessions = sessions
        self._fill(0.0)

    def finished(self, ids, t: float, failed: bool = False) -> None:
        for k in ids:
            i = self.owner[k]
            turn = k - self.start[i]  # 0-based
            turns = self.sessions[i].turns
            if not failed and turn + 1 < len(turns):
                heapq.heappush(self.heap, (t + turns[turn + 1].think_s + self.delay, k + 1))
            else:
                self.active -= 1
                self._fill(t)


class JobArrivals(_Groups):
    """Agent jobs (workloads.agent): requests are the jobs' calls back to back, each job's in node order.
    A job starts at its arrival (or when one of `cap` slots frees); a call arrives its planned delay
    after the last of its parents ended; a failed call ends its job (nothing after it is sent)."""

    def __init__(self, jobs, cap: int = 0, delay: float = 0.0):
        super().__init__(jobs, [j.nodes for j in jobs], cap, delay)
        self.jobs = jobs
        self.children = [j.children for j in jobs]
        self.pending = [[len(n.parents) for n in j.nodes] for j in jobs]
        self.latest = [[0.0] * len(j.nodes) for j in jobs]
        self.inflight = [0] * len(jobs)
        self.dead = [False] * len(jobs)
        self._fill(0.0)

    def _started(self, i: int) -> None:
        self.inflight[i] = 1

    def finished(self, ids, t: float, failed: bool = False) -> None:
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
                when = self.latest[i][c] + self.jobs[i].nodes[c].delay_s + self.delay
                heapq.heappush(self.heap, (when, self.start[i] + c))


def arrivals_for(plan, delay: float = 0.0):
    """The arrivals a plan describes (workloads.plan.Plan), each reaching the engine `delay` after its send."""
    if plan.jobs:
        return JobArrivals(plan.jobs, plan.job_cap, delay)
    if plan.sessions:
        return SessionArrivals(plan.sessions, plan.session_cap, delay)
    if plan.closed:
        a = plan.arrival
        return ClosedArrivals(len(plan.requests), a.concurrency, a.think_time_s, plan.duration_s, delay)
    return OpenArrivals(plan.offsets, delay)
