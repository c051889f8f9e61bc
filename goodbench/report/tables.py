"""Rich renderings of everything the CLI prints besides a run's summary (console.py): sweep tables,
max-rate searches, chunk-size advice, the engine's tiers and models, gate verdicts and comparisons.
Each function returns renderables or prints to the console it is given; none computes a number."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ..engine.jitter import deciles
from ..engine.uncertainty import statements
from ..records import fmt_num, format_slo


def ms(v) -> str:
    return "-" if v is None else f"{v:.1f}"


_SHORT = {
    "max_num_batched_tokens=": "budget=",
    "enable_chunked_prefill=false": "unchunked",
    "enable_chunked_prefill=true": "chunked",
    "max_num_seqs=": "seqs=",
    "long_prefill_token_threshold=": "lpt=",
    "enable_prefix_caching=true": "cache",
    "enable_prefix_caching=false": "nocache",
}


def short(label: str) -> str:
    """A cell label with the common knobs abbreviated."""
    for k, v in _SHORT.items():
        label = label.replace(k, v)
    return label


LONG_CONFIG = 24  # longer config labels are shown as c1, c2, ... with a legend under the table


def config_names(rows: list[dict]) -> tuple[dict, list[str]]:
    """{cell: the config label the tables show} and the legend lines (empty when the labels are short)."""
    labels = {r["cell"]: short(r["cell"].partition(",")[2]) or "base" for r in rows}
    distinct = list(dict.fromkeys(labels.values()))
    if max((len(x) for x in distinct), default=0) <= LONG_CONFIG:
        return labels, []
    ids = {lab: f"c{i + 1}" for i, lab in enumerate(distinct)}
    return {c: ids[lab] for c, lab in labels.items()}, [f"  {ids[lab]} = {lab}" for lab in distinct]


# ----------------------------------------------------------------------------------------------- sweeps
def sweep_table(title: str, rows: list[dict]) -> Table:
    """One row per cell (config labels by config_names; print it with print_wide)."""
    names, _ = config_names(rows)
    tab = Table(title=title)
    for col in (
        "gpu",
        "config",
        "goodput req/s [95% CI]",
        "attain",
        "TTFT p50",
        "TTFT p99",
        "stall p99",
        "ITL p99",
        "p99/p50",
        "TPOT p99",
        "goodput/GPU",
        "$/M tok",
    ):
        tab.add_column(col, justify="left" if col in ("gpu", "config") else "right", no_wrap=True)
    for r in rows:
        config = names[r["cell"]]
        if r.get("error"):
            tab.add_row(r["gpu"], config, f"[red]{r['error'][:60]}[/]", *[""] * 9)
            continue
        per_gpu = r.get("goodput_per_gpu")
        tab.add_row(
            r["gpu"],
            config,
            f"{r['goodput']:.2f} [{r['goodput_lo']:.2f}-{r['goodput_hi']:.2f}]",
            f"{r['slo_attainment']:.1%}" + (" ~" if r.get("verdict_could_flip") else ""),
            ms(r["ttft_p50_ms"]),
            ms(r["ttft_p99_ms"]),
            ms(r.get("stall_p99_ms")),
            ms(r["itl_p99_ms"]),
            f"{r['itl_p99_over_p50'] or 0:.2f}",
            ms(r["tpot_p99_ms"]),
            "-" if per_gpu is None else f"{per_gpu:.3f}",
            usd(r.get("usd_per_million_output_tokens")),
        )
    return tab


def cheapest_line(c: dict | None) -> str:
    if not c:
        return "  cheapest at the SLO: no cell has a price and requests meeting the SLO (--gpu-price)"
    return (
        f"  cheapest at the SLO: [bold]{short(c['cell'])}[/] — {usd(c['usd_per_million_output_tokens'])} per million "
        f"delivered output tokens ({c['goodput_per_usd_hour']:.2f} req/s per $/h, attainment "
        f"{c['slo_attainment']:.1%}); most goodput per GPU: {short(c['most_goodput_per_gpu'])} "
        f"({c['goodput_per_gpu']:.3f} req/s)"
    )


def sweep_title(sweep_id: str, workload: str, label: str, n: int, slo: dict, offered: float | None = None) -> str:
    """offered: the rate the seeded schedule actually offered (a Poisson draw of n arrivals is not the
    asked rate exactly); the table is labelled by it, with the asked process beside it."""
    load = (
        label
        if not offered
        else (
            f"offered {offered:.2f} req/s (the workload's own timing)"
            if label == "workload"
            else f"offered {offered:.2f} req/s ({label} asked)"
        )
    )
    return f"sweep {sweep_id}: {workload} · {load} · {n} requests · SLO {format_slo(slo)}"


def best_text(gpu: str, b: dict) -> str:
    """The best cell of a tier in words (plain text: the console and the HTML report both use it); when
    goodputs are indistinguishable it says so and why the winner won (analysis.sweep.TIE_RULE)."""
    head = (
        f"best on {gpu}: {short(b['cell'])} — goodput {b['goodput']:.2f} req/s, stall p99 "
        f"{ms(b.get('stall_p99_ms'))} ms, ITL p99 {ms(b['itl_p99_ms'])} ms"
    )
    if not b["goodput"]:
        return f"best on {gpu}: none — no cell delivered a request within the SLO"
    tied = b.get("tied") or []
    if tied:
        names = ", ".join(
            f"{short(t['cell'])} ({t['goodput']:.2f} req/s, stall p99 {ms(t.get('stall_p99_ms'))} ms, ITL p99 "
            f"{ms(t['itl_p99_ms'])} ms)"
            for t in tied[:3]
        )
        more = f" and {len(tied) - 3} more" if len(tied) > 3 else ""
        return f"{head}; goodput indistinguishable from {names}{more}: the shortest stall among them wins"
    if b["next"] is None:
        return head
    return f"{head}; next {short(b['next'])} by {fmt_num(b['margin_goodput'], '+.2f')} req/s" + (
        " (intervals separate)" if b["separated"] else " (within the intervals)"
    )


def best_lines(best: dict) -> list[str]:
    out = []
    for gpu, b in best.items():
        out.append("  " + escape(best_text(gpu, b)))
        if b.get("could_flip"):
            alt = {v for k, v in b.items() if k.startswith("best_if_") and v != b["cell"]}
            out.append(
                f"    ~ within the engine's step-time error the best could be {', '.join(short(a) for a in sorted(alt))}"
            )
    return out


def flip_legend(rows: list[dict], target: float) -> str | None:
    """The note under a sweep table whose cells carry ~ marks."""
    flagged = [r for r in rows if r.get("verdict_could_flip")]
    if not flagged:
        return None
    pct = max(r.get("engine_uncertainty_pct") or 0 for r in flagged)
    return (
        f"  ~ meets the SLO (attainment >= {target:.0%}) or not depending on the engine's step-time error "
        f"(up to ±{pct:.0f}%, summary engine_uncertainty): {len(flagged)} cell(s); measure them on your server"
    )


def slo_scale_table(rows: list[dict], scales) -> Table:
    st = Table(title="SLO-scale curves: attainment with every SLO threshold multiplied by the scale")
    st.add_column("gpu")
    st.add_column("config")
    for k in scales:
        st.add_column(f"x{k:g}", justify="right")
    names, _ = config_names(rows)
    for r in rows:
        if not r.get("error"):
            st.add_row(
                r["gpu"],
                names[r["cell"]],
                *(f"{r[f'attainment@{k:g}']:.1%}" for k in scales),
            )
    return st


def min_gpus_table(rows: list[dict], target: float) -> Table:
    t = Table(title=f"fewest GPUs with SLO attainment >= {target:.0%} at the workload's rate")
    for col in ("gpu", "config", "replicas", "GPUs", "attain", "goodput", "$/h", "$/M tok"):
        t.add_column(col, justify="left" if col in ("gpu", "config") else "right")
    for r in rows:
        config = short(r["cell"].partition(",")[2]) or "base"
        if r["replicas"] is None:
            t.add_row(r["gpu"], config, "[red]not reached[/]", "", f"{r.get('slo_attainment') or 0:.1%}", "", "", "")
            continue
        t.add_row(
            r["gpu"],
            config,
            str(r["replicas"]),
            str(r["gpus"]),
            f"{r['slo_attainment']:.1%}",
            f"{r['goodput']:.2f}",
            usd(r["usd_per_hour"]),
            usd(r["usd_per_million_output_tokens"]),
        )
    return t


# ----------------------------------------------------------------------------------------------- cost
def usd(v, digits: int = 2) -> str:
    return "-" if v is None else f"${v:,.{digits}f}"


def cost_line(c: dict) -> str:
    tiers = ", ".join(f"{n}x {g}" for g, n in c["gpu_tiers"].items())
    price = (
        f"{usd(c['usd_per_hour'])}/h"
        if c["usd_per_hour"] is not None
        else f"no price for {', '.join(c['unpriced'])} (--gpu-price)"
    )
    per_gpu = "-" if c["goodput_per_gpu"] is None else f"{c['goodput_per_gpu']:.3f}"
    return (
        f"  cost: {tiers} = {c['gpus']} GPUs, {price}; {usd(c['usd_per_million_output_tokens'])} per million "
        f"delivered output tokens (requests meeting the SLO); goodput per GPU {per_gpu} req/s"
    )


def instances_line(sim: dict) -> list[str]:
    """One line on the instances of a replicated or disaggregated simulation (none for one instance)."""
    inst = sim.get("instances")
    if not inst:
        return []
    parts = [f"{x['role']} {x['gpu']} tp{x['tp']}: {x['requests']} req, busy {x['busy_s']:.0f} s" for x in inst]
    out = [f"  instances ({sim['router']} router): " + "; ".join(parts)]
    if sim.get("kv_link"):
        out.append(
            f"  KV transfer over {sim['kv_link']}: p50 {sim['kv_transfer_ms_p50']:.2f} ms, "
            f"max {sim['kv_transfer_ms_max']:.2f} ms"
        )
    return out


# ----------------------------------------------------------------------------------------------- advise
def _fine(s: float) -> str:
    """A per-token or per-unit time: in ns from 1 ns up, else in ps."""
    return f"{s * 1e9:.2f} ns" if s >= 1e-9 else f"{s * 1e12:.1f} ps"


def scatter_line(spread: tuple) -> str:
    """How a profile's steps scatter around their model time (engine/jitter.py keeps the 1st..99th
    percentiles; the 10th and 90th shown)."""
    lo, hi = deciles(spread)
    return f"  steps scatter as the server's did: x{lo:.2f} to x{hi:.2f} their model time (10th to 90th percentile)"


def calibration_lines(prof) -> list[str]:
    """A calibration profile's fitted terms, in the units they are usually thought in."""
    t = prof.terms
    out = [
        "[bold]fitted step-time model[/] (per step: step + max(floor, token x N) + decode request x D + "
        "context token x C + prefill attention x A; front end once per request: front end + in flight x F + "
        "prompt token x P)",
        f"  step {t['step_s'] * 1e3:.3f} ms · floor {t['floor_s'] * 1e3:.3f} ms · token {t['token_s'] * 1e6:.2f} us "
        f"(floor covers {t['floor_s'] / t['token_s']:.0f} tokens) · decode request {t['decode_request_s'] * 1e6:.1f} us"
        if t["token_s"]
        else f"  step {t['step_s'] * 1e3:.3f} ms · floor {t['floor_s'] * 1e3:.3f} ms · token 0 us · decode request "
        f"{t['decode_request_s'] * 1e6:.1f} us",
        f"  context token {_fine(t['context_token_s'])} · prefill attention {_fine(t['prefill_attention_s'])} per unit",
        f"  front end {t['frontend_s'] * 1e3:.2f} ms · per request in flight at the send "
        f"{t['frontend_flight_s'] * 1e3:.2f} ms · per prompt token {t['frontend_token_s'] * 1e6:.1f} us",
        f"  server as calibrated: {', '.join(f'{k}={v}' for k, v in prof.engine.items())}",
    ]
    if prof.step_jitter:
        out.insert(4, scatter_line(prof.step_jitter))
    if prof.ttft_pct is not None:  # per metric, held out where there were several runs (the basis says)
        each = " · ".join(f"{m} ±{getattr(prof, m.lower() + '_pct'):.1f}%" for m in ("TTFT", "ITL", "TPOT"))
        out.append(f"  expected error: {each} ({prof.basis})")
    elif prof.step_time_pct is not None:  # a profile written before the errors were kept per metric
        out.append(f"  expected error: ±{prof.step_time_pct:.1f}% ({prof.basis})")
    return out


