"""Rich rendering of a run's summary and live progress (tables.py renders the rest). With cli, the report
package is the only place that knows rich."""

from __future__ import annotations

from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from ..engine.uncertainty import statements
from ..gating import attains
from ..records import SLO_SUMMARY_KEYS
from .jobs import job_text


def make_console(quiet: bool = False) -> Console:
    """The CLI's console: 120 columns when writing to a log or CI (not a terminal), so tables do not wrap at 80."""
    import os

    c = Console(quiet=quiet, highlight=False)
    if not c.is_terminal and not os.environ.get("COLUMNS"):
        c = Console(quiet=quiet, highlight=False, width=120)
    return c


def _ms(v) -> str:
    return "-" if v is None else (f"{v:.1f}" if v < 1000 else f"{v:,.0f}")


def _clause_value(summary: dict, key: str) -> str:
    d = summary.get(SLO_SUMMARY_KEYS[key])
    if key == "max_itl":
        return f"ITL max {_ms(d['max'])} ms" if d and d["n"] else "no gaps"
    return f"p50 {_ms(d['p50'])} / p99 {_ms(d['p99'])} ms" if d and d["n"] else "no samples"


SLO_HINT = "--goodput ttft:MS tpot:MS"  # how to give an SLO; locust's is --goodbench-slo "ttft:MS tpot:MS"


def failures(by_status: dict) -> str:
    """{'http_error': 10, 'timeout': 2} -> 'http_error 10, timeout 2' (the failed ones only)."""
    return ", ".join(f"{k} {v}" for k, v in by_status.items() if k != "ok")


def _interrupted(summary: dict, meta: dict) -> Text:
    """An interrupted run is not judged: what it holds is a part of the planned run."""
    req, att = summary["requests"], summary.get("slo_attainment")
    planned = meta.get("planned_requests")
    of = f" of {planned} planned" if planned else ""
    t = Text("INTERRUPTED  ", style="bold yellow")
    t.append(f"stopped after {req['issued']}{of} requests; ")
    t.append(
        "not judged" if att is None else f"{att:.1%} of those met the SLO (not judged against the target)",
    )
    return t


def _verdict(summary: dict, spec, slo_hint: str = SLO_HINT, meta: dict | None = None) -> Text:
    """The headline: the one judge's verdict (gating.headline) in words."""
    from ..gating import headline

    h = headline(summary, spec, interrupted=bool((meta or {}).get("interrupted")))
    if h.word == "INTERRUPTED":
        return _interrupted(summary, meta)
    style = {"PASS": "bold green", "FAIL": "bold red", "CANNOT JUDGE": "bold yellow"}.get(h.word, "bold")
    verdict = Text(f"{h.word}  ", style=style)
    n = summary["jobs"]["started"] if h.unit == "jobs" else summary["requests"]["issued"]
    if h.attainment is not None:
        verdict.append(
            f"{h.attainment:.1%} of {n} {h.unit} met the SLO (target {h.target:.0%}); "
            + (
                f"job goodput {h.goodput or 0:.2f} jobs/s"
                if h.unit == "jobs"
                else f"goodput {h.goodput or 0:.2f} req/s"
            )
        )
    elif h.word == "DONE":
        req = summary["requests"]
        verdict.append(
            f"{req['completed']}/{req['issued']} requests completed (no SLO given: pass {slo_hint} for goodput)"
        )
    failed = [c.name for c in h.result.clauses if not c.passed and c.kind not in ("attainment", "jobs")]
    if failed:
        verdict.append(f"; failed: {', '.join(failed)}", style="red")
    if h.word == "CANNOT JUDGE":
        verdict.append(f"  [cannot judge: {h.result.reason}]", style="bold yellow")
    elif h.result.note:
        verdict.append(f"  [{h.result.note}]", style="yellow")
    if summary.get("saturated"):
        verdict.append("  [SATURATED: the server could not keep up]", style="bold yellow")
    return verdict


def _run_line(summary: dict, meta: dict) -> Text:
    target_s = meta.get("target", {}) or {}
    line = (
        f"{meta.get('workload', {}).get('name', '?')} · {summary.get('label') or '?'} · "
        f"{summary['requests']['issued']} requests"
    )
    line += f" · {target_s.get('base_url', '?')}{target_s.get('endpoint', '')} model={target_s.get('model', '?')}"
    eng = meta.get("engine")
    if eng:
        line += (
            f" · engine {eng.get('model')} on {eng.get('gpu')} tp{eng.get('tensor_parallel_size')} "
            f"budget={eng.get('max_num_batched_tokens')} chunked={'on' if eng.get('enable_chunked_prefill') else 'off'}"
        )
    return Text(line, style="dim")


