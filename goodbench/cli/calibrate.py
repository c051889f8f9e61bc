"""`goodbench calibrate RUN_DIR [RUN_DIR ...] --out PROFILE.toml`: the engine's step-time model fitted to
runs made against your own server; `--calibration PROFILE.toml` then uses it in simulate, sweep,
advise, serve and engine explain."""

from __future__ import annotations

from .common import EXIT_OK, Stages, add_engine_args, console, engine_config


def add_parser(sub) -> None:
    p = sub.add_parser(
        "calibrate",
        help="fit the engine's step-time model to runs against your own server (a calibration profile)",
        description="Replays each run's requests at their send times on the engine and fits the step-time "
        "terms (per step, per token past a floor, per decoding request, per context token, prefill attention, "
        "front end) to every request's TTFT and TPOT, with and without async scheduling unless told (keeping the one "
        "that explains the runs better). Pass your server's GPU (--gpu), TP size and model, which "
        "the profile records (they label and price its what-ifs), and the knobs it ran with (vLLM's names); its "
        "KV capacity comes from the runs' scraped /metrics when they have it. With several runs, each is also "
        "predicted by a fit made without it. Make the runs with prompt lengths spread like the built-in "
        "workload's: `goodbench run --base-url URL --workload calibrate --request-rate R`.",
    )
    p.add_argument(
        "run_dirs",
        nargs="+",
        metavar="RUN_DIR",
        help="runs made with `goodbench run --base-url ... --workload calibrate`",
    )
    p.add_argument("--out", "-o", required=True, metavar="PROFILE.toml", help="where to write the profile")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    add_engine_args(p)
    p.set_defaults(fn=cmd_calibrate)


def cmd_calibrate(args) -> int:
    from .. import api
    from ..report.tables import calibration_lines, calibration_table

    con = console()
    cfg = engine_config(args, resolve=False)
    with Stages(con, quiet=args.quiet) as stages:
        cal = api.calibrate(args.run_dirs, cfg, out=args.out, on_stage=stages)
    for line in calibration_lines(cal.profile):
        con.print(line)
    con.print(calibration_table(cal.rows, cal.out_of_sample))
    con.print(f"  {cal.scheduling}", style="dim", markup=False)
    notes = list(cal.notes)
    if not args.gpu:
        eng = cal.profile.engine
        notes.append(
            f"no --gpu: the profile records its server as {eng['gpu']} tp{eng['tensor_parallel_size']} (the default "
            "tier), so its what-ifs are labelled and priced as that GPU, whose defaults also set the KV capacity, "
            "budget and sequence limit that flags and the runs' /metrics did not; calibrate again with --gpu TIER "
            "[--tensor-parallel-size N] for your server's"
        )
    for note in notes:
        con.print(f"  note: {note}", style="yellow", markup=False)
    con.print(f"  profile: {args.out} · use it with --calibration {args.out}", style="dim")
    return EXIT_OK
