"""Command handlers for report, compare, import and export (cli.py wires the parsers; only it imports this)."""

from __future__ import annotations

import hashlib
import json
import os
import sys

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


class UsageError(ValueError):
    pass


def _console():
    from .report.console import make_console

    return make_console()


def _slo(text):
    from .records import parse_slo

    return parse_slo(text) if text else None


def _margin(text: str | None) -> float:
    if text is None:
        return 0.0
    try:
        return float(text[:-1]) / 100 if str(text).endswith("%") else float(text)
    except ValueError:
        raise UsageError(f"--margin {text!r}: expected e.g. 5% or 0.05") from None


def cmd_report(args) -> int:
    from .report.html import run_report, sweep_report

    console = _console()
    runs = []
    for path in args.paths:
        if os.path.exists(os.path.join(path, "sweep.json")):
            console.print(f"wrote {sweep_report(path)}")
        elif os.path.exists(os.path.join(path, "run.json")):
            runs.append(path)
        else:
            raise UsageError(f"{path} is neither a run directory (run.json) nor a sweep directory (sweep.json)")
    if not runs:
        return EXIT_OK
    from .report.runplots import run_figures
    from .report.view import load_view

    slo = _slo(args.goodput)
    with console.status(f"loading {len(runs)} run(s) ...") as status:
        views = [load_view(r, slo=slo) for r in runs]
        out = args.out or runs[0]
        if len(views) > 1 and not args.out:
            tag = hashlib.sha1("\0".join(os.path.abspath(r) for r in runs).encode()).hexdigest()[:8]
            out = os.path.join(os.path.dirname(os.path.abspath(runs[0])), f"combined-{tag}")
        os.makedirs(out, exist_ok=True)
        figures = []
        if not args.no_figures:
            status.update("drawing figures ...")
            figures = run_figures(views, out)
        status.update("writing report.html ...")
        path = run_report(views, out, figures)
    console.print(f"wrote {path}" + (f" and {len(figures)} figures" if figures else ""))
    return EXIT_OK


def cmd_compare(args) -> int:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    from .analysis.compare import compare
    from .metrics import Columns, columns_of, summarize
    from .store import load_columns

    console = _console()
    margin = _margin(args.margin)
    slo = _slo(args.goodput)
    runs = [load_columns(p) for p in (args.base, args.new)]
    if slo is None:
        slo = runs[0].meta.slo or runs[1].meta.slo
    with console.status("bootstrapping differences ..."):
        cs = [Columns(columns_of(r)) for r in runs]
        sums = [summarize(r, slo=slo, ci=False, prepared=c) for r, c in zip(runs, cs)]
        res = compare(cs[0], cs[1], sums[0], sums[1], level=args.level, margin=margin, seed=args.seed)
    tab = Table(box=box.SIMPLE_HEAD, pad_edge=False, title=f"{res['base']} → {res['new']}  "
                f"({args.level:.0%} CI of the difference)", title_justify="left")
    for col in ("metric", "base", "new", "Δ", "Δ%", "CI of Δ", "p MWU", "verdict"):
        tab.add_column(col, justify="left" if col in ("metric", "verdict") else "right", no_wrap=True)
    names = {"slo_attainment": "attainment", "goodput": "goodput /s"}

    def f(v, unit):
        if v is None:
            return "-"
        return f"{v:.1%}" if unit == "fraction" else (f"{v:.2f}" if unit == "req/s" else f"{v:.1f}")

    for d in res["metrics"]:
        style = {"better": "green", "worse": "red"}.get(d["verdict"], "")
        verdict = {"no significant change": "~ same", "not comparable": "n/a"}.get(d["verdict"], d["verdict"])
        verdict += " REGRESSION" if d["regression"] else ""
        ci = "-" if not d["ci"] else f"{f(d['ci'][0], d['unit'])}…{f(d['ci'][1], d['unit'])}"
        name = names.get(d["metric"], d["metric"].replace("_p", " p").upper().replace(" P", " p") + " ms")
        tab.add_row(name, f(d["base"], d["unit"]), f(d["new"], d["unit"]),
                    f(d["delta"], d["unit"]), "-" if d["rel"] is None else f"{d['rel']:+.1%}", ci,
                    "-" if d["p_value"] is None else f"{d['p_value']:.2g}", Text(verdict, style=style))
    console.print(tab)
    console.print("  ~ same: the interval of the difference contains 0. p MWU: Mann-Whitney U on the whole "
                  "per-request distribution.", style="dim")
    for w in res["warnings"]:
        console.print(f"[yellow]! {w}[/]")
    if args.json:
        from .store import json_safe

        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(json_safe(res), fh, indent=2)
        console.print(f"wrote {args.json}")
    if res["regressions"]:
        msg = (f"{len(res['regressions'])} significant regression(s) beyond {margin:.0%}: "
               f"{', '.join(res['regressions'])}")
        console.print(Text(("FAIL  " if args.fail_on_regression else "") + msg, style="bold red"))
        return EXIT_FAIL if args.fail_on_regression else EXIT_OK
    console.print(Text(f"no significant regression beyond {margin:.0%}", style="bold green"))
    return EXIT_OK


