"""The max-goodput-rate search on the console: each probe as it ends (and whether it stopped early),
the result per cell, and the per-layout table (`goodbench sweep --find-max-rate`)."""

from __future__ import annotations

from rich.table import Table

from .tables import short


def probe_line(p: dict) -> str:
    stopped = (
        f"  [yellow]stopped early after {p['requests']} of {p['planned']} requests (the server fell behind); "
        "scored on those sent[/]"
        if p.get("stopped_early")
        else ""
    )
    return (
        f"    {p['rate']:8.3f} req/s  attainment {p['attainment']:6.1%} "
        f"[{p['lo']:.1%}, {p['hi']:.1%}]  {'pass' if p['pass'] else 'fail'}" + stopped
    )


def max_rate_line(r: dict) -> str:
    label = r["cell"]
    if r.get("error"):
        return f"  [red]✗ {label}: {r['error']}[/]"
    mr = r["max_rate"]
    if not mr:
        return (
            f"  max goodput rate on {label}: [red]none: even the lowest probed rate misses the target (is the "
            "SLO reachable on this GPU? see `goodbench engine explain`)[/]"
        )
    per = f" = {r['max_rate_per_gpu']:.3f} per GPU on {r['gpus']} GPUs" if (r.get("gpus") or 1) > 1 else ""
    lo, hi = r["bracket"]
    bracket = f"{lo:.2f}-{hi:.2f}" if hi is not None else f"{lo:.2f}-?"
    stopped = stopped_early(r)
    return (
        f"  max goodput rate on {label}: [bold]{mr:.2f} req/s[/]{per} (bracket {bracket})"
        + ("" if r["conclusive"] else " — inconclusive at the bracket ends: run more requests")
        + ("" if stopped == "-" else f"; {stopped} probes stopped early (scored on the requests they sent)")
    )


def max_rate_table(results: list[dict], target: float) -> Table:
    """DistServe's headline per cell: max goodput rate at the SLO, and per GPU, by instance layout."""
    t = Table(title=f"max goodput rate with SLO attainment >= {target:.0%}, per GPU")
    for col in ("cell", "layout", "GPUs", "max rate", "per GPU", "conclusive", "stopped early"):
        t.add_column(col, justify="left" if col in ("cell", "layout") else "right")
    for r in results:
        if r.get("error"):
            continue
        cell = short(r["cell"].rsplit(",", 1)[0] if r.get("layout") and r["cell"].endswith(r["layout"]) else r["cell"])
        mr, per = r.get("max_rate"), r.get("max_rate_per_gpu")
        t.add_row(
            cell,
            r.get("layout", ""),
            str(r.get("gpus", "")),
            f"{mr:.2f}" if mr else "none",
            f"{per:.3f}" if per else "",
            "yes" if r.get("conclusive") else "no",
            stopped_early(r),
        )
    return t


def stopped_early(r: dict) -> str:
    """How many of a search's live probes stopped early (the server fell behind), e.g. "1 of 5"."""
    probes = r.get("probes") or []
    n = sum(1 for p in probes if p.get("stopped_early"))
    return f"{n} of {len(probes)}" if n else "-"
