"""One engine instance in virtual time: arrivals + Engine -> records, with no sockets and no sleeping.

Every request is 'sent' at its arrival (no client lag) and each token arrives at the end of the step
that produced it, so the records mean exactly what a perfect client would have measured."""

from __future__ import annotations

import json
import math
from typing import NamedTuple

from ...records import RequestRecord, RequestSpec
from ..core import Engine, RequestTooLong
from ..kvcache import Seq
from ..speculative import engine_counts
from .recorder import NOT_FIT, Tally, prompt_hashes, with_request


class DecodeStep(NamedTuple):
    """One step of a closed-form decode run, as a Batch shows it to the cost model."""

    decode_tokens: int
    decode_ctx: int
    prefill_tokens: int = 0
    prefill_attn: float = 0.0
    prefill_ctx: int = 0
    padding: int = 0
    spec_tokens: int = 0  # never drafts (a decode run is taken only without speculation)

    @property
    def num_seqs(self) -> int:
        return self.decode_tokens


def _trace_line(engine: Engine, res, start: float) -> str:
    b = res.batch
    return (
        json.dumps(
            {
                "step": engine.stats.steps,
                "start": round(start, 6),
                "duration": round(res.duration, 6),
                "prefill_tokens": b.prefill_tokens,
                "decode_tokens": b.decode_tokens,
                "spec_tokens": b.spec_tokens,
                "batch_size": b.num_seqs,
                "kv_usage": round(engine.kv.usage, 4),
                "preemptions": len(b.preempted),
                "lateness": 0.0,
            }
        )
        + "\n"
    )


def decode_run(engine: Engine, tally: Tally, horizon: float, now: float, on_step=None) -> tuple[float, list] | None:
    """Take the engine's closed-form decode steps up to the horizon (engine.decode_run) and give every
    running request its token times: (the new now, the finished sequences), or None."""
    run = engine.decode_run(4096, horizon, now)
    if run is None:
        return None
    ends, finished = run
    if on_step is not None:
        r, ctx = engine.last_run
        for j, end in enumerate(ends):
            on_step(DecodeStep(r, ctx + j * r), ends[j - 1] if j else now, end)
    times = tally.times
    for s in engine.sched.running:  # finished ones have left running already
        times[s.id].extend(ends)
    for s in finished:
        times[s.id].extend(ends)
    return ends[-1], finished


def admit(engine: Engine, seq: Seq, tally: Tally) -> bool:
    """Hand a request to the engine; one it refuses is recorded as an error (False)."""
    try:
        engine.add(seq)
    except RequestTooLong as e:
        tally.bad[seq.id] = str(e)
        return False
    tally.seqs[seq.id] = seq
    return True


def _arrive(engine: Engine, requests: list[RequestSpec], arr, now: float, tally: Tally) -> None:
    """Admit every request whose arrival time has come (a request that can never fit fails at once)."""
    bs, pc = engine.cfg.block_size, engine.cfg.enable_prefix_caching
    while (due := arr.pop(now)) is not None:
        t, k = due
        tally.sent[k] = arr.sent[k]
        r = requests[k]
        s = Seq(
            k,
            r.prompt_tokens,
            r.max_tokens,
            arrival=t,
            priority=r.priority or 0,
            hashes=prompt_hashes(r, bs) if pc else (),
        )
        with_request(s, r)
        if not admit(engine, s, tally):
            arr.finished((k,), t, failed=True)