def cmd_import(args) -> int:
    from .interop import IMPORTERS

    out = IMPORTERS[args.tool](args.file, args.result_dir, run_id=args.run_id, slo=_slo(args.goodput))
    _console().print(f"imported {args.file} into {out}\n  next: goodbench report {out}")
    return EXIT_OK


def cmd_export(args) -> int:
    from .interop import export_csv, export_parquet, export_vllm
    from .metrics import summarize
    from .store import load_columns

    run = load_columns(args.run_dir)
    slo = _slo(args.goodput)
    ext = {"csv": "requests.csv", "parquet": "requests.parquet", "vllm": "vllm_result.json"}[args.format]
    out = args.output or os.path.join(args.run_dir, ext)
    if args.format == "csv":
        export_csv(run, out, slo)
    elif args.format == "parquet":
        export_parquet(run, out, slo)
    else:
        export_vllm(run, summarize(run, slo=slo, ci=False), out)
    print(f"wrote {out}", file=sys.stdout)
    return EXIT_OK


def add_parsers(sub, engine_args=None) -> None:
    rep = sub.add_parser("report", help="report.html with figures for run directories (combined for several) "
                         "or sweep directories",
                         description="Self-contained HTML (inline CSS, embedded PNGs, escaped text). One run: written "
                         "into the run directory. Several runs: one combined report with overlaid figures.")
    rep.add_argument("paths", nargs="+", metavar="DIR")
    rep.add_argument("--out", metavar="DIR", help="where to write (default: the run directory, or "
                     "combined-<hash> beside the first run)")
    rep.add_argument("--goodput", metavar="SLO", help="judge against this SLO instead of the run's own, "
                     "e.g. 'ttft:500 tpot:50'")
    rep.add_argument("--no-figures", action="store_true", help="tables only (fast on huge runs)")
    rep.set_defaults(fn=cmd_report)

    cmp_ = sub.add_parser("compare", help="BASE vs NEW: deltas with confidence intervals and a verdict",
                          description="Per-metric deltas with a bootstrap CI of the difference and Mann-Whitney U "
                          "p-values. Exit 1 with --fail-on-regression when a metric got significantly worse by "
                          "more than --margin.")
    cmp_.add_argument("base", metavar="BASE_RUN_DIR")
    cmp_.add_argument("new", metavar="NEW_RUN_DIR")
    cmp_.add_argument("--level", type=float, default=0.95, help="confidence level (default 0.95)")
    cmp_.add_argument("--margin", default="0%", help="relative change a significant worsening must exceed to "
                      "count as a regression (default 0%%), e.g. 5%%")
    cmp_.add_argument("--fail-on-regression", action="store_true", help="exit 1 on a regression (for CI)")
    cmp_.add_argument("--json", metavar="FILE", help="write the comparison as JSON")
    cmp_.add_argument("--goodput", metavar="SLO", help="SLO for attainment/goodput (default: BASE's)")
    cmp_.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    cmp_.set_defaults(fn=cmd_compare)

    imp = sub.add_parser("import", help="turn a vllm bench serve, AIPerf or GenAI-Perf result into a goodbench "
                         "run directory",
                         description="vllm: the JSON of `vllm bench serve --save-result --save-detailed`. "
                         "aiperf: profile_export.jsonl (or its artifact directory). genai-perf: "
                         "profile_export.json (perf_analyzer's per-request export, or its directory).")
    imp.add_argument("tool", choices=("vllm", "aiperf", "genai-perf"))
    imp.add_argument("file", metavar="FILE")
    imp.add_argument("--result-dir", default="results", help="parent directory (default results/)")
    imp.add_argument("--run-id", help="run directory name (default: <tool>-<timestamp>)")
    imp.add_argument("--goodput", metavar="SLO", help="SLO to record with the run, e.g. 'ttft:500 tpot:50'")
    imp.set_defaults(fn=cmd_import)

    exp = sub.add_parser("export", help="per-request CSV / Parquet, or a vLLM-shaped result JSON",
                         description="csv/parquet: one row per request with derived metrics (ms). vllm: the shape "
                         "of `vllm bench serve --save-detailed` output.")
    exp.add_argument("run_dir", metavar="RUN_DIR")
    exp.add_argument("--format", choices=("csv", "parquet", "vllm"), default="csv")
    exp.add_argument("-o", "--output", metavar="FILE", help="default: requests.csv / requests.parquet / "
                     "vllm_result.json in the run directory")
    exp.add_argument("--goodput", metavar="SLO", help="SLO for the met_slo column (default: the run's)")
    exp.set_defaults(fn=cmd_export)
