"""`goodbench run`: drive a workload at a server (default: the auto-started reference engine)."""

from __future__ import annotations

import os

from .common import (
    EXIT_INTERRUPTED,
    Stages,
    add_engine_args,
    add_gate_args,
    add_label_args,
    add_workload_args,
    console,
    engine_config,
    gate_spec,
    judge,
    maybe_gate,
    run_labels,
    workload,
)


def add_target_args(p) -> None:
    g = p.add_argument_group("target")
    g.add_argument(
        "--base-url",
        help="OpenAI-compatible server, e.g. http://127.0.0.1:8000 "
        "(default: start the reference engine on a free loopback port)",
    )
    g.add_argument(
        "--endpoint",
        help="API path, e.g. /v1/completions, /v1/chat/completions, /v1/responses, /v1/messages, "
        "/v1/embeddings, /v1/rerank (default: the workload's, /v1/completions; the API is inferred from the path, --endpoint-type says it otherwise)",
    )
    g.add_argument(
        "--pool-batch",
        type=int,
        default=1,
        metavar="N",
        help="embeddings: texts per request; rerank / score: documents per query (default 1)",
    )
    g.add_argument("--model", help="model name sent in requests (default: the server's first /v1/models entry)")
    g.add_argument(
        "--api-key-env",
        default="OPENAI_API_KEY",
        metavar="VAR",
        help="environment variable holding the API key (default OPENAI_API_KEY; never written anywhere)",
    )
    g.add_argument(
        "--no-preflight",
        action="store_true",
        help="skip the preflight (the model checked against /v1/models, one tiny request to the endpoint, "
        "at most 2 s before the clock starts)",
    )
    g.add_argument("--no-ignore-eos", action="store_true", help="do not send ignore_eos (for servers that reject it)")
    g.add_argument("--min-tokens", action="store_true", help="also send min_tokens = max_tokens")
    g.add_argument("--timeout", type=float, default=600.0, help="per-request total timeout, s (default 600)")
    g.add_argument("--idle-timeout", type=float, default=60.0, help="per-stream idle timeout, s (default 60)")
    g.add_argument(
        "--client",
        choices=["lean", "aiohttp"],
        default="lean",
        help="load-generator client: lean (asyncio + httptools, default) or aiohttp (the baseline)",
    )
    g.add_argument(
        "--no-kernel-timestamps",
        action="store_true",
        help="lean client on http://: stamp chunks with the event loop's clock instead of the kernel's "
        "receive time (SO_TIMESTAMPNS, the default on Linux)",
    )
    _add_header_args(g)
    g.add_argument(
        "--keepalive",
        type=float,
        default=4.0,
        metavar="S",
        help="never reuse a connection idle longer than this (default 4 s; uvicorn closes after 5)",
    )


def _add_header_args(g) -> None:
    """The headers a fleet behind a router is measured through."""
    g.add_argument(
        "--replica-header",
        metavar="NAME",
        help="a response header naming the replica that served each request (a router's or server's; "
        "`goodbench serve --replica-name` sets x-goodbench-replica): each record's replica and the "
        "summary's replicas block (default: none)",
    )
    g.add_argument(
        "--replicas",
        metavar="NAME,NAME",
        help="every replica behind the router, as --replica-header names them: one that serves nothing still "
        "counts in the balance (Jain's index); without it the balance covers the replicas seen (default: none)",
    )
    g.add_argument(
        "--worker-metrics",
        metavar="[NAME=]URL",
        nargs="+",
        help="each replica behind the router (its base URL, or NAME=URL; unnamed: w0, w1, ...): its /metrics is "
        "read 5 times a second and each request attributed to the replica whose finished-request "
        "counters and token sums moved for it (how sure: the summary's replicas.attribution); a "
        "--replica-header, where a reply has it, wins and is checked against (default: none)",
    )
    g.add_argument(
        "--session-header",
        metavar="NAME",
        help="the request header a multi-turn session's id is sent in, for a router's session affinity "
        "(default: the workload's, X-Session-ID)",
    )


def add_run_args(p) -> None:
    r = p.add_argument_group("run")
    r.add_argument(
        "--max-concurrency",
        type=int,
        help="cap on in-flight requests; waiting shows as schedule lag (default: no cap)",
    )
    r.add_argument("--workers", type=int, default=1, help="load-generator processes (default 1)")
    r.add_argument(
        "--scrape-metrics",
        dest="scrape",
        action="store_true",
        default=None,
        help="scrape the target's /metrics every second (default: on when it serves it)",
    )
    r.add_argument(
        "--no-scrape-metrics",
        dest="scrape",
        action="store_false",
        help="do not scrape /metrics (default: scrape when the target serves it)",
    )
    r.add_argument(
        "--gpu-telemetry",
        nargs="+",
        metavar="URL|nvml|amdsmi",
        help="sample GPU power and energy every second: NVIDIA DCGM exporter URLs (http://host:9400), or this "
        "host's GPUs through nvml (nvidia-ml-py) or amdsmi; the summary gains an energy block (default: none)",
    )
    r.add_argument("--result-dir", default="results", help="parent folder of run directories (default results/)")
    r.add_argument("--run-id", help="name of the run directory (default: run-DATE-TIME-PID)")
    r.add_argument("--quiet", action="store_true", help="no live progress")
    r.add_argument("--no-pin", action="store_true", help="do not pin the auto-started engine to CPU 0")
    r.add_argument(
        "--grace-period",
        type=float,
        default=5.0,
        help="after Ctrl-C, seconds in-flight requests may finish before they are cancelled (default 5)",
    )
    lg = p.add_argument_group("locust (--via locust)")
    lg.add_argument(
        "--via",
        choices=["native", "locust"],
        default="native",
        help="load generator: goodbench's own (default) or locust (needs the [locust] extra)",
    )
    lg.add_argument("--users", type=int, default=16, help="locust users (concurrent requests), default 16")
    lg.add_argument("--spawn-rate", type=float, default=16.0, help="locust users started per second (default 16)")
    lg.add_argument(
        "--locust-workers", type=int, default=0, help="start a local master and N workers (default 0: one process)"
    )
    lg.add_argument(
        "--open-loop",
        action="store_true",
        help="locust users take send times from the workload's arrival schedule (default: closed loop)",
    )


