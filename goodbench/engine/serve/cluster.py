"""`goodbench serve --replicas N` and `--disaggregate P:D`: several engine instances in one server
process, each its own step loop on the real clock (steploop.EngineLoop), behind one HTTP front.

Replicas: the router (engine/router.py) picks an instance per request. Disaggregation follows the
simulator's convention (engine/virtual/cluster.py): the router picks a prefill instance, which runs the prompt
as a max_tokens=1 request whose token is not streamed; when that step ends, the KV cache is in flight
for the modelled transfer time (a timer), then lands on the least-loaded decode instance, which holds
the prompt's KV, recomputes its last position and streams every token. TTFT = prefill queueing +
prefill + KV transfer + decode queueing + the first decode step, as in `simulate --disaggregate`.

The single-instance server (server.EngineServer) is not touched by any of this: a cluster is this
subclass, built only when asked for."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from ..config import EngineConfig
from ..core import Engine, RequestTooLong
from ..costmodel import CostModel
from ..frontend import MediaQueue
from ..kvcache import Seq
from ..layout import ClusterSpec
from ..router import Router, front_end_for
from .openai_api import Parsed, error_event
from .server import EngineServer, ServeOptions
from .steploop import EngineLoop


@dataclass
class _Where:
    """Where a request is: in an instance (loop, its sequence there) or in flight between two (timer)."""

    loop: EngineLoop | None
    seq: Seq | None = None
    timer: asyncio.TimerHandle | None = None
    stream: object = None


class ClusterServer(EngineServer):
    def __init__(self, cfg: EngineConfig, opts: ServeOptions, tok, spec: ClusterSpec, cost: CostModel | None = None):
        spec.check()
        self.spec = spec
        self.where: dict[int, _Where] = {}
        self.wanted: dict[int, int] = {}  # disaggregated: the output length the decode side will produce
        self.busy: dict[int, float] = {}  # disaggregated: prefill compute per request (layer-wise overlap)
        super().__init__(cfg, opts, tok, cost)
        self.front_end = front_end_for(spec.router, spec.many, self.front_end)  # as the simulated fleet pays it
        self.media_queue = MediaQueue(len(self.front))  # an API server's image preprocessing per instance

    def _build_loops(self, cost: CostModel | None) -> list[EngineLoop]:
        spec, t0, trace = self.spec, self.t0, self._trace
        if spec.disaggregated:
            pcfg, dcfg = spec.configs(self.cfg)
            self.front = [EngineLoop(Engine(pcfg, cost, salt=i), i, "prefill", trace, t0) for i in range(spec.prefill)]
            self.back = [
                EngineLoop(Engine(dcfg, cost, salt=spec.prefill + i), spec.prefill + i, "decode", trace, t0)
                for i in range(spec.decode)
            ]
            for lp in self.front:
                lp.handoff = lambda res, end, lp=lp: self._prefilled(lp, res, end)
            self.xfer = spec.kv_transfer(self.cfg)
        else:
            self.front = [
                EngineLoop(Engine(self.cfg, cost, salt=i), i, "replica", trace, t0) for i in range(spec.replicas)
            ]
            self.back = []
        bs = self.front[0].engine.cfg.block_size
        self.router = Router(spec.router, len(self.front), bs)
        self.wants_hashes = self.router.wants_hashes
        self.back_router = Router("least-outstanding", len(self.back), bs) if self.back else None
        return self.front + self.back

    def describe(self) -> str:
        """The layout for the ready line."""
        lp0 = self.front[0].engine.cfg
        if not self.back:
            return f"{self.spec.replicas} replicas of {lp0.gpu} x{lp0.tensor_parallel_size} ({self.spec.router} router)"
        d = self.back[0].engine.cfg
        return (
            f"{self.spec.prefill} prefill ({lp0.gpu} x{lp0.tensor_parallel_size}) + {self.spec.decode} decode "
            f"({d.gpu} x{d.tensor_parallel_size}) instances, KV over {self.xfer.link.name}"
        )

    # ------------------------------------------------------------------ requests
    def _submit(self, seq: Seq, req: Parsed) -> None:
        front = self.front
        i = self.router.pick(
            [lp.outstanding for lp in front],
            seq.hashes,
            lambda j: front[j].engine.kv.cached_blocks_of(seq.hashes),
            req.session,
        )
        if self.back:
            self.back[0].engine.check_fits(seq.prompt_len, seq.max_tokens)  # refuse early what decode cannot hold
            self.wanted[seq.id] = seq.max_tokens
            seq.max_tokens = 1
        front[i].submit(seq)
        self.where[seq.id] = _Where(front[i], seq)
        name = self.opts.replica_name
        seq.payload.replica = f"{name}/{i}" if name else str(i)

    def _release(self, seq: Seq) -> None:
        w = self.where.pop(seq.id, None)
        self.wanted.pop(seq.id, None)
        self.busy.pop(seq.id, None)
        if w is None:
            return
        if w.timer is not None:
            w.timer.cancel()
        elif w.seq.status not in ("finished", "aborted"):
            w.loop.engine.abort(w.seq)

    def _prefilled(self, lp: EngineLoop, res, end: float) -> None:
        """A prefill instance's step ended: its finished prompts' KV caches start to cross the link."""
        for s in res.batch.seqs:
            self.busy[s.id] = self.busy.get(s.id, 0.0) + res.duration
        loop = asyncio.get_running_loop()
        for s in res.finished:
            w = self.where.get(s.id)
            if w is None or s.payload is None or s.payload.dead:
                continue
            delay = self.xfer.seconds(s.prompt_len, self.busy.pop(s.id, 0.0))
            w.loop, w.seq, w.stream = None, None, s.payload
            # an absolute deadline, as the step loop's (asyncio's clock is time.monotonic, self.clock):
            # a delay from a second reading would move the landing by however long this process waited
            w.timer = loop.call_at(end + delay, self._land, s)

    def _land(self, pre: Seq) -> None:
        """The KV cache arrived: the request joins the least-loaded decode instance."""
        w = self.where.get(pre.id)
        if w is None:
            return
        lp = self.back[self.back_router.pick([x.outstanding for x in self.back])]
        seq = Seq(
            pre.id,
            pre.prompt_len,
            self.wanted.get(pre.id, 1),
            arrival=self.clock(),
            priority=pre.priority,
            payload=pre.payload,
        )
        seq.preloaded = pre.prompt_len - 1
        seq.lora = pre.lora
        w.loop, w.seq, w.timer = lp, seq, None
        try:
            lp.submit(seq)
        except RequestTooLong as e:  # checked at intake; a decode tier with a shorter context still refuses
            pre.payload.push(error_event(f"the decode instance refused the request: {e}"), done=True)

    def _open_streams(self) -> list:
        return super()._open_streams() + [w.stream for w in self.where.values() if w.timer is not None]

    def _metric_rows(self) -> list[tuple[str, EngineLoop]]:
        return [(f'{self.labels},engine="{lp.index}"', lp) for lp in self.loops]
