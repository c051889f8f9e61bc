"""EngineConfig: the engine's knobs, named as vLLM names them, with vLLM v1's defaults; it validates
itself and derives the KV-cache size from GPU memory (UsageError with a clear message). Each field
carries its flag's help (`knob`), so the CLI generates the engine's arguments from this one place."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace

from ..errors import UsageError
from ..limits import check
from .hardware import GIB, GPUS, get_gpu
from .knobs import knob, to_argv
from .lora import slot_bytes
from .models import Model, get_model, is_model_file
from .profile import SERVER_KEYS, Profile, contradiction, server
from .speculative import METHODS, SpecDecode, draft_shape

SCHEDULERS = ("vllm", "decode-first", "prefill-first", "static")
POLICIES = ("fcfs", "priority")
NON_TORCH_GIB = 1.0  # CUDA context, cuBLAS workspaces, CUDA graphs (vLLM profiling typically 0.5-1.5 GiB)
UNREAD = (
    "{what} {path} has not been read: the engine reads no files; pass the config through goodbench's API "
    "(gb.simulate, gb.run, ...) or goodbench.api.enginefiles.with_files, which read it once"
)


class DefaultStr(str):
    """A server knob (GPU, model, dtypes) at EngineConfig's default: equal to the plain value, but resolution
    tells it from the same value the user named (a calibration profile's server replaces a default and
    refuses a named value that differs, as the CLI refuses the flag)."""

    __slots__ = ()


class DefaultInt(int):
    """The TP size at its default (DefaultStr's reason)."""

    __slots__ = ()


def user_set(value) -> bool:
    """The user named this server knob's value (it is not EngineConfig's default)."""
    return not isinstance(value, (DefaultStr, DefaultInt))


def _plain(value):
    """A knob's value as stored: a marked default as its plain str or int."""
    if isinstance(value, DefaultStr):
        return str.__str__(value)
    return int(value) if isinstance(value, DefaultInt) else value


def _kept(value: str, was):
    """A derived value, still marked as the default when the knob it comes from was."""
    return value if user_set(was) else DefaultStr(value)


def _knob_fields(cls) -> list:
    """EngineConfig's knobs: its init fields but the files they name."""
    return [f for f in fields(cls) if f.init and f.name != "files"]


@dataclass(frozen=True)
class EngineFiles:
    """What a config's file knobs name, read once at the edge (api/enginefiles.py) and carried with the
    config so the engine reads no files: the calibration profile and a model file's shape, each with the
    path the config named (a config that names another file has not read it)."""

    calibration: str | None = None
    profile: Profile | None = None
    model_file: str | None = None
    model: Model | None = None


@dataclass(frozen=True)
class EngineConfig:
    gpu: str = knob(DefaultStr("h100-sxm"), f"GPU tier: {', '.join(GPUS)}")
    model: str = knob(
        DefaultStr("llama-3.1-8b"),
        "the engine's model shape: see `goodbench engine models`, or a .toml file (--model is the served model name)",
        flags=("--engine-model",),
    )
    dtype: str = knob(
        DefaultStr("bf16"),
        "weights and compute (default: the model's checkpoint's, e.g. fp8 for deepseek-v3)",
        ("bf16", "fp8"),
    )
    kv_cache_dtype: str = knob(DefaultStr("auto"), "KV cache (auto = bf16)", ("auto", "bf16", "fp8"))
    tensor_parallel_size: int = knob(DefaultInt(1), "GPUs per replica", flags=("--tensor-parallel-size", "-tp"))
    enable_expert_parallel: bool = knob(
        False, "MoE models: whole experts per GPU (vLLM's --enable-expert-parallel) instead of each expert TP-sharded"
    )
    expert_skew: float = knob(
        0.0,
        "MoE routing skew: expert i chosen in proportion to (i+1)^-skew (0 = balanced; measured routing is rarely "
        "balanced: AIConfigurator collects 1.01 and 1.2)",
    )
    max_num_batched_tokens: int | None = knob(
        None, "token budget per step, the chunk size (default 8192 on >= 70 GiB non-A100 GPUs, else 2048)"
    )
    max_num_seqs: int | None = knob(None, "max running requests (default 1024 / 256 by the same split, as vLLM)")
    enable_chunked_prefill: bool = knob(True, "split long prefills across steps")
    long_prefill_token_threshold: int = knob(0, "cap on one request's prefill tokens per step (0 = none)")
    block_size: int = knob(16, "KV block size, tokens")
    gpu_memory_utilization: float = knob(0.9, "fraction of GPU memory vLLM may use")
    max_model_len: int | None = knob(None, "longest prompt + output (default: the model's, clamped to the KV cache)")
    scheduling_policy: str = knob("fcfs", "waiting-queue order", POLICIES)
    enable_prefix_caching: bool = knob(True, "reuse KV blocks of shared prompt prefixes")
    async_scheduling: bool | None = knob(
        None,
        "schedule each step while the one before runs, as vLLM >= 0.14 does on GPUs by default: a request "
        "that arrives during a step waits one step more for its prefill; the host time it hides is not priced "
        "apart (docs/engine.md) (default off, or as a calibration profile's server ran; calibrate tells it "
        "from the runs)",
    )
    scheduler: str = knob(
        "vllm", "vllm (v1), decode-first (Sarathi), prefill-first (v0/Orca) or static batching", SCHEDULERS
    )
    num_gpu_blocks: int | None = knob(None, "override the memory-derived KV-cache size")
    adaptive_chunk_target_ms: float | None = knob(
        None,
        "adapt the token budget (AIMD) so steps that carry decodes "
        "stay under this many ms, e.g. the TPOT SLO (off by default)",
    )
    adaptive_chunk_floor: int = knob(128, "smallest budget the adaptive policy goes down to")
    step_overhead_ms: float | None = knob(None, "override the cost model's fixed per-step time")
    frontend_ms: float | None = knob(
        None,
        "override the server front end's time per request before the engine (HTTP, tokenizing; the tiers' is 0, "
        "a calibration's is fitted): what a host's real server adds, e.g. measured by benchmarks/router_live.py",
    )
    frontend_token_us: float | None = knob(None, "override the front end's time per prompt token (us; tokenizing)")
    calibration: str | None = knob(
        None,
        "a calibration profile (goodbench calibrate) fitted to your own server: replaces the tier's cost model "
        "(its KV capacity, budget and sequence limit are the defaults)",
    )
    speculative_method: str | None = knob(
        None, "speculative decoding's drafter (vLLM's --speculative-config method; default off)", METHODS
    )
    num_speculative_tokens: int = knob(
        DefaultInt(0), "draft tokens per request per step (0 = no speculation, or a calibration profile's server's)"
    )
    speculative_acceptance: str | None = knob(
        None,
        "per-position conditional acceptance rates, e.g. 0.8,0.7,0.6 (the last repeats), then any per workload "
        "class, e.g. 0.8,0.7;code=0.9,0.85 (default: the method's published rate where one exists, docs/engine.md; "
        "a live run's summary.json has the server's: speculative.acceptance)",
    )
    speculative_model: str | None = knob(
        None, "draft_model: the draft's built-in model shape (goodbench engine models)"
    )
    enable_lora: bool = knob(False, "serve LoRA adapters (requests name one as their model)")
    max_loras: int = knob(1, "LoRA adapters on the GPU at once: at most this many distinct ones in a step")
    max_lora_rank: int = knob(16, "the rank every adapter is padded to (their GEMMs' width)")
    max_cpu_loras: int | None = knob(None, "adapters kept in host memory (default max_loras); others load from disk")
    fixed_step_ms: float | None = knob(None, "testing: every step takes exactly this long")
    # the files the knobs above name, read at the edge (api/enginefiles.with_files); no flag, not stored
    files: EngineFiles | None = field(default=None, compare=False, repr=False, metadata={"cli": False})
    # set by resolved(): the config as the user gave it (None: this config is not resolved)
    _knobs: EngineConfig | None = field(default=None, init=False, compare=False, repr=False)

    def to_dict(self) -> dict:
        return {f.name: _plain(getattr(self, f.name)) for f in _knob_fields(self)}

    @property
    def is_resolved(self) -> bool:
        return self._knobs is not None

    def knobs(self) -> EngineConfig:
        """The config as the user set it, before resolved() filled in what depends on the GPU (derive a
        config for another tier from this, then resolve it)."""
        return self._knobs if self._knobs is not None else self

    @classmethod
    def from_dict(cls, d: dict) -> EngineConfig:
        names = {f.name for f in _knob_fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    def to_argv(self) -> list[str]:
        """This config as `goodbench serve` flags (None fields are left to the child's defaults; a
        calibration profile by its absolute path, so a child in another directory finds it)."""
        cfg = replace(self, kv_cache_dtype="auto") if self.kv_cache_dtype == "bf16" else self
        if cfg.calibration:
            cfg = replace(cfg, calibration=os.path.abspath(cfg.calibration))
        return to_argv(cfg)

    def memory(self) -> dict:
        """Per-GPU memory budget in bytes: what the KV blocks are derived from."""
        gpu, model = get_gpu(self.gpu), self.shape()
        tp = self.tensor_parallel_size
        weights = model.weight_bytes(self.dtype) / tp  # TP-sharded, or whole experts per rank (EP): the same share
        budget = self.max_num_batched_tokens or 8192
        seqs = self.max_num_seqs or 256
        # activations of the profiling pass (hidden + qkv + gate/up per token) and sampler logits
        act = budget * (4 * model.hidden + 2 * model.active_ffn / tp) * 2 + seqs * model.vocab * 4 / tp
        usable = gpu.mem_gib * GIB * self.gpu_memory_utilization
        # LoRA: max_loras GPU slots at max_lora_rank, allocated before the KV cache (engine/lora.slot_bytes)
        lora = self.max_loras * slot_bytes(model, self.max_lora_rank, tp) if self.enable_lora else 0.0
        return {
            "usable": usable,
            "weights": weights,
            "activations": act,
            "non_torch": NON_TORCH_GIB * GIB,
            "lora_slots": lora,
            "kv": usable - weights - act - NON_TORCH_GIB * GIB - lora,
        }

    def kv_bytes_per_token(self) -> float:
        """Per GPU: KV heads split over TP ranks (replicated when fewer heads than ranks; MLA's latent on every
        rank); sliding-window layers keep a window per request, not a slot per token (Model.kv_layers)."""
        kvb = 1.0 if self.kv_cache_dtype == "fp8" else 2.0
        return self.shape().kv_bytes_per_token(kvb, self.tensor_parallel_size)

    def _check_knobs(self, gpu, model) -> None:
        """Knobs that are wrong whatever else is set (UsageError naming the problem); every number in
        its range of limits.py (a negative step overhead or a zero fixed step never reach the engine)."""
        for f in _knob_fields(self):
            check(f.name, getattr(self, f.name))
        if self.scheduler not in SCHEDULERS:
            raise UsageError(f"scheduler {self.scheduler!r} is not one of {', '.join(SCHEDULERS)}")
        if self.scheduling_policy not in POLICIES:
            raise UsageError(f"scheduling policy {self.scheduling_policy!r} is not one of {', '.join(POLICIES)}")
        if self.dtype not in ("bf16", "fp8") or self.kv_cache_dtype not in ("auto", "bf16", "fp8"):
            raise UsageError("dtype must be bf16 or fp8; kv_cache_dtype auto, bf16 or fp8")
        if self.dtype == "fp8" and gpu.fp8_tflops is None:
            whose = "" if user_set(self.dtype) else f" ({model.name}'s checkpoint is FP8)"
            raise UsageError(f"{gpu.name} has no FP8 tensor cores{whose}; use --dtype bf16")
        tp = self.tensor_parallel_size
        if tp < 1 or model.heads % tp:
            raise UsageError(f"tensor_parallel_size {tp} must divide the model's {model.heads} attention heads")
        if self.enable_expert_parallel and (model.moe is None or tp < 2 or model.moe.experts % tp):
            raise UsageError(
                f"--enable-expert-parallel needs a MoE model whose experts divide over tp ({model.name}: "
                f"{model.moe.experts if model.moe else 'no'} experts, tp {tp})"
            )
        if not 0 < self.gpu_memory_utilization <= 1:
            raise UsageError("gpu_memory_utilization must be in (0, 1]")
        if self.block_size not in (1, 2, 4, 8, 16, 32, 64, 128):
            raise UsageError("block_size must be a power of two from 1 to 128")
        if self.draft() is not None or self.spec():
            if self.scheduler == "static":
                raise UsageError("speculative decoding needs a continuous-batching scheduler, not static batching")
        if self.enable_lora and self.scheduler == "static":
            raise UsageError("LoRA adapters need a continuous-batching scheduler, not static batching")

    def spec(self) -> SpecDecode | None:
        """The speculative-decoding config (None: off); UsageError for one vLLM would refuse."""
        return SpecDecode.from_knobs(self.speculative_method, self.num_speculative_tokens, self.speculative_acceptance)

    def draft(self) -> Model | None:
        """The shape the drafter runs (None: off, or n-gram's host lookup)."""
        sd = self.spec()
        if sd is None:
            return None
        named = get_model(self.speculative_model) if self.speculative_model else None
        return draft_shape(sd.method, self.shape(), named)

    def _blocks(self, served: dict) -> int:
        """KV blocks: the user's, the profiled server's (in this config's block size), else what GPU
        memory leaves after weights, activations and the runtime (UsageError when the model does not fit)."""
        if self.num_gpu_blocks is not None:
            return self.num_gpu_blocks
        if served.get("num_gpu_blocks"):
            return int(served["num_gpu_blocks"]) * int(served.get("block_size", 16)) // self.block_size
        gpu, model = get_gpu(self.gpu), self.shape()
        mem = self.memory()
        blocks = int(mem["kv"] // (self.kv_bytes_per_token() * self.block_size))
        if blocks <= 0:
            need = (mem["weights"] + mem["activations"] + mem["non_torch"] + mem["lora_slots"]) / GIB
            lora = f" + LoRA slots {mem['lora_slots'] / GIB:.1f} GiB" if mem["lora_slots"] else ""
            raise UsageError(
                f"{model.name} does not fit on {gpu.name} at tp={self.tensor_parallel_size}: weights "
                f"{mem['weights'] / GIB:.1f} GiB + activations {mem['activations'] / GIB:.1f} GiB + runtime "
                f"{NON_TORCH_GIB:.1f} GiB{lora} = {need:.1f} GiB > {mem['usable'] / GIB:.1f} GiB usable "
                f"({gpu.mem_gib:g} GiB x {self.gpu_memory_utilization:g}). Raise --tensor-parallel-size, use --dtype "
                f"fp8, {'lower --max-loras, ' if lora else ''}or a bigger GPU."
            )
        return blocks

    def resolved(self) -> EngineConfig:
        """Every None filled in (budget, sequences, KV blocks, context length) and every knob checked;
        raises UsageError naming the problem. Idempotent: a resolved config resolves to itself. A knob
        the user set (num_gpu_blocks, max_model_len, ...) is kept, never taken for a derived value."""
        if self._knobs is not None:
            return self
        prof = self.profile()
        out = self._on_server(prof)._resolve(prof.engine if prof else {})  # what the server ran with
        object.__setattr__(out, "_knobs", self)
        return out

    def profile(self) -> Profile | None:
        """The calibration profile this config names, as read at the edge (None without one; UsageError
        when it has not been read: the engine reads no files)."""
        if not self.calibration:
            return None
        f = self.files
        if f is None or f.profile is None or f.calibration != self.calibration:
            raise UsageError(UNREAD.format(what="calibration profile", path=self.calibration))
        return f.profile

    def shape(self) -> Model:
        """The model's shape: a built-in one by name, or the model file's as read at the edge."""
        if not is_model_file(self.model):
            return get_model(self.model)
        f = self.files
        if f is None or f.model is None or f.model_file != self.model:
            raise UsageError(UNREAD.format(what="model file", path=self.model))
        return f.model

    def check_server(self) -> None:
        """UsageError when a server knob the user set (GPU, TP size, model, dtypes: one not left at its
        default) differs from the calibration profile's server. The one check, made in resolution, so the
        library refuses what the CLI refuses (prepare_sweep also asks it of each GPU tier named)."""
        prof = self.profile()
        if prof is None:
            return
        line = contradiction(prof, {k: getattr(self, k) for k in SERVER_KEYS if user_set(getattr(self, k))})
        if line:
            raise UsageError(line)

    def _on_server(self, prof: Profile | None) -> EngineConfig:
        """A calibration profile is one server: its GPU, TP size, model and dtypes (where it names them;
        profile.server) label, count and price the what-ifs; a knob the user set otherwise is refused
        (check_server). knobs() keeps what was asked; resolving those again applies the profile again."""
        if prof is None:
            return self
        self.check_server()
        hw = server(prof.engine)
        return replace(self, **hw) if hw else self

    def _served_spec(self, served: dict) -> EngineConfig:
        """The speculative decoding a calibration profile's server ran (its method, k and fitted acceptance),
        where the user left it: a what-if on k alone (--num-speculative-tokens 5) keeps the server's method
        and acceptance; another method keeps the server's k, with its own rates; --num-speculative-tokens 0
        turns it off, whatever the method (a sweep's baseline cell)."""
        m, k = served.get("speculative_method"), self.num_speculative_tokens
        if not m or (user_set(k) and k == 0):
            return self
        kept = {"num_speculative_tokens": k if user_set(k) else served.get("num_speculative_tokens", 0)}
        if self.speculative_method in (None, m):
            kept["speculative_method"] = m
            for key in ("speculative_acceptance", "speculative_model"):
                if getattr(self, key) is None and served.get(key) is not None:
                    kept[key] = served[key]
        return replace(self, **kept)

    def _resolve(self, served: dict) -> EngineConfig:
        self = self._served_spec(served)
        gpu, model = get_gpu(self.gpu), self.shape()
        if not user_set(self.dtype) and model.dtype != self.dtype:  # the checkpoint's own (DeepSeek-V3: FP8)
            self = replace(self, dtype=DefaultStr(model.dtype))
        self._check_knobs(gpu, model)
        big = gpu.mem_gib >= 70 and not gpu.name.startswith("a100")
        seqs = self.max_num_seqs or served.get("max_num_seqs") or (1024 if big else 256)
        budget_given = self.max_num_batched_tokens is not None
        budget = self.max_num_batched_tokens or served.get("max_num_batched_tokens") or (8192 if big else 2048)
        if self.long_prefill_token_threshold < 0:
            raise UsageError("long_prefill_token_threshold must be >= 0")
        if budget < 1 or seqs < 1:
            raise UsageError("max_num_batched_tokens and max_num_seqs must be >= 1")
        if self.adaptive_chunk_target_ms is not None and (
            self.adaptive_chunk_target_ms <= 0 or self.adaptive_chunk_floor < 1
        ):
            raise UsageError("adaptive_chunk_target_ms must be > 0 and adaptive_chunk_floor >= 1")
        held = self.async_scheduling  # the user's, else the profiled server's, else off
        held = bool(served.get("async_scheduling", False)) if held is None else held
        cfg = replace(self, max_num_seqs=seqs, max_num_batched_tokens=budget, async_scheduling=held)
        blocks = cfg._blocks(served)
        capacity = blocks * self.block_size
        if self.max_model_len is not None:
            if self.max_model_len > model.max_position:
                raise UsageError(f"max_model_len {self.max_model_len} exceeds {model.name}'s {model.max_position}")
            if self.max_model_len > capacity:
                raise UsageError(
                    f"max_model_len {self.max_model_len} needs more KV cache than fits "
                    f"({capacity} tokens in {blocks} blocks); lower it or add memory"
                )
            mml = self.max_model_len
        else:
            mml = min(model.max_position, capacity)
        if not self.enable_chunked_prefill:
            if not budget_given:
                budget = mml
            elif budget < mml:
                raise UsageError(
                    f"with chunked prefill off, max_num_batched_tokens ({budget}) must be >= "
                    f"max_model_len ({mml}), as in vLLM; raise it or lower --max-model-len"
                )
        return replace(
            cfg,
            max_num_batched_tokens=budget,
            num_gpu_blocks=blocks,
            max_model_len=mml,
            kv_cache_dtype="fp8" if self.kv_cache_dtype == "fp8" else _kept("bf16", self.kv_cache_dtype),
        )
