"""`goodbench sweep` (a grid of GPU tiers x engine knobs, or --find-max-rate) and `goodbench advise`."""

from __future__ import annotations

from ..limits import TARGET_ATTAINMENT
from .common import (
    EXIT_GATE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    Stages,
    add_engine_args,
    add_goodput_arg,
    add_label_args,
    add_min_attainment,
    add_workload_args,
    console,
    engine_config,
    run_labels,
    workload,
)
from .scale import add_cluster_args, add_price_args, cluster_spec, electricity, prices


def add_parser(sub) -> None:
    p = sub.add_parser(
        "sweep",
        help="simulate a grid of GPU tiers x engine knobs and rank cells by goodput",
        description="Which chunk size (max_num_batched_tokens) maximises goodput for this "
        "traffic on each GPU tier? Cells run on the simulated engine in parallel processes. "
        "Example: goodbench sweep --workload workloads/mixed-long-short.toml --request-rate 6 "
        "--goodput ttft:500 tpot:50 --gpu h100-sxm,a100-80g-pcie,l40s "
        "--param max_num_batched_tokens=256,512,1024,2048,4096 --param enable_chunked_prefill=false",
    )
    add_workload_args(p)
    add_engine_args(p)
    add_cluster_args(p)
    add_price_args(p)
    p.add_argument(
        "--compare-disaggregation",
        type=int,
        metavar="N",
        help="DistServe's comparison: every cell also as N colocated replicas and as each P:D split with "
        "P + D = N (equal GPU count), ranked by goodput per GPU",
    )
    p.add_argument("--layouts", metavar="L1,L2,...", help="instance layouts to sweep, e.g. 2x,1P:1D (replicas or P:D)")
    p.add_argument(
        "--min-gpus",
        action="store_true",
        help="per cell, the fewest replicas whose SLO attainment at the workload's rate reaches "
        "--target-attainment (GPUs = replicas x TP), with their cost",
    )
    p.add_argument("--max-replicas", type=int, default=16, help="for --min-gpus: most replicas tried (default 16)")
    _add_grid_args(p)
    _add_backend_args(p)
    add_label_args(p)
    _load_lists(p)
    p.set_defaults(fn=cmd_sweep)


def _load_lists(p) -> None:
    """In sweep, --concurrency and --request-rate take lists: a load axis, and the frontier view."""
    for action in p._actions:  # the shared workload flags, retyped here only (each value is checked on parsing)
        if "--concurrency" in action.option_strings:
            action.type, action.dest = str, "concurrency_axis"
            action.help = (
                "closed loop with N users; a list (1,4,16,64) sweeps the load: frontier.csv, pareto.png "
                "(default: open loop at --request-rate)"
            )
        if "--request-rate" in action.option_strings:
            action.dest = "request_rate_axis"
            action.help += "; a list (1,2,4,8) sweeps the load: frontier.csv, pareto.png"


def _add_grid_args(p) -> None:
    p.add_argument(
        "--param",
        action="append",
        metavar="KNOB=V1,V2,...",
        help="an axis of the grid (repeatable; --gpu takes a comma list too). "
        "enable_chunked_prefill=false alone adds one unchunked baseline cell per tier",
    )
    p.add_argument("--jobs", type=int, default=0, help="parallel processes (default: one per CPU)")
    p.add_argument("--result-dir", default="results", help="parent folder of the sweep directory (default results/)")
    p.add_argument("--sweep-id", help="name of the sweep directory (default sweep-DATE-TIME-PID)")
    p.add_argument("--no-plots", action="store_true", help="do not write the sweep PNGs")
    p.add_argument("--quiet", action="store_true", help="no progress line while the cells run")
    p.add_argument(
        "--slo-scales",
        metavar="S1,S2,...",
        help="also report attainment with both SLO thresholds multiplied by each scale, e.g. 0.4,0.6,0.8,1.0,1.2",
    )


