"""Several engine instances in virtual time: replicas behind a router, or prefill/decode
disaggregation (P prefill instances hand each prompt's KV cache to one of D decode instances over a
link). One instance stays on simulate.py's loop, untouched; this loop steps whichever instance is
earliest, so every instance keeps its own clock.

Disaggregation convention (vLLM's disaggregated serving with a KV connector and its proxy): the
prefill instance runs the prompt as a request with max_tokens=1 and its sampled token is not streamed;
the KV moves to a decode instance, which recomputes the last prompt position (as a prefix-cache hit
always does) and streams from its first step. So TTFT = prefill queueing + prefill + KV transfer +
decode queueing + the first decode step, and prefill instances run prefill-only steps, decode
instances decode-only batches."""

from __future__ import annotations

import heapq
import math
from array import array
from collections import deque
from dataclasses import dataclass, replace

from ..errors import UsageError
from ..records import RequestRecord, RequestSpec
from .config import EngineConfig
from .core import Engine, RequestTooLong
from .hardware import get_model
from .kvcache import Seq
from .links import Link, get_link, transfer_s
from .router import Router
from .simulate import _records, prompt_hashes, simulate


@dataclass(frozen=True)
class ClusterSpec:
    """replicas: colocated instances of the base config. prefill/decode > 0: disaggregated, each side
    with its own GPU tier and TP (None = the base config's)."""

    replicas: int = 1
    prefill: int = 0
    decode: int = 0
    prefill_gpu: str | None = None
    decode_gpu: str | None = None
    prefill_tp: int | None = None
    decode_tp: int | None = None
    router: str = "least-outstanding"
    kv_link: str = "auto"
    layerwise: bool = False

    @property
    def disaggregated(self) -> bool:
        return self.prefill > 0

    def configs(self, base: EngineConfig) -> tuple[EngineConfig | None, EngineConfig | None]:
        """(prefill config, decode config), resolved; (None, None) when colocated."""
        if not self.disaggregated:
            return None, None
        p = replace(base, gpu=self.prefill_gpu or base.gpu, tensor_parallel_size=self.prefill_tp or base.tensor_parallel_size,
                    num_gpu_blocks=None)
        d = replace(base, gpu=self.decode_gpu or base.gpu, tensor_parallel_size=self.decode_tp or base.tensor_parallel_size,
                    num_gpu_blocks=None)
        return p.resolved(), d.resolved()

    def gpus(self, base: EngineConfig) -> dict[str, int]:
        """GPUs by tier: what the cluster costs."""
        if not self.disaggregated:
            return {base.gpu: self.replicas * base.tensor_parallel_size}
        p, d = self.configs(base)
        out: dict[str, int] = {}
        for cfg, n in ((p, self.prefill), (d, self.decode)):
            out[cfg.gpu] = out.get(cfg.gpu, 0) + n * cfg.tensor_parallel_size
        return out

    def link(self, base: EngineConfig) -> Link | None:
        if not self.disaggregated:
            return None
        p, d = self.configs(base)
        return get_link(self.kv_link, p.gpu, d.gpu, sum(self.gpus(base).values()))

    def kv_transfer(self, base: EngineConfig) -> "KVTransfer":
        """How long a finished prompt's KV cache takes to reach a decode instance."""
        p, d = self.configs(base)
        return KVTransfer(self.link(base), d.kv_bytes_per_token() * d.tensor_parallel_size,  # the whole model's KV
                          min(p.tensor_parallel_size, d.tensor_parallel_size), get_model(base.model).layers,
                          self.layerwise)

    @property
    def many(self) -> bool:
        """More than one instance."""
        return self.disaggregated or self.replicas > 1

    def to_argv(self) -> list[str]:
        """These instances as `goodbench serve` flags (none for one instance)."""
        if not self.many:
            return []
        if not self.disaggregated:
            return ["--replicas", str(self.replicas), "--router", self.router]
        out = ["--disaggregate", f"{self.prefill}:{self.decode}", "--router", self.router, "--kv-link", self.kv_link]
        for flag, v in (("--prefill-gpu", self.prefill_gpu), ("--decode-gpu", self.decode_gpu),
                        ("--prefill-tp", self.prefill_tp), ("--decode-tp", self.decode_tp)):
            if v is not None:
                out += [flag, str(v)]
        return out + (["--layerwise-kv"] if self.layerwise else [])

    def label(self) -> str:
        if self.disaggregated:
            return f"{self.prefill}P:{self.decode}D"
        return f"{self.replicas}x" if self.replicas > 1 else "1x"

    def check(self) -> None:
        if self.replicas < 1 or self.prefill < 0 or self.decode < 0 or (self.prefill > 0) != (self.decode > 0):
            raise UsageError("--replicas must be >= 1 and --disaggregate P:D needs P >= 1 and D >= 1")
        if self.disaggregated and self.replicas != 1:
            raise UsageError("use either --replicas or --disaggregate, not both")


