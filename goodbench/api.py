"""The public Python API: what `goodbench/__init__.py` exports and every CLI command calls.

    import goodbench as gb
    wl = gb.load_workload("hol-stress", num_prompts=100)
    run = gb.simulate(wl, gb.EngineConfig(max_num_batched_tokens=2048))
    print(run.summary["slo_attainment"], gb.gate(run).verdict)

Each function does one whole job (a run, a simulation, a sweep, a verdict) and returns typed results;
rendering and exit codes stay in the CLI."""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, replace

from .columnar import RunArrays
from .engine.config import EngineConfig
from .errors import RunDirError, TargetError, UsageError
from .gating import GateResult, GateSpec, evaluate
from .limits import check_all
from .records import RequestRecord, RunMeta
from .rundir import RunDir
from .store import load_arrays, load_meta, new_run_id
from .workloads import WorkloadOptions, WorkloadSpec, resolve_workload


@dataclass
class Run:
    """A finished (or interrupted) run: its directory, metadata and summary."""

    dir: str
    meta: RunMeta
    summary: dict | None
    interrupted: bool = False

    def arrays(self) -> RunArrays:
        """The run as flat arrays (reads the columns/ sidecar, or records.jsonl once)."""
        return load_arrays(self.dir)

    def records(self) -> list[RequestRecord]:
        from .store import load

        return load(self.dir).records


def load_workload(source: str | WorkloadSpec | None = None, **options) -> WorkloadSpec:
    """A workload file or a built-in workload's name ("hol-stress"; `goodbench workloads` lists them), or,
    with source None, the built-in `dataset_name` (default random), with the
    command line's overrides as keyword arguments: num_prompts, request_rate, duration, concurrency,
    goodput ("ttft:500 tpot:50"), seed, ... (the fields of workloads.WorkloadOptions)."""
    if isinstance(source, WorkloadSpec):
        if options:
            raise UsageError("overrides apply to workload files; use dataclasses.replace on a WorkloadSpec")
        return source
    try:
        opts = WorkloadOptions(workload=source, **options)
    except TypeError as e:
        raise UsageError(f"load_workload: {e}") from None
    return resolve_workload(opts)


def _workload(w) -> WorkloadSpec:
    return w if isinstance(w, WorkloadSpec) else load_workload(w)


def simulate(workload, engine: EngineConfig | None = None, *, result_dir: str = "results",
             run_id: str | None = None, tokenizer: str | None = None, step_trace: bool = False,
             cluster=None, prices: dict | None = None, on_stage=None) -> Run:
    """The workload through the reference engine in virtual time: a run directory like `run`'s, with
    a `simulation` block (wall time, steps, preemptions, speed-up) and a `cost` block in its summary.
    cluster: an engine.layout.ClusterSpec (replicas behind a router, or prefill/decode instances);
    prices: $ per GPU-hour overrides by tier (engine.prices)."""
    from . import tokenizer as tokmod
    from .analysis.knobs import chunked_prefill_note
    from .engine.prices import price_table
    from .engine.virtual import simulate as simulate_plan
    from .workloads import build_plan

    spec = _workload(workload)
    cfg = (engine or EngineConfig()).resolved()
    tok = tokmod.load(tokenizer, lazy=True)  # a simulation counts no tokens itself
    _stage(on_stage, "building workload...")
    plan = build_plan(spec, tok)
    layout = cluster if cluster is not None and cluster.many else None
    gpus = layout.gpus(cfg) if layout else {cfg.gpu: cfg.tensor_parallel_size}
    rd = RunDir.open(result_dir, RunMeta(
        run_id=run_id or "", label=("sessions:" if plan.sessions else "") + plan.arrival.label,
        target={"base_url": "simulated", "endpoint": "", "model": cfg.model},
        engine=cfg.to_dict() | ({"cluster": layout.to_dict()} if layout else {}),
        workload=spec.to_dict(), workload_hash=spec.hash(), slo=spec.slo, seed=spec.seed, tokenizer=tok.name,
        mode="simulate", requested_rate=plan.arrival.mean_rate if not plan.closed else None,
        planned_requests=plan.planned, expected_prefix_reuse=plan.expected_reuse(), gpus=gpus,
        prices=price_table(prices)), prefix="sim")
    where = f"{layout.label()} " if layout else ""
    _stage(on_stage, f"simulating {len(plan.requests)} requests on {cfg.model} / {where}{cfg.gpu} ...")
    t = time.perf_counter()
    out = simulate_plan(cfg, plan, layout,
                        trace_path=os.path.join(rd.dir, "step_trace.jsonl") if step_trace else None)
    wall = time.perf_counter() - t
    rd.append_many(out.records)
    largest = max((r.prompt_tokens for r in plan.requests), default=0)
    note = None if layout else chunked_prefill_note(cfg, out.stats["max_step_tokens"], largest)
    rd.meta.engine_stats = out.stats | {"wall_s": wall, "notes": [note] if note else []}
    summary = rd.finish(records=out.records)  # summarised in memory: no read-back of records.jsonl
    return Run(rd.dir, rd.meta, summary)


