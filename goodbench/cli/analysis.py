"""`goodbench report | compare | import | export`: reading results directories, offline."""

from __future__ import annotations

import json

from ..limits import PRACTICAL_MARGIN
from .common import EXIT_GATE, EXIT_OK, add_goodput_arg, add_label_args, add_min_attainment, console, run_labels


def add_parsers(sub) -> None:
    for add in (_add_report, _add_compare, _add_import, _add_export):
        add(sub)


def _add_report(sub) -> None:
    rep = sub.add_parser(
        "report",
        help="report.html with figures for run directories (combined for several) or sweep directories",
        description="Self-contained HTML (inline CSS, embedded PNGs, escaped text). One run: written "
        "into the run directory. Several runs: one combined report with overlaid figures.",
    )
    rep.add_argument("paths", nargs="+", metavar="DIR")
    rep.add_argument(
        "--out",
        metavar="DIR",
        help="where to write (default: the run directory, or combined-<hash> beside the first run)",
    )
    add_goodput_arg(rep, "each run's own")
    add_min_attainment(rep, "target_attainment")  # default: each run's recorded gate
    rep.add_argument("--no-figures", action="store_true", help="tables only (fast on huge runs)")
    rep.set_defaults(fn=cmd_report)


def _add_compare(sub) -> None:
    cmp_ = sub.add_parser(
        "compare",
        help="BASE vs NEW: deltas with confidence intervals and a verdict",
        description="Per-metric deltas with a bootstrap CI of the difference and Mann-Whitney U "
        "p-values. A regression is a worsening whose whole interval lies beyond the practical margin, "
        "max(--margin x base, 1 ms; 1 point of attainment). Exit 1 with --fail-on-regression on one.",
    )
    cmp_.add_argument("base", metavar="BASE_RUN_DIR")
    cmp_.add_argument("new", metavar="NEW_RUN_DIR")
    cmp_.add_argument("--level", type=float, default=0.95, help="confidence level (default 0.95)")
    cmp_.add_argument(
        "--margin",
        default=f"{PRACTICAL_MARGIN:.0%}",
        help="relative change a significant worsening must exceed to count as a regression, besides 1 ms "
        f"for latencies and 1 point of attainment (default {PRACTICAL_MARGIN * 100:.0f}%%)",
    )
    cmp_.add_argument("--fail-on-regression", action="store_true", help="exit 1 on a regression (for CI)")
    cmp_.add_argument("--json", metavar="FILE", help="write the comparison as JSON")
    add_goodput_arg(cmp_, "BASE's")
    cmp_.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    cmp_.add_argument(
        "--allow-different-workloads",
        action="store_true",
        help="compare runs of different workloads (refused by default: their deltas mean little)",
    )
    cmp_.set_defaults(fn=cmd_compare)


def _add_import(sub) -> None:
    imp = sub.add_parser(
        "import",
        help="turn a vllm bench serve, AIPerf, GenAI-Perf or llm-d result into a goodbench run directory",
        description="vllm: the JSON of `vllm bench serve --save-result --save-detailed`. "
        "aiperf: profile_export.jsonl (or its artifact directory). genai-perf: "
        "profile_export.json (perf_analyzer's per-request export, or its directory). llmd: an llm-d "
        "Benchmark Report (v0.1, v0.2, v0.2.1; JSON, or YAML with PyYAML): aggregates only, for the history.",
    )
    imp.add_argument("tool", choices=("vllm", "aiperf", "genai-perf", "llmd"))
    imp.add_argument("file", metavar="FILE")
    imp.add_argument("--result-dir", default="results", help="parent directory (default results/)")
    imp.add_argument("--run-id", help="run directory name (default: <tool>-<timestamp>)")
    add_goodput_arg(imp, "none (the tool's files carry no SLO)")
    add_label_args(imp)
    imp.set_defaults(fn=cmd_import)


def _add_export(sub) -> None:
    exp = sub.add_parser(
        "export",
        help="per-request CSV / Parquet, a vLLM-shaped result JSON, or an llm-d Benchmark Report",
        description="csv/parquet: one row per request with derived metrics (ms). vllm: the shape "
        "of `vllm bench serve --save-detailed` output. llmd: an llm-d Benchmark Report v0.2.1 "
        "(JSON; field mapping in docs/history.md).",
    )
    exp.add_argument("run_dir", metavar="RUN_DIR")
    exp.add_argument("--format", choices=("csv", "parquet", "vllm", "llmd"), default="csv", help="default csv")
    exp.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="default: requests.csv / requests.parquet / vllm_result.json / benchmark_report_v0.2.1.json "
        "in the run directory",
    )
    add_goodput_arg(exp, "the run's own, for the met_slo column")
    exp.set_defaults(fn=cmd_export)


def _slo(text):
    from ..records import parse_slo

    return parse_slo(text) if text else None


def cmd_report(args) -> int:
    from ..report.write import write_reports

    con = console()
    notes: list[str] = []
    with con.status("loading runs ...") as status:
        written = write_reports(
            args.paths,
            out=args.out,
            slo=_slo(args.goodput),
            figures=not args.no_figures,
            on_stage=status.update,
            notes=notes,
            target=args.target_attainment,
        )
    for note in notes:
        con.print(f"[yellow]! {note}[/]")
    for path, n in written:
        con.print(f"wrote {path}" + (f" and {n} figures" if n else ""))
    return EXIT_OK


def cmd_compare(args) -> int:
    from rich.text import Text

    from .. import api
    from ..gating import parse_fraction
    from ..report.comparetable import compare_table
    from ..report.width import print_wide
    from ..store import json_safe

    con = console()
    from ..limits import margin_text

    margin = parse_fraction(args.margin, "--margin")
    with con.status("bootstrapping differences ..."):
        res = api.compare(
            args.base,
            args.new,
            slo=_slo(args.goodput),
            level=args.level,
            margin=margin,
            seed=args.seed,
            allow_different_workloads=args.allow_different_workloads,
        )
    print_wide(con, compare_table(res), keys=1)
    con.print(
        "  ~ same: the interval of the difference contains 0. p MWU: Mann-Whitney U on the whole "
        f"per-request distribution. REGRESSION: worse, the whole interval beyond {margin_text(margin)}.",
        style="dim",
    )
    for w in res["warnings"]:
        con.print(f"[yellow]! {w}[/]")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(json_safe(res), fh, indent=2)
        con.print(f"wrote {args.json}")
    if res["regressions"]:
        msg = f"{len(res['regressions'])} regression(s) beyond {margin_text(margin)}: {', '.join(res['regressions'])}"
        con.print(Text(("FAIL  " if args.fail_on_regression else "") + msg, style="bold red"))
        return EXIT_GATE if args.fail_on_regression else EXIT_OK
    con.print(Text(f"no regression beyond {margin_text(margin)}", style="bold green"))
    return EXIT_OK


def cmd_import(args) -> int:
    from ..history.provenance import labels_in_env
    from ..interop import IMPORTERS

    with labels_in_env(run_labels(args)):
        out = IMPORTERS[args.tool](args.file, args.result_dir, run_id=args.run_id, slo=_slo(args.goodput))
    nxt = f"goodbench history trend --under {out}" if args.tool == "llmd" else f"goodbench report {out}"
    console().print(f"imported {args.file} into {out}\n  next: {nxt}")
    return EXIT_OK


def cmd_export(args) -> int:
    from ..interop import export_run

    out = export_run(args.run_dir, args.format, args.output, _slo(args.goodput))
    print(f"wrote {out}")
    return EXIT_OK
