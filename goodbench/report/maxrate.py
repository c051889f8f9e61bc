"""The max-goodput-rate search on the console: each probe as it ends (and whether it stopped early),
the result per cell, and the per-layout table (`goodbench sweep --find-max-rate`)."""

from __future__ import annotations

from rich.table import Table

from ..limits import CONFIRM_SCALE, STEADY_SHARE
from .tables import short


def probe_line(p: dict) -> str:
    """One probe: the rate its schedule offered (the nominal rate that drew it beside), its requests,
    attainment with its interval, the verdict, and what makes it weaker than it looks."""
    offered, nominal = p.get("offered_rate", p["rate"]), p.get("nominal_rate", p["rate"])
    notes = []
    if p.get("confirmation"):
        notes.append("confirmation")
    if p.get("stopped_early"):
        notes.append(
            f"[yellow]stopped early after {p['requests']} of {p['planned']} requests (the server fell behind); "
            "scored on those sent[/]"
        )
    elif not p.get("conclusive", True):
        share = p.get("steady_share")
        notes.append(
            "[yellow]inconclusive: "
            + ("too few sends" if share is None else f"steady {share:.0%} < {STEADY_SHARE:.0%}")
            + "[/]"
        )
    return (
        f"    offered {offered:7.3f} req/s (nominal {nominal:7.3f}) {p['requests']:>5} req  "
        f"{p['attainment']:6.1%} [{p['lo']:.1%}, {p['hi']:.1%}] {'pass' if p['pass'] else 'fail'}"
        + "".join(f"  {n}" for n in notes)
    )


def max_rate_line(r: dict) -> str:
    label = r["cell"]
    if r.get("error"):
        return f"  [red]✗ {label}: {r['error']}[/]"
    mr = r["max_rate"]
    if not mr:
        why = r.get("why_inconclusive") or "no probed rate met the target"
        return (
            f"  max goodput rate on {label}: [red]none: {why} (is the SLO reachable on this GPU? see "
            "`goodbench engine explain`)[/]"
        )
    per = f" = {r['max_rate_per_gpu']:.3f} per GPU on {r['gpus']} GPUs" if (r.get("gpus") or 1) > 1 else ""
    nominal = f", nominal {r['nominal_rate']:.2f}" if r.get("nominal_rate") else ""
    lo, hi = r["bracket"]
    bracket = f"{lo:.2f}-{hi:.2f}" if hi is not None else f"{lo:.2f}-?"
    stopped = stopped_early(r)
    down = r.get("stepped_down_from") or []
    return (
        f"  max goodput rate on {label}: [bold]{mr:.2f} req/s offered[/]{per} (bracket {bracket}{nominal})"
        + (f"; held with {CONFIRM_SCALE}x the requests" if r.get("confirmed") else "")
        + (f"; stepped down from {', '.join(f'{x:.2f}' for x in down)} (failed with more requests)" if down else "")
        + ("" if r["conclusive"] else f" — inconclusive: {r.get('why_inconclusive') or 'run more requests'}")
        + ("" if stopped == "-" else f"; {stopped} probes stopped early (scored on the requests they sent)")
    )


def max_rate_table(results: list[dict], target: float) -> Table:
    """DistServe's headline per cell: max goodput rate at the SLO, and per GPU, by instance layout."""
    t = Table(title=f"max goodput rate with SLO attainment >= {target:.0%}, per GPU")
    for col in ("cell", "layout", "GPUs", "max rate (offered)", "nominal", "per GPU", "conclusive", "stopped early"):
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
            f"{r['nominal_rate']:.2f}" if r.get("nominal_rate") else "",
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
