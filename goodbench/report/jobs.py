"""Agent jobs, one-body APIs and a fleet's replicas in the reports: console lines and an HTML block (the
job timeline figure is runfigures.job_timeline)."""

from __future__ import annotations

import html


def _ms(v) -> str:
    return "-" if v is None else f"{v:,.0f}"


def job_text(summary: dict) -> list[str]:
    """Plain lines (the console styles them): jobs, JCT, critical path and client share, per depth."""
    out = []
    j = summary.get("jobs")
    if j:
        jct, path = j["jct_ms"], j["critical_path_ms"]
        line = (
            f"  agent jobs: {j['completed']}/{j['started']} completed, {j['calls_per_job']:.1f} calls each · "
            f"JCT p50 {_ms(jct['p50'])} / p90 {_ms(jct['p90'])} / p99 {_ms(jct['p99'])} ms"
        )
        if j.get("attainment") is not None:
            line += f" · met the SLO {j['attainment']:.1%} · job goodput {j['goodput']:.2f}/s"
        out.append(line)
        share = j.get("critical_path_share") or {}
        out.append(
            f"  critical path p50 {_ms(path['p50'])} ms (tool/think {_ms(j['tool_think_on_path_ms']['p50'])} ms), "
            f"{(share.get('min') or 0):.1%} of JCT at least; the client added p50 "
            f"{_ms(j['client_overhead_ms']['p50'])} / max {_ms(j['client_overhead_ms']['max'])} ms"
        )
        out.append(
            "  TTFT p50 by depth: "
            + " · ".join(f"{d}: {_ms(b['ttft_ms']['p50'])} ms" for d, b in (j.get("per_depth") or {}).items())
        )
    p = summary.get("pooling")
    if p:
        b = p["batch_size"]
        out.append(
            f"  one-body requests: {p['requests']} carrying {p['items']} items ({_ms(p['items_per_s'])} items/s), "
            f"batch mean {b['mean'] or 0:.1f} (max {b['max']}), latency p50 {_ms(p['latency_ms']['p50'])} / "
            f"p99 {_ms(p['latency_ms']['p99'])} ms"
        )
    fleet = replica_text(summary)
    return out + ([fleet] if fleet else [])


def replica_text(summary: dict) -> str | None:
    """The replicas line: balance, hit rate beside the workload's reuse, TTFT p50 by hit and miss."""
    from ..metrics.replicas import describe

    expected = (summary.get("prefix_cache") or {}).get("expected_hit_rate")
    text = describe(summary.get("replicas"), expected)
    return None if text is None else "  replicas: " + text


def job_html(summary: dict) -> str:
    """The jobs block of the HTML report (empty when the run has no jobs)."""
    j = summary.get("jobs")
    lines = job_text(summary)
    if not lines:
        return ""
    rows = ""
    if j:
        rows = "<table><tr><th class=l>depth</th><th>calls</th><th>TTFT p50</th><th>TTFT p99</th><th>E2E p50</th></tr>"
        for d, b in (j.get("per_depth") or {}).items():
            rows += (
                f"<tr><td class=l>{html.escape(d)}</td><td>{b['calls']}</td><td>{_ms(b['ttft_ms']['p50'])}</td>"
                f"<td>{_ms(b['ttft_ms']['p99'])}</td><td>{_ms(b['e2e_ms']['p50'])}</td></tr>"
            )
        rows += "</table>"
    body = "".join(f"<p>{html.escape(x.strip())}</p>" for x in lines)
    head = "Agent jobs" if j else "Embeddings / rerank" if summary.get("pooling") else "Replicas"
    return f"<h3>{head}</h3>{body}{rows}{replica_table(summary.get('replicas'))}"


def replica_table(block: dict | None) -> str:
    """Per replica: requests, prompt and cached tokens, hit rate, peak running (names are escaped:
    they come from a server's header)."""
    per = (block or {}).get("per_replica") or {}
    if not per:
        return ""
    rows = "<table><tr><th class=l>replica</th><th>requests</th><th>prompt tokens</th><th>cached</th>"
    rows += "<th>hit rate</th><th>peak running</th></tr>"
    for name, r in per.items():
        hr = "-" if r["hit_rate"] is None else f"{r['hit_rate']:.1%}"
        rows += (
            f"<tr><td class=l>{html.escape(name)}</td><td>{r['requests']}</td><td>{r['prompt_tokens']:,}</td>"
            f"<td>{r['cached_tokens']:,}</td><td>{hr}</td><td>{r['peak_running']}</td></tr>"
        )
    return rows + "</table>"
