"""Self-contained HTML reports: inline CSS, images embedded as data URIs, nothing loaded from the network.
Every string that came from a workload, a dataset, a server or a file name is escaped."""

from __future__ import annotations

import base64
import json
import os
from html import escape

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2rem;color:#1d1d1f;max-width:1400px}
h1{font-size:1.4rem}h2{font-size:1.1rem;margin-top:2rem}
table{border-collapse:collapse;font-size:.85rem;margin:.5rem 0}
th,td{border-bottom:1px solid #ddd;padding:.3rem .6rem;text-align:right}th{background:#f5f5f7}
td.l,th.l{text-align:left}.pass{color:#1a7f37;font-weight:600}.fail{color:#cf222e;font-weight:600}
.warn{color:#9a6700}img{max-width:100%;border:1px solid #eee;margin:.5rem 0}.dim{color:#6e6e73}
"""


def _e(x) -> str:
    return escape("" if x is None else str(x), quote=True)


def _num(v, fmt="{:.1f}") -> str:
    return "-" if v is None else fmt.format(v)


def _img(path: str) -> str:
    with open(path, "rb") as f:
        data = base64.b64encode(f.read()).decode()
    return f'<img alt="{_e(os.path.basename(path))}" src="data:image/png;base64,{data}">'


def _page(title: str, body: str) -> str:
    return (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{_e(title)}</title>"
            f"<style>{CSS}</style></head><body>{body}</body></html>\n")


def sweep_report(sweep_dir: str) -> str:
    """report.html for a sweep directory (sweep.json + PNGs); returns its path."""
    with open(os.path.join(sweep_dir, "sweep.json"), encoding="utf-8") as f:
        data = json.load(f)
    meta, cells, best = data.get("meta", {}), data.get("cells", []), data.get("best", {})
    slo = meta.get("slo") or {}
    parts = [f"<h1>goodbench sweep {_e(meta.get('sweep_id', os.path.basename(sweep_dir)))}</h1>",
             f"<p class=dim>workload {_e(meta.get('workload', {}).get('name'))} · {_e(meta.get('label'))} · SLO "
             f"{_e(' '.join(f'{k}:{v:g}' for k, v in slo.items()))}</p>", "<h2>Best chunk size per tier</h2><ul>"]
    for gpu, b in best.items():
        margin = "" if b.get("next") is None else (
            f"; next {_e(b['next'])} by {b['margin_goodput']:+.2f} req/s"
            + ("" if b.get("separated") else " (within the intervals)"))
        parts.append(f"<li><b>{_e(gpu)}</b>: {_e(b['cell'])} — goodput {b['goodput']:.2f} req/s, ITL p99 "
                     f"{_num(b.get('itl_p99_ms'))} ms{margin}</li>")
    parts.append("</ul><h2>Cells</h2><table><tr><th class=l>cell</th><th>goodput req/s</th><th>95% CI</th>"
                 "<th>attainment</th><th>TTFT p50</th><th>TTFT p99</th><th>ITL p50</th><th>ITL p99</th>"
                 "<th>ITL p99/p50</th><th>TPOT p99</th><th>tok/s</th></tr>")
    for r in cells:
        if r.get("error"):
            parts.append(f"<tr><td class=l>{_e(r['cell'])}</td><td class='l fail' colspan=10>{_e(r['error'])}</td></tr>")
            continue
        ci = (f"{r['goodput_lo']:.2f}–{r['goodput_hi']:.2f}" if r.get("goodput_lo") is not None else "-")
        att = "-" if r.get("slo_attainment") is None else f"{r['slo_attainment']:.1%}"
        parts.append(f"<tr><td class=l>{_e(r['cell'])}</td><td>{_num(r.get('goodput'), '{:.2f}')}</td><td>{ci}</td>"
                     f"<td>{att}</td><td>{_num(r.get('ttft_p50_ms'))}</td><td>{_num(r.get('ttft_p99_ms'))}</td>"
                     f"<td>{_num(r.get('itl_p50_ms'))}</td><td>{_num(r.get('itl_p99_ms'))}</td>"
                     f"<td>{_num(r.get('itl_p99_over_p50'), '{:.2f}')}</td><td>{_num(r.get('tpot_p99_ms'))}</td>"
                     f"<td>{_num(r.get('output_throughput'), '{:,.0f}')}</td></tr>")
    parts.append("</table>")
    pngs = [p for p in ("sweep_metrics.png", "sweep_goodput_heatmap.png", "sweep_frontier.png")
            if os.path.exists(os.path.join(sweep_dir, p))]
    if pngs:
        parts.append("<h2>Figures</h2>" + "".join(_img(os.path.join(sweep_dir, p)) for p in pngs))
    out = os.path.join(sweep_dir, "report.html")
    with open(out, "w", encoding="utf-8") as f:
        f.write(_page(f"goodbench sweep {meta.get('sweep_id', '')}", "".join(parts)))
    return out


def run_report(run_dir: str, summary: dict, meta: dict) -> str:
    """report.html for one run: the verdict, SLO clauses, latency tables (overall and per class) and
    warnings, as the console shows them."""
    req = summary["requests"]
    att = summary.get("slo_attainment")
    verdict = ("<span class=dim>no SLO given</span>" if att is None else
               f"<span class={'pass' if att >= 0.95 else 'fail'}>{att:.1%}</span> of {req['issued']} requests met "
               f"the SLO; goodput {summary['goodput']:.2f} req/s")
    t = meta.get("target") or {}
    parts = [f"<h1>goodbench run {_e(summary.get('run_id'))}</h1><p>{verdict}</p>",
             f"<p class=dim>{_e(meta.get('workload', {}).get('name'))} · {_e(summary.get('label'))} · "
             f"{req['issued']} requests · {_e(t.get('base_url'))}{_e(t.get('endpoint'))} model={_e(t.get('model'))}</p>"]
    for k, c in (summary.get("slo_clauses") or {}).items():
        ok = c["attainment"] is not None and c["attainment"] >= 0.95
        parts.append(f"<div><span class={'pass' if ok else 'fail'}>{'✓' if ok else '✗'}</span> {_e(k)} ≤ "
                     f"{c['threshold_ms']:g} ms met by {c['attainment']:.1%}</div>")
    parts.append(_latency_table(summary))
    for cls, b in (summary.get("per_class") or {}).items():
        parts.append(f"<h2>class {_e(cls)}</h2>" + _latency_table(b))
    for w in summary.get("warnings", []):
        parts.append(f"<p class=warn>! {_e(w)}</p>")
    out = os.path.join(run_dir, "report.html")
    with open(out, "w", encoding="utf-8") as f:
        f.write(_page(f"goodbench run {summary.get('run_id', '')}", "".join(parts)))
    return out


def _latency_table(s: dict) -> str:
    rows = ["<table><tr><th class=l>metric (ms)</th><th>p50</th><th>p90</th><th>p95</th><th>p99</th><th>mean</th>"
            "<th>max</th><th>n</th></tr>"]
    for name, key in (("TTFT", "ttft_ms"), ("TPOT", "tpot_ms"), ("ITL", "itl_ms"), ("E2E", "e2el_ms"),
                      ("schedule lag", "schedule_lag_ms")):
        d = s.get(key)
        if d:
            rows.append(f"<tr><td class=l>{name}</td>" + "".join(f"<td>{_num(d.get(c))}</td>" for c in
                                                                 ("p50", "p90", "p95", "p99", "mean", "max"))
                        + f"<td>{d.get('n', 0)}</td></tr>")
    rows.append("</table>")
    return "".join(rows)
