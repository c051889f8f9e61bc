"""A sweep's grid: GPU tiers x engine knobs (`--param KNOB=V1,V2,...`), each cell an EngineConfig (and,
for `router`, the policy of the cell's instances: its ClusterSpec; a live `--server-cmd` gets {router})."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

from ..engine.config import EngineConfig
from ..engine.knobs import field_kind, flag_fields
from ..engine.router import canonical
from ..errors import UsageError

CLUSTER_KNOBS = ("router",)  # a cell's ClusterSpec, not its EngineConfig (SweepSetup.layout applies it)
KNOBS = tuple(f.name for f in flag_fields(EngineConfig)) + CLUSTER_KNOBS


@dataclass(frozen=True)
class Cell:
    gpu: str
    params: tuple  # ((knob, value), ...)
    layout: str = ""  # "" (the sweep's instances), "4x" (replicas) or "1P:3D" (disaggregated)

    @property
    def label(self) -> str:
        return ",".join(
            [self.gpu] + [f"{k}={_fmt(v)}" for k, v in self.params] + ([self.layout] if self.layout else [])
        )

    @property
    def slug(self) -> str:
        """The cell's label as a directory name."""
        return "cell-" + "".join(c if c.isalnum() or c in "._=-" else "_" for c in self.label.replace(",", "_"))


def _fmt(v) -> str:
    return "off" if v is None else str(v).lower() if isinstance(v, bool) else str(v)


def parse_value(knob: str, text: str):
    """A knob's value from the command line, typed as EngineConfig declares it."""
    if knob not in KNOBS:
        raise UsageError(f"unknown engine knob {knob!r}; knobs: {', '.join(KNOBS)}")
    if knob == "router":
        canonical(text.strip())  # a policy goodbench knows (vllm-router's spellings kept as given for {router})
        return text.strip()
    kind = field_kind(EngineConfig, knob)
    low = text.strip().lower()
    if low in ("none", "off") and kind is not bool and _optional(knob):
        return None  # an optional knob left unset (e.g. adaptive_chunk_target_ms=off: a fixed budget)
    if kind is bool:
        if low in ("true", "on", "1", "yes"):
            return True
        if low in ("false", "off", "0", "no"):
            return False
        raise UsageError(f"{knob}: {text!r} is not true/false")
    if kind in (int, float):
        try:
            return kind(low)
        except ValueError:
            raise UsageError(f"{knob}: {text!r} is not a {'whole number' if kind is int else 'number'}") from None
    return text.strip()


def cell_cluster(cell: Cell) -> dict:
    """The cell's ClusterSpec fields among its params ({"router": ...} or {})."""
    return {k: v for k, v in cell.params if k in CLUSTER_KNOBS}


def _optional(knob: str) -> bool:
    return next(f.default for f in flag_fields(EngineConfig) if f.name == knob) is None


def parse_params(items: list[str]) -> dict[str, list]:
    """["max_num_batched_tokens=256,512", "enable_chunked_prefill=false"] -> {knob: [values]}."""
    out: dict[str, list] = {}
    for item in items:
        knob, sep, vals = item.partition("=")
        knob = knob.strip().replace("-", "_")
        if not sep or not vals:
            raise UsageError(f"--param {item!r}: expected KNOB=V1,V2,...")
        out[knob] = [parse_value(knob, v) for v in vals.split(",") if v.strip()]
    return out


def layouts_for(total_gpus: int) -> list[str]:
    """Equal-GPU layouts for DistServe's comparison: N colocated replicas and every P:D with P + D = N."""
    if total_gpus < 2:
        raise UsageError("--compare-disaggregation needs at least 2 GPUs")
    return [f"{total_gpus}x"] + [f"{p}P:{total_gpus - p}D" for p in range(1, total_gpus)]


def grid(gpus: list[str], params: dict[str, list], layouts: list[str] | None = None) -> list[Cell]:
    """The product of the --param axes per GPU tier (and per layout, when given). `enable_chunked_prefill
    =false` alone is not an axis: it adds one unchunked baseline cell per tier (its budget is then
    max_model_len, as vLLM's)."""
    params = dict(params)
    baseline = params.get("enable_chunked_prefill") == [False]
    if baseline:
        del params["enable_chunked_prefill"]
    axes = [[(k, v) for v in vals] for k, vals in params.items()]
    cells = []
    for gpu in gpus:
        for lay in layouts or [""]:
            for combo in itertools.product(*axes) if axes else [()]:
                cells.append(Cell(gpu, tuple(combo), lay))
            if baseline:
                cells.append(Cell(gpu, (("enable_chunked_prefill", False),), lay))
    return cells


def cell_config(base: EngineConfig, cell: Cell) -> EngineConfig:
    """The resolved config of one cell (UsageError when the combination is impossible)."""
    kw = {k: v for k, v in cell.params if k not in CLUSTER_KNOBS}
    if kw.get("enable_chunked_prefill") is False and "max_num_batched_tokens" not in kw:
        kw["max_num_batched_tokens"] = None  # vLLM: max_model_len when chunking is off
    return replace(base, gpu=cell.gpu, **kw).resolved()


def check_cells(base: EngineConfig, cells: list[Cell]) -> None:
    """Validate every cell up front: one clear line instead of a failed cell later."""
    for c in cells:
        try:
            cell_config(base, c)
        except UsageError as e:
            raise UsageError(f"cell {c.label}: {e}") from None
