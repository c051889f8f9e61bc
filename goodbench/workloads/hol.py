"""Head-of-line stress: a long prompt lands, then short ones arrive behind it at a fixed stagger; the
group repeats. The generator times its own requests (arrival process `workload`)."""

from __future__ import annotations

import random

from ..records import RequestSpec
from .mixture import as_prompt
from .spec import MESSAGE_APIS, WorkloadSpec


def hol_requests(spec: WorkloadSpec, tok) -> list[RequestSpec]:
    """Every request of the workload, sorted by arrival_s, reproducible for spec.seed."""
    h = spec.hol
    rng = random.Random(spec.seed)
    chat = spec.endpoint in MESSAGE_APIS
    out = []
    for k in range(h.repeats):
        t0 = k * h.period_s
        text = tok.synthetic_text(h.long_input, rng)
        out.append(
            RequestSpec(f"r{len(out)}", "long", as_prompt(text, chat), h.long_input, h.long_output, arrival_s=t0)
        )
        for j in range(1, h.shorts + 1):
            text = tok.synthetic_text(h.short_input, rng)
            out.append(
                RequestSpec(
                    f"r{len(out)}",
                    "short",
                    as_prompt(text, chat),
                    h.short_input,
                    h.short_output,
                    arrival_s=t0 + j * h.stagger_ms / 1000.0,
                )
            )
    out.sort(key=lambda r: r.arrival_s)
    return out


def hol_count(spec: WorkloadSpec) -> int:
    return spec.hol.repeats * (spec.hol.shorts + 1)