def _add_backend_args(p) -> None:
    """Where cells or rate probes run (analysis/backends.py), and the max-rate search."""
    p.add_argument(
        "--live",
        action="store_true",
        help="run each cell against a real-time `goodbench serve` with the cell's config (cells in turn)",
    )
    p.add_argument(
        "--server-cmd",
        metavar="CMD",
        help="start this server for each cell, e.g. 'vllm serve MODEL --max-num-batched-tokens "
        "{max_num_batched_tokens} --port {port}' ({port}, {gpu}, {model} and any knob are filled in); "
        "it must answer /health on 127.0.0.1:{port}",
    )
    p.add_argument("--server-timeout", type=float, default=600.0, help="seconds to wait for /health (default 600)")
    p.add_argument(
        "--find-max-rate",
        action="store_true",
        help="per cell, search the highest offered arrival rate (each probe's schedule's own) whose SLO "
        "attainment stays >= --target-attainment, confirmed with 4x the requests",
    )
    add_min_attainment(p, "target_attainment", TARGET_ATTAINMENT)  # --find-max-rate, --min-gpus, the verdicts
    p.add_argument(
        "--max-probes",
        type=int,
        default=16,
        help="for --find-max-rate: most runs per search, one kept to confirm the rate found (default 16)",
    )
    p.add_argument("--base-url", help="with --find-max-rate: search against this running endpoint instead")
    p.add_argument(
        "--gpu-telemetry",
        nargs="+",
        metavar="URL|nvml|amdsmi",
        help="with --live or --server-cmd: sample GPU power in every cell, as `run --gpu-telemetry` (default: none)",
    )
    p.add_argument(
        "--api-key-env",
        default="OPENAI_API_KEY",
        metavar="VAR",
        help="with --base-url: environment variable holding the API key (default OPENAI_API_KEY; never written anywhere)",
    )


def _scales(text: str | None) -> list[float]:
    from ..errors import UsageError

    try:
        return [float(x) for x in text.split(",")] if text else []
    except ValueError:
        raise UsageError(f"--slo-scales {text!r}: expected numbers, e.g. 0.4,0.6,0.8,1.0,1.2") from None


def cmd_sweep(args) -> int:
    from .. import api
    from ..analysis.frontier import parse_loads
    from ..analysis.grid import parse_params
    from ..errors import UsageError

    con = console()
    if args.gpu_telemetry and not (args.live or args.server_cmd):
        raise UsageError("--gpu-telemetry samples real GPUs: give --live or --server-cmd (a simulated sweep has none)")
    conc = parse_loads(args.concurrency_axis, "concurrency")
    rates = parse_loads(args.request_rate_axis, "request-rate")
    args.concurrency = int(conc[0]) if len(conc) == 1 else None
    args.request_rate = args.request_rate_axis if len(rates) == 1 else None
    if (len(conc) > 1 and rates) or (len(rates) > 1 and conc):
        raise UsageError("a load axis is --concurrency A,B,... or --request-rate A,B,...: give one of them")
    if len(conc) > 1 or len(rates) > 1:
        return _frontier(args, con, "concurrency" if len(conc) > 1 else "rate", conc if len(conc) > 1 else rates)
    spec, scales = workload(args), _scales(args.slo_scales)
    with Stages(con, quiet=args.quiet) as stages:
        s = api.prepare_sweep(
            spec,
            _gpus(args),
            parse_params(args.param or []),
            engine=engine_config(args, resolve=False),
            result_dir=args.result_dir,
            sweep_id=args.sweep_id,
            tokenizer=args.tokenizer,
            cluster=cluster_spec(args),
            prices=prices(args),
            layouts=_layouts(args),
            labels=run_labels(args),
            on_stage=stages,
            target_attainment=args.target_attainment,
            gpu_telemetry=args.gpu_telemetry,
            electricity=electricity(args),
        )
    if args.find_max_rate:
        return _max_rate(args, con, s)
    if args.min_gpus:
        return _min_gpus(args, con, s)
    from ..analysis.sweep import SweepInterrupted

    backend, done = _backend(args, scales), []
    try:
        with Stages(con, quiet=args.quiet) as st:
            st(
                f"{'running' if backend.live else 'simulating'} {len(s.cells)} cells x {len(s.plan.requests)} requests ..."
            )
            out = api.sweep(
                s,
                backend,
                plots=not args.no_plots,
                on_done=lambda row: (done.append(row), st(f"{len(done)}/{len(s.cells)} cells done ...")),
            )
    except SweepInterrupted as e:
        kept = sum(1 for r in e.rows if not r.get("interrupted"))
        con.print(f"[yellow]interrupted: {kept} of {len(s.cells)} cells finished; kept in {s.out_dir}[/]")
        return EXIT_INTERRUPTED
    return _print_sweep(con, s, out, scales, backend)