def calibration_table(rows: list[dict], out_of_sample: bool) -> Table:
    """Per run: measured TTFT, ITL and TPOT p50, the fit's, and (several runs) a fit's without that run; the
    mean front end the server's histograms measured beside the profile's on that run, where scraped."""
    t = Table(title="calibration: each run measured vs predicted (p50, ms)")
    cols = ["run", "requests", "metric", "measured", "fitted", "error"]
    if out_of_sample:
        cols += ["without this run", "error "]
    for c in cols:
        t.add_column(c, justify="left" if c in ("run", "metric") else "right")
    for r in rows:
        for i, m in enumerate(("ttft_p50_ms", "itl_p50_ms", "tpot_p50_ms")):
            cells = [r["run"] if i == 0 else "", str(r["requests"]) if i == 0 else "", m.split("_")[0].upper()]
            cells += [ms(r["observed"][m]), ms(r["fitted"][m]), f"{r['fit_error'].get(m, 0):+.1%}"]
            if out_of_sample:
                cells += [ms(r["loro"][m]), f"{r['loro_error'].get(m, 0):+.1%}"]
            t.add_row(*cells)
        fe = r.get("front_end_ms")  # the server's histograms measured it: the client's TTFT less queue + prefill
        if fe:
            cells = ["", "", "front end", ms(fe["measured"]), ms(fe["fitted"])]
            cells += [f"{fe['fitted'] / fe['measured'] - 1:+.1%}" if fe["measured"] > 0 else "n/a"]
            t.add_row(*cells, *([""] * (len(cols) - len(cells))))
    return t


