"""LoRA adapters in the engine's step (vLLM's --enable-lora, --max-loras, --max-lora-rank, --max-cpu-loras). Pure.

Every linear layer of a LoRA'd request runs two more GEMMs beside the base one: shrink (hidden -> rank) and
expand (rank -> out), batched over the step's requests by adapter (vLLM's Punica kernels, padded to
max_lora_rank). A step pays, per layer and per LoRA'd projection (qkv, o, gate_up, down):
    max(2 N r (in + out) / peak, A r (in + out) 2 bytes / bandwidth) + 2 kernels x (floor + N x per token)
for N tokens of LoRA requests and A distinct adapters (each adapter's weights read once). The kernel terms
are what Punica-style kernels cost beyond the roofline, and most of the overhead (docs/engine.md, "LoRA
adapters", says what they are fitted to).

Adapters live in max_loras GPU slots (vLLM's LRU adapter manager) and max_cpu_loras host slots: a step
that needs an adapter not on the GPU pays its copy over PCIe, and one not in host memory its read from disk
first. The scheduler never runs more distinct adapters in a step than there are slots: a waiting request
whose adapter would be one too many waits (vLLM skips it, requests behind it may go first)."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

# per shrink or expand kernel: a floor, and a cost per token it carries (the kernels run far from the GEMMs'
# roofline); fitted (engine/lorafit.py) to vLLM 0.5.0's one-adapter TPOT overhead (Agulló et al., two of
# three profiles), the third profile and vLLM PR #11267 held out (benchmarks/lora_overhead.py)
KERNEL_FLOOR_S = 8.116e-6
KERNEL_TOKEN_S = 24.456e-9
# adapter loads, from the same source's load counters (A4: Llama-3.1-8B, ranks 8/16/32, max_lora_rank = rank):
# disk -> host 66.0 / 82.9 / 125.5 ms for 36 / 71 / 143 MB of BF16 weights (all linear layers): 46 ms + bytes at
# 1.8 GB/s (the line through ranks 8 and 32; it gives 85.8 ms for rank 16);
# host -> GPU slot 6.4-8.1 ms whatever the rank: a constant (per-layer copies, not the bytes)
DISK_BPS = 1.8e9
DISK_FIXED_S = 46e-3
ACTIVATE_S = 7.0e-3
H2D_BPS = {"hopper": 50e9, "blackwell": 50e9, "cdna3": 50e9, "cdna4": 50e9}  # PCIe 5 x16, else PCIe 4's 25
# the whole held-out source (vLLM PR #11267: A100, ShareGPT offline, one adapter): the engine's throughput
# ratio 0.917 against the measured 0.664 (+38 %): what a LoRA run's engine_uncertainty says
LORA_HELD_OUT_WORST = 0.38
PROJECTIONS = 4  # qkv, o, gate_up, down: vLLM LoRAs every linear layer an adapter targets (all, here)


def adapter_params(m, rank: int) -> int:
    """Parameters of one adapter at this rank on every linear layer: rank x (in + out) per projection."""
    h, hd = m.hidden, m.head_dim
    qkv = h + (m.heads + 2 * m.kv_heads) * hd
    o = m.heads * hd + h
    ffn = m.ffn or (m.moe.expert_ffn if m.moe else 0)
    gate_up, down = h + 2 * ffn, ffn + h
    return rank * (qkv + o + gate_up + down) * m.layers


def slot_bytes(m, rank: int, tp: int = 1, dtype_bytes: int = 2) -> float:
    """Bytes per GPU one GPU adapter slot takes, as vLLM allocates it (max_loras of them, at max_lora_rank,
    before the KV cache is sized): packed projections keep an A per slice (q, k, v; gate, up); a
    column-parallel layer's A is whole on every rank and its B split, a row-parallel one's the other way."""
    h, hd = m.hidden, m.head_dim
    ffn = m.ffn or (m.moe.expert_ffn if m.moe else 0)
    qkv = 3 * h + (m.heads + 2 * m.kv_heads) * hd / tp
    o = m.heads * hd / tp + h
    gate_up = 2 * h + 2 * ffn / tp
    down = ffn / tp + h
    return rank * (qkv + o + gate_up + down) * m.layers * dtype_bytes


@dataclass(frozen=True)
class LoraCost:
    """The LoRA GEMMs' time in a step, per GPU (TP shards the adapters as it shards the layers)."""

    params: float  # one adapter's parameters per GPU
    flops_per_token: float  # 2 x params per GPU
    peak: float  # FLOP/s
    bw: float  # bytes / s
    kernels: int  # shrink + expand launches per step
    h2d_bps: float

    @classmethod
    def of(cls, m, rank: int, tp: int, gpu) -> LoraCost:
        p = adapter_params(m, rank) / tp
        return cls(
            p,
            2.0 * p,
            gpu.bf16_tflops * 1e12,
            gpu.bandwidth,
            2 * PROJECTIONS * m.layers,
            H2D_BPS.get(gpu.arch, 25e9),
        )

    def step_time(
        self, tokens: int, adapters: int, floor_s: float = KERNEL_FLOOR_S, token_s: float = KERNEL_TOKEN_S
    ) -> float:
        """Seconds the LoRA GEMMs add to a step with `tokens` tokens of `adapters` distinct adapters (the
        kernel terms: the fitted ones, or a fit's candidates: engine/lorafit.py)."""
        if not tokens:
            return 0.0
        compute = tokens * self.flops_per_token / self.peak
        memory = adapters * self.params * 2.0 / self.bw
        return max(compute, memory) + self.kernels * (floor_s + tokens * token_s)

    def load_time(self, from_disk: bool) -> float:
        """Seconds to bring one adapter onto the GPU: over PCIe, and from disk first when not in host memory."""
        nbytes = self.params * 2.0
        disk = DISK_FIXED_S + nbytes / DISK_BPS if from_disk else 0.0
        return disk + ACTIVATE_S + nbytes / self.h2d_bps


class AdapterSlots:
    """The GPU's max_loras slots and the host's max_cpu_loras, both least-recently-used first out."""

    def __init__(self, gpu_slots: int, cpu_slots: int):
        self.gpu: OrderedDict = OrderedDict()
        self.cpu: OrderedDict = OrderedDict()
        self.gpu_slots, self.cpu_slots = gpu_slots, max(cpu_slots, gpu_slots)
        self.loads = 0  # adapters copied onto the GPU
        self.disk_loads = 0  # ... of which read from disk first

    def activate(self, names, cost: LoraCost | None) -> float:
        """Make these adapters resident (at most gpu_slots of them); the seconds their loads take (none
        without a cost: a fixed-step test engine)."""
        t = 0.0
        for name in names:  # the step's resident adapters first: none of them is evicted for another
            if name in self.gpu:
                self.gpu.move_to_end(name)
                if name in self.cpu:
                    self.cpu.move_to_end(name)
        for name in names:
            if name in self.gpu:
                continue
            disk = name not in self.cpu
            t += cost.load_time(disk) if cost is not None else 0.0
            self.loads += 1
            self.disk_loads += disk
            self.cpu[name] = True
            self.cpu.move_to_end(name)
            while len(self.cpu) > self.cpu_slots:
                self.cpu.popitem(last=False)
            self.gpu[name] = True
            while len(self.gpu) > self.gpu_slots:
                self.gpu.popitem(last=False)
        return t