def _print_sweep(con, s, out, scales, backend) -> int:
    """The table, the best cell per tier, the cheapest, where things went; exit 1 when a cell failed."""
    from ..arrivals import span_rate
    from ..report import tables
    from ..report.width import print_wide

    spec = s.spec
    offered = span_rate(s.plan.offsets) if s.plan.offsets is not None else None
    title = tables.sweep_title(s.sweep_id, spec.name, s.plan.arrival.label, len(s.plan.requests), spec.slo, offered)
    print_wide(con, tables.sweep_table(title, out.rows))
    for line in tables.config_names(out.rows)[1]:
        con.print(line, style="dim")
    legend = tables.flip_legend(out.rows, s.target)
    if legend:
        con.print(legend)
    for line in tables.best_lines(out.best):
        con.print(line)
    if any(b.get("tied") for b in out.best.values()):
        con.print(f"  rule: {next(iter(out.best.values()))['rule']}", style="dim")
    con.print(tables.cheapest_line(out.cheapest))
    from ..analysis.routers import router_verdicts

    for line in router_verdicts(out.rows):  # a --param router=... axis: each policy against round_robin
        con.print(f"  {line}", markup=False)
    if out.plots:
        con.print(f"  plots: {', '.join(p.rsplit('/', 1)[-1] for p in out.plots)}", style="dim")
    if out.plots_missing:
        con.print("  (no plots: matplotlib is missing; pip install matplotlib)", style="dim")
    con.print(f"  report: {out.report}", style="dim")
    if scales and not backend.live:
        print_wide(con, tables.slo_scale_table(out.rows, scales))
    con.print(
        f"  {len(s.cells)} cells in {out.wall_s:.1f} s · results: {out.dir} (sweep.csv, sweep.json, cells/)",
        style="dim",
    )
    failed = [r for r in out.rows if r.get("error")]
    for r in failed:
        con.print(f"  [red]✗ {r['cell']}: {r['error'][:300]}[/]")
    return EXIT_GATE if failed else EXIT_OK


def _frontier(args, con, kind: str, values: list[float]) -> int:
    """`sweep --concurrency 1,4,16` (or --request-rate A,B,C): the grid at each load, then the frontier."""
    import copy

    from .. import api
    from ..analysis.grid import parse_params
    from ..errors import UsageError
    from ..report.frontier import frontier_table
    from ..report.width import print_wide

    if args.find_max_rate or args.min_gpus or args.slo_scales:
        raise UsageError("a load axis (a list of --concurrency or --request-rate) does not combine with "
                         "--find-max-rate, --min-gpus or --slo-scales")  # fmt: skip
    loads = []
    for v in values:
        a = copy.copy(args)
        a.concurrency, a.request_rate = (int(v), None) if kind == "concurrency" else (None, f"{v:g}")
        loads.append((v, workload(a)))
    with Stages(con, quiet=args.quiet) as st:
        out = api.frontier(
            kind, loads, _gpus(args), parse_params(args.param or []), backend=_backend(args), plots=not args.no_plots,
            result_dir=args.result_dir, sweep_id=args.sweep_id, engine=engine_config(args, resolve=False),
            tokenizer=args.tokenizer, cluster=cluster_spec(args), prices=prices(args), layouts=_layouts(args),
            labels=run_labels(args), target_attainment=args.target_attainment, gpu_telemetry=args.gpu_telemetry,
            electricity=electricity(args),
            on_load=lambda label, n: st(f"load {label}: {n} cells ..."),
        )  # fmt: skip
    print_wide(con, frontier_table(out.rows))
    con.print(f"  {out.caption}", markup=False)
    con.print(f"  report: {out.report}", style="dim")
    files = "frontier.csv, frontier.json" + (", pareto.png" if out.plot else "") + ", load-*/ (each load's sweep)"
    con.print(f"  {len(out.rows)} points in {out.wall_s:.1f} s · results: {out.dir} ({files})", style="dim")
    failed = [r for o in out.sweeps for r in o.rows if r.get("error")]
    return EXIT_GATE if failed else EXIT_OK


