"""LoRA adapters over a live run, from the server's vllm:lora_requests_info gauge (vLLM's and goodbench
serve's): each label set is a state the server was in (the adapters of its running and waiting requests),
its value the time it was last in it. Pure.

summary.json's `lora` block (only where the server reports adapters):
  max_lora                 the server's GPU slots for adapters (--max-loras)
  max_running_adapters     the most distinct adapters it ran at once in a state seen during the run
  running_adapters_seen    every adapter seen running"""

from __future__ import annotations

import re

NAME = "vllm:lora_requests_info"
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def _states(sample: dict) -> dict[str, float]:
    return {k: v for k, v in sample.items() if k.split("{", 1)[0] == NAME}


def observed(rows: list[dict]) -> dict | None:
    """The block from the scraped rows: the states updated between the first and the last sample."""
    if len(rows) < 2:
        return None
    first, last = _states(rows[0].get("metrics") or {}), _states(rows[-1].get("metrics") or {})
    fresh = [k for k, v in last.items() if first.get(k) != v]
    if not fresh:
        return None
    most, seen, slots = 0, set(), None
    for key in fresh:
        labels = dict(_LABEL.findall(key))
        running = [a for a in labels.get("running_lora_adapters", "").split(",") if a]
        most = max(most, len(set(running)))
        seen.update(running)
        if labels.get("max_lora", "").isdigit():
            slots = int(labels["max_lora"])
    return {"max_lora": slots, "max_running_adapters": most, "running_adapters_seen": sorted(seen)}