# ----------------------------------------------------------------------------------------------- workloads
def workloads_table(catalogue) -> Table:
    """The built-in workloads: (name, WorkloadSpec, what it models) rows."""
    t = Table(title="built-in workloads (--workload NAME)", title_justify="left")
    for c in ("name", "requests", "arrival", "SLO", "what it models"):
        t.add_column(c, overflow="fold", no_wrap=c in ("name", "arrival"))
    for name, spec, about in catalogue:
        n = (
            f"{spec.hol.repeats * (spec.hol.shorts + 1)}"
            if spec.hol
            else f"{spec.session.sessions} sessions"
            if spec.session
            else "the trace's"
            if spec.trace or (spec.agent and spec.agent.trace)
            else f"{spec.agent.jobs} jobs"
            if spec.agent
            else str(spec.num_requests)
            if spec.num_requests
            else f"{spec.duration_s:g} s"
            if spec.duration_s
            else "-"
        )
        t.add_row(name, n, spec.arrival.label, format_slo(spec.slo), escape(spec.description or about.split(". ")[0]))
    return t


# ----------------------------------------------------------------------------------------------- engine
def gpus_table(gpus) -> Table:
    t = Table(title="GPU tiers (dense tensor-core figures)")
    cols = ("gpu", "arch", "BF16 TFLOPS", "FP8 TFLOPS", "FP4 TFLOPS", "memory GiB", "bandwidth TB/s")
    for c in cols + ("interconnect GB/s", "TDP W", "source"):
        t.add_column(c, overflow="fold")
    for g in gpus:
        t.add_row(
            g.name,
            g.arch,
            f"{g.bf16_tflops:g}",
            "-" if g.fp8_tflops is None else f"{g.fp8_tflops:g}",
            "-" if g.fp4_tflops is None else f"{g.fp4_tflops:g}",
            f"{g.mem_gib:g}",
            f"{g.mem_bw_tbs:g}",
            f"{g.interconnect_gbs:g}{' NVLink' if g.nvlink else ''}",
            "-" if g.tdp_w is None else f"{g.tdp_w:g}",
            g.source,
        )
    return t


