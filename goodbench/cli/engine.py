"""`goodbench serve` (the reference engine as an OpenAI-compatible server) and `goodbench engine
gpus | models | explain` (what the engine knows, and one step's priced breakdown)."""

from __future__ import annotations

import os
from dataclasses import replace

from .common import EXIT_OK, add_engine_args, console, engine_config
from .scale import add_cluster_args, cluster_spec


def add_serve_parser(sub) -> None:
    p = sub.add_parser(
        "serve",
        help="start the reference engine as an OpenAI-compatible server",
        description="OpenAI-compatible streaming server whose scheduler is vLLM v1's and whose "
        "step times come from the GPU/model cost model.",
    )
    add_engine_args(p)
    add_cluster_args(p)
    p.add_argument("--host", default="127.0.0.1", help="bind address (default loopback only)")
    p.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000)")
    p.add_argument("--served-model-name", help="model name clients use (default: the --engine-model shape name)")
    p.add_argument(
        "--api-key",
        default=os.environ.get("GOODBENCH_API_KEY"),
        help="require this bearer token (default: $GOODBENCH_API_KEY; none = open)",
    )
    p.add_argument("--step-trace", metavar="FILE", help="write one JSON line per engine step")
    p.add_argument(
        "--eos-length-dist",
        help="without ignore_eos, cap outputs by uniform:MIN:MAX or "
        "lognormal:MEDIAN:SIGMA (default: always max_tokens)",
    )
    p.add_argument("--tokenizer", help="tokenizer for prompt token counts (default: the bundled Qwen3 tokenizer)")
    p.add_argument("--seed", type=int, default=0, help="seed of the engine's own randomness (default 0)")
    p.add_argument(
        "--log-interval",
        type=float,
        default=10.0,
        metavar="S",
        help="log finished requests, tokens/s, running, waiting and KV use every S seconds while busy "
        "(default 10; 0: off)",
    )
    p.add_argument("--log-requests", action="store_true", help="log one line per finished request")
    p.add_argument(
        "--enable-prompt-tokens-details",
        action="store_true",
        help="usage says the prompt tokens found in the prefix cache (prompt_tokens_details.cached_tokens; "
        "Messages: cache_read_input_tokens), as vLLM's flag of the same name (default: off, as vLLM's; "
        "the Responses API always says them)",
    )
    p.add_argument(
        "--replica-name",
        metavar="NAME",
        help="send NAME in an x-goodbench-replica header on every reply, so that a run through a router "
        "(`goodbench run --replica-header x-goodbench-replica`) knows which replica served each request "
        "(default: none; with --replicas N the header names the instance, NAME/i)",
    )
    p.add_argument(
        "--lora-modules",
        nargs="+",
        metavar="NAME[=PATH]",
        help="LoRA adapters served beside the base model, as vLLM's flag (a request names one as its model; "
        "the path is listed in /v1/models, never read); needs --enable-lora (default: none)",
    )
    p.set_defaults(fn=cmd_serve)


def lora_modules(given, enabled: bool) -> tuple:
    """--lora-modules NAME[=PATH] ... as ((name, path), ...); UsageError as vLLM's for one without --enable-lora."""
    if not given:
        return ()
    from ..errors import UsageError

    if not enabled:
        raise UsageError("--lora-modules needs --enable-lora (as vLLM)")
    out = tuple((g.split("=", 1)[0], g.split("=", 1)[1] if "=" in g else g) for g in given)
    names = [n for n, _ in out]
    if len(set(names)) != len(names) or not all(names):
        raise UsageError("--lora-modules: names must be distinct and non-empty")
    return out


def cmd_serve(args) -> int:
    from ..engine.serve.main import run_server
    from ..engine.serve.server import ServeOptions

    opts = ServeOptions(
        host=args.host,
        port=args.port,
        served_model_name=args.served_model_name,
        api_key=args.api_key,
        step_trace=args.step_trace,
        eos_dist=args.eos_length_dist,
        seed=args.seed,
        log_interval_s=args.log_interval,
        log_requests=args.log_requests,
        enable_prompt_tokens_details=args.enable_prompt_tokens_details,
        replica_name=args.replica_name,
        lora_modules=lora_modules(args.lora_modules, args.enable_lora),
    )
    return run_server(engine_config(args), opts, args.tokenizer, cluster_spec(args))