@dataclass
class Target:
    """Where a run sends its requests (api.run fills what is not given)."""

    base_url: str | None = None     # None: start the reference engine
    endpoint: str | None = None     # /v1/completions, /v1/chat/completions, or completions | chat
    model: str | None = None        # None: the server's first /v1/models entry
    api_key: str | None = None      # never written anywhere
    ignore_eos: bool = True
    min_tokens: bool = False
    timeout_s: float = 600.0
    idle_timeout_s: float = 60.0
    client: str = "lean"            # lean (asyncio + httptools) | aiohttp (the baseline)
    keepalive_s: float = 4.0        # never reuse a connection idle longer than this


def _stage(on_stage, text: str) -> None:
    if on_stage is not None:
        on_stage(text)


def _start_engine(cfg: EngineConfig, pin: bool, on_stage):
    from .engine.serve.launch import start_engine

    _stage(on_stage, f"starting the reference engine ({cfg.model} on {cfg.gpu}) ...")
    return start_engine(cfg, pin=pin)


def _stop_engine(proc, run_dir: str | None) -> None:
    """Stop the auto-started engine; its log goes into the run directory as engine.log."""
    from .engine.serve.launch import release_cpus

    proc.stop()
    release_cpus()
    if run_dir and os.path.isdir(run_dir):
        proc.copy_log(os.path.join(run_dir, "engine.log"))
    proc.close()


def _connect(target: Target, spec: WorkloadSpec):
    """The client config for a reachable target (TargetError otherwise)."""
    from .client.config import ClientConfig, resolve_endpoint
    from .client.target import check_reachable, resolve_model

    why = asyncio.run(check_reachable(target.base_url))
    if why:
        raise TargetError(f"target unreachable: {why}")
    model = target.model or asyncio.run(resolve_model(target.base_url, target.api_key))
    header = {"session_header": spec.session.header} if spec.session else {}
    return ClientConfig(**header, base_url=target.base_url, endpoint=resolve_endpoint(target.endpoint, spec.endpoint),
                        model=model, api_key=target.api_key, ignore_eos=spec.ignore_eos and target.ignore_eos,
                        min_tokens=target.min_tokens, timeout_s=target.timeout_s,
                        idle_timeout_s=target.idle_timeout_s, client=target.client, keepalive_s=target.keepalive_s)