def add_parser(sub) -> None:
    p = sub.add_parser(
        "run",
        help="drive a workload at a server (default: the reference engine) and summarise",
        description="Drive a workload at an OpenAI-compatible streaming server and write "
        "results/<run-id>/ with per-request records and summary.json.",
    )
    add_workload_args(p)
    add_target_args(p)
    add_run_args(p)
    add_engine_args(p, served_model=True)
    add_gate_args(p, True)
    add_label_args(p)
    p.set_defaults(fn=cmd_run)


def _target(args):
    from ..api import Target
    from ..client.config import api_key_from_env

    return Target(
        base_url=args.base_url,
        endpoint=args.endpoint,
        model=args.model,
        api_key=api_key_from_env(args.api_key_env),
        ignore_eos=not args.no_ignore_eos,
        min_tokens=args.min_tokens,
        timeout_s=args.timeout,
        idle_timeout_s=args.idle_timeout,
        client=args.client,
        keepalive_s=args.keepalive,
        preflight=not args.no_preflight,
        pool_batch=args.pool_batch,
        kernel_stamps=not args.no_kernel_timestamps,
        replica_header=args.replica_header,
        replicas=tuple(x.strip() for x in (args.replicas or "").split(",") if x.strip()),
        session_header=args.session_header,
        worker_metrics=tuple(args.worker_metrics or ()),
    )


def _live(con, quiet: bool, slo_given: bool, stages):
    """A rich live progress line around the timed part of the run (none when quiet or not a terminal)."""
    from ..report.console import progress_text

    if quiet or not con.is_terminal:
        return None

    def live(prog, fn):
        from rich.live import Live

        stages.stop()
        with Live(progress_text(prog, slo_given), console=con, auto_refresh=False, transient=True) as lv:
            return fn(lambda: lv.update(progress_text(prog, slo_given), refresh=True))

    return live


def cmd_run(args) -> int:
    from .. import api
    from ..eventloop import install_uvloop
    from ..report.console import print_summary

    con = console()
    spec = workload(args)
    engine = engine_config(args, resolve=False)
    labels = run_labels(args)
    gspec = gate_spec(args, spec.gate)  # checked before the clock starts; the headline and the gate use it
    if args.via == "locust":
        return _via_locust(args, con, spec, engine, labels, gspec)
    install_uvloop()
    with Stages(con, quiet=args.quiet) as stages:
        run = api.run(
            spec,
            _target(args),
            engine=engine,
            result_dir=args.result_dir,
            run_id=args.run_id,
            tokenizer=args.tokenizer,
            max_concurrency=args.max_concurrency,
            workers=args.workers,
            scrape_metrics=args.scrape,
            grace_s=args.grace_period,
            pin=not args.no_pin,
            labels=labels,
            on_stage=stages,
            live=_live(con, args.quiet, bool(spec.slo), stages),
            gate=gspec,
            gpu_telemetry=args.gpu_telemetry,
        )
    print_summary(con, run.summary, run.meta.to_dict(), gspec, run.dir)
    if run.interrupted:
        kept = run.summary["requests"]["issued"] + run.summary.get("warmup_excluded", 0)
        con.print(f"[yellow]interrupted: {kept} records kept in {run.dir}[/]")
        return EXIT_INTERRUPTED
    return maybe_gate(args, run.dir, spec, con, run.summary)


# flags goodbench's own client honours and locust cannot: refused, never silently ignored
NOT_UNDER_LOCUST = {
    "tokenizer": "--tokenizer",
    "max_concurrency": "--max-concurrency (locust's --users is its concurrency)",
    "scrape": "--scrape-metrics/--no-scrape-metrics",
    "gpu_telemetry": "--gpu-telemetry",
}


def _via_locust(args, con, spec, engine, labels, gspec) -> int:
    """`run --via locust`: refuse the flags locust cannot honour, run, then judge the run directory the
    master wrote with the same gate as a native run."""
    from .. import api
    from ..errors import UsageError
    from ..store import new_run_id

    given = [flag for dest, flag in NOT_UNDER_LOCUST.items() if getattr(args, dest, None) is not None]
    given += ["--workers (use --locust-workers)"] if args.workers != 1 else []
    if given:
        raise UsageError(f"--via locust cannot honour {', '.join(given)}: leave them out or drop --via locust")
    run_id = args.run_id or new_run_id("locust")
    rc = api.run_via_locust(
        spec,
        _target(args),
        engine=engine,
        result_dir=args.result_dir,
        run_id=run_id,
        users=args.users,
        spawn_rate=args.spawn_rate,
        locust_workers=args.locust_workers,
        open_loop=args.open_loop,
        gate=gspec,
        api_key_env=args.api_key_env,
        pin=not args.no_pin,
        labels=labels,
    )
    if rc not in (0, 1) or not (args.gate or spec.gate):
        return rc  # interrupted, a worker lost, or no gate asked: the master's verdict (the same judge)
    con.rule("gate")
    return judge(args, os.path.join(args.result_dir, run_id), spec.slo, spec.gate, con)
