"""Step building, after vLLM v1's Scheduler.schedule() (FCFS/priority, recompute preemption).

No I/O and no clock: given the running and waiting sequences, the config and the KV cache, build the
next step's Batch and advance each scheduled sequence's computed-token count (as vLLM does right
after scheduling). Besides vLLM v1 ("vllm") it offers, for comparison sweeps, an explicit Sarathi
decode-first order ("decode-first"), vLLM v0/Orca prefill-prioritised steps ("prefill-first") and
static batching ("static")."""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass, field

from .config import EngineConfig
from .encodercache import EncoderCache
from .kvcache import KVCache, Seq


@dataclass
class Batch:
    """One step's composition: what the cost model prices."""

    seqs: list = field(default_factory=list)  # scheduled Seq objects
    tokens: list = field(default_factory=list)  # tokens scheduled for each
    prefill_tokens: int = 0
    decode_tokens: int = 0
    decode_ctx: int = 0  # sum of context lengths read by decode tokens
    prefill_attn: float = 0.0  # sum over chunks of n*(p + (n+1)/2): causal attention work
    prefill_ctx: int = 0  # sum over chunks of p + n: KV read by prefill attention
    padding: int = 0  # static batching: finished rows still computed
    encoder_s: float = 0.0  # the vision encoder's time for the images first scheduled in this step
    spec_tokens: int = 0  # speculative decoding: draft tokens verified (beside each request's own token)
    drafted: tuple | list = ()  # (Seq, its draft tokens) of the decodes that carry drafts (a list once any do)
    preempted: list = field(default_factory=list)

    @property
    def num_tokens(self) -> int:
        return self.prefill_tokens + self.decode_tokens + self.spec_tokens + self.padding

    @property
    def num_seqs(self) -> int:
        return len(self.seqs) + self.padding

    def add(self, seq: Seq, n: int) -> None:
        p = seq.num_computed
        self.seqs.append(seq)
        self.tokens.append(n)
        if n == 1 and p >= seq.prompt_len:
            self.decode_tokens += 1
            self.decode_ctx += p + 1
        else:
            self.prefill_tokens += n
            self.prefill_attn += n * (p + (n + 1) / 2)
            self.prefill_ctx += p + n

    def add_drafted(self, seq: Seq, drafts: int) -> None:
        """A decode carrying draft tokens: its own token plus the drafts, verified together (the context
        is read once: decode_ctx counts the request's own token)."""
        self.seqs.append(seq)
        self.tokens.append(1 + drafts)
        self.decode_tokens += 1
        self.decode_ctx += seq.num_computed + 1
        self.spec_tokens += drafts
        if not self.drafted:
            self.drafted = []
        self.drafted.append((seq, drafts))