def run(workload, target: Target | str | None = None, *, engine: EngineConfig | None = None,
        result_dir: str = "results", run_id: str | None = None, tokenizer: str | None = None,
        max_concurrency: int | None = None, workers: int = 1, scrape_metrics: bool | None = None,
        grace_s: float = 5.0, pin: bool = True, on_stage=None, live=None) -> Run:
    """Drive the workload at an OpenAI-compatible server on the real clock. target: a Target, a base
    URL, or None to start the reference engine (`engine`, default EngineConfig()) on a free loopback
    port for the run. live(progress, fn): wraps the timed part for a progress display; fn(on_tick)."""
    from . import runner, tokenizer as tokmod
    from .workloads import build_plan

    spec = _workload(workload)
    target = Target(base_url=target) if isinstance(target, str) or target is None else target
    check_all({"max_concurrency": max_concurrency, "workers": workers, "grace_period": grace_s,
               "timeout": target.timeout_s, "idle_timeout": target.idle_timeout_s, "keepalive": target.keepalive_s})
    if target.client not in runner.CLIENTS:
        raise UsageError(f"client {target.client!r} is not one of {', '.join(runner.CLIENTS)}")
    if run_id:
        RunDir.check_free(result_dir, run_id)
    cfg = (engine or EngineConfig()).resolved() if target.base_url is None else None
    proc, rd = None, None
    if cfg is not None:
        proc = _start_engine(cfg, pin, on_stage)
        target = replace(target, base_url=proc.base_url)
    try:
        ccfg = _connect(target, spec)
        tok = tokmod.load(tokenizer)
        _stage(on_stage, "building workload...")
        plan = build_plan(spec, tok)
        cap = max_concurrency or (spec.session.max_concurrent if plan.sessions else None) or None
        label = ("sessions:" if plan.sessions else "") + plan.arrival.label + (f",maxconc={cap}" if cap else "")
        rd = RunDir.open(result_dir, RunMeta(
            run_id=run_id or "", label=label, target={"base_url": ccfg.base_url, "endpoint": ccfg.endpoint,
                                                "model": ccfg.model},
            engine=cfg.to_dict() if cfg else None, workload=spec.to_dict(), workload_hash=spec.hash(), slo=spec.slo,
            seed=spec.seed, tokenizer=tok.name, mode="closed" if plan.closed else "open",
            requested_rate=plan.arrival.mean_rate if not plan.closed else None, max_concurrency=cap,
            planned_requests=plan.planned, expected_prefix_reuse=plan.expected_reuse()))
        opts = runner.RunOptions(max_concurrency=max_concurrency, workers=max(1, workers),
                                 scrape_metrics=scrape_metrics, slo=spec.slo, grace_s=grace_s)
        prog = runner.Progress()
        go = lambda on_tick: runner.run_plan(plan, ccfg, rd, opts, tok, tokenizer, prog, on_tick)  # noqa: E731
        interrupted = live(prog, go) if live is not None else go(None)
        rd.meta.interrupted = interrupted
        summary = rd.finish()
        return Run(rd.dir, rd.meta, summary, interrupted)
    finally:
        if proc is not None:
            _stop_engine(proc, rd.dir if rd else None)


def run_via_locust(workload, target: Target | str | None = None, *, engine: EngineConfig | None = None,
                   result_dir: str = "results", run_id: str | None = None, users: int = 16,
                   spawn_rate: float = 16.0, locust_workers: int = 0, open_loop: bool = False,
                   min_attainment: float = 0.95, api_key_env: str = "OPENAI_API_KEY", pin: bool = True,
                   on_stage=None) -> int:
    """The same workload under locust (one process, or a local master and N workers); the locust
    master writes the results directory. Returns its exit code (1: attainment below min_attainment)."""
    from .runner.via_locust import LocustRun, run_locust

    spec = _workload(workload)
    target = Target(base_url=target) if isinstance(target, str) or target is None else target
    run_id = run_id or new_run_id("locust")
    proc = None
    if target.base_url is None:
        proc = _start_engine((engine or EngineConfig()).resolved(), pin, on_stage)
        target = replace(target, base_url=proc.base_url)
    try:
        return run_locust(spec, LocustRun(base_url=target.base_url, result_dir=result_dir, run_id=run_id,
                                          users=users, spawn_rate=spawn_rate, workers=locust_workers,
                                          open_loop=open_loop, min_attainment=min_attainment,
                                          api_key_env=api_key_env, model=target.model, endpoint=target.endpoint))
    finally:
        if proc is not None:
            _stop_engine(proc, None)


def load_run(run_dir: str) -> Run:
    """A results directory: its run.json and summary.json (None for an unfinished or imported run)."""
    from .store import load_summary

    meta = load_meta(run_dir)
    return Run(run_dir, meta, load_summary(run_dir), bool(meta.interrupted))


def summarize(run: Run | str, slo: dict | str | None = None, ci: bool = True) -> dict:
    """The summary of a run (a Run or a run directory), recomputed from what its directory holds (the
    summary the run wrote, unless slo or ci differ); slo: judge against this SLO ("ttft:500 tpot:50" or
    a dict) instead of the run's own."""
    from .records import parse_slo
    from .rundir import summarize_dir

    run_dir = run.dir if isinstance(run, Run) else run
    slo = parse_slo(slo) if isinstance(slo, (str, list)) else slo
    return summarize_dir(run_dir, slo=slo, ci=ci)


def _summary_of(x, slo: dict | None) -> dict:
    if isinstance(x, dict):
        return x
    if isinstance(x, Run) and x.summary is not None and slo is None:
        return x.summary
    return summarize(x, slo)