def add_fleet_parser(sub) -> None:
    p = sub.add_parser(
        "fleet",
        help="start reference-engine workers behind vllm-router (a live router under test)",
        description="N `goodbench serve` workers (prefix caching on, cached tokens in usage, each naming "
        "itself in x-goodbench-replica) behind `vllm-router --policy POLICY` on --port, until Ctrl-C. "
        "Measure it with `goodbench run --base-url http://127.0.0.1:PORT --replica-header "
        "x-goodbench-replica`; compare policies with `goodbench sweep --live --server-cmd 'goodbench fleet "
        "--port {port} --policy {router}' --param router=round_robin,cache_aware` (fresh caches per cell).",
    )
    add_engine_args(p)
    p.add_argument("--port", type=int, default=8000, help="the router's port (default 8000)")
    p.add_argument("--policy", default="cache_aware", help="vllm-router's --policy (default cache_aware)")
    p.add_argument("--workers", type=int, default=2, help="engine workers behind it (default 2)")
    p.set_defaults(fn=cmd_fleet)


def cmd_fleet(args) -> int:
    import signal
    import threading

    from ..analysis.fleet import RouterFleet
    from ..engine.router import canonical

    canonical(args.policy)  # a policy goodbench can also simulate: UsageError otherwise
    cfg = engine_config(args)
    if not cfg.enable_prefix_caching:
        cfg = replace(cfg, enable_prefix_caching=True)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with RouterFleet(cfg, args.policy, args.workers, port=args.port) as fleet:
        print(f"fleet ready: {fleet.base_url} ({args.workers} workers, vllm-router --policy {args.policy}); "
              f"logs in {fleet.log_dir}; measure with --replica-header x-goodbench-replica --replicas "
              f"{','.join(fleet.names)}", flush=True)  # fmt: skip
        stop.wait()
    return EXIT_OK


def add_engine_parser(sub) -> None:
    eng = sub.add_parser("engine", help="inspect the engine's GPU tiers, models and cost model")
    esub = eng.add_subparsers(dest="engine_cmd", required=True, metavar="WHAT")
    esub.add_parser("gpus", help="list GPU tiers with their datasheet figures").set_defaults(fn=cmd_gpus)
    esub.add_parser("models", help="list model shapes").set_defaults(fn=cmd_models)
    esub.add_parser("prices", help="list the $ per GPU-hour table with dates and sources").set_defaults(fn=cmd_prices)
    ex = esub.add_parser(
        "explain",
        help="price one step and show its breakdown",
        description="e.g. goodbench engine explain --gpu h100-sxm --engine-model llama-3.1-8b "
        "--prefill 4096 --decode 32x1000",
    )
    add_engine_args(ex)
    ex.add_argument(
        "--prefill",
        action="append",
        default=None,
        metavar="N[@CTX]",
        help="a prefill chunk of N new tokens after CTX computed ones (repeatable)",
    )
    ex.add_argument(
        "--decode",
        action="append",
        default=None,
        metavar="COUNTxCTX",
        help="COUNT decoding requests at context CTX (repeatable)",
    )
    ex.set_defaults(fn=cmd_explain)


def cmd_gpus(args) -> int:
    from ..engine.hardware import GPUS
    from ..report.tables import gpus_table

    console().print(gpus_table(GPUS.values()))
    return EXIT_OK


def cmd_models(args) -> int:
    from ..engine.models import MODELS
    from ..report.tables import models_table

    console().print(models_table(MODELS.values()))
    return EXIT_OK


def cmd_prices(args) -> int:
    from ..engine.prices import PRICES
    from ..report.tables import prices_table

    console().print(prices_table(PRICES.values()))
    return EXIT_OK


def cmd_explain(args) -> int:
    from ..engine.explain import explain, parse_step
    from ..report.tables import explain_lines

    cfg = engine_config(args)
    prefill, decodes = parse_step(args.prefill or [], args.decode or [])
    con = console()
    for line in explain_lines(cfg, explain(cfg, prefill, decodes)):
        con.print(line)
    return EXIT_OK
