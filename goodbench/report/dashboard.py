"""The history dashboard (`goodbench history html --out DIR`): one self-contained page, no network.
The runs, series and change points are embedded as JSON in a script tag (escaped so no run's text can
close it), and dashboard.js draws the filters, the trend plots (inline SVG) and the run table from it,
inserting every string as text. Each run links to its report.html (or its summary.json when it has no
report yet), by a path relative to the page."""

from __future__ import annotations

import html
import json
import os
from datetime import datetime, timezone
from urllib.parse import quote

from ..errors import RunDirError
from ..history.identity import describe, metric_info, tell_apart
from ..store import json_safe, write_output

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:">
<title>goodbench history</title>
<style>
body{{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1b1f24;max-width:1100px}}
h1{{font-size:20px;margin:0 0 4px}} h3{{font-size:14px;margin:14px 0 2px}}
.filters{{display:flex;flex-wrap:wrap;gap:10px;margin:12px 0;padding:8px;background:#f4f6f8;border-radius:6px}}
.filters label{{display:flex;flex-direction:column;font-size:12px;color:#555}}
.key,.tick{{font-size:11px;fill:#666;color:#666}} .frame{{fill:none;stroke:#ddd}}
.line{{fill:none;stroke:#2f6fb0;stroke-width:1.2}} .pt circle{{fill:#2f6fb0}} .pt.dim circle{{fill:#fff;stroke:#aab}}
.cp{{stroke-dasharray:4 3;stroke-width:1.5}} .cp.regression,.cpl.regression{{stroke:#c0392b;fill:#c0392b}}
.cp.improvement,.cpl.improvement{{stroke:#1e8449;fill:#1e8449}} .cpl{{font-size:11px;stroke:none}}
table{{border-collapse:collapse;margin-top:12px;font-size:12px}} td,th{{padding:2px 8px;border-bottom:1px solid #eee;text-align:left}}
.ver{{stroke:#bbb;stroke-dasharray:1 3}} .verl{{font-size:10px;fill:#888}} td.num{{text-align:right}} #count{{color:#555}} .empty{{color:#a00}}
</style></head><body>
<h1>goodbench history</h1>
<div class="key">{subtitle}. Dashed red/green: change points (the first run of the new level, the
change of the median, the permutation p-value); dotted grey: the server's version changed. Hollow points:
runs outside the label filter.</div>
<div class="filters">
<label>metric<select id="f-metric"></select></label><label>workload<select id="f-workload"></select></label>
<label>model<select id="f-model"></select></label><label>server<select id="f-server"></select></label>
<label>GPU<select id="f-gpu"></select></label><label>label<select id="f-label"></select></label>
</div>
<div id="count"></div>
<div id="plots"></div>
<table><thead><tr><th>started (UTC)</th><th>run</th><th>workload</th><th>model</th><th>server</th><th>GPU</th>
<th>value</th><th>labels</th></tr></thead><tbody id="runs"></tbody></table>
<script type="application/json" id="gb-data">{data}</script>
<script>{script}</script>
</body></html>
"""


def embed_json(obj) -> str:
    """JSON safe inside a <script> element: no '<', '>' or '&' (so no '</script>' or '<!--'), and no
    U+2028/U+2029, whatever the runs' labels, names or paths hold."""
    text = json.dumps(json_safe(obj), separators=(",", ":"), allow_nan=False, ensure_ascii=False)
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(ch, esc)
    return text


def link(out_dir: str, run_dir: str) -> tuple[str, bool]:
    """(a URL relative to the page for the run's report.html, or its summary.json; whether a report exists)."""
    report = os.path.exists(os.path.join(run_dir, "report.html"))
    target = os.path.join(run_dir, "report.html" if report else "summary.json")
    rel = os.path.relpath(os.path.abspath(target), os.path.abspath(out_dir)).replace(os.sep, "/")
    return quote(rel, safe="/"), report  # ':' is quoted, so no path reads as a scheme (javascript:)


def dashboard_data(out_dir: str, runs: list[dict], trends: dict) -> dict:
    """The page's data: runs oldest first (with links), identities, each metric's series (run indices)
    and change points."""
    runs = sorted(runs, key=lambda r: (r["started"] or "", r["dir"]))
    index = {r["dir"]: i for i, r in enumerate(runs)}
    identities: dict = {}
    rows = []
    for r in runs:
        ident = {k: r.get(k) or "" for k in ("workload", "workload_key", "model", "slo", "server", "gpu", "loop")}
        identities.setdefault(r["identity"], ident | {"key": r["identity"], "knobs": r.get("knobs") or ""})
        href, has_report = link(out_dir, r["dir"])
        keep = ("run_id", "started", "identity", "server_version", "commit", "branch", "goodbench_version", "labels")
        rows.append({k: r.get(k) for k in keep} | {"href": href, "report": has_report, "m": r["metrics"]})
    tell_apart(list(identities.values()))  # sweep cells: the knob that separates them
    for ident in identities.values():
        ident["desc"] = describe(ident)
        del ident["knobs"], ident["key"]
    series: dict = {}
    changes: dict = {}
    for metric, found in trends.items():
        for t in found:
            key = t.series.identity["key"]
            idx = [index[p.path] for p in t.series.points if p.path in index]
            series.setdefault(metric, {})[key] = idx
            changes.setdefault(metric, {})[key] = [
                {
                    "run": idx[c.index],
                    "change": c.change,
                    "lo": c.change_ci[0],
                    "hi": c.change_ci[1],
                    "p": c.p_value,
                    "direction": c.direction,
                    "before": c.before,
                    "after": c.after,
                }
                for c in t.changes
            ]
    metrics = [{"name": m, "unit": metric_info(m)[0], "better": metric_info(m)[1]} for m in trends]
    return {"metrics": metrics, "identities": identities, "runs": rows, "series": series, "changes": changes}


def write_dashboard(out_dir: str, runs: list[dict], trends: dict) -> str:
    """out_dir/index.html (RunDirError naming it when it cannot be written)."""
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as e:
        raise RunDirError(f"cannot write {out_dir}: {e.strerror or e}") from None
    data = dashboard_data(out_dir, runs, trends)
    with open(os.path.join(os.path.dirname(__file__), "dashboard.js"), encoding="utf-8") as f:
        script = f.read()
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    subtitle = html.escape(f"{len(data['runs'])} runs, {len(data['identities'])} identities; generated {now}")
    page = PAGE.format(subtitle=subtitle, data=embed_json(data), script=script.replace("</", "<\\/"))
    path = os.path.join(out_dir, "index.html")
    write_output(path, page)
    return path
