"""Several engine instances in virtual time: replicas behind a router, or prefill/decode
disaggregation (engine/layout.py). One instance runs on instance.py's loop; this loop steps whichever
instance is earliest, so every instance keeps its own clock.

Disaggregation convention (vLLM's disaggregated serving with a KV connector and its proxy): the
prefill instance runs the prompt as a request with max_tokens=1 and its sampled token is not streamed;
the KV moves to a decode instance, which recomputes the last prompt position (as a prefix-cache hit
always does) and streams from its first step. So TTFT = prefill queueing + prefill + KV transfer +
decode queueing + the first decode step, and prefill instances run prefill-only steps, decode
instances decode-only batches.

Arrivals come from virtual/arrivals.py, so open loops, closed loops and multi-turn sessions run on a
cluster as on one instance. When finishing requests can create arrivals (closed loops, sessions), no
instance runs its decode fast path past another busy instance's clock: a finish there could bring a
request here before that time."""

from __future__ import annotations

import heapq
import math
from collections import deque

from ...records import RequestRecord, RequestSpec
from ..config import EngineConfig
from ..core import Engine, RequestTooLong
from ..costmodel import CostModel
from ..kvcache import Seq
from ..layout import ClusterSpec
from ..router import Router
from .instance import decode_run, energy_stats, lora_loads, spec_stats
from .recorder import NOT_FIT, Tally, prompt_hashes, with_request


class _Instance:
    """One engine with its own clock (when its next step may start) and its routed/finished counts."""

    def __init__(self, engine: Engine, role: str):
        self.engine, self.role = engine, role
        self.t = 0.0
        self.routed = 0
        self.done_at: deque = deque()  # finish times, in order
        self.done = 0

    def outstanding(self, t: float) -> int:
        while self.done_at and self.done_at[0] <= t:
            self.done_at.popleft()
            self.done += 1
        return self.routed - self.done


def _clock(x: _Instance) -> float:
    return x.t


