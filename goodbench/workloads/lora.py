"""LoRA traffic: a workload's requests spread over adapter names (each sent as the request's `model`), by
explicit weights or Zipf popularity, with a share left on the base model. Pure: the adapter of a request is
a function of the workload's seed and the request's id, so a run is reproducible and a request keeps its
adapter however many requests the run builds."""

from __future__ import annotations

import zlib
from dataclasses import dataclass, replace

from ..engine.jitter import unit
from ..errors import UsageError

MAX_ADAPTERS = 10_000


@dataclass(frozen=True)
class LoraSpec:
    """[lora]: adapter names, their weights (normalised), and the base model's share of requests."""

    adapters: tuple[str, ...]
    weights: tuple[float, ...]
    base_share: float = 0.0

    @classmethod
    def of(cls, adapters, skew: float = 0.0, weights=None, base_share: float = 0.0) -> LoraSpec:
        """adapters: a count (named lora-0 .. lora-N-1) or names; weights, else Zipf(skew) by position
        (0 = uniform). UsageError naming the problem."""
        names = tuple(f"lora-{i}" for i in range(adapters)) if isinstance(adapters, int) else tuple(adapters)
        if not names or len(names) > MAX_ADAPTERS:
            raise UsageError(f"lora adapters: give 1 to {MAX_ADAPTERS:,} adapters")
        if len(set(names)) != len(names) or not all(isinstance(n, str) and n.strip() for n in names):
            raise UsageError("lora adapters: names must be distinct, non-empty strings")
        if weights is None:
            if not 0 <= skew <= 10:
                raise UsageError(f"lora skew {skew:g} is not in [0, 10]")
            weights = [(i + 1) ** -skew for i in range(len(names))]
        if len(weights) != len(names) or any(not w >= 0 for w in weights) or not sum(weights) > 0:
            raise UsageError("lora weights: one non-negative weight per adapter, not all zero")
        if not 0 <= base_share < 1:
            raise UsageError(f"lora base_share {base_share:g} is not in [0, 1)")
        total = float(sum(weights))
        return cls(names, tuple(float(w) / total for w in weights), float(base_share))

    def adapter_for(self, key: str, seed: int) -> str | None:
        """The adapter a request with this id gets (None: the base model)."""
        u = unit(seed ^ 0x10AA, zlib.crc32(key.encode()))
        if u < self.base_share:
            return None
        u = (u - self.base_share) / (1 - self.base_share)
        acc = 0.0
        for name, w in zip(self.adapters, self.weights):
            acc += w
            if u < acc:
                return name
        return self.adapters[-1]


def check_generator(gen: str) -> None:
    """Adapters are assigned to a built request list: not yet to sessions' and agents' turns."""
    if gen in ("sessions", "agent"):
        raise UsageError(f"LoRA adapters: not yet for the {gen} generator (its turns are built as the run goes)")


def lora_table(t, gen: str) -> LoraSpec | None:
    """A workload's [lora]: adapters = N or [names], skew (Zipf) or weights = [...], base_share
    (docs/workloads.md); UsageError naming the problem."""
    if t is None:
        return None
    if not isinstance(t, dict):
        raise UsageError("expected a table ([lora])")
    unknown = sorted(set(t) - {"adapters", "skew", "weights", "base_share"})
    if unknown:
        raise UsageError(f"unknown key {unknown[0]!r}; allowed: adapters, base_share, skew, weights")
    check_generator(gen)
    adapters = t.get("adapters")
    if not (isinstance(adapters, int) and not isinstance(adapters, bool)) and not isinstance(adapters, list):
        raise UsageError("adapters: a count of adapters or a list of their names")
    nums = {k: t.get(k, 0.0) for k in ("skew", "base_share")}
    if any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in nums.values()):
        raise UsageError("skew and base_share are numbers")
    weights = t.get("weights")
    if weights is not None and (
        not isinstance(weights, list) or any(isinstance(w, bool) or not isinstance(w, (int, float)) for w in weights)
    ):
        raise UsageError("weights: a list of numbers, one per adapter")
    return LoraSpec.of(adapters, skew=float(nums["skew"]), weights=weights, base_share=float(nums["base_share"]))


def assign(requests: list, lora: LoraSpec | None, seed: int) -> list:
    """The requests with their adapters (unchanged without a [lora] table)."""
    if lora is None:
        return requests
    return [replace(r, adapter=lora.adapter_for(r.id, seed)) for r in requests]
