"""Runs: a workload on the simulated engine (`simulate`), against a server on the real clock (`run`,
starting the reference engine when no server is given), or under locust (`run_via_locust`)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from dataclasses import dataclass, replace

from ..engine.config import EngineConfig
from ..errors import TargetError, UsageError
from ..limits import TARGET_ATTAINMENT, check_all
from ..redact import scrub, scrub_url
from ..rundir import RunDir, plan_meta
from ..store import new_run_id
from ..workloads import WorkloadSpec, build_plan
from .common import Run, as_workload, stage
from .enginefiles import resolve_engine


def simulate(
    workload,
    engine: EngineConfig | None = None,
    *,
    result_dir: str = "results",
    run_id: str | None = None,
    tokenizer: str | None = None,
    step_trace: bool = False,
    cluster=None,
    prices: dict | None = None,
    labels: dict | None = None,
    on_stage=None,
    target_attainment: float = TARGET_ATTAINMENT,
    gate=None,
    electricity: dict | None = None,
) -> Run:
    """The workload through the reference engine in virtual time: a run directory like `run`'s, with
    a `simulation` block (wall time, steps, preemptions, speed-up) and a `cost` block in its summary.
    cluster: an engine.layout.ClusterSpec (replicas behind a router, or prefill/decode instances);
    prices: $ per GPU-hour overrides by tier (engine.prices); labels: run.json's (docs/history.md);
    electricity: {usd_per_kwh, facility_factor}: the energy block's cost per million good tokens."""
    from .. import tokenizer as tokmod
    from ..analysis.knobs import simulation_notes
    from ..engine.prices import price_table
    from ..engine.virtual import simulate as simulate_plan

    spec = as_workload(workload)
    judged = _gate_meta(gate, target_attainment, spec.gate)
    cfg = resolve_engine(engine)
    check_needs(spec, cfg, None, "the simulated engine")
    check_engine(spec, cfg, "the simulated engine")
    tok = tokmod.load(tokenizer, lazy=True)  # a simulation counts no tokens itself
    stage(on_stage, "building workload...")
    plan = build_plan(spec, tok)
    layout = cluster if cluster is not None and cluster.many else None
    meta = plan_meta(
        spec,
        plan,
        "simulate",
        run_id=run_id or "",
        target={"base_url": "simulated", "endpoint": "", "model": cfg.model},
        engine=cfg.to_dict() | ({"cluster": layout.to_dict()} if layout else {}),
        tokenizer=tok.name,
        gpus=layout.gpus(cfg) if layout else {cfg.gpu: cfg.tensor_parallel_size},
        prices=price_table(prices),
        labels=dict(labels or {}),
        electricity=electricity,
        **judged,
    )
    rd = RunDir.open(result_dir, meta, prefix="sim")
    where = f"{layout.label() + ' ' if layout else ''}{cfg.gpu}"
    stage(on_stage, f"simulating {len(plan.requests)} requests on {cfg.model} / {where} ...")
    t = time.perf_counter()
    trace = os.path.join(rd.dir, "step_trace.jsonl") if step_trace else None
    out = simulate_plan(cfg, plan, layout, trace_path=trace)
    wall = time.perf_counter() - t
    rd.append_many(out.records)
    notes = simulation_notes(cfg, plan.requests, out.stats, instances=bool(layout))
    rd.meta.engine_stats = out.stats | {"wall_s": wall, "notes": notes}
    return Run(rd.dir, rd.meta, rd.finish(records=out.records))  # summarised in memory: no read-back


@dataclass
class Target:
    """Where a run sends its requests (api.run fills what is not given)."""

    base_url: str | None = None  # None: start the reference engine
    endpoint: str | None = None  # /v1/completions, /v1/chat/completions, or completions | chat
    model: str | None = None  # None: the server's first /v1/models entry
    api_key: str | None = None  # never written anywhere
    ignore_eos: bool = True
    min_tokens: bool = False
    timeout_s: float = 600.0
    idle_timeout_s: float = 60.0
    client: str = "lean"  # lean (asyncio + httptools) | aiohttp (the baseline)
    keepalive_s: float = 4.0  # never reuse a connection idle longer than this
    preflight: bool = True  # check the model and send one tiny request before the clock starts
    pool_batch: int = 1  # embeddings: texts per request; rerank / score: documents per query
    kernel_stamps: bool = True  # lean client on http:// (Linux): chunk times from the kernel's receive stamps
    replica_header: str | None = None  # a response header naming the replica that served each request
    replicas: tuple[str, ...] = ()  # every replica behind the router, as that header names them (the balance's)
    session_header: str | None = None  # the header a session's id is sent in (None: the workload's)
    worker_metrics: tuple[str, ...] = ()  # each replica's URL (NAME=URL): requests attributed by its counters