def _slo_lines(summary: dict, target: float) -> list[Text]:
    out = []
    for k, c in (summary.get("slo_clauses") or {}).items():
        a = c["attainment"]
        good = attains(a, target)
        t = Text("  ✓ " if good else "  ✗ ", style="green" if good else "red")
        met = f"{a:.1%}" if a is not None else "n/a (no request finished)"
        t.append(f"{k} ≤ {c['threshold_ms']:g} ms   met by {met}   ({_clause_value(summary, k)})")
        out.append(t)
    a_ci, g_ci = summary.get("slo_attainment_ci"), summary.get("goodput_ci")
    if a_ci and g_ci:
        out.append(
            Text(
                f"  95% CI: attainment {a_ci[0]:.1%}–{a_ci[1]:.1%} (Wilson), goodput {g_ci[0]:.2f}–{g_ci[1]:.2f} req/s",
                style="dim",
            )
        )
    req = summary["requests"]
    out.append(
        Text(
            f"  throughput {summary.get('request_throughput') or 0:.2f} req/s, "
            f"{summary.get('output_throughput') or 0:,.0f} output tok/s · "
            f"duration {summary['duration_s']:.1f} s · failed {req['failed']}"
            + (f" ({failures(req['by_status'])})" if req["failed"] else "")
        )
    )
    return out


def _latency_table(summary: dict) -> Table:
    tab = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    tab.add_column("metric (ms)")
    for col in ("p50", "p90", "p99", "p99 95% CI", "mean", "max", "n"):
        tab.add_column(col, justify="right")
    think = [("TTFO (first answer)", "ttfo_ms")] if summary.get("reasoning_tokens") else []  # reasoning models
    for name, key in (
        ("TTFT", "ttft_ms"),
        *think,
        ("TPOT", "tpot_ms"),
        ("ITL", "itl_ms"),
        ("E2E", "e2el_ms"),
        ("TTFT from schedule", "ttft_from_scheduled_ms"),
        ("schedule lag", "schedule_lag_ms"),
    ):
        d = summary.get(key)
        if d is None:
            continue
        ci = (d.get("ci") or {}).get("p99")
        tab.add_row(
            name,
            *(_ms(d[c]) for c in ("p50", "p90", "p99")),
            f"{_ms(ci[0])}–{_ms(ci[1])}" if ci else "",
            *(_ms(d[c]) for c in ("mean", "max")),
            str(d["n"]),
        )
    return tab


def _ratios_line(summary: dict) -> Text:
    r1, r2 = summary.get("itl_p99_over_p50"), summary.get("ttft_p99_over_p50")
    line = Text(f"  ITL p99/p50 {r1:.2f}" if r1 else "  ITL p99/p50 -", style="bold")
    if r2:
        line.append(f" · TTFT p99/p50 {r2:.2f}")
    rate, sched, asked = summary.get("achieved_rate"), summary.get("scheduled_rate"), summary.get("requested_rate")
    if rate:
        jobs = summary.get("jobs")  # agent jobs arrive at the asked rate; their calls at a multiple of it
        line.append(f" · achieved {'call ' if jobs else ''}rate {rate:.2f} req/s")
        extra = [f"schedule {sched:.2f}"] if sched else []
        if isinstance(asked, (int, float)) and asked != float("inf"):
            # sessions and jobs arrive at the asked rate, not their turns or calls
            unit = " sessions/s" if summary.get("sessions") else (" jobs/s" if jobs else "")
            extra.append(f"requested {asked:.2f}{unit}")
            if jobs and jobs.get("throughput") is not None:
                extra.append(f"jobs done {jobs['throughput']:.2f}/s")
        if extra:
            line.append(f" ({', '.join(extra)})")
    return line


def _hol_line(h: dict | None) -> Text | None:
    if not h or not h["itl_ms"]["p99_ratio"]:
        return None
    i, t = h["itl_ms"], h["ttft_ms"]
    hl = Text(
        f"  HOL: {', '.join(h['short_classes'])} ITL p99 {_ms(i['clear']['p99'])} ms clear vs "
        f"{_ms(i['during_long_prefill']['p99'])} ms while a {h['long_class']} prefill was in flight "
        f"({i['p99_ratio']:.1f}x)"
    )
    if t["p50_ratio"]:
        hl.append(f"; TTFT p50 {t['p50_ratio']:.1f}x")
    return hl