def _gpus(args) -> list[str]:
    """--gpu's tiers ([]: the engine's own GPU)."""
    return [g.strip() for g in args.gpu.split(",") if g.strip()] if args.gpu else []


def _backend(args, scales=()):
    """Where the cells (or rate probes) run, from the flags, chosen once."""
    from ..analysis.backends import backend_for
    from ..client.config import api_key_from_env

    return backend_for(
        live=args.live,
        server_cmd=args.server_cmd,
        startup_timeout_s=args.server_timeout,
        base_url=args.base_url,
        jobs=args.jobs,
        slo_scales=scales,
        api_key=api_key_from_env(args.api_key_env) if args.base_url else None,
    )


def _layouts(args) -> list[str] | None:
    """--compare-disaggregation N or --layouts L1,L2 (checked by prepare_sweep)."""
    from ..analysis.grid import layouts_for

    if args.compare_disaggregation:
        return layouts_for(args.compare_disaggregation)
    if not args.layouts:
        return None
    return [x.strip() for x in args.layouts.split(",") if x.strip()]


def _min_gpus(args, con, s) -> int:
    from .. import api
    from ..report import tables
    from ..report.width import print_wide

    rows = api.min_gpus(
        s,
        target=args.target_attainment,
        max_replicas=args.max_replicas,
        on_probe=lambda label, n, att: con.print(f"    {label}: {n} replicas -> attainment {att:.1%}"),
    )
    print_wide(con, tables.min_gpus_table(rows, args.target_attainment))
    con.print(f"  results: {s.out_dir}/min_gpus.json", style="dim")
    return EXIT_OK


def _max_rate(args, con, s) -> int:
    from .. import api
    from ..report import maxrate
    from ..report.width import print_wide

    results = api.max_rate(
        s,
        _backend(args),
        target=args.target_attainment,
        max_probes=args.max_probes,
        on_start=lambda label: con.print(
            f"[bold]{label}[/]: searching the max rate with attainment >= {args.target_attainment:.0%}"
        ),
        on_probe=lambda p: con.print(maxrate.probe_line(p)),
        on_result=lambda r: con.print(maxrate.max_rate_line(r)),
        plots=not args.no_plots,
    )
    if len({r.get("layout") for r in results}) > 1:
        print_wide(con, maxrate.max_rate_table(results, args.target_attainment))
    import os

    figure = os.path.join(s.out_dir, "max_rate_per_gpu.png")
    con.print(
        f"  results: {s.out_dir}/max_rate.json" + (", max_rate_per_gpu.png" if os.path.exists(figure) else ""),
        style="dim",
    )
    return EXIT_OK