def _target(target) -> Target:
    """A Target, its base URL normalised (client.config.normalize_base_url; each correction warned)."""
    from urllib.parse import urlsplit

    from ..client.config import normalize_base_url
    from ..errors import warn

    target = Target(base_url=target) if isinstance(target, str) or target is None else target
    if target.base_url is None:
        return target
    base, endpoint, notes = normalize_base_url(target.base_url, target.endpoint)
    for note in notes:
        warn(scrub(note, (target.api_key,)))
    if target.api_key and urlsplit(base).username is not None:  # both would be the Authorization header
        raise UsageError(
            f"--base-url {scrub_url(base)} carries user:password and an API key is set too: both would be "
            "the request's Authorization header; drop the user:password from the URL or unset the key"
        )
    return replace(target, base_url=base, endpoint=endpoint)


def _start_engine(cfg: EngineConfig, pin: bool, on_stage, lora: tuple = ()):
    from ..engine.serve.launch import start_engine

    stage(on_stage, f"starting the reference engine ({cfg.model} on {cfg.gpu}) ...")
    return start_engine(cfg, pin=pin, lora_modules=lora)


def adapters(spec: WorkloadSpec) -> tuple:
    """The LoRA adapters a workload names (its requests' models beside the base one)."""
    return spec.lora.adapters if spec.lora is not None else ()


def check_engine(spec: WorkloadSpec, cfg: EngineConfig, where: str) -> None:
    """What the reference engine must serve for this workload, checked before the clock (the simulated and
    the started engine alike): its LoRA adapters, and images only on a vision-language model."""
    check_lora(spec, cfg, where)
    media = [c.media for c in spec.classes if c.media is not None]
    if any(m.audio_ms is not None for m in media):
        raise UsageError(f"the workload sends audio; {where} prices no audio encoder: measure audio on a real server")
    if any(m.sends_images for m in media) and cfg.shape().vision is None:
        raise UsageError(
            f"the workload sends images; {where}'s model {cfg.model} takes none: --engine-model qwen2.5-vl-7b, "
            "qwen3-vl-8b or llava-1.5-7b (or a vision-language config.json)"
        )


def check_lora(spec: WorkloadSpec, cfg: EngineConfig, where: str) -> None:
    """A workload that names LoRA adapters needs an engine that serves them (vLLM answers 404 to a model it
    does not serve): UsageError before the clock, for the simulated and the started engine alike."""
    if spec.lora is not None and not cfg.enable_lora:
        raise UsageError(
            f"the workload sends its requests to {len(spec.lora.adapters)} LoRA adapters; {where} serves none: "
            "add --enable-lora (and --max-loras N for N adapters on the GPU at once)"
        )


def _stop_engine(proc, run_dir: str | None) -> None:
    """Stop the auto-started engine; its log goes into the run directory as engine.log."""
    from ..engine.serve.launch import release_cpus

    proc.stop()
    release_cpus()
    if run_dir and os.path.isdir(run_dir):
        try:
            proc.copy_log(os.path.join(run_dir, "engine.log"))
        except OSError:
            pass  # a full or read-only results disk: the run's own error says so
    proc.close()


