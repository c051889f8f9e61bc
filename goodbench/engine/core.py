"""Engine: the scheduler, KV cache and cost model stepped together. No clock of its own: the caller
(simulate: virtual time; server: real time) decides when a step's tokens are delivered."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

from ..errors import GoodbenchError
from .adaptive import AimdBudget
from .config import EngineConfig
from .costmodel import SHIPPED, CostModel
from .hardware import get_gpu
from .jitter import factor
from .kvcache import KVCache, Seq, image_keyed
from .lora import AdapterSlots, LoraCost
from .scheduler import Batch, Scheduler
from .speculative import Drafter, SpecCounters
from .vision import encoder_time


class RequestTooLong(GoodbenchError):
    """The engine refuses a request (it can never fit); the server answers 400, simulate records it."""


class NoVision(RequestTooLong):
    """A request with images on a model that takes none (answered and recorded as any refusal)."""


@dataclass
class StepResult:
    duration: float
    batch: Batch
    emitted: list = field(default_factory=list)  # sequences that produced tokens this step
    finished: list = field(default_factory=list)
    counts: list | None = None  # speculative decoding: tokens each emitted sequence produced (None: one each)

    def outputs(self):
        """(sequence, tokens it produced this step) for each emitted sequence: one chunk each."""
        if self.counts is None:
            return ((s, 1) for s in self.emitted)
        return zip(self.emitted, self.counts)


@dataclass
class EngineStats:
    steps: int = 0
    prompt_tokens: int = 0
    generation_tokens: int = 0
    preemptions: int = 0
    busy_s: float = 0.0
    busy_seqs_s: float = 0.0  # sum of step time x requests in the step: / busy_s = the mean batch
    prefill_busy_s: float = 0.0  # time in steps that carried prefill tokens
    max_step_tokens: int = 0  # the most tokens one step carried: below the budget, the budget never bound
    energy_j: float = 0.0  # per GPU, over the steps (engine/power.py; 0 without a power model)
    images: int = 0  # images encoded (a vision-language model's)
    spec: SpecCounters | None = None  # speculative decoding's counters (None: off)


class Engine:
    def __init__(self, cfg: EngineConfig, cost: CostModel | None = None, salt: int = 0):
        self.cfg = cfg.resolved()
        self.cost = cost or CostModel.for_config(self.cfg)
        self.salt = salt  # the step-time jitter's draws (engine/jitter.py): one per engine of a cluster
        self.kv = KVCache(self.cfg.num_gpu_blocks, self.cfg.block_size, self.cfg.enable_prefix_caching)
        self.sched = Scheduler(self.cfg, self.kv)
        self.stats = EngineStats()
        t = self.cfg.adaptive_chunk_target_ms
        self.adaptive = (
            None if t is None else AimdBudget(t / 1000, self.cfg.adaptive_chunk_floor, self.cfg.max_num_batched_tokens)
        )
        if self.adaptive is not None:
            self.sched.budget = self.adaptive.budget
        spec = self.cfg.spec()
        self.drafter = None if spec is None else Drafter(spec, self._draft_cost(), self.cost.fixed_step_s is not None)
        if spec is not None:
            self.stats.spec = SpecCounters()
        cfg = self.cfg
        on = cfg.enable_lora and self.cost.fixed_step_s is None
        self.lora = (
            LoraCost.of(cfg.shape(), cfg.max_lora_rank, cfg.tensor_parallel_size, get_gpu(cfg.gpu)) if on else None
        )
        self.slots = AdapterSlots(cfg.max_loras, cfg.max_cpu_loras or cfg.max_loras) if cfg.enable_lora else None
        # closed-form decode runs (decode_run): steps that differ only in context; not with drafts or adapters
        self.runs_ok = cfg.scheduler in ("vllm", "decode-first") and self.drafter is None and self.slots is None

    def _draft_cost(self) -> CostModel | None:
        """The drafter's cost model on this tier and TP (None: n-gram, or a fixed-step test engine)."""
        shape = self.cfg.draft()
        if shape is None or self.cost.fixed_step_s is not None:
            return None
        from .costmodel import SHIPPED, tier_model

        return tier_model(self.cfg, SHIPPED, shape=shape)

    def check_fits(self, prompt_len: int, max_tokens: int) -> None:
        if prompt_len < 1:
            raise RequestTooLong("the prompt must have at least one token")
        if prompt_len + max_tokens > self.cfg.max_model_len:
            raise RequestTooLong(
                f"prompt ({prompt_len} tokens) + max_tokens ({max_tokens}) = "
                f"{prompt_len + max_tokens} exceeds max_model_len {self.cfg.max_model_len}"
            )

    def add(self, seq: Seq) -> None:
        """Queue a request. With async scheduling, one that arrives while a step runs misses the next
        step too (vLLM scheduled it when this one was launched): the scheduler holds it until the next
        step() has been built."""
        if seq.images:
            self._vision(seq)
        self.check_fits(seq.prompt_len, seq.max_tokens)
        self.stats.images += len(seq.images)
        self.sched.add(seq)
        self.stats.prompt_tokens += seq.prompt_len

    def _launched(self) -> None:
        """After a step (or a run of decode steps) is built: the held requests may join the next one,
        and with async scheduling, if work remains, that next step is already scheduled, so requests
        arriving from now on are held (vLLM's engine core with a batch queue of two)."""
        sched = self.sched
        sched.admit()
        sched.holding = self.cfg.async_scheduling and (bool(sched.waiting) or bool(sched.running))

    def _vision(self, seq: Seq) -> None:
        """A request's images as prompt tokens and encoder parts (engine/vision.py; each one skipped where the
        prefix or encoder cache holds it: engine/encodercache.py). Its prompt blocks are keyed by its images, as
        vLLM hashes them in: the same images (content keys) match, unique or unknown ones match nothing."""
        v = self.cfg.shape().vision
        if v is None:
            raise NoVision(f"{self.cfg.model} takes no images (a vision-language model does: qwen2.5-vl-7b)")
        m, gpu, tp = self.cfg.shape(), get_gpu(self.cfg.gpu), self.cfg.tensor_parallel_size
        fixed = self.cost.fixed_step_s is not None
        ids = seq.image_ids if len(seq.image_ids) == len(seq.images) else (None,) * len(seq.images)
        parts, end = [], 0
        for (w, h), key in zip(seq.images, ids):
            tokens, patches = v.tokens(w, h)
            end += v.prompt_tokens(w, h)
            secs = 0.0 if fixed else encoder_time(v, patches, m.hidden, gpu, tp, SHIPPED.prefill_attn)
            parts.append((key, tokens, secs, end))
            seq.enc_tokens += tokens
            seq.enc_all += tokens
        seq.prompt_len += end
        seq.enc_parts = tuple(parts)
        known = all(k is not None for k in ids)
        seq.hashes = image_keyed(seq.hashes, ids, end, self.kv.block_size) if known else ()

    def abort(self, seq: Seq) -> None:
        self.sched.remove(seq)

    def drop_unschedulable(self) -> Seq:
        """When step() returned None with work queued, the head request can never be scheduled (it
        needs more KV blocks than the engine has): remove it and return it, so the caller fails that
        one request instead of spinning."""
        seq = self.sched.peek()
        self.sched.remove(seq)
        return seq

    @property
    def has_work(self) -> bool:
        sched = self.sched
        if sched.waiting or sched.incoming:
            return True
        if self.cfg.scheduler == "static":
            return any(s.status == "running" for s in sched.running)
        return bool(sched.running)

    @property
    def num_running(self) -> int:
        return sum(1 for s in self.sched.running if s.status == "running")

    def step(self) -> StepResult | None:
        """Build and 'execute' one step. None when nothing can be scheduled."""
        batch = self.sched.schedule()
        self.stats.preemptions += len(batch.preempted)
        if not batch.seqs and not batch.padding:
            if self.sched.incoming:  # nothing to run ahead of the held requests: they are next
                self.sched.admit()
                return self.step()
            self.sched.holding = False  # no step runs: the next arrival is taken in at once
            return None
        dur = self.cost.batch_time(batch) + batch.encoder_s
        if self.drafter is not None:
            dur += self._speculate(batch)
        if self.slots is not None:
            dur += self._lora_time(batch)
        if self.cost.step_jitter:
            dur *= factor(self.cost.step_jitter, self.salt, self.stats.steps)
        if self.adaptive is not None and batch.decode_tokens:
            self.sched.budget = self.adaptive.observe(dur, batch.num_tokens >= self.sched.budget)
        res = StepResult(dur, batch)
        kv, sched = self.kv, self.sched
        if batch.drafted:
            self._emit_drafted(batch, res)
        else:
            for seq in batch.seqs:
                if kv.prefix_caching:
                    kv.commit_full_blocks(seq)
                if seq.num_computed >= seq.num_tokens:
                    seq.num_output += 1
                    res.emitted.append(seq)
                    if seq.num_output >= seq.max_tokens:
                        sched.finish(seq)
                        res.finished.append(seq)
        self._launched()
        st = self.stats
        st.steps += 1
        st.max_step_tokens = max(st.max_step_tokens, batch.num_tokens)
        st.generation_tokens += len(res.emitted) if res.counts is None else sum(res.counts)
        st.busy_s += dur
        st.busy_seqs_s += dur * batch.num_seqs
        st.energy_j += self.cost.step_energy(batch.num_tokens, batch.decode_ctx + batch.prefill_ctx, dur)
        if batch.prefill_tokens:
            st.prefill_busy_s += dur
        return res

    def _lora_time(self, batch: Batch) -> float:
        """The LoRA GEMMs of the step's adapter requests, and the loads of adapters not on the GPU."""
        names = [s.lora for s in batch.seqs if s.lora is not None]
        if not names:
            return 0.0
        tokens = sum(n for s, n in zip(batch.seqs, batch.tokens) if s.lora is not None)
        distinct = list(dict.fromkeys(names))
        loads = self.slots.activate(distinct, self.lora)
        return loads if self.lora is None else self.lora.step_time(tokens, len(distinct)) + loads

    def _speculate(self, batch: Batch) -> float:
        """The seconds speculation adds to this step: verifying the drafts, and the drafter's passes."""
        n = batch.num_tokens - batch.spec_tokens
        return self.cost.verify_time(n, batch.num_seqs, batch.spec_tokens) + self.drafter.time(batch)

    def _emit_drafted(self, batch: Batch, res: StepResult) -> None:
        """A step that verified drafts: accept a prefix of each request's drafts (SpecDecode.accepted), roll
        its computed tokens back to what was accepted (the rejected drafts' KV slots are written over later),
        count them, and emit 1 + accepted tokens per request (never past its max_tokens) in one chunk."""
        spec, counters, out = self.drafter.spec, self.stats.spec, {}
        for seq, d in batch.drafted:
            a = spec.accepted(seq.id, seq.num_output, d, self.salt, seq.klass)
            counters.add(d, a)
            seq.num_computed -= d - a
            out[id(seq)] = min(1 + a, seq.max_tokens - seq.num_output)
        res.counts = []
        kv, sched = self.kv, self.sched
        for seq in batch.seqs:
            if kv.prefix_caching:
                kv.commit_full_blocks(seq)
            if seq.num_computed >= seq.num_tokens:
                m = out.get(id(seq), 1)
                seq.num_output += m
                res.emitted.append(seq)
                res.counts.append(m)
                if seq.num_output >= seq.max_tokens:
                    sched.finish(seq)
                    res.finished.append(seq)

    def _kv_room(self, run, k: int) -> tuple[int, list[int]]:
        """The largest k' <= k (halving) for which every running sequence's blocks for k' more tokens
        are free, and those block counts; k' < 2 means take single steps."""
        kv = self.kv
        bs = kv.block_size
        while k >= 2:
            needs = [max(0, -(-(s.num_computed + k) // bs) - s.blocks) for s in run]
            if sum(needs) <= kv.num_free:
                return k, needs
            k //= 2
        return k, []

    def _jittered_ends(self, d0: float, delta: float, k: int, now: float, horizon: float) -> list[float]:
        """The end times of up to k decode steps, each its model time (d0 + delta j) times its own draw
        (engine/jitter.py), as single steps would take them; only those that start before the horizon
        (drawn one at a time: a run that the next arrival cuts short draws no more than it takes)."""
        ends, end, n, spread, salt = [], now, self.stats.steps, self.cost.step_jitter, self.salt
        for j in range(k):
            if end >= horizon:
                break
            end += (d0 + delta * j) * factor(spread, salt, n + j)
            ends.append(end)
        return ends

    def _tell(self, policy: AimdBudget, r: int, ends: list[float], now: float) -> int:
        """Tell an adaptive policy these decode steps' times, each as Engine.step would; stop after the
        step that leaves the budget below the r requests decoding (single steps would then decode fewer
        a step). The steps told; the scheduler's budget is the policy's."""
        budget = self.sched.budget
        for j, (a, b) in enumerate(zip([now] + ends[:-1], ends)):
            budget = policy.observe(b - a, r >= budget)
            if budget < r:
                return j + 1
        return len(ends)

    def decode_run(self, max_steps: int, horizon: float, now: float):
        """Fast path for simulation: while every running sequence is decoding and nothing waits,
        steps differ only in context length. Step time is linear in the summed context, so k steps
        have closed-form end times and are taken at once. Returns (end times of the k steps,
        finished seqs), or None when the fast path does not apply (then take a normal step)."""
        sched, kv = self.sched, self.kv
        if sched.waiting or sched.incoming or not self.runs_ok:
            return None
        run = sched.running
        r = len(run)
        if r == 0 or r > sched.budget:  # the budget: an adaptive policy may hold it below the flag's
            return None
        k = max_steps
        ctx = r
        for s in run:
            c = s.num_computed
            if c != s.prompt_len + s.num_output - 1 or not s.num_output:
                return None  # still prefilling (one prompt token left, no output yet, is a prefill chunk)
            ctx += c
            left = s.max_tokens - s.num_output
            if left < k:
                k = left
        if k < 2:
            return None
        cost = self.cost
        d0 = cost.step_time(0, r, ctx, 0, 0, r)
        delta = cost.step_time(0, r, ctx + r, 0, 0, r) - d0  # exact: linear in decode context
        if horizon != math.inf:
            k = min(k, steps_before(d0, delta, horizon - now, k))
        if cost.step_jitter:
            ends = self._jittered_ends(d0, delta, k, now, horizon)
        else:
            ends = [now + (j + 1) * d0 + delta * (j + 1) * j / 2 for j in range(k)]
        k = self._tell(copy.copy(self.adaptive), r, ends, now) if self.adaptive is not None else len(ends)
        k, needs = self._kv_room(run, k)
        if k < 2:
            return None
        kv._take(sum(needs))
        finished = []
        for s, nb in zip(run, needs):
            s.blocks += nb
            s.num_computed += k
            s.num_output += k
            if s.num_output >= s.max_tokens:
                finished.append(s)
        for s in finished:
            sched.finish(s)
        self._launched()
        ends = ends[:k]
        if self.adaptive is not None:  # the steps taken, told to the policy itself this time
            self._tell(self.adaptive, r, ends, now)
            sched.budget = self.adaptive.budget
        self.last_run = (r, ctx)  # the run's batch size and first step's summed context (calibration)
        self._count_run(r, ctx, k, ends[-1] - now)
        return ends, finished

    def _count_run(self, r: int, ctx: int, k: int, span: float) -> None:
        """A decode run's k steps of r requests in the engine's counters."""
        st = self.stats
        st.steps += k
        st.max_step_tokens = max(st.max_step_tokens, r)
        st.generation_tokens += k * r
        st.busy_s += span
        st.busy_seqs_s += span * r
        st.energy_j += self.cost.run_energy(r, ctx, k, span)


def steps_before(d0: float, delta: float, h: float, most: int | None = None) -> int:
    """How many decode steps start within h seconds, when step s starts at s*d0 + delta*s*(s-1)/2
    (step time grows by delta per step as contexts lengthen). At least 1; `most` when at least that
    many do (a horizon 1e9 s away, a record far from the rest of its run, would count steps one by
    one at a float's resolution)."""
    if delta > 1e-15:
        b = d0 - delta / 2
        root = (-b + math.sqrt(b * b + 2 * delta * h)) / delta
    else:
        root = h / d0
    if most is not None and root > most + 1:
        return most
    kh = max(1, math.ceil(root))
    while kh > 1 and (kh - 1) * d0 + delta * (kh - 1) * (kh - 2) / 2 >= h:
        kh -= 1
    while kh * d0 + delta * kh * (kh - 1) / 2 < h:
        kh += 1
    return kh
