"""How many engine instances, and how they are arranged: replicas behind a router, or prefill/decode
disaggregation (P prefill instances hand each prompt's KV cache to one of D decode instances over a
link). The simulator (engine/virtual/cluster.py) and the server (engine/serve/cluster.py) both read
it. Each field carries its flag (engine/knobs.py), so the CLI's instance flags come from here."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from ..errors import UsageError
from .config import EngineConfig
from .knobs import knob
from .links import LINKS, Link, get_link, transfer_s
from .router import ROUTER_NAMES, canonical


@dataclass(frozen=True)
class ClusterSpec:
    """replicas: colocated instances of the base config. prefill/decode > 0: disaggregated, each side
    with its own GPU tier and TP (None = the base config's)."""

    replicas: int = knob(1, "identical engine instances behind a router")
    prefill: int = knob(0, "prefill-only instances", cli=False)  # both set by --disaggregate P:D
    decode: int = knob(0, "decode-only instances", cli=False)
    prefill_gpu: str | None = knob(None, "GPU tier of the prefill instances (default --gpu)")
    decode_gpu: str | None = knob(None, "GPU tier of the decode instances (default --gpu)")
    prefill_tp: int | None = knob(None, "tensor parallelism of a prefill instance (default -tp)")
    decode_tp: int | None = knob(None, "tensor parallelism of a decode instance (default -tp)")
    router: str = knob(
        "least-outstanding",
        "how requests pick a replica or prefill instance (engine/router.py; vllm-router's spellings too)",
        ROUTER_NAMES,
    )
    kv_link: str = knob(
        "auto",
        "link the KV cache crosses (auto: NVLink within one node of one NVLink tier, "
        "else InfiniBand, PCIe between boards without NVLink)",
        ("auto",) + tuple(LINKS),
    )
    layerwise: bool = knob(
        False,
        "send each layer's KV while the next layers compute (overlaps transfer with prefill)",
        flags=("--layerwise-kv",),
    )

    @property
    def disaggregated(self) -> bool:
        return self.prefill > 0

    @property
    def many(self) -> bool:
        """More than one instance."""
        return self.disaggregated or self.replicas > 1

    def to_dict(self) -> dict:
        return asdict(self)

    def configs(self, base: EngineConfig) -> tuple[EngineConfig | None, EngineConfig | None]:
        """(prefill config, decode config), resolved from the base's own knobs on each side's tier;
        (None, None) when colocated."""
        if not self.disaggregated:
            return None, None
        sides = [f for f, v in self.side_flags() if v is not None]
        if base.calibration and sides:
            raise UsageError(
                f"{', '.join(sides)} with --calibration: a calibration profile is one server, its GPU and TP size "
                "on both sides; leave them out"
            )
        knobs = base.knobs()
        p = replace(
            knobs, gpu=self.prefill_gpu or knobs.gpu, tensor_parallel_size=self.prefill_tp or knobs.tensor_parallel_size
        )
        d = replace(
            knobs, gpu=self.decode_gpu or knobs.gpu, tensor_parallel_size=self.decode_tp or knobs.tensor_parallel_size
        )
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

    def kv_transfer(self, base: EngineConfig) -> KVTransfer:
        """How long a finished prompt's KV cache takes to reach a decode instance."""
        p, d = self.configs(base)
        return KVTransfer(
            self.link(base),
            d.kv_bytes_per_token() * d.tensor_parallel_size,  # the whole model's KV
            min(p.tensor_parallel_size, d.tensor_parallel_size),
            base.shape().layers,
            self.layerwise,
        )

    def side_flags(self) -> tuple:
        """(flag, value) of each side's own tier and TP size (None: the base config's)."""
        return (
            ("--prefill-gpu", self.prefill_gpu),
            ("--decode-gpu", self.decode_gpu),
            ("--prefill-tp", self.prefill_tp),
            ("--decode-tp", self.decode_tp),
        )

    def to_argv(self) -> list[str]:
        """These instances as `goodbench serve` flags (none for one instance)."""
        if not self.many:
            return []
        if not self.disaggregated:
            return ["--replicas", str(self.replicas), "--router", self.router]
        out = ["--disaggregate", f"{self.prefill}:{self.decode}", "--router", self.router, "--kv-link", self.kv_link]
        for flag, v in self.side_flags():
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
        canonical(self.router)  # UsageError naming the policies


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
        return transfer_s(
            prompt_len * self.kv_bytes_per_token, self.link, self.tp, self.layers, prefill_s, self.layerwise
        )


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


def parse_layout(text: str, base: ClusterSpec | None = None) -> ClusterSpec:
    """A sweep cell's instance layout ("" = the base, "4x" = replicas, "1P:3D" = disaggregated) as a
    ClusterSpec built on the base (UsageError when malformed)."""
    base = base or ClusterSpec()
    if not text:
        return base
    try:
        if text.endswith("x"):
            spec = replace(base, replicas=int(text[:-1]), prefill=0, decode=0)
        else:
            p, d = parse_disaggregate(text.replace("P", "").replace("D", ""))
            spec = replace(base, replicas=1, prefill=p, decode=d)
        spec.check()
    except (ValueError, UsageError):
        raise UsageError(f"--layouts {text!r}: expected NX (replicas) or PP:DD, e.g. 4x or 1P:3D") from None
    return spec