def _connect(target: Target, spec: WorkloadSpec, on_stage=None):
    """The client config for a reachable target (TargetError otherwise), after the preflight (the
    model against /v1/models, one tiny request; client/target.py) unless target.preflight is False."""
    from ..client.config import ClientConfig, resolve_endpoint, workload_fields
    from ..client.target import check_reachable, preflight, resolve_model
    from ..errors import warn

    ccfg = ClientConfig(
        **workload_fields(spec, resolve_endpoint(target.endpoint, spec.endpoint)),
        base_url=target.base_url,
        pool_batch=target.pool_batch,
        model=target.model or "",
        api_key=target.api_key,
        ignore_eos=spec.ignore_eos and target.ignore_eos,
        min_tokens=target.min_tokens,
        timeout_s=target.timeout_s,
        idle_timeout_s=target.idle_timeout_s,
        client=target.client,
        keepalive_s=target.keepalive_s,
        kernel_stamps=target.kernel_stamps,
        replica_header=target.replica_header,
    )
    if target.session_header:
        ccfg = replace(ccfg, session_header=target.session_header)
    if target.preflight:
        stage(on_stage, f"preflight: {ccfg.base_url}/v1/models and one tiny request to {ccfg.endpoint} ...")
        try:
            model, notes = asyncio.run(preflight(ccfg))
        except TargetError as e:
            raise TargetError(scrub(str(e), (target.api_key,))) from None
        for note in notes:
            warn(scrub(note, (target.api_key,)))
        return replace(ccfg, model=model)
    why = asyncio.run(check_reachable(target.base_url))
    if why:
        raise TargetError(f"target unreachable: {scrub(why, (target.api_key,))}")
    return replace(ccfg, model=target.model or asyncio.run(resolve_model(target.base_url, target.api_key)))


def check_needs(spec: WorkloadSpec, cfg: EngineConfig | None, api: str | None, where: str) -> None:
    """Warn, before the run, about what the workload needs of the server ([requires], priority lanes)
    that the engine started (cfg) does not do, or that an external server cannot be asked about.
    api: the API the client speaks (ClientConfig.api: --endpoint-type, else the path's), None simulated."""
    from ..errors import warn
    from ..workloads.spec import unmet

    known = {"endpoint": api}
    if cfg is not None:
        known |= {"scheduling_policy": cfg.scheduling_policy, "prefix_caching": cfg.enable_prefix_caching}
    for line in unmet(spec.needs(), known, where):
        warn(line)


def _check_run_options(target: Target, max_concurrency, workers, grace_s) -> None:
    from ..runner import CLIENTS

    check_all(
        {
            "max_concurrency": max_concurrency,
            "workers": workers,
            "grace_period": grace_s,
            "timeout": target.timeout_s,
            "idle_timeout": target.idle_timeout_s,
            "keepalive": target.keepalive_s,
        }
    )
    if target.client not in CLIENTS:
        raise UsageError(f"client {target.client!r} is not one of {', '.join(CLIENTS)}")


@contextlib.contextmanager
def _server(target: Target, engine: EngineConfig | None, pin: bool, on_stage, spec: WorkloadSpec | None = None):
    """(the target, the engine config) for a run: the server given, or the reference engine started on a
    free loopback port (config `engine`), stopped afterwards with its log kept as the run directory's
    engine.log (set logs["dir"] once the directory exists)."""
    if target.base_url is not None:
        yield target, None, {}
        return
    cfg = resolve_engine(engine)
    if spec is not None:
        check_engine(spec, cfg, "the engine started for this run")
    proc, logs = _start_engine(cfg, pin, on_stage, adapters(spec) if spec else ()), {"dir": None}
    try:
        yield replace(target, base_url=proc.base_url), cfg, logs
    finally:
        _stop_engine(proc, logs["dir"])


def _server_info(ccfg, cfg) -> dict:
    """run.json's server block: what the target says about itself (client/serverinfo.py)."""
    from ..client.serverinfo import server_info
    from ..version import __version__

    info = asyncio.run(server_info(ccfg.base_url, ccfg.api_key, ccfg.model))
    if cfg is not None:  # the reference engine started for this run
        info = {"name": "goodbench", "version": __version__} | info
    return info


def _gate_meta(gate, target_attainment: float, workload_gate: dict | None) -> dict:
    """run.json's record of how the run is judged: the gate (a gating.GateSpec; default: the workload's
    [gate] with target_attainment where it was given), kept so every later judge of the run (report,
    gate) uses it."""
    from ..gating import spec_from_options

    check_all({"target_attainment": target_attainment})
    if gate is None:
        given = None if target_attainment == TARGET_ATTAINMENT else target_attainment
        gate = spec_from_options(workload_gate, min_attainment=given)
    return {"target_attainment": gate.min_attainment, "gate": gate.to_table()}