def run_instance(
    engine: Engine,
    requests: list[RequestSpec],
    arr,
    trace_path: str | None = None,
    max_virtual_s: float | None = None,
    fast: bool = True,
    on_step=None,
) -> list[RequestRecord]:
    """Run the requests through one engine as the arrivals (virtual/arrivals.py) bring them. fast=False
    takes every step singly (the decode fast path is exact; tests compare the two). on_step(batch,
    start, end) is called after every step, a closed-form decode run's too (calibration follows the
    clock with it)."""
    tally = Tally(len(requests), cache_said=engine.cfg.enable_prefix_caching)
    pending = arr.heap
    trace = open(trace_path, "w", encoding="utf-8") if trace_path else None
    now = 0.0
    try:
        while pending or engine.has_work:
            _arrive(engine, requests, arr, now, tally)
            if not engine.has_work:
                if pending:
                    now = max(now, pending[0][0])
                continue
            if max_virtual_s is not None and now > max_virtual_s:
                break
            if trace is None and fast:
                run = decode_run(engine, tally, pending[0][0] if pending else math.inf, now, on_step)
                if run is not None:
                    now, done = run
                    arr.finished([s.id for s in done], now)
                    continue
            res = engine.step()
            if res is None:  # nothing schedulable and nothing running: the head request can never fit
                s = engine.drop_unschedulable()
                tally.bad[s.id] = NOT_FIT
                arr.finished((s.id,), now, failed=True)
                continue
            start = now
            now += res.duration
            if on_step is not None:
                on_step(res.batch, start, now)
            tally.emit(res, now)
            arr.finished([s.id for s in res.finished], now)
            if trace is not None:
                trace.write(_trace_line(engine, res, start))
    finally:
        if trace is not None:
            trace.close()
    return tally.records(requests)


def instance_stats(engine: Engine) -> dict:
    """What the simulation block of a summary reports about one instance (with what its
    engine_uncertainty is judged from: the busy time, the mean requests per step, the prefill share)."""
    st = engine.stats
    busy = st.busy_s or 1.0
    out = {
        "steps": st.steps,
        "preemptions": st.preemptions,
        "max_step_tokens": st.max_step_tokens,
        "prefix_cache_queries": engine.kv.queries,
        "prefix_cache_hits": engine.kv.hits,
        "busy_s": st.busy_s,
        "mean_batch": st.busy_seqs_s / busy,
        "prefill_share": st.prefill_busy_s / busy,
    }
    if engine.cost.profile:
        out["profile"] = dict(engine.cost.profile)
    if engine.cost.moe:
        out["moe"] = dict(engine.cost.moe)
    energy = energy_stats([engine])
    if energy:
        out["energy"] = energy
    spec = spec_stats([engine])
    if spec:
        out["speculative"] = spec
    if engine.stats.images:  # and of them, those the prefix or encoder cache spared the encoder
        out |= {"images": engine.stats.images, "images_not_encoded": engine.sched.encoder.skipped}
    return out | lora_loads([engine])


def lora_loads(engines: list[Engine]) -> dict:
    """LoRA: the adapters copied onto the GPUs, and of them read from disk first ({}: no engine serves LoRA)."""
    slots = [e.slots for e in engines if e.slots is not None]
    if not slots:
        return {}
    return {"lora_loads": sum(s.loads for s in slots), "lora_disk_loads": sum(s.disk_loads for s in slots)}


def spec_stats(engines: list[Engine]) -> dict | None:
    """The engines' speculative-decoding counts (speculative.engine_counts); None: none speculated."""
    k = max((e.drafter.spec.k for e in engines if e.drafter is not None), default=0)
    return engine_counts([e.stats.spec for e in engines], k) if k else None


def energy_stats(engines: list[Engine]) -> dict | None:
    """What the summary's simulated energy block is made of (metrics/energy.simulated_block): the steps' joules
    on every GPU, the fleet's idle power, and the idle power over the busy time (to take out of idle x duration)."""
    powered = [e for e in engines if e.cost.power is not None]
    if not powered:
        return None
    gpus = [e.cfg.tensor_parallel_size for e in powered]
    pm = [e.cost.power for e in powered]
    return {
        "busy_j": sum(e.stats.energy_j * g for e, g in zip(powered, gpus)),
        "idle_w": sum(p.idle_w * g for p, g in zip(pm, gpus)),
        "idle_busy_j": sum(p.idle_w * g * e.stats.busy_s for p, g, e in zip(pm, gpus, powered)),
        "gpus": sum(gpus),
        "basis": pm[0].basis,
        "borrowed": next((p.borrowed for p in pm if p.borrowed), None),
    }