def _incomplete(x) -> str | None:
    from .store import incomplete

    if isinstance(x, dict):
        return None
    return incomplete(x.dir if isinstance(x, Run) else x)


def _workload_of(x) -> dict | None:
    """The workload a Run or run directory recorded (None for a summary dict: it does not say)."""
    if isinstance(x, Run):
        return x.meta.workload
    return load_meta(x).workload if isinstance(x, str) else None


def gate(run: Run | str | dict, spec: GateSpec | None = None, *, slo: dict | str | None = None,
         baseline: Run | str | dict | None = None, allow_incomplete: bool = False,
         allow_different_workloads: bool = False) -> GateResult:
    """Pass/fail a run (a Run, a run directory or a summary dict) against the gate spec (default: SLO
    attainment >= 95%). slo: judge against this SLO instead of the run's own. A run directory that
    cannot be read, holds an incomplete run (killed, interrupted, records cut short; unless
    allow_incomplete), or a baseline that ran a different workload (unless allow_different_workloads),
    gives a result that cannot be judged (exit code 2), not an exception."""
    from .records import parse_slo
    from .workloads.identity import difference

    slo = parse_slo(slo) if isinstance(slo, (str, list)) else slo
    try:
        for which, x in (("", run), ("baseline: ", baseline)):
            why = None if allow_incomplete or x is None else _incomplete(x)
            if why:
                return GateResult([], False, f"cannot judge an incomplete run: {which}{why} "
                                             "(--allow-incomplete judges the records it holds)")
        summary = _summary_of(run, slo)
        base = _summary_of(baseline, slo or summary.get("slo")) if baseline is not None else None
        differ = difference(_workload_of(baseline), _workload_of(run)) if baseline is not None else None
    except RunDirError as e:
        return GateResult([], False, str(e))
    if differ and not allow_different_workloads:
        return GateResult([], False, differ)
    return evaluate(summary, spec or GateSpec(), base)


def compare(base: Run | str, new: Run | str, *, slo: dict | str | None = None, level: float = 0.95,
            margin: float = 0.0, seed: int = 0, allow_different_workloads: bool = False) -> dict:
    """BASE vs NEW: per-metric deltas with bootstrap intervals of the difference, Mann-Whitney U
    p-values and a verdict per metric (analysis.compare). Runs of different workloads are refused
    (UsageError) unless allow_different_workloads; the result then carries the difference as a warning."""
    from .analysis.compare import compare as compare_columns
    from .metrics import RequestMetrics, measured_arrays, summarize as summarize_columns
    from .records import parse_slo
    from .workloads.identity import difference

    runs = [load_arrays(r.dir if isinstance(r, Run) else r) for r in (base, new)]
    differ = difference(runs[0].meta.workload, runs[1].meta.workload)
    if differ and not allow_different_workloads:
        raise UsageError(differ)
    slo = parse_slo(slo) if isinstance(slo, (str, list)) else slo
    slo = slo or runs[0].meta.slo or runs[1].meta.slo
    cs = [RequestMetrics(measured_arrays(r)) for r in runs]
    sums = [summarize_columns(r, slo=slo, ci=False, prepared=c) for r, c in zip(runs, cs)]
    out = compare_columns(cs[0], cs[1], sums[0], sums[1], level=level, margin=margin, seed=seed)
    if differ:
        out["warnings"].insert(0, differ.split("; pass")[0])
    out["incomplete"] = {}
    for which, r in (("base", base), ("new", new)):
        why = _incomplete(r)
        if why:
            out["incomplete"][which] = why
            out["warnings"].insert(0, f"the {which} run is incomplete: {why}")
    return out


@dataclass
class SweepOutcome:
    """A finished sweep: one row per cell (sweep.csv), the best cell per tier, and what was written."""

    dir: str
    rows: list[dict]
    best: dict
    wall_s: float
    plots: list[str]
    report: str | None
    plots_missing: bool = False  # matplotlib is not installed
    cheapest: dict | None = None  # the cell with the lowest $ per million output tokens within the SLO