def _open_run(
    spec, plan, ccfg, cfg, tok, result_dir: str, run_id: str | None, max_concurrency, labels, judged: dict, fleet=()
) -> RunDir:
    """The run directory of a live run: its meta from the plan, the target (and the replicas behind it, where
    named: one that serves nothing still counts in the balance, metrics/replicas.fleet_names) and the engine."""
    cap = max_concurrency or (spec.session.max_concurrent if plan.sessions else None) or None
    target = {"base_url": scrub_url(ccfg.base_url), "endpoint": ccfg.endpoint, "model": ccfg.model}
    target |= {"replicas": list(fleet)} if fleet else {}
    meta = plan_meta(
        spec,
        plan,
        "closed" if plan.closed else "open",
        run_id=run_id or "",
        target=target,
        engine=cfg.to_dict() if cfg else None,
        tokenizer=tok.name,
        max_concurrency=cap,
        labels=dict(labels or {}),
        server=_server_info(ccfg, cfg),
        **judged,
    )
    meta.label += f",maxconc={cap}" if cap else ""
    return RunDir.open(result_dir, meta)


def _telemetry(sources: list[str] | None, workers: int) -> list[str]:
    """--gpu-telemetry's sources as the run reads them, each checked now (runner/telemetry.check_sources)."""
    from ..runner.telemetry import check_sources

    if sources and workers > 1:
        raise UsageError("--gpu-telemetry samples in one load-generator process: leave --workers at 1")
    return check_sources(list(sources)) if sources else []


def _workers(target: Target) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """--worker-metrics as (names, /metrics URLs), every worker checked now (runner/workermetrics.py)."""
    from ..runner.workermetrics import check_workers, parse_workers

    if not target.worker_metrics:
        return (), ()
    names, urls = parse_workers(target.worker_metrics)
    check_workers(names, urls)
    if target.replicas and set(target.replicas) != set(names):
        raise UsageError("--replicas and --worker-metrics name different replicas: name each worker once, the same")
    return names, urls


def _plan(spec, ccfg, tok, on_stage) -> tuple:
    """The workload's plan, and with a controlled hit rate its priming phase sent now, before the run directory
    and the clock (runner/priming.py): (plan, {"priming": what was sent} or {})."""
    stage(on_stage, "building workload...")
    plan = build_plan(spec, tok)
    if not plan.primes:
        return plan, {}
    from ..runner.priming import prime

    stage(on_stage, f"priming: {len(plan.primes)} shared prefixes sent once before the clock ...")
    return plan, {"priming": prime(ccfg, plan.primes, tok)}


def _attribute(rd: RunDir, names: tuple[str, ...], urls: tuple[str, ...]) -> None:
    """After the run: each request's replica from the workers' counters, written into its record, and how sure
    that was into run.json's target (the summary's replicas block shows it)."""
    from ..runner.workermetrics import attribute_run

    if not names:
        return
    rd.store.close()
    if rd.store.write_error is None:
        stats = attribute_run(rd.dir, names)
        rd.meta.target["worker_metrics"] = {"workers": dict(zip(names, map(scrub_url, urls))), "attribution": stats}


def run(
    workload,
    target: Target | str | None = None,
    *,
    engine: EngineConfig | None = None,
    result_dir: str = "results",
    run_id: str | None = None,
    tokenizer: str | None = None,
    max_concurrency: int | None = None,
    workers: int = 1,
    scrape_metrics: bool | None = None,
    grace_s: float = 5.0,
    pin: bool = True,
    labels: dict | None = None,
    on_stage=None,
    live=None,
    target_attainment: float = TARGET_ATTAINMENT,
    gate=None,
    gpu_telemetry: list[str] | None = None,
) -> Run:
    """Drive the workload at an OpenAI-compatible server on the real clock. target: a Target, a base
    URL, or None to start the reference engine (`engine`, default EngineConfig()) on a free loopback
    port for the run. labels: {key: value} kept in run.json and the history catalogue. live(progress,
    fn): wraps the timed part for a progress display; fn(on_tick). target_attainment: the attainment
    run.json records as the pass mark (the console's and `goodbench report`'s). gpu_telemetry: DCGM exporter
    URLs, "nvml" or "amdsmi": GPU power sampled every second into the summary's energy block (checked first)."""
    from .. import tokenizer as tokmod
    from ..client.lag import client_lag
    from ..runner import Progress, RunOptions, run_plan

    spec, target = as_workload(workload), _target(target)
    judged = _gate_meta(gate, target_attainment, spec.gate)
    _check_run_options(target, max_concurrency, workers, grace_s)
    if spec.generator == "agent" and workers > 1:
        raise UsageError("agent jobs run in one load-generator process: leave --workers at 1")
    if run_id:
        RunDir.check_free(result_dir, run_id)
    gpus = _telemetry(gpu_telemetry, workers)  # checked before any server starts
    names, urls = _workers(target)
    with _server(target, engine, pin, on_stage, spec) as (target, cfg, logs):
        ccfg = _connect(target, spec, on_stage)
        check_needs(spec, cfg, ccfg.api, "the engine started for this run" if cfg else ccfg.base_url)
        tok = tokmod.load(tokenizer)
        plan, primed = _plan(spec, ccfg, tok, on_stage)
        fleet = target.replicas or names  # one that serves nothing still counts in the balance
        rd = _open_run(spec, plan, ccfg, cfg, tok, result_dir, run_id, max_concurrency, labels, judged | primed, fleet)
        logs["dir"] = rd.dir
        opts = RunOptions(max_concurrency, max(1, workers), grace_s, scrape_metrics, slo=spec.slo)
        opts.gpu_telemetry, opts.worker_metrics = tuple(gpus), urls
        rd.meta.gpu_telemetry = [scrub_url(g) for g in gpus] or None
        prog = Progress()

        def go(on_tick):
            return run_plan(plan, ccfg, rd, opts, tok, tokenizer, prog, on_tick)

        rd.meta.interrupted = live(prog, go) if live is not None else go(None)
        rd.meta.client_lag = client_lag(prog.lag_states)
        _attribute(rd, names, urls)
        return Run(rd.dir, rd.meta, rd.finish(), rd.meta.interrupted)


