"""A sweep over router policies (`--param router=round_robin,cache_aware`): each policy against
round_robin (else the first policy) on the same tier and other knobs, in one line per policy: hit
rate, TTFT p50 and goodput, and whether the two goodputs can be told apart (the sweep's tie rule,
analysis/sweep.indistinct: its one judge). Pure."""

from __future__ import annotations

from ..engine.router import canonical
from .grid import KNOBS
from .sweep import indistinct


def _pct(new, old) -> str:
    return "-" if new is None or not old else f"{new / old - 1:+.0%}"


def _versus(r: dict, base: dict) -> str:
    hr = "-"
    if r.get("hit_rate") is not None and base.get("hit_rate") is not None:
        pts = (r["hit_rate"] - base["hit_rate"]) * 100
        hr = f"{base['hit_rate']:.1%} -> {r['hit_rate']:.1%} ({pts:+.1f} pts)"
    line = (
        f"{r['router']} vs {base['router']}: hit rate {hr}, TTFT p50 {_pct(r.get('ttft_p50_ms'), base.get('ttft_p50_ms'))}, "
        f"goodput {_pct(r.get('goodput'), base.get('goodput'))}"
    )
    if r.get("goodput") is not None and base.get("goodput") is not None:
        low, high = sorted((r, base), key=lambda x: x["goodput"])
        if indistinct(low, high):
            line += " (goodputs indistinguishable by the sweep's tie rule)"
    return line + (f" [{r['cell'].split(',', 1)[0]}]" if r.get("cell") else "")


def router_verdicts(rows: list[dict]) -> list[str]:
    """One line per policy that is not the baseline, for every group of cells differing only in router."""
    groups: dict = {}
    for r in rows:
        if r.get("router") is None or r.get("error"):
            continue
        key = tuple(sorted((k, str(v)) for k, v in r.items() if k == "gpu" or (k in KNOBS and k != "router")))
        groups.setdefault(key, []).append(r)
    out = []
    for cells in groups.values():
        if len(cells) < 2:
            continue
        base = next((c for c in cells if canonical(c["router"]) == "round-robin"), cells[0])
        out += [_versus(c, base) for c in cells if c is not base]
    return out
