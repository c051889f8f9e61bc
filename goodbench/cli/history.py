"""`goodbench history index | list | trend | html | frontier`: every run in a catalogue, a metric over time with its
change points, the dashboard page, the frontier of a set of runs (docs/history.md)."""

from __future__ import annotations

import json

from .common import EXIT_OK, console


def add_parsers(sub) -> None:
    p = sub.add_parser(
        "history",
        help="runs over time: index results directories, list runs, trends with change points, a dashboard",
        description="Every finished run indexes itself into ~/.local/share/goodbench/history.sqlite "
        "(or $GOODBENCH_HISTORY_DB, --history-db); the directories stay the source of truth and "
        "`history index` rebuilds the catalogue from them at any time. See docs/history.md.",
    )
    hsub = p.add_subparsers(dest="history_cmd", required=True, metavar="SUBCOMMAND")
    idx = hsub.add_parser("index", help="index run directories (sweep cells included) into the catalogue")
    idx.add_argument("dirs", nargs="+", metavar="DIR", help="results directories or run directories")
    idx.add_argument(
        "--history-db",
        metavar="FILE",
        help="the catalogue (default $GOODBENCH_HISTORY_DB, else ~/.local/share/goodbench/history.sqlite)",
    )
    idx.add_argument("--force", action="store_true", help="re-read directories whose files did not change")
    idx.add_argument("--prune", action="store_true", help="drop catalogue rows whose directory is gone")
    idx.add_argument("--rebuild", action="store_true", help="delete the catalogue first and index from scratch")
    idx.set_defaults(fn=cmd_index)
    ls = hsub.add_parser("list", help="runs in the catalogue, newest first")
    _add_filters(ls)
    ls.add_argument("--limit", type=int, default=50, help="at most this many runs (default 50)")
    ls.add_argument("--json", metavar="FILE", help="also write them as JSON")
    ls.set_defaults(fn=cmd_list)
    tr = hsub.add_parser("trend", help="a metric over time per identity: table, sparkline, change points, PNG")
    _add_metric(tr)
    _add_filters(tr)
    tr.add_argument("--last", type=int, help="only each identity's newest N runs")
    tr.add_argument("--rows", type=int, default=15, help="newest runs shown per identity (default 15)")
    tr.add_argument("--png", metavar="FILE", help="also draw the series (one line per identity) as a PNG")
    tr.add_argument("--json", metavar="FILE", help="also write the series and change points as JSON")
    tr.set_defaults(fn=cmd_trend)
    ht = hsub.add_parser("html", help="the dashboard: a self-contained page with filters, trends, change points")
    ht.add_argument("--out", required=True, metavar="DIR", help="where index.html goes")
    ht.add_argument("--metric", nargs="+", metavar="METRIC", help="metrics to offer (default: the headline ones)")
    _add_filters(ht)
    ht.add_argument("--limit", type=int, default=5000, help="newest runs on the page (default 5000)")
    ht.set_defaults(fn=cmd_html)
    fr = hsub.add_parser(
        "frontier",
        help="the frontier of a set of runs: output tok/s per GPU against tok/s per user, pareto.png",
        description="One point per catalogued run (simulated runs and sweep cells carry the numbers); a "
        "configuration's runs at different loads make its curve. Writes frontier.csv, frontier.json, pareto.png "
        "and report.html (docs/sweeps.md).",
    )
    fr.add_argument("--out", required=True, metavar="DIR", help="where the files go")
    _add_filters(fr)
    fr.add_argument("--limit", type=int, default=5000, help="newest runs considered (default 5000)")
    fr.set_defaults(fn=cmd_frontier)


def _add_metric(p) -> None:
    from ..history.identity import METRICS

    p.add_argument(
        "--metric",
        default="goodput",
        metavar="METRIC",
        help=f"default goodput; one of {', '.join(METRICS)}",
    )