def _client_line(cl: dict | None, eng: dict | None) -> Text | None:
    """The load generator's self-check (client_lag) and, against goodbench's engine, its step lateness."""
    if not cl and not eng:
        return None
    parts = []
    if cl:
        stamps = "kernel receive stamps" if cl["stamps"] == "kernel" else f"{cl['stamps']} (loop) stamps"
        parts.append(
            f"client: {stamps}, stamp error p99 ≤ {_ms(cl['stamp_error_p99_ms'])} ms · read lag p99 "
            f"{_ms(cl['read_p99_ms'])} ms · loop lag p99 {_ms(cl['loop_lag_p99_ms'])} ms · "
            f"{cl['loop_busy_pct'] or 0:.0f}% of a core x {cl['processes']}"
        )
    if eng:
        parts.append(
            f"engine step lateness p99 {_ms(eng['late_p99_ms'])} ms, mean {_ms(eng['late_mean_ms'])} ms"
            + (" (fell behind)" if eng["behind"] else "")
        )
    return Text("  " + " · ".join(parts), style="dim")


def _server_timing_line(st: dict | None) -> Text | None:
    """TTFT split into the server's queue and prefill time (its histograms), beside goodbench's TTFT."""
    if not st:
        return None
    ttft, q, p, other = st.get("ttft_ms"), st.get("queue_ms"), st.get("prefill_ms"), st.get("other_ms")
    parts = [f"{name} {_ms(d['mean'])}" for name, d in (("queue", q), ("prefill", p)) if d]
    if other is not None:
        parts.append(f"other {_ms(other)}")
    n = (ttft or q or p)["n"]
    line = Text(f"  server's view (means of {n}): ")
    line.append((f"TTFT {_ms(ttft['mean'])} = " if ttft else "") + " + ".join(parts) + " ms")
    c = st.get("client_ttft_ms")
    if c:
        line.append(f" · goodbench TTFT {_ms(c['mean'])} ms")
        if st.get("client_minus_server_ms") is not None:
            line.append(f" ({st['client_minus_server_ms']:+.1f} outside the server)")
    return line


def _per_class_table(per: dict, title: str = "per class", key: str = "class") -> Table | None:
    """The per-class table (and the per-adapter one: the same blocks, split by LoRA adapter)."""
    if not per:
        return None
    pt = Table(box=box.SIMPLE_HEAD, pad_edge=False, title=title, title_justify="left")
    for col in (key, "n", "ok", "TTFT p50", "TTFT p99", "ITL p50", "ITL p99", "TPOT p99", "attain"):
        pt.add_column(col, justify="left" if col == key else "right")
    for k, b in per.items():
        a = b.get("slo_attainment")
        pt.add_row(
            k,
            str(b["requests"]["issued"]),
            str(b["requests"]["completed"]),
            _ms(b["ttft_ms"]["p50"]),
            _ms(b["ttft_ms"]["p99"]),
            _ms(b["itl_ms"]["p50"]),
            _ms(b["itl_ms"]["p99"]),
            _ms(b["tpot_ms"]["p99"]),
            "-" if a is None else f"{a:.1%}",
        )
    return pt


def render_summary(
    summary: dict,
    meta: dict | None = None,
    target=None,
    results_path: str | None = None,
    slo_hint: str = SLO_HINT,
) -> Group:
    """The verdict first, then the run line, each SLO clause, the latency table with n, the HOL
    signature, offered load, per class, warnings that say what to do, and where the results are."""
    from ..gating import spec_of

    meta = meta or {}
    spec = spec_of(meta, target)  # target: a GateSpec, a pass mark, or None (the run's recorded gate)
    parts: list = [
        _verdict(summary, spec, slo_hint, meta),
        _run_line(summary, meta),
        *_slo_lines(summary, spec.min_attainment),
        _latency_table(summary),
        _ratios_line(summary),
        _hol_line(summary.get("hol")),
        _server_timing_line(summary.get("server_timing")),
        _client_line(summary.get("client_lag"), summary.get("engine_lateness")),
        uncertainty_line(summary.get("engine_uncertainty")),
        energy_line(summary.get("energy")),
        _per_class_table(summary.get("per_class") or {}),
        _per_class_table(summary.get("per_adapter") or {}, "per LoRA adapter", "adapter"),
    ]
    parts += _sessions_lines(summary)
    parts += [Text(x) for x in job_text(summary)]
    parts.append(prefix_line(summary.get("prefix_cache")))
    parts.append(spec_line(summary.get("speculative")))
    parts.append(_media_line(summary.get("media")))
    lanes = summary.get("per_priority") or {}
    if lanes:
        honoured = {True: "lower served first", False: "NOT served in priority order: see the warnings"}
        parts.append(
            Text(
                f"  priority lanes ({honoured.get(summary.get('priority_honoured'), 'lower meant first; not verified')}): "
                + " · ".join(
                    f"{k}: {b['requests']['issued']} req, attainment "
                    + ("-" if b.get("slo_attainment") is None else f"{b['slo_attainment']:.1%}")
                    + f", TTFT p99 {_ms(b['ttft_ms']['p99'])} ms"
                    for k, b in lanes.items()
                )
            )
        )
    parts += [Text(f"  ! {w}", style="yellow") for w in summary.get("warnings", [])]
    if results_path:
        parts.append(Text(f"  results: {results_path}", style="dim"))
    return Group(*[p for p in parts if p is not None])