class ClusterSim:
    """The event loop. Events: arrivals (to the router) and KV landings (to a decode instance)."""

    def __init__(
        self,
        spec: ClusterSpec,
        base: EngineConfig,
        requests: list[RequestSpec],
        cost: CostModel | None = None,
        step_scale: float = 1.0,
    ):
        """cost: one cost model for every instance (tests; None: each instance's config's own).
        step_scale: every instance's step times times this (how sure the engine is, in sweeps)."""
        spec.check()
        self.spec, self.requests = spec, requests
        pcfg, dcfg = spec.configs(base)

        def engine(cfg, i):  # i: the instance's own step-time jitter draws (engine/jitter.py)
            return Engine(cfg, (cost or CostModel.for_config(cfg.resolved())).scaled(step_scale), salt=i)

        if spec.disaggregated:
            self.front = [_Instance(engine(pcfg, i), "prefill") for i in range(spec.prefill)]
            self.back = [_Instance(engine(dcfg, spec.prefill + i), "decode") for i in range(spec.decode)]
            self.xfer = spec.kv_transfer(base)
        else:
            self.front = [_Instance(engine(base, i), "mixed") for i in range(spec.replicas)]
            self.back = []
        self.insts = self.front + self.back
        bs = self.front[0].engine.cfg.block_size
        self.bs, self.pc = bs, self.front[0].engine.cfg.enable_prefix_caching
        self.router = Router(spec.router, len(self.front), bs)
        self.back_router = Router("least-outstanding", len(self.back), bs) if self.back else None
        self.tally = Tally(len(requests), cache_said=self.pc)
        self.arr = None  # the arrivals (virtual/arrivals.py), set by run()
        self.events: list = []  # KV landings: (time, request index)
        self.pf_busy: dict[int, float] = {}
        self.transfers: list[float] = []

    # ------------------------------------------------------------------ events
    def _fail(self, k: int, t: float, why: str) -> None:
        """Request k is refused: recorded as an error; its user or session goes on."""
        self.tally.bad[k] = why
        self.arr.finished((k,), t, failed=True)

    def _place(self, inst: _Instance, seq: Seq, t: float) -> bool:
        if not inst.engine.has_work:
            inst.t = max(inst.t, t)
        try:
            inst.engine.add(seq)
        except RequestTooLong as e:
            self._fail(seq.id, t, str(e))
            return False
        inst.routed += 1
        return True

    def prime(self, primes: list) -> None:
        """A priming phase before the clock (workloads/priming.py): each priming request routed as the router
        would route it, all in flight together, its prompt's blocks left in that instance's cache."""
        load = [0] * len(self.front)
        for p in primes:
            hashes = prompt_hashes(p, self.bs)
            i = self.router.pick(load, hashes, lambda j, h=hashes: self.front[j].engine.kv.cached_blocks_of(h), None)
            self.front[i].engine.kv.prime(hashes)
            load[i] += 1

    def _arrive(self, t: float, k: int) -> None:
        r = self.requests[k]
        self.tally.sent[k] = self.arr.sent[k]
        hashes = prompt_hashes(r, self.bs) if self.pc or self.router.wants_hashes else ()
        i = self.router.pick(
            [x.outstanding(t) for x in self.front],
            hashes,
            lambda j: self.front[j].engine.kv.cached_blocks_of(hashes),
            r.session,
        )
        mt = 1 if self.spec.disaggregated else r.max_tokens
        s = with_request(Seq(k, r.prompt_tokens, mt, arrival=t, hashes=hashes, priority=r.priority or 0), r)
        if self.spec.disaggregated:
            try:  # refuse early what decode cannot hold
                self.back[0].engine.check_fits(r.prompt_tokens, r.max_tokens)
            except RequestTooLong as e:
                self._fail(k, t, str(e))
                return
        if self._place(self.front[i], s, t):
            self.tally.routed[k] = (str(i), s)  # as `goodbench serve --replicas N` names its instances
            if not self.spec.disaggregated:
                self.tally.seqs[k] = s

    def _land(self, t: float, k: int) -> None:
        r = self.requests[k]
        i = self.back_router.pick([x.outstanding(t) for x in self.back], (), lambda j: 0, None)
        pre = self.tally.routed.get(k, (None, None))[1]  # the prefill instance's: its images' tokens counted
        n = pre.prompt_len if pre is not None else r.prompt_tokens
        s = Seq(k, n, r.max_tokens, arrival=t, priority=r.priority or 0)
        s.lora, s.klass = r.adapter, r.cls  # the decode side drafts: its acceptance is the class's
        s.preloaded = n - 1
        if self._place(self.back[i], s, t):
            self.tally.seqs[k] = s

    def _finished(self, inst: _Instance, seqs, t: float) -> None:
        """Requests that ended on a mixed or decode instance: the router's counts and the arrivals."""
        for _ in seqs:
            inst.done_at.append(t)
        if seqs and self.arr.dynamic:  # only they need to know (loads are not kept here otherwise)
            self.arr.finished([s.id for s in seqs], t)

    # ------------------------------------------------------------------ steps
    def _horizon(self, inst: _Instance) -> float:
        """The earliest time something could reach this instance: the next known event; for decode
        instances also any prefill instance's next step (its finished prompts land later); with arrivals
        that follow finishes (closed loops, sessions), any other busy instance's clock."""
        heap, events = self.arr.heap, self.events
        h = heap[0][0] if heap else math.inf
        if events and events[0][0] < h:
            h = events[0][0]
        others = self.insts if self.arr.dynamic else self.front if inst.role == "decode" else ()
        for x in others:
            if x is not inst and x.engine.has_work and x.t < h:
                h = x.t
        return h

    def _step(self, inst: _Instance) -> None:
        eng = inst.engine
        if inst.role != "prefill":
            run = decode_run(eng, self.tally, self._horizon(inst), inst.t)
            if run is not None:
                inst.t, finished = run
                if finished:
                    self._finished(inst, finished, inst.t)
                return
        res = eng.step()
        if res is None:  # the head request can never be scheduled
            s = eng.drop_unschedulable()
            inst.done_at.append(inst.t)
            self._fail(s.id, inst.t, NOT_FIT)
            return
        inst.t += res.duration
        if inst.role == "prefill":
            self._prefill_done(inst, res)
            return
        self.tally.emit(res, inst.t)
        if res.finished:
            self._finished(inst, res.finished, inst.t)

    def _prefill_done(self, inst: _Instance, res) -> None:
        for s in res.batch.seqs:
            self.pf_busy[s.id] = self.pf_busy.get(s.id, 0.0) + res.duration
        for s in res.finished:
            inst.done_at.append(inst.t)
            x = self.xfer.seconds(s.prompt_len, self.pf_busy.pop(s.id, 0.0))
            self.transfers.append(x)
            heapq.heappush(self.events, (inst.t + x, s.id))

    def run(self, arr) -> list[RequestRecord]:
        """Run the requests as the arrivals (virtual/arrivals.py) bring them."""
        self.arr = arr
        heap, events, insts, inf = arr.heap, self.events, self.insts, math.inf
        while True:
            busy = [x for x in insts if x.engine.has_work]
            nxt = min(busy, key=_clock) if busy else None
            ta = heap[0][0] if heap else inf
            tl = events[0][0] if events else inf
            t = ta if ta <= tl else tl
            if t < inf and (nxt is None or t <= nxt.t):
                if ta <= tl:
                    due = arr.pop(ta)  # None: a send, or images to preprocess: what follows is on the heap
                    if due is not None:
                        self._arrive(*due)
                else:
                    self._land(*heapq.heappop(events))
            elif nxt is not None:
                self._step(nxt)
            else:
                break
        return self.tally.records(self.requests)

    def stats(self) -> dict:
        st = [x.engine.stats for x in self.insts]
        xs = sorted(self.transfers)
        busy = sum(s.busy_s for s in st)
        prof = next((x.engine.cost.profile for x in self.insts if x.engine.cost.profile), None)
        moe = next((x.engine.cost.moe for x in self.insts if x.engine.cost.moe), None)
        energy = energy_stats([x.engine for x in self.insts])
        spec = spec_stats([x.engine for x in self.insts])
        return (
            ({"profile": dict(prof)} if prof else {})
            | ({"speculative": spec} if spec else {})
            | ({"images": n} if (n := sum(x.engine.stats.images for x in self.insts)) else {})
            | ({"images_not_encoded": sum(x.engine.sched.encoder.skipped for x in self.insts)} if n else {})
            | lora_loads([x.engine for x in self.insts])
            | ({"moe": dict(moe)} if moe else {})
            | ({"energy": energy} if energy else {})
            | {
                "busy_s": busy,
                "mean_batch": sum(s.busy_seqs_s for s in st) / (busy or 1.0),
                "prefill_share": sum(s.prefill_busy_s for s in st) / (busy or 1.0),
                "instances": [
                    {
                        "role": x.role,
                        "gpu": x.engine.cfg.gpu,
                        "tp": x.engine.cfg.tensor_parallel_size,
                        "requests": x.routed,
                        "steps": x.engine.stats.steps,
                        "busy_s": x.engine.stats.busy_s,
                    }
                    for x in self.insts
                ],
                "steps": sum(s.steps for s in st),
                "preemptions": sum(s.preemptions for s in st),
                "max_step_tokens": max(s.max_step_tokens for s in st),
                "prefix_cache_queries": sum(x.engine.kv.queries for x in self.insts),
                "prefix_cache_hits": sum(x.engine.kv.hits for x in self.insts),
                "router": self.spec.router,
                "kv_link": self.xfer.link.name if self.back else None,
                "kv_transfer_ms_p50": xs[len(xs) // 2] * 1000 if xs else None,
                "kv_transfer_ms_max": xs[-1] * 1000 if xs else None,
            }
        )