def prepare_sweep(workload, gpus: list[str], params: dict, *, engine: EngineConfig | None = None,
                  result_dir: str = "results", sweep_id: str | None = None, tokenizer: str | None = None,
                  cluster=None, prices: dict | None = None, layouts: list[str] | None = None, on_stage=None):
    """Validate the grid (every cell's config and layout) and build the shared plan: an
    analysis.sweep.SweepSetup. cluster: the engine.layout.ClusterSpec every cell runs on; layouts:
    per-cell instance layouts ("4x", "1P:3D", ...: analysis.grid.layouts_for(N) compares N GPUs
    colocated and split)."""
    from . import tokenizer as tokmod
    from .analysis.grid import check_cells, grid
    from .analysis.sweep import require_slo, setup
    from .engine.layout import parse_layout
    from .workloads import build_plan

    spec = _workload(workload)
    require_slo(spec)
    base = replace(engine or EngineConfig(), gpu=gpus[0])
    for lay in layouts or ():
        parse_layout(lay, cluster)
    cells = grid(gpus, params, layouts)
    check_cells(base, cells)
    tok = tokmod.load(tokenizer, lazy=True)
    _stage(on_stage, "building workload...")
    return setup(spec, build_plan(spec, tok), base, cells, result_dir, sweep_id or new_run_id("sweep"), gpus, params,
                 cluster, prices)


def sweep(s, backend=None, *, plots: bool = True, on_done=None) -> SweepOutcome:
    """Run every cell of a prepared sweep on the backend (analysis.backends: Simulated(jobs) by default,
    in parallel processes, or Live(server_cmd, startup_timeout_s), cells one after another), then write
    sweep.csv, sweep.json, the plots and report.html."""
    from .analysis.backends import Simulated
    from .analysis.sweep import run_sweep
    from .report.html import sweep_report

    t = time.perf_counter()
    result = run_sweep(s, backend or Simulated(), on_done)
    wall = time.perf_counter() - t
    pngs, missing = [], False
    if plots:
        try:
            from .report.sweepfigures import sweep_plots

            pngs = sweep_plots(result.rows, s.out_dir)
        except ImportError:
            missing = True
    return SweepOutcome(s.out_dir, result.rows, result.best, wall, pngs, sweep_report(s.out_dir), missing,
                        result.cheapest)


def min_gpus(s, *, target: float = 0.9, max_replicas: int = 16, on_probe=None) -> list[dict]:
    """Per cell of a prepared sweep: the fewest replicas (and GPUs) whose SLO attainment at the workload's
    rate reaches target, with their cost (analysis.capacity; writes min_gpus.json)."""
    from .analysis.capacity import min_gpus as search

    return search(s, target, max_replicas, on_probe)


def max_rate(s, backend=None, *, target: float = 0.9, max_probes: int = 16, on_start=None, on_probe=None,
             on_result=None, plots: bool = True) -> list[dict]:
    """DistServe's max goodput rate per cell of a prepared sweep (or once, on a backends.External
    server), written to max_rate.json: the highest arrival rate whose SLO attainment stays >= target.
    Each simulated cell runs on its instance layout and also reports its GPUs and max rate per GPU;
    cells that differ in layout (--compare-disaggregation, --layouts) get max_rate_per_gpu.png."""
    from .analysis.backends import Simulated
    from .analysis.maxrate import search_max_rates

    results = search_max_rates(s, backend or Simulated(), target, max_probes, on_start=on_start, on_probe=on_probe,
                               on_result=on_result)
    if plots:
        try:
            from .report.sweepfigures import max_rate_plot

            max_rate_plot(results, s.out_dir)
        except ImportError:
            pass
    return results


def advise(engine: EngineConfig, ttft_slo_ms: float, p95_input: int, *, concurrency: int = 32,
           context: int = 1024, min_chunk: int = 256, time_per_chunk_ms: float | None = None):
    """Chunk-size advice from the memory ceiling and the TTFT SLO (analysis.advise.Advice)."""
    from .analysis.advise import advise as advise_chunk

    return advise_chunk(engine, ttft_slo_ms, p95_input, concurrency, context, min_chunk,
                        time_per_chunk_ms=time_per_chunk_ms)


def check_advice(a, engine: EngineConfig, ttft_slo_ms: float, tpot_slo_ms: float | None = None, *,
                 num_prompts: int = 400, request_rate: float = 4.0, jobs: int = 0) -> list[dict]:
    """The advice checked on a simulated sweep of chunk sizes (rows with the long class's TTFT)."""
    from . import tokenizer as tokmod
    from .analysis.advise import check, check_workload

    spec = check_workload(a, ttft_slo_ms, tpot_slo_ms, num_prompts, request_rate)
    return check(a, engine, spec, tokmod.load(None, lazy=True), jobs)
