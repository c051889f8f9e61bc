"""Self-contained HTML reports: inline CSS, images embedded as data URIs, nothing loaded from the network.
Every string that came from a workload, a dataset, a server or a file name is escaped."""

from __future__ import annotations

import base64
import json
import os
from html import escape

from ..engine.uncertainty import statements
from .captions import caption
from .jobs import job_html
from .tables import best_text

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2rem;color:#1d1d1f;max-width:1400px}
h1{font-size:1.4rem}h2{font-size:1.1rem;margin-top:2rem}h3{font-size:1rem;margin-top:1.2rem}
table{border-collapse:collapse;font-size:.85rem;margin:.5rem 0}
th,td{border-bottom:1px solid #ddd;padding:.3rem .6rem;text-align:right}th{background:#f5f5f7}
td.l,th.l{text-align:left}.pass{color:#1a7f37;font-weight:600}.fail{color:#cf222e;font-weight:600}
.warn{color:#9a6700}img{max-width:100%;border:1px solid #eee;margin:.5rem 0}.dim{color:#6e6e73}
figure{margin:1.2rem 0}figcaption{font-size:.85rem;color:#3a3a3c;max-width:70rem}
"""


def _e(x) -> str:
    return escape("" if x is None else str(x), quote=True)


def _num(v, fmt="{:.1f}") -> str:
    return "-" if v is None else fmt.format(v)


def _img(path: str) -> str:
    """A figure with its title as alt text and a caption under it saying what it shows (captions.py)."""
    with open(path, "rb") as f:
        data = base64.b64encode(f.read()).decode()
    title, text = caption(path)
    return (
        f'<figure><img alt="{_e(title)}" src="data:image/png;base64,{data}">'
        f"<figcaption><b>{_e(title)}.</b> {_e(text)}</figcaption></figure>"
    )


def _page(title: str, body: str) -> str:
    return (
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{_e(title)}</title>"
        f"<style>{CSS}</style></head><body>{body}</body></html>\n"
    )


def sweep_report(sweep_dir: str) -> str:
    """report.html for a sweep directory (sweep.json + PNGs); returns its path."""
    with open(os.path.join(sweep_dir, "sweep.json"), encoding="utf-8") as f:
        data = json.load(f)
    meta, cells, best = data.get("meta", {}), data.get("cells", []), data.get("best", {})
    slo = meta.get("slo") or {}
    parts = [
        f"<h1>goodbench sweep {_e(meta.get('sweep_id', os.path.basename(sweep_dir)))}</h1>",
        f"<p class=dim>workload {_e(meta.get('workload', {}).get('name'))} · {_e(meta.get('label'))} · SLO "
        f"{_e(' '.join(f'{k}:{v:g}' for k, v in slo.items()))}</p>",
        "<h2>Best chunk size per tier</h2><ul>",
    ]
    for gpu, b in best.items():
        parts.append(f"<li>{_e(best_text(gpu, b))}</li>")
    rule = next(iter(best.values()), {}).get("rule")
    if rule:
        parts.append(f"<li class=dim>rule: {_e(rule)}</li>")
    parts.append(
        "</ul><h2>Cells</h2><table><tr><th class=l>cell</th><th>goodput req/s</th><th>95% CI</th>"
        "<th>attainment</th><th>TTFT p50</th><th>TTFT p99</th><th>stall p99</th><th>ITL p50</th><th>ITL p99</th>"
        "<th>ITL p99/p50</th><th>TPOT p99</th><th>tok/s</th></tr>"
    )
    for r in cells:
        if r.get("error"):
            parts.append(
                f"<tr><td class=l>{_e(r['cell'])}</td><td class='l fail' colspan=11>{_e(r['error'])}</td></tr>"
            )
            continue
        ci = f"{r['goodput_lo']:.2f}–{r['goodput_hi']:.2f}" if r.get("goodput_lo") is not None else "-"
        att = "-" if r.get("slo_attainment") is None else f"{r['slo_attainment']:.1%}"
        parts.append(
            f"<tr><td class=l>{_e(r['cell'])}</td><td>{_num(r.get('goodput'), '{:.2f}')}</td><td>{ci}</td>"
            f"<td>{att}</td><td>{_num(r.get('ttft_p50_ms'))}</td><td>{_num(r.get('ttft_p99_ms'))}</td>"
            f"<td>{_num(r.get('stall_p99_ms'))}</td><td>{_num(r.get('itl_p50_ms'))}</td><td>{_num(r.get('itl_p99_ms'))}</td>"
            f"<td>{_num(r.get('itl_p99_over_p50'), '{:.2f}')}</td><td>{_num(r.get('tpot_p99_ms'))}</td>"
            f"<td>{_num(r.get('output_throughput'), '{:,.0f}')}</td></tr>"
        )
    parts.append("</table>")
    pngs = [
        p
        for p in ("sweep_metrics.png", "sweep_goodput_heatmap.png", "sweep_frontier.png")
        if os.path.exists(os.path.join(sweep_dir, p))
    ]
    if pngs:
        parts.append("<h2>Figures</h2>" + "".join(_img(os.path.join(sweep_dir, p)) for p in pngs))
    out = os.path.join(sweep_dir, "report.html")
    with open(out, "w", encoding="utf-8") as f:
        f.write(_page(f"goodbench sweep {meta.get('sweep_id', '')}", "".join(parts)))
    return out


def frontier_report(root: str) -> str:
    """report.html of a sweep over loads: the caption, pareto.png, every (configuration, load) point and a link to
    each load's own sweep report; returns its path."""
    with open(os.path.join(root, "frontier.json"), encoding="utf-8") as f:
        data = json.load(f)
    meta, rows = data.get("meta", {}), data.get("rows", [])
    slo = meta.get("slo") or {}
    parts = [
        f"<h1>goodbench frontier {_e(os.path.basename(os.path.abspath(root)))}</h1>",
        f"<p class=dim>{_e(meta.get('kind'))} {_e(', '.join(f'{v:g}' for v in meta.get('loads', [])))} · SLO "
        f"{_e(' '.join(f'{k}:{v:g}' for k, v in slo.items()))}</p><p>{_e(meta.get('caption'))}</p>",
    ]
    if os.path.exists(os.path.join(root, "pareto.png")):
        parts.append(_img(os.path.join(root, "pareto.png")))
    parts.append(
        "<table><tr><th class=l>configuration</th><th class=l>load</th><th>tok/s per user</th><th>out tok/s/GPU</th>"
        "<th>good tok/s/GPU</th><th>attainment</th><th>TTFT p50</th><th>TPOT p50</th><th class=l>frontier</th></tr>"
    )
    for r in rows:
        on = " + ".join(w for w, k in (("all tokens", "on_frontier"), ("good tokens", "on_good_frontier")) if r.get(k))
        att = "-" if r.get("slo_attainment") is None else f"{r['slo_attainment']:.1%}"
        parts.append(
            f"<tr><td class=l>{_e(r['config'])}</td><td class=l>{_e(r['load'])}</td>"
            f"<td>{_num(r.get('tok_s_per_user'))}</td><td>{_num(r.get('output_tok_s_per_gpu'), '{:,.0f}')}</td>"
            f"<td>{_num(r.get('good_output_tok_s_per_gpu'), '{:,.0f}')}</td><td>{att}</td>"
            f"<td>{_num(r.get('ttft_p50_ms'))}</td><td>{_num(r.get('tpot_p50_ms'), '{:.2f}')}</td>"
            f"<td class=l>{on}</td></tr>"
        )
    loads = sorted(d for d in os.listdir(root) if d.startswith("load-"))
    links = "".join(f'<li><a href="{_e(d)}/report.html">{_e(d)}</a></li>' for d in loads)
    parts.append(f"</table><h2>Each load's sweep</h2><ul>{links}</ul>")
    out = os.path.join(root, "report.html")
    with open(out, "w", encoding="utf-8") as f:
        f.write(_page("goodbench frontier", "".join(parts)))
    return out


def run_report(views, out_dir: str, figures: list[str], target: float | None = None) -> str:
    """report.html for one run, or one combining several (overlaid figures, a side-by-side table): the
    verdict and SLO clauses, latency tables with 95% intervals (overall and per class), HOL attribution,
    other tools' metric definitions, warnings, then the figures. target: the attainment shown as pass
    (default: each run's recorded gate, gating.spec_of)."""
    title = (
        f"goodbench run {views[0].summary.get('run_id', '')}" if len(views) == 1 else f"goodbench: {len(views)} runs"
    )
    parts = [f"<h1>{_e(title)}</h1>"]
    if len(views) > 1:
        parts.append("<h2>Side by side</h2>" + _side_by_side(views))
    for v in views:
        parts.append(_run_section(v, heading=len(views) > 1, target=target))
    if figures:
        parts.append("<h2>Figures</h2>" + "".join(_img(p) for p in figures))
    out = os.path.join(out_dir, "report.html")
    with open(out, "w", encoding="utf-8") as f:
        f.write(_page(title, "".join(parts)))
    return out


def _ci(pair, fmt="{:.1f}") -> str:
    return "" if not pair else f"{fmt.format(pair[0])}–{fmt.format(pair[1])}"


def _side_by_side(views) -> str:
    head = (
        "<table><tr><th class=l>run</th><th>requests</th><th>attainment (95% CI)</th><th>goodput req/s (95% CI)</th>"
        "<th>TTFT p50</th><th>TTFT p99</th><th>ITL p50</th><th>ITL p99</th><th>ITL p99/p50</th><th>TPOT p99</th>"
        "<th>E2E p99</th><th>lag p99</th><th>valid</th></tr>"
    )
    rows = [head]
    for v in views:
        s = v.summary
        att = s.get("slo_attainment")
        rows.append(
            f"<tr><td class=l>{_e(v.label)}</td><td>{s['requests']['issued']}</td>"
            f"<td>{'-' if att is None else f'{att:.1%}'} <span class=dim>{_ci(s.get('slo_attainment_ci'), '{:.1%}')}</span></td>"
            f"<td>{_num(s.get('goodput'), '{:.2f}')} <span class=dim>{_ci(s.get('goodput_ci'), '{:.2f}')}</span></td>"
            + "".join(
                f"<td>{_num(s[k][q])}</td>"
                for k, q in (("ttft_ms", "p50"), ("ttft_ms", "p99"), ("itl_ms", "p50"), ("itl_ms", "p99"))
            )
            + f"<td>{_num(s.get('itl_p99_over_p50'), '{:.2f}')}</td><td>{_num(s['tpot_ms']['p99'])}</td>"
            f"<td>{_num(s['e2el_ms']['p99'])}</td><td>{_num(s['schedule_lag_ms']['p99'])}</td>"
            f"<td class={'pass' if s.get('valid', True) else 'fail'}>{'yes' if s.get('valid', True) else 'NO'}</td></tr>"
        )
    rows.append("</table>")
    return "".join(rows)


def _verdict(v, summary: dict, spec) -> str:
    """The headline: the one judge's verdict (gating.headline), attainment and goodput with their
    intervals, and any mark that the numbers are saturated or incomplete."""
    from ..gating import headline

    h = headline(summary, spec, interrupted=bool(v.meta.get("interrupted")))
    cls = {"PASS": "pass", "FAIL": "fail", "CANNOT JUDGE": "fail"}.get(h.word, "dim")
    verdict = f"<span class={cls}>{_e(h.word)}</span> "
    if h.attainment is None:
        verdict += "<span class=dim>no SLO given</span>"
    elif h.unit == "jobs":
        verdict += (
            f"<span class={cls}>{h.attainment:.1%}</span> of {summary['jobs']['started']} jobs met the SLO (target {h.target:.0%}); "
            f"job goodput {h.goodput or 0:.2f}/s"
        )
    else:
        verdict += (
            f"<span class={cls}>{h.attainment:.1%}</span> <span class=dim>(95% CI {_ci(summary.get('slo_attainment_ci'), '{:.1%}')})</span> "
            f"of {summary['requests']['issued']} requests met the SLO (target {h.target:.0%}); goodput "
            f"{summary['goodput']:.2f} req/s <span class=dim>(95% CI {_ci(summary.get('goodput_ci'), '{:.2f}')})</span>"
        )
    failed = [c.name for c in h.result.clauses if not c.passed and c.kind not in ("attainment", "jobs")]
    if failed:
        verdict += f" <span class=fail>failed: {_e(', '.join(failed))}</span>"
    if h.word == "CANNOT JUDGE":
        verdict += f" <span class=fail>INVALID: {_e(h.result.reason)}</span>"
    elif h.result.note:
        verdict += f" <span class=warn>{_e(h.result.note)}</span>"
    if summary.get("saturated"):
        verdict += " <span class=fail>SATURATED: the server could not keep up (see the warnings)</span>"
    if getattr(v, "incomplete", None):
        verdict += f" <span class=fail>INCOMPLETE: {_e(v.incomplete)}</span>"
    return verdict


def _energy_line(e: dict | None) -> str:
    """The energy block in one line (the console's words), or nothing for a run without telemetry or a model."""
    if not e:
        return ""
    from .energy import energy_words

    text, basis = energy_words(e)
    return f"<p>{_e(text)} <span class=dim>{_e(basis)}</span></p>" if basis else f"<p class=warn>{_e(text)}</p>"


def _run_line(v, summary: dict, meta: dict) -> str:
    """Workload, load, target and engine of the run, dim."""
    t, eng = meta.get("target") or {}, meta.get("engine") or {}
    engine = f" · engine {_e(eng.get('model'))} on {_e(eng.get('gpu'))} budget={_e(eng.get('max_num_batched_tokens'))}"
    return (
        f"<p class=dim>{_e((meta.get('workload') or {}).get('name'))} · {_e(summary.get('label'))} · "
        f"{summary['requests']['issued']} requests · {_e(t.get('base_url'))}{_e(t.get('endpoint'))} "
        f"model={_e(t.get('model'))}{engine if eng else ''} · {_e(v.dir)}</p>"
    )


def _class_section(cls: str, b: dict) -> str:
    a = b.get("slo_attainment")
    att = (
        ""
        if a is None
        else f" · attainment {a:.1%} ({_ci(b.get('slo_attainment_ci'), '{:.1%}')}) · goodput {b['goodput']:.2f} req/s"
    )
    return f"<h3>class {_e(cls)}</h3><p class=dim>{b['requests']['issued']} requests{att}</p>" + _latency_table(b)


def _blocks(summary: dict) -> list[str]:
    """The optional blocks, each where the run has it."""
    parts = []
    if summary.get("per_priority"):
        parts.append(_lanes_table(summary["per_priority"]))
    if summary.get("per_adapter"):
        parts.append(_lanes_table(summary["per_adapter"], ADAPTERS_INTRO, "adapter"))
    if summary.get("sessions"):
        parts.append(_sessions_table(summary["sessions"], summary.get("per_turn") or {}))
    parts.append(job_html(summary))
    if summary.get("prefix_cache"):
        parts.append(_prefix_line(summary["prefix_cache"]))
    if summary.get("speculative"):
        parts.append(_spec_line(summary["speculative"]))
    parts += [
        f"<p>engine: {what} ±{pct:.0f}% <span class=dim>{_e(basis)}</span></p>"
        for what, pct, basis in statements(summary.get("engine_uncertainty"))
    ]
    if summary.get("hol"):
        parts.append(_hol_table(summary["hol"]))
    if summary.get("server_timing"):
        parts.append(_server_timing_table(summary["server_timing"]))
    if summary.get("metric_variants"):
        parts.append(_variants_table(summary["metric_variants"]))
    return parts


def _run_section(v, heading: bool, target: float | None) -> str:
    summary, meta = v.summary, v.meta
    from ..gating import attains, spec_of

    spec = spec_of(meta, target)  # target: a GateSpec, a pass mark, or None (the run's recorded gate)
    req, mark = summary["requests"], spec.min_attainment
    parts = [
        f"<h2>{_e(v.label)}</h2>" if heading else "",
        f"<p>{_verdict(v, summary, spec)}</p>",
        _run_line(v, summary, meta),
        _energy_line(summary.get("energy")),
    ]
    for k, c in (summary.get("slo_clauses") or {}).items():
        ok = attains(c["attainment"], mark)
        parts.append(
            f"<div><span class={'pass' if ok else 'fail'}>{'✓' if ok else '✗'}</span> {_e(k)} ≤ "
            f"{c['threshold_ms']:g} ms met by {_num(c['attainment'], '{:.1%}')}</div>"
        )
    parts.append(
        f"<p>throughput {_num(summary.get('request_throughput'), '{:.2f}')} req/s, "
        f"{_num(summary.get('output_throughput'), '{:,.0f}')} output tok/s · duration "
        f"{summary['duration_s']:.1f} s · failed {req['failed']} {_e(req['by_status'] if req['failed'] else '')}</p>"
    )
    parts.append(_latency_table(summary))
    parts += [_class_section(cls, b) for cls, b in (summary.get("per_class") or {}).items()]
    parts += _blocks(summary)
    parts += [f"<p class=warn>! {_e(w)}</p>" for w in summary.get("warnings", [])]
    return "".join(parts)


LANES_INTRO = (
    "<h3>Priority lanes</h3><p class=dim>vLLM's <code>priority</code> field: lower is served first "
    "(when the server schedules by priority).</p>"
)
ADAPTERS_INTRO = "<h3>LoRA adapters</h3><p class=dim>each request's adapter, sent as its <code>model</code>.</p>"


def _lanes_table(lanes: dict, intro: str = LANES_INTRO, key: str = "lane") -> str:
    """Priority lanes (and LoRA adapters: the same blocks, split by adapter)."""
    rows = [
        f"{intro}<table><tr><th class=l>{key}</th><th>requests</th>"
        "<th>attainment</th><th>goodput</th><th>TTFT p50</th><th>TTFT p99</th><th>ITL p99</th></tr>"
    ]
    for k, b in lanes.items():
        a = b.get("slo_attainment")
        rows.append(
            f"<tr><td class=l>{_e(k)}</td><td>{b['requests']['issued']}</td>"
            f"<td>{'-' if a is None else f'{a:.1%}'}</td><td>{_num(b.get('goodput'), '{:.2f}')}</td>"
            f"<td>{_num(b['ttft_ms']['p50'])}</td><td>{_num(b['ttft_ms']['p99'])}</td>"
            f"<td>{_num(b['itl_ms']['p99'])}</td></tr>"
        )
    rows.append("</table>")
    return "".join(rows)


def _sessions_table(sess: dict, per_turn: dict) -> str:
    a = sess.get("attainment")
    head = (
        f"<h3>Sessions</h3><p>{sess['completed']} of {sess['started']} sessions completed, "
        f"{sess['turns_per_session']:.1f} turns each"
        + (
            ""
            if a is None
            else f"; every turn met the SLO in {a:.1%} · session goodput {_num(sess.get('goodput'), '{:.2f}')}/s"
        )
        + "</p>"
    )
    rows = [
        head,
        "<table><tr><th class=l>turn</th><th>requests</th><th>TTFT p50</th><th>TTFT p99</th><th>attainment</th></tr>",
    ]
    for k, b in per_turn.items():
        t = b.get("slo_attainment")
        rows.append(
            f"<tr><td class=l>{_e(k)}</td><td>{b['requests']['issued']}</td><td>{_num(b['ttft_ms']['p50'])}</td>"
            f"<td>{_num(b['ttft_ms']['p99'])}</td><td>{'-' if t is None else f'{t:.1%}'}</td></tr>"
        )
    rows.append("</table>")
    return "".join(rows)


def _prefix_line(pc: dict) -> str:
    from ..metrics.prefix import describe

    text = describe(pc)
    if text is None:
        return ""
    return (
        f"<p>prefix cache: {_e(text)}"
        + (f" <span class=dim>observed by {_e(pc.get('observed_by'))}</span>" if pc.get("observed_by") else "")
        + "</p>"
    )


def _spec_line(b: dict) -> str:
    from ..metrics.speculative import describe

    text = describe(b)
    return (
        "" if text is None else f"<p>speculative decoding: {_e(text)} <span class=dim>{_e(b['observed_by'])}</span></p>"
    )


def _hol_table(h: dict) -> str:
    rows = [
        f"<h3>Head-of-line attribution</h3><p class=dim>{_e(', '.join(h['short_classes']))} requests while a "
        f"{_e(h['long_class'])} prefill was in flight ({_e(h['long_prefill_window'])}; "
        f"{_num((h.get('long_prefill_time_share') or 0) * 100)}% of the run) vs while none was.</p>"
        "<table><tr><th class=l>metric (ms)</th><th>during p50</th><th>during p99</th><th>n</th><th>clear p50</th>"
        "<th>clear p99</th><th>n</th><th>p50 ratio</th><th>p99 ratio</th></tr>"
    ]
    for name, key in (("TTFT", "ttft_ms"), ("ITL", "itl_ms")):
        d = h[key]
        a, b = d["during_long_prefill"], d["clear"]
        rows.append(
            f"<tr><td class=l>{name}</td><td>{_num(a['p50'])}</td><td>{_num(a['p99'])}</td><td>{a['n']}</td>"
            f"<td>{_num(b['p50'])}</td><td>{_num(b['p99'])}</td><td>{b['n']}</td>"
            f"<td>{_num(d['p50_ratio'], '{:.2f}')}×</td><td>{_num(d['p99_ratio'], '{:.2f}')}×</td></tr>"
        )
    rows.append("</table>")
    return "".join(rows)


def _server_timing_table(st: dict) -> str:
    w = st.get("window_s") or [None, None]
    rows = [
        "<h3>Where TTFT went (the server's view)</h3><p class=dim>"
        f"{_e(st.get('source'))}; samples at {_num(w[0])}–{_num(w[1])} s of the run.</p>"
        "<table><tr><th class=l>phase</th><th>mean (ms)</th><th>n</th><th class=l>from → to</th></tr>"
    ]
    client = st.get("client_ttft_ms")
    for name, d, what in (
        ("queue", st.get("queue_ms"), "arrival → first scheduled"),
        ("prefill", st.get("prefill_ms"), "first scheduled → first token"),
        (
            "other",
            None if st.get("other_ms") is None else {"mean": st["other_ms"]},
            "server TTFT − queue − prefill: its front end (HTTP, tokenizing, hand-offs)",
        ),
        ("TTFT, server", st.get("ttft_ms"), "arrival → first token (server clock)"),
        ("TTFT, goodbench", client, "request sent → first token read (client clock)"),
        (
            "goodbench − server",
            None if st.get("client_minus_server_ms") is None else {"mean": st["client_minus_server_ms"]},
            "outside the server: network, client (same requests)",
        ),
    ):
        if d is not None:
            rows.append(
                f"<tr><td class=l>{name}</td><td>{_num(d.get('mean'))}</td><td>{_e(d.get('n', ''))}</td>"
                f"<td class=l>{_e(what)}</td></tr>"
            )
    rows.append("</table>")
    return "".join(rows)


def _variants_table(var: dict) -> str:
    rows = [
        "<h3>Other tools' definitions</h3><p class=dim>Same run, computed as other tools define them "
        "(docs/metrics.md), to reconcile numbers across tools.</p><table><tr><th class=l>variant</th>"
        "<th class=l>definition</th><th class=l>used by</th><th>p50</th><th>p99</th><th>mean</th><th>n</th></tr>"
    ]
    for k, d in var.items():
        rows.append(
            f"<tr><td class=l>{_e(k)}</td><td class=l>{_e(d['defined_as'])}</td><td class=l>{_e(d['used_by'])}</td>"
            f"<td>{_num(d['p50'])}</td><td>{_num(d['p99'])}</td><td>{_num(d['mean'])}</td><td>{d['n']}</td></tr>"
        )
    rows.append("</table>")
    return "".join(rows)


def _latency_table(s: dict) -> str:
    rows = [
        "<table><tr><th class=l>metric (ms)</th><th>p50</th><th class=dim>95% CI</th><th>p90</th><th>p95</th>"
        "<th>p99</th><th class=dim>95% CI</th><th>mean</th><th>max</th><th>n</th></tr>"
    ]
    think = [("TTFO (first answer)", "ttfo_ms")] if s.get("reasoning_tokens") else []  # reasoning models
    for name, key in (
        ("TTFT", "ttft_ms"),
        *think,
        ("TPOT", "tpot_ms"),
        ("ITL", "itl_ms"),
        ("E2E", "e2el_ms"),
        ("schedule lag", "schedule_lag_ms"),
    ):
        d = s.get(key)
        if d:
            ci = d.get("ci") or {}
            cell = {c: f"<td>{_num(d.get(c))}</td>" for c in ("p50", "p90", "p95", "p99", "mean", "max")}
            rows.append(
                f"<tr><td class=l>{name}</td>{cell['p50']}<td class=dim>{_ci(ci.get('p50'))}</td>"
                f"{cell['p90']}{cell['p95']}{cell['p99']}<td class=dim>{_ci(ci.get('p99'))}</td>"
                f"{cell['mean']}{cell['max']}<td>{d.get('n', 0)}</td></tr>"
            )
    rows.append("</table>")
    return "".join(rows)