def prices_table(prices) -> Table:
    t = Table(title="GPU prices, on-demand $ per GPU-hour (override with --gpu-price or --price-file)")
    for c in ("gpu", "$/GPU-hour", "date", "source"):
        t.add_column(c, overflow="fold")
    for p in prices:
        t.add_row(p.gpu, f"{p.usd_per_hour:.2f}", p.date, p.source)
    return t


def models_table(models) -> Table:
    t = Table(title="model shapes")
    for c in (
        "model",
        "layers",
        "hidden",
        "heads",
        "kv heads",
        "head dim",
        "ffn",
        "vocab",
        "params (B)",
        "KV KiB/token",
        "kind",
    ):
        t.add_column(c, justify="right" if c != "model" else "left")
    for m in models:
        t.add_row(
            m.name,
            str(m.layers),
            str(m.hidden),
            str(m.heads),
            str(m.kv_heads),
            str(m.head_dim),
            str(m.ffn),
            str(m.vocab),
            f"{m.params_total / 1e9:.2f}",
            f"{m.kv_bytes_per_token() / 1024:g}",
            m.describe(),
        )
    return t


def explain_lines(cfg, r: dict) -> list[str]:
    out = [
        (
            "[bold]calibration profile[/]: step of "
            if cfg.calibration
            else f"[bold]{cfg.model}[/] on [bold]{cfg.gpu}[/] tp{cfg.tensor_parallel_size} {cfg.dtype}: step of "
        )
        + f"{r['prefill_tokens']} prefill + {r['decode_tokens']} decode tokens, {r['num_seqs']} requests",
        f"  step time [bold]{r['total_s'] * 1000:.2f} ms[/]  ("
        + (
            f"linear layers at {r['linear_vs_roofline']:.0%} of their roofline, "
            if r["linear_vs_roofline"] is not None
            else ""
        )
        + f"one token's linear layers{' and experts' if r.get('experts_touched') else ''} "
        f"{r['one_token_linear_s'] * 1000:.2f} ms; "
        f"front end {r['frontend_s'] * 1000:.1f} ms per request, not in the step"
        + (
            f", + {r['frontend_flight_s'] * 1000:.1f} ms per request in flight and "
            f"{r['frontend_token_s'] * 1e6:.0f} us per prompt token"
            if r.get("frontend_flight_s") or r.get("frontend_token_s")
            else ""
        )
        + ")",
        f"  [dim]{r['basis']}[/]",
    ]
    if r.get("step_jitter"):
        out.insert(2, scatter_line(r["step_jitter"]))
    if r.get("experts_touched"):
        e = r["experts_touched"]
        out.append(
            f"  experts touched per MoE layer: {e['touched']:.1f} of {e['experts']} (top-{e['top_k']} of "
            f"{r['tokens']} tokens); a MoE step is set by these, not by the active parameters"
        )
    for what, pct, basis in statements(r.get("uncertainty")):
        label = "expected error" if what == "step times" else f"expected {what} error"
        out.append(f"  {label} ±{pct:.0f}% [dim]({basis})[/]")
    out += [f"  {k:<18} {v * 1000:8.3f} ms  {v / r['total_s']:6.1%}" for k, v in r["breakdown_s"].items()]
    return out


# ----------------------------------------------------------------------------------------------- gate
def gate_lines(result) -> list[Text]:
    out = []
    for c in result.clauses:
        t = Text("✓ " if c.passed else "✗ ", style="bold green" if c.passed else "bold red")
        t.append(f"{c.name}  {c.threshold}  observed {c.observed}")
        out.append(t)
    style = "bold green" if result.passed else ("bold yellow" if not result.judgeable else "bold red")
    out.append(Text(result.verdict, style=style))
    if result.note:  # e.g. an invalid run judged because its error bound flips no clause
        out.append(Text(f"  {result.note}", style="yellow"))
    return out


# ----------------------------------------------------------------------------------------------- compare