class Scheduler:
    def __init__(self, cfg: EngineConfig, kv: KVCache):
        self.cfg = cfg
        self.kv = kv
        self.encoder = EncoderCache(cfg.max_num_batched_tokens)  # vision encoder outputs by image (VLMs)
        self.running: list[Seq] = []
        self.priority = cfg.scheduling_policy == "priority"
        self.waiting: deque[Seq] | list = [] if self.priority else deque()
        # async scheduling: requests that reached the engine after the next step was already scheduled
        # (they wait one step more); while `holding` (Engine._launched sets it) add() puts them here,
        # admit() moves them to `waiting`
        self.incoming: list[Seq] = []
        self.holding = False
        self._order = 0
        self.budget = cfg.max_num_batched_tokens  # the per-step token budget (an adaptive policy moves it)
        spec = cfg.spec()
        self.spec_k = spec.k if spec else 0  # draft tokens a decoding request carries into a step
        self.max_loras = cfg.max_loras if cfg.enable_lora else 0  # distinct adapters a step may run (0: no LoRA)

    # ---- queue helpers (FCFS deque, or a heap on (priority, arrival order))
    def add(self, seq: Seq) -> None:
        if self.holding:
            seq.status = "waiting"
            self.incoming.append(seq)
            return
        seq.order = self._order
        self._order += 1
        seq.status = "waiting"
        if self.priority:
            heapq.heappush(self.waiting, (seq.priority, seq.order, seq))
        else:
            self.waiting.append(seq)

    def peek(self) -> Seq:
        return self.waiting[0][2] if self.priority else self.waiting[0]

    def _pop(self) -> Seq:
        return heapq.heappop(self.waiting)[2] if self.priority else self.waiting.popleft()

    def _prepend(self, seq: Seq) -> None:
        if self.priority:
            heapq.heappush(self.waiting, (seq.priority, seq.order, seq))
        else:
            self.waiting.appendleft(seq)

    def admit(self) -> None:
        """Move the held requests to the waiting queue (in arrival order): the next step may take them."""
        self.holding = False
        if not self.incoming:  # the usual case, once per step
            return
        held, self.incoming = self.incoming, []
        for seq in held:
            self.add(seq)

    def num_waiting(self) -> int:
        return len(self.waiting) + len(self.incoming)

    def _queued(self) -> list[Seq]:
        return [w[2] for w in self.waiting] if self.priority else list(self.waiting)

    def waiting_seqs(self) -> list[Seq]:
        return self._queued() + self.incoming

    def remove(self, seq: Seq) -> bool:
        """Abort: drop a sequence wherever it is and free its blocks."""
        if seq in self.running:
            self.running.remove(seq)
        elif seq in self.incoming:
            self.incoming.remove(seq)
        else:
            items = self._queued()
            if seq not in items:
                return False
            items.remove(seq)
            if self.priority:
                self.waiting = [(s.priority, s.order, s) for s in items]
                heapq.heapify(self.waiting)
            else:
                self.waiting = deque(items)
        self.kv.release(seq)
        seq.status = "aborted"
        return True

    def _preempt(self, victim: Seq) -> None:
        self.kv.release(victim)
        victim.status = "preempted"
        victim.num_computed = 0
        victim.preloaded = 0  # its transferred KV is gone too: recompute locally
        victim.num_preemptions += 1
        victim.enc_tokens = victim.enc_all  # its encoder outputs are freed with it (vLLM's encoder cache)
        self._prepend(victim)

    def _chunk(self, n: int, budget: int) -> int:
        t = self.cfg.long_prefill_token_threshold
        if 0 < t < n:
            n = t
        return min(n, budget)

    # ---- step building
    def schedule(self) -> Batch:
        kind = self.cfg.scheduler
        if kind == "prefill-first":
            return self._schedule_prefill_first()
        if kind == "static":
            return self._schedule_static()
        return self._schedule_v1(decode_first=kind == "decode-first")

    def _schedule_v1(self, decode_first: bool) -> Batch:
        kv = self.kv
        budget = self.budget
        batch = Batch()
        running = self.running
        if decode_first:  # Sarathi: every decode before any prefill chunk
            order = [s for s in running if s.num_computed >= s.prompt_len] + [
                s for s in running if s.num_computed < s.prompt_len
            ]
        else:  # vLLM v1: admission order
            order = list(running)
        spec_k = self.spec_k
        for seq in order:
            if budget <= 0:
                break
            if seq.status != "running":  # preempted earlier in this pass
                continue
            n = self._chunk(seq.num_tokens - seq.num_computed, budget)
            if n <= 0:
                continue
            if spec_k:  # a local: the text-only path pays one check
                drafts = self._drafts(seq, n, budget)
                n += drafts
            ok = kv.allocate(seq, n)
            while not ok:
                victim = self._pick_victim()
                running.remove(victim)
                if victim.status == "running" and victim in batch.seqs:  # priority: undo its tokens
                    k = batch.seqs.index(victim)
                    budget += batch.tokens[k]
                    self._unbatch(batch, k)
                self._preempt(victim)
                batch.preempted.append(victim)
                if victim is seq:
                    break
                ok = kv.allocate(seq, n)
            if not ok:
                break  # the sequence preempted itself: stop scanning, as vLLM does
            if spec_k and drafts:
                batch.add_drafted(seq, drafts)
            else:
                batch.add(seq, n)
            seq.num_computed += n
            budget -= n
        if not batch.preempted:
            self._admit(batch, budget)
        return batch

    def _drafts(self, seq: Seq, n: int, budget: int) -> int:
        """Draft tokens this decode carries: k, as far as the budget and max_model_len allow (vLLM trims the
        drafts to both: a request that fits is never pushed past its KV by its drafts), none while prefilling
        (the drafter proposes once a request has an output token)."""
        if not self.spec_k or n != 1 or not seq.num_output or seq.num_computed < seq.prompt_len:
            return 0
        return max(0, min(self.spec_k, budget - 1, self.cfg.max_model_len - 2 - seq.num_computed))

    def finish(self, seq: Seq) -> None:
        """A sequence produced its last token: free it (static batching keeps the row as padding)."""
        self.kv.release(seq)
        seq.status = "finished"
        if self.cfg.scheduler != "static":
            self.running.remove(seq)

    def _pick_victim(self) -> Seq | None:
        if not self.running:
            return None
        if self.priority:
            return max(self.running, key=lambda s: (s.priority, s.order))
        return self.running[-1]

    def _unbatch(self, batch: Batch, k: int) -> None:
        """Remove entry k from the batch and roll back its computed tokens; recount the rest."""
        batch.seqs[k].num_computed -= batch.tokens[k]
        seqs, toks = batch.seqs[:k] + batch.seqs[k + 1 :], batch.tokens[:k] + batch.tokens[k + 1 :]
        drafted = {id(s): d for s, d in batch.drafted}
        fresh = Batch(preempted=batch.preempted)
        for s, n in zip(seqs, toks):
            s.num_computed -= n
            if id(s) in drafted:
                fresh.add_drafted(s, drafted[id(s)])
            else:
                fresh.add(s, n)
            s.num_computed += n
        batch.__dict__.update(fresh.__dict__)

    def _admit(self, batch: Batch, budget: int, whole_only: bool = False) -> int:
        """Waiting -> running while budget, max_num_seqs and KV blocks allow (head-of-line stops)."""
        cfg, kv = self.cfg, self.kv
        chunked = cfg.enable_chunked_prefill and not whole_only
        # the adapters this step already runs (prefill-first's steps hold new prompts only: the running ones')
        held = self.running if whole_only else batch.seqs
        loras = {s.lora for s in held if s.lora is not None} if self.max_loras else None
        skipped: list[Seq] = []
        enc_budget = cfg.max_num_batched_tokens  # vLLM's encoder budget: image tokens encoded a step
        while self.waiting and budget > 0:
            if len(self.running) >= cfg.max_num_seqs:
                break
            seq = self.peek()
            if loras is not None and seq.lora is not None and seq.lora not in loras:
                if len(loras) >= self.max_loras:  # one adapter too many for the slots: it waits, others may go
                    skipped.append(self._pop())
                    continue
                loras.add(seq.lora)
            pre = seq.preloaded  # KV transferred from a prefill instance: held, not hashed
            hit = 0 if pre else kv.cached_prefix_blocks(seq)
            n_cached = pre or hit * kv.block_size
            n = seq.num_tokens - n_cached
            t = cfg.long_prefill_token_threshold
            if 0 < t < n and chunked:
                n = t
            if not chunked and n > budget:
                break
            # its images are encoded in the step that first schedules them, within the budget, but for those the
            # prefix or encoder cache holds (engine/encodercache.py)
            enc = self.encoder.plan(seq.enc_parts, n_cached) if seq.enc_tokens else None
            if enc:
                if enc[0] > enc_budget and enc_budget < cfg.max_num_batched_tokens:
                    break
                enc_budget -= enc[0]
            n = min(n, budget)
            seq.num_computed = 0
            if not kv.allocate(seq, n + pre, hit_blocks=hit):
                break
            if kv.prefix_caching and not pre:
                kv.queries += seq.num_tokens  # vLLM's prefix_cache_queries: tokens looked up on admission
            if seq.num_cached < 0:
                seq.num_cached = hit * kv.block_size
            if enc:
                batch.encoder_s += enc[1]
                self.encoder.keep(enc)
                seq.enc_tokens = 0
            self._pop()
            seq.status = "running"
            self.running.append(seq)
            seq.num_computed = n_cached
            batch.add(seq, n)
            seq.num_computed += n
            budget -= n
        for seq in reversed(skipped):
            self._prepend(seq)
        return budget

    def _schedule_prefill_first(self) -> Batch:
        """vLLM v0 default: a step of whole new prompts when any can be admitted, else a decode step."""
        batch = Batch()
        self._admit(batch, self.budget, whole_only=True)
        if batch.seqs:
            return batch
        return self._schedule_v1(decode_first=False)

    def _schedule_static(self) -> Batch:
        """Static batching: a new batch only when the previous one has fully finished; the whole batch
        is prefilled in one step and decodes until its longest member ends (finished rows are padding)."""
        if not any(s.status == "running" for s in self.running):
            self.running = []
            batch = Batch()
            while self.waiting and len(self.running) < self.cfg.max_num_seqs:
                seq = self.peek()
                need = seq.prompt_len + seq.max_tokens  # static batching reserves the full length
                if -(-need // self.kv.block_size) > self.kv.num_free:
                    break
                self._pop()
                self.kv.allocate(seq, need)
                seq.status = "running"
                self.running.append(seq)
                batch.add(seq, seq.num_tokens)
                seq.num_computed = seq.num_tokens
            return batch
        batch = Batch()
        for seq in self.running:
            if seq.status == "running":
                batch.add(seq, 1)
                seq.num_computed += 1
            else:
                batch.padding += 1
        return batch