def add_advise_parser(sub) -> None:
    p = sub.add_parser(
        "advise",
        help="chunk-size advice from first principles, settled on the simulator by the sweep's rule",
        description="e.g. goodbench advise --gpu h100-sxm --engine-model llama-3.1-8b --ttft-slo 500 --p95-input 6000; "
        "for a sweep's traffic: goodbench advise --gpu h100-sxm --workload mixed-long-short --request-rate 6 "
        "--goodput ttft:500 tpot:50",
    )
    add_engine_args(p)
    p.add_argument(
        "--workload",
        metavar="FILE|NAME",
        help="size and check the advice on this traffic, as `sweep --workload` runs it: its TTFT SLO, 95th-"
        "percentile prompt, rate and requests (default: 10%% --p95-input prompts among 128-token chats)",
    )
    add_goodput_arg(p, "the workload's [slo]; --ttft-slo and --tpot-slo without --workload")
    p.add_argument("--ttft-slo", type=float, help="TTFT SLO, ms (default: the workload's; required without it)")
    p.add_argument("--tpot-slo", type=float, help="TPOT SLO, ms (default: the workload's; none without it)")
    p.add_argument(
        "--p95-input",
        type=int,
        help="95th-percentile prompt length, tokens (default: the workload's; required without)",
    )
    p.add_argument("--concurrency", type=int, default=32, help="concurrent decodes to reserve KV for (default 32)")
    p.add_argument("--context", type=int, default=1024, help="their context length, tokens (default 1024)")
    p.add_argument("--min-chunk", type=int, default=256, help="smallest chunk considered (default 256)")
    p.add_argument("--time-per-chunk-ms", type=float, help="override the cost model's time per chunk")
    p.add_argument("--num-prompts", type=int, help="requests in the simulated check (default 400, or the workload's)")
    p.add_argument("--request-rate", type=str, help="arrival rate of the check (default 4, or the workload's)")
    p.add_argument("--tokenizer", help="tokenizer for --workload (default: the bundled Qwen3 tokenizer)")
    p.add_argument("--jobs", type=int, default=0, help="parallel processes for the check (default: one per CPU)")
    p.add_argument("--no-check", action="store_true", help="skip the simulated check")
    p.set_defaults(fn=cmd_advise)


def _advice_inputs(args):
    """(check workload or None, TTFT SLO, p95 prompt) from --workload or --ttft-slo / --p95-input."""
    from .. import api
    from ..errors import UsageError
    from ..workloads import WorkloadOptions, resolve_workload

    if args.workload is None:
        if args.ttft_slo is None or args.p95_input is None or args.goodput:
            raise UsageError("advise: give --ttft-slo and --p95-input, or --workload (with --goodput if it has no SLO)")
        return None, args.ttft_slo, args.p95_input
    opts = WorkloadOptions(
        workload=args.workload, goodput=args.goodput, num_prompts=args.num_prompts, request_rate=args.request_rate
    )
    spec, ttft, p95 = api.advice_traffic(
        resolve_workload(opts), ttft_slo_ms=args.ttft_slo, tpot_slo_ms=args.tpot_slo, tokenizer=args.tokenizer
    )
    return spec, ttft, args.p95_input or p95


def cmd_advise(args) -> int:
    from .. import api
    from ..report import advice, tables
    from ..workloads.options import parse_rate

    con = console()
    base = engine_config(args, resolve=False)
    spec, ttft, p95 = _advice_inputs(args)
    a = api.advise(
        base,
        ttft,
        p95,
        concurrency=args.concurrency,
        context=args.context,
        min_chunk=args.min_chunk,
        time_per_chunk_ms=args.time_per_chunk_ms,
    )
    for line in advice.advice_lines(a):
        con.print(line)
    if args.no_check:
        return EXIT_OK
    n, rate = args.num_prompts or 400, parse_rate(args.request_rate or 4.0)
    with con.status("checking the chunk sizes on the simulator ..."):
        chk = api.check_advice(
            a, base, ttft, args.tpot_slo, num_prompts=n, request_rate=rate, jobs=args.jobs, workload=spec,
            tokenizer=args.tokenizer,
        )  # fmt: skip
    title = advice.advice_check_title(a, spec, n, rate)
    con.print(advice.advice_check_table(a, chk, title))
    legend = tables.flip_legend(chk.rows, TARGET_ATTAINMENT)  # the check sweep's verdict bar (sweep.setup's default)
    if legend:
        con.print(legend, style="dim")
    for line in advice.advice_check_lines(chk):
        con.print(line)
    return EXIT_OK
