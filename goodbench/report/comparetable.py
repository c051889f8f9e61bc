"""`goodbench compare`'s table: BASE vs NEW per metric, the interval of the difference, the verdict
(a worsening within the practical margin said so, not called a regression)."""

from __future__ import annotations

from rich import box
from rich.table import Table
from rich.text import Text

from ..records import fmt_num


def _fmt(v, unit):
    if v is None:
        return "-"
    return fmt_num(v, ".1%" if unit == "fraction" else ".2f" if unit == "req/s" else ".1f")


_NAMES = {"slo_attainment": "attainment", "goodput": "goodput /s"}


def compare_table(res: dict) -> Table:
    tab = Table(
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        title=f"{res['base']} → {res['new']}  ({res['level']:.0%} CI of the difference)",
        title_justify="left",
    )
    for col in ("metric", "base", "new", "Δ", "Δ%", "CI of Δ", "p MWU", "verdict"):
        tab.add_column(col, justify="left" if col in ("metric", "verdict") else "right", no_wrap=True)
    for d in res["metrics"]:
        style = {"better": "green", "worse": "red"}.get(d["verdict"], "")
        verdict = {"no significant change": "~ same", "not comparable": "n/a"}.get(d["verdict"], d["verdict"])
        if d["regression"]:
            verdict += " REGRESSION"
        elif d["verdict"] == "worse":
            verdict, style = ("worse, heavier load" if d.get("load_explained") else "worse, within margin"), "yellow"
        u = d["unit"]
        ci = "-" if not d["ci"] else f"{_fmt(d['ci'][0], u)}…{_fmt(d['ci'][1], u)}"
        name = _NAMES.get(d["metric"], d["metric"].replace("_p", " p").upper().replace(" P", " p") + " ms")
        tab.add_row(
            name,
            _fmt(d["base"], u),
            _fmt(d["new"], u),
            _fmt(d["delta"], u),
            "-" if d["rel"] is None else fmt_num(d["rel"], "+.1%"),
            ci,
            "-" if d["p_value"] is None else f"{d['p_value']:.2g}",
            Text(verdict, style=style),
        )
    return tab