def _sessions_lines(summary: dict) -> list[Text]:
    """Multi-turn sessions: how many completed, their attainment, TTFT by turn."""
    sess, per_turn = summary.get("sessions"), summary.get("per_turn") or {}
    if not sess:
        return []
    line = f"  sessions: {sess['completed']}/{sess['started']} completed, {sess['turns_per_session']:.1f} turns each"
    if sess.get("attainment") is not None:
        line += f", every turn met the SLO in {sess['attainment']:.1%} · session goodput {sess['goodput']:.2f}/s"
    by_turn = " · ".join(f"{k}: {_ms(b['ttft_ms']['p50'])} ms" for k, b in list(per_turn.items())[:12])
    return [Text(line), Text("  TTFT p50 by turn: " + by_turn, style="dim")]


def energy_line(e: dict | None) -> Text | None:
    """What the GPUs drew over the measured window (metrics/energy.py); one line saying so when telemetry was
    asked for and none covered the window, never a number then."""
    if e is None:
        return None
    from .energy import energy_words

    text, basis = energy_words(e)
    return Text(f"  {text}" + (f" ({basis})" if basis else ""), style=None if basis else "yellow")


def uncertainty_line(u: dict | None) -> Text | None:
    """How sure the simulated engine's step times (and, on public tiers, its TTFTs) are
    (engine/uncertainty.py)."""
    lines = [f"  engine: {what} ±{pct:.0f}% ({basis})" for what, pct, basis in statements(u)]
    return Text("\n".join(lines), style="dim") if lines else None


def prefix_line(pc: dict | None) -> Text | None:
    """The prefix cache's hit rate beside the workload's own reuse; nothing on unique prompts."""
    from ..metrics.prefix import describe

    text = describe(pc)
    return None if text is None else Text("  prefix cache: " + text, style="dim")


def _media_line(b: dict | None) -> Text | None:
    from ..metrics.media import describe

    text = describe(b)
    return None if text is None else Text("  media: " + text, style="dim")


def spec_line(b: dict | None) -> Text | None:
    """Speculative decoding's acceptance (the server's counters) beside the client's tokens per chunk."""
    from ..metrics.speculative import describe

    text = describe(b)
    return None if text is None else Text("  speculative decoding: " + text, style="dim")


def print_summary(
    console: Console,
    summary: dict,
    meta: dict | None = None,
    target=None,
    results_path: str | None = None,
    slo_hint: str = SLO_HINT,
) -> None:
    console.print(render_summary(summary, meta, target, results_path, slo_hint))


def progress_text(p, slo_given: bool) -> Text:
    import time

    el = time.monotonic() - p.started
    t = Text(
        f"sent {int(p.sent)}" + (f"/{p.total}" if p.total else "") + f" · done {int(p.done)} · "
        f"in flight {p.in_flight} · failed {int(p.failed)} · lag max {p.lag_max_ms:.1f} ms · {el:.0f}s"
    )
    if slo_given and el > 0:
        t.append(f" · goodput so far {p.good / el:.2f} req/s")
    left = eta_s(p)
    if left is not None:
        t.append(f" · ETA {_duration(left)}")
    return t


def eta_s(p) -> float | None:
    """Seconds until every planned request has finished, at the rate they have been finishing since the
    clock started (None before the first finishes, or with no planned count: a duration-bound run)."""
    import time

    if not p.total or not p.done:
        return None
    el = time.monotonic() - (p.t0 if p.t0 is not None else p.started)
    return max(0.0, (p.total - p.done) * el / p.done) if el > 0 else None


def _duration(s: float) -> str:
    s = int(round(s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"