def _add_filters(p) -> None:
    g = p.add_argument_group("which runs (exact values, or globs with * ?)")
    g.add_argument(
        "--history-db",
        metavar="FILE",
        help="the catalogue (default $GOODBENCH_HISTORY_DB, else ~/.local/share/goodbench/history.sqlite)",
    )
    g.add_argument("--under", metavar="DIR", help="runs whose directory is at or under DIR, e.g. results/")
    for name, text in (
        ("workload", "workload name, e.g. mixed-long-short"),
        ("model", "served model name"),
        ("server", "vllm, sglang, tgi, goodbench, goodbench-sim, ..."),
        ("server-version", "the server's version, e.g. 0.11.*"),
        ("gpu", "e.g. 'h100-sxm x1' or 'h100*'"),
        ("identity", "an identity key (or its prefix), as trend prints it"),
        ("mode", "open, closed, simulate, imported"),
        ("branch", "the CI branch the run recorded"),
    ):
        g.add_argument(f"--{name}", help=text)
    g.add_argument("--label", action="append", metavar="KEY=VALUE", help="runs with this label (repeatable)")
    g.add_argument("--since", metavar="DATE", help="runs started at or after, e.g. 2026-01-01")
    g.add_argument("--until", metavar="DATE", help="runs started at or before (a date: the whole day)")


def _filters(args):
    from ..api import HistoryFilters, history
    from ..history.provenance import parse_labels

    f = HistoryFilters(
        **{k: getattr(args, k) for k in ("workload", "model", "server", "server_version", "gpu", "identity", "mode")},
        branch=args.branch,
        labels=parse_labels(args.label),
        since=args.since,
        until=args.until,
        under=args.under,
    )
    return f, history.catalogue_path(args.history_db)


def cmd_index(args) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from .. import api

    con = console()
    with Progress(TextColumn("indexing"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(), console=con) as pr:
        task = pr.add_task("index", total=None)
        db, res = api.index_history(
            args.dirs,
            args.history_db,
            force=args.force,
            prune=args.prune,
            rebuild=args.rebuild,
            on_progress=lambda done, total: pr.update(task, completed=done, total=total),
        )
    con.print(
        f"{res.indexed} run(s) indexed, {res.unchanged} unchanged"
        + (f", {res.pruned} pruned" if res.pruned else "")
        + f"; catalogue: {db}",
        markup=False,
    )
    for d, why in res.skipped[:20]:
        con.print(f"  ! {d}: {why}", style="yellow", markup=False)
    if len(res.skipped) > 20:
        con.print(f"  ! ... and {len(res.skipped) - 20} more", style="yellow")
    return EXIT_OK


def cmd_list(args) -> int:
    from .. import api
    from ..report.history import runs_table

    f, db = _filters(args)
    runs = api.history_runs(f, db, args.limit)
    con = console()
    con.print(runs_table(runs, f"{len(runs)} run(s), newest first · {db}"))
    _write_json(con, args.json, runs)
    return EXIT_OK


def _write_json(con, path: str | None, obj) -> None:
    from ..store import json_safe

    if path:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(json_safe(obj), fh, indent=2)
        con.print(f"wrote {path}", markup=False)


def cmd_trend(args) -> int:
    from dataclasses import asdict

    from .. import api
    from ..report.history import trend_png, trend_renderables

    f, db = _filters(args)
    trends = api.history_trend(args.metric, f, db, last=args.last)
    con = console()
    if not trends:
        con.print(f"no run in {db} matches these filters with a value for {args.metric}", style="yellow", markup=False)
    for t in trends:
        for r in trend_renderables(t, args.rows):
            con.print(r)
        con.print()
    if args.png and trends:
        con.print(f"wrote {trend_png(trends, args.png)}", markup=False)
    _write_json(
        con, args.json, [{"series": asdict(t.series), "changes": [asdict(c) for c in t.changes]} for t in trends]
    )
    return EXIT_OK


def cmd_frontier(args) -> int:
    from ..api import history
    from ..report.frontier import frontier_table
    from ..report.width import print_wide

    f, db = _filters(args)
    out = history.history_frontier(args.out, f, db, args.limit)
    con = console()
    print_wide(con, frontier_table(out.rows))
    con.print(f"  {out.caption}", markup=False)
    con.print(f"  {len(out.rows)} runs · {out.dir} (frontier.csv, frontier.json, pareto.png, report.html)", style="dim")
    return EXIT_OK


def cmd_html(args) -> int:
    from .. import api
    from ..history.identity import HEADLINE

    f, db = _filters(args)
    path = api.history_dashboard(args.out, f, db, metrics=tuple(args.metric or HEADLINE), limit=args.limit)
    console().print(f"wrote {path}", markup=False)
    return EXIT_OK