@dataclass(frozen=True)
class KVTransfer:
    """The KV hand-off between a prefill and a decode instance (simulator and server alike)."""

    link: Link
    kv_bytes_per_token: float
    tp: int
    layers: int
    layerwise: bool

    def seconds(self, prompt_len: int, prefill_s: float) -> float:
        """Transfer time of a prompt whose prefill computed for prefill_s (for layer-wise overlap)."""
        return transfer_s(prompt_len * self.kv_bytes_per_token, self.link, self.tp, self.layers, prefill_s,
                          self.layerwise)


def parse_disaggregate(text: str | None) -> tuple[int, int]:
    """`2:2` -> (2, 2); None -> (0, 0)."""
    if not text:
        return 0, 0
    p, sep, d = text.partition(":")
    try:
        pd = int(p), int(d)
    except ValueError:
        pd = (0, 0)
    if not sep or min(pd) < 1:
        raise UsageError(f"--disaggregate {text!r}: expected P:D with P, D >= 1, e.g. 1:3")
    return pd


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


class ClusterSim:
    """The event loop. Events: arrivals (to the router) and KV landings (to a decode instance)."""

    def __init__(self, spec: ClusterSpec, base: EngineConfig, requests: list[RequestSpec]):
        spec.check()
        self.spec, self.requests = spec, requests
        pcfg, dcfg = spec.configs(base)
        if spec.disaggregated:
            self.front = [_Instance(Engine(pcfg), "prefill") for _ in range(spec.prefill)]
            self.back = [_Instance(Engine(dcfg), "decode") for _ in range(spec.decode)]
            self.xfer = spec.kv_transfer(base)
        else:
            cfg = base if base.num_gpu_blocks is not None else base.resolved()
            self.front = [_Instance(Engine(cfg), "mixed") for _ in range(spec.replicas)]
            self.back = []
        self.insts = self.front + self.back
        bs = self.front[0].engine.cfg.block_size
        self.bs, self.pc = bs, self.front[0].engine.cfg.enable_prefix_caching
        self.router = Router(spec.router, len(self.front), bs)
        self.back_router = Router("least-outstanding", len(self.back), bs) if self.back else None
        n = len(requests)
        self.times = [array("d") for _ in range(n)]
        self.sent = [math.nan] * n
        self.seqs: list = [None] * n
        self.bad: dict[int, str] = {}
        self.events: list = []
        self.pf_busy: dict[int, float] = {}
        self.transfers: list[float] = []

    # ------------------------------------------------------------------ events
    def _place(self, inst: _Instance, seq: Seq, t: float) -> bool:
        if not inst.engine.has_work:
            inst.t = max(inst.t, t)
        try:
            inst.engine.add(seq)
        except RequestTooLong as e:
            self.bad[seq.id] = str(e)
            return False
        inst.routed += 1
        return True

    def _arrive(self, t: float, k: int) -> None:
        r = self.requests[k]
        self.sent[k] = t
        hashes = prompt_hashes(r, self.bs) if self.pc else ()
        i = self.router.pick([x.outstanding(t) for x in self.front], hashes,
                             lambda j: self.front[j].engine.kv.cached_blocks_of(hashes),
                             getattr(r, "session_id", None))
        mt = 1 if self.spec.disaggregated else r.max_tokens
        s = Seq(k, r.prompt_tokens, mt, arrival=t, hashes=hashes, priority=r.priority or 0)
        if self.spec.disaggregated:
            self.back[0].engine.check_fits(r.prompt_tokens, r.max_tokens)  # refuse early what decode cannot hold
        if self._place(self.front[i], s, t) and not self.spec.disaggregated:
            self.seqs[k] = s

    def _land(self, t: float, k: int) -> None:
        r = self.requests[k]
        i = self.back_router.pick([x.outstanding(t) for x in self.back], (), lambda j: 0, None)
        s = Seq(k, r.prompt_tokens, r.max_tokens, arrival=t, priority=r.priority or 0)
        s.preloaded = r.prompt_tokens - 1
        if self._place(self.back[i], s, t):
            self.seqs[k] = s

    def _event(self) -> None:
        t, _, kind, k = heapq.heappop(self.events)
        if kind == 0:
            try:
                self._arrive(t, k)
            except RequestTooLong as e:
                self.bad[k] = str(e)
        else:
            self._land(t, k)

    # ------------------------------------------------------------------ steps
    def _horizon(self, inst: _Instance) -> float:
        """The earliest time something could reach this instance: for decode instances, also any
        prefill instance's next step (its finished prompts land later)."""
        h = self.events[0][0] if self.events else math.inf
        if inst.role == "decode":
            for x in self.front:
                if x.engine.has_work and x.t < h:
                    h = x.t
        return h

    def _step(self, inst: _Instance) -> None:
        eng = inst.engine
        if inst.role != "prefill":
            run = eng.decode_run(4096, self._horizon(inst), inst.t)
            if run is not None:
                ends, finished = run
                for s in eng.sched.running:
                    self.times[s.id].extend(ends)
                for s in finished:
                    self.times[s.id].extend(ends)
                    inst.done_at.append(ends[-1])
                inst.t = ends[-1]
                return
        res = eng.step()
        if res is None:  # the head request can never be scheduled
            s = eng.sched._peek()
            eng.sched.remove(s)
            self.bad[s.id] = "request needs more KV cache than the engine has"
            inst.done_at.append(inst.t)
            return
        inst.t += res.duration
        if inst.role == "prefill":
            self._prefill_done(inst, res)
            return
        for s in res.emitted:
            self.times[s.id].append(inst.t)
        for s in res.finished:
            inst.done_at.append(inst.t)

    def _prefill_done(self, inst: _Instance, res) -> None:
        for s in res.batch.seqs:
            self.pf_busy[s.id] = self.pf_busy.get(s.id, 0.0) + res.duration
        for s in res.finished:
            inst.done_at.append(inst.t)
            x = self.xfer.seconds(s.prompt_len, self.pf_busy.pop(s.id, 0.0))
            self.transfers.append(x)
            heapq.heappush(self.events, (inst.t + x, s.id, 1, s.id))

    def run(self, offsets) -> list[RequestRecord]:
        for k, off in enumerate(offsets):
            heapq.heappush(self.events, (float(off), k, 0, k))
        while True:
            busy = [x for x in self.insts if x.engine.has_work]
            nxt = min(busy, key=lambda x: x.t) if busy else None
            if self.events and (nxt is None or self.events[0][0] <= nxt.t):
                self._event()
            elif nxt is not None:
                self._step(nxt)
            else:
                break
        return _records(self.requests, self.sent, self.times, self.seqs, self.bad)

    def stats(self) -> dict:
        st = [x.engine.stats for x in self.insts]
        xs = sorted(self.transfers)
        return {"instances": [{"role": x.role, "gpu": x.engine.cfg.gpu, "tp": x.engine.cfg.tensor_parallel_size,
                               "requests": x.routed, "steps": x.engine.stats.steps, "busy_s": x.engine.stats.busy_s}
                              for x in self.insts],
                "steps": sum(s.steps for s in st), "preemptions": sum(s.preemptions for s in st),
                "router": self.spec.router, "kv_link": self.xfer.link.name if self.back else None,
                "kv_transfer_ms_p50": xs[len(xs) // 2] * 1000 if xs else None,
                "kv_transfer_ms_max": xs[-1] * 1000 if xs else None}


def simulate_cluster(spec: ClusterSpec, base: EngineConfig, requests: list[RequestSpec], offsets) -> tuple[list, dict]:
    """Records (as simulate's) and the cluster's stats. Open loop only."""
    if offsets is None:
        raise UsageError("replicas and disaggregation are simulated with open-loop arrivals (a rate), not --concurrency")
    sim = ClusterSim(spec, base, requests)
    return sim.run(offsets), sim.stats()


def simulate_layout(spec: "ClusterSpec | None", cfg: EngineConfig, requests: list[RequestSpec], offsets, *,
                    plan=None, trace_path: str | None = None) -> tuple[list, dict]:
    """Records and step statistics of the requests on one instance (simulate's own loop: closed loops,
    think time and sessions from the plan, a step trace) or on a cluster of instances (open loop)."""
    closed = plan is not None and plan.closed
    if spec is not None and spec.many:
        if trace_path:
            raise UsageError("--step-trace is for one instance; drop it with --replicas / --disaggregate")
        if plan is not None and plan.sessions:
            raise UsageError("multi-turn sessions are simulated on one instance (no --replicas, --disaggregate "
                             "or instance layouts)")
        return simulate_cluster(spec, cfg, requests, None if closed else offsets)
    eng = Engine(cfg)
    kw = {} if plan is None else {
        "closed_users": plan.arrival.concurrency if closed else 0, "think_s": plan.arrival.think_time_s,
        "duration_s": plan.duration_s, "sessions": plan.sessions,
        "session_cap": plan.spec.session.max_concurrent if plan.sessions else 0}
    recs = simulate(eng, requests, offsets, trace_path=trace_path, **kw)
    return recs, {"steps": eng.stats.steps, "preemptions": eng.stats.preemptions,
                  "max_step_tokens": eng.stats.max_step_tokens,
                  "prefix_cache_queries": eng.kv.queries, "prefix_cache_hits": eng.kv.hits}