def _locust_can_run(spec: WorkloadSpec) -> None:
    """What locust cannot drive: agent job graphs, and a controlled hit rate's priming before the clock."""
    if spec.generator == "agent" or any(c.hit_rate is not None for c in spec.classes):
        raise UsageError(
            "agent jobs and a controlled hit rate (primed before the clock) run with goodbench's own client: "
            "leave out --via locust"
        )


def run_via_locust(
    workload,
    target: Target | str | None = None,
    *,
    engine: EngineConfig | None = None,
    result_dir: str = "results",
    run_id: str | None = None,
    users: int = 16,
    spawn_rate: float = 16.0,
    locust_workers: int = 0,
    open_loop: bool = False,
    min_attainment: float = TARGET_ATTAINMENT,
    api_key_env: str = "OPENAI_API_KEY",
    pin: bool = True,
    labels: dict | None = None,
    on_stage=None,
    gate=None,
) -> int:
    """The same workload under locust (one process, or a local master and N workers); the locust
    master writes the results directory. Returns its exit code (1: attainment below min_attainment).
    labels reach the master's run.json through $GOODBENCH_LABELS, which its process inherits."""
    from ..client.config import ClientConfig
    from ..history.provenance import labels_in_env
    from ..runner.via_locust import LocustRun, run_locust

    spec = as_workload(workload)
    _locust_can_run(spec)
    check_all({"users": users, "spawn_rate": spawn_rate, "locust_workers": locust_workers})
    judged = _gate_meta(gate, min_attainment, spec.gate)  # the master judges with it (its exit code)
    if run_id:
        RunDir.check_free(result_dir, run_id)  # before any load: the master could not write it afterwards
    with _server(_target(target), engine, pin, on_stage) as (target, cfg, _logs), labels_in_env(labels):
        if target.preflight:
            target = replace(target, model=_connect(target, spec, on_stage).model)
        key = os.environ.get(api_key_env) or None
        server = _server_info(ClientConfig(base_url=target.base_url, model=target.model, api_key=key), cfg)
        # the locust master writes run.json from this block: how it drives the load, and the engine started
        # for it (history/identity.py keeps both in the run's identity)
        loop = "open" if open_loop else "closed"
        server |= {"driven_as": {"via": "locust", "loop": loop, "users": users, "workers": locust_workers}}
        server |= {"engine": cfg.to_dict()} if cfg is not None else {}
        return run_locust(
            spec,
            LocustRun(
                base_url=target.base_url,
                result_dir=result_dir,
                run_id=run_id or new_run_id("locust"),
                users=users,
                spawn_rate=spawn_rate,
                workers=locust_workers,
                open_loop=open_loop,
                min_attainment=judged["target_attainment"],
                gate=judged["gate"],
                api_key_env=api_key_env,
                model=target.model,
                endpoint=target.endpoint,
                server=server,
            ),
        )
