"""`goodbench gate RUN_DIR`: exit 0 when every clause holds, 1 when one fails, 2 when the run cannot be judged."""

from __future__ import annotations

import os

from .common import EXIT_USAGE, add_gate_args, add_goodput_arg, console, judge


def add_parser(sub) -> None:
    p = sub.add_parser(
        "gate",
        help="pass/fail a run against SLO clauses (exit 0 pass, 1 fail, 2 cannot judge)",
        description="Judge a results directory: exit 0 when every clause holds, 1 when any "
        "fails, 2 when the run cannot be judged (missing/corrupt files, invalid run, nothing "
        "completed).",
    )
    p.add_argument("run_dir", metavar="RUN_DIR")
    add_goodput_arg(p, "the run's own")
    add_gate_args(p, False)
    p.set_defaults(fn=cmd_gate)


def cmd_gate(args) -> int:
    from ..errors import RunDirError
    from ..records import parse_slo
    from ..store import load_meta

    con = console()
    if not os.path.isdir(args.run_dir):
        con.print(f"[bold yellow]CANNOT JUDGE: {args.run_dir} is not a directory[/]")
        return EXIT_USAGE
    from ..gating import recorded_spec

    slo = parse_slo(args.goodput) if args.goodput else None
    table = None
    try:
        meta = load_meta(args.run_dir)
        slo = slo if slo is not None else meta.slo
        table = recorded_spec(meta.to_dict()).to_table()  # flags given here override it, clause by clause
    except RunDirError:
        pass  # judge() reports the unreadable run
    return judge(args, args.run_dir, slo, table, con)
