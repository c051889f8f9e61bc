"""Sweeps: a grid of GPU tiers x engine knobs prepared once (the plan every cell shares), run on a
backend (simulated, or live servers), DistServe's max goodput rate per cell, the fewest GPUs that meet
the SLO, and chunk-size advice checked on the simulator."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from ..engine.config import EngineConfig
from ..errors import UsageError
from ..limits import TARGET_ATTAINMENT
from ..store import new_run_id
from ..workloads import build_plan
from .common import as_workload, stage
from .enginefiles import with_files


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


def _profiles_server(engine: EngineConfig, gpus: list[str], params: dict) -> list[str]:
    """The tiers to sweep: a calibration profile that names its server is that one server, so its GPU is
    the only tier and its hardware is not a knob to sweep."""
    from ..engine.profile import SERVER_KEYS, server

    for gpu in gpus:  # each tier named is a GPU the user set: refused when the profile's server is another
        replace(engine, gpu=gpu).check_server()
    prof = engine.profile()
    hw = server(prof.engine) if prof else {}
    if not hw:
        return gpus
    swept = sorted(({"calibration"} | set(SERVER_KEYS)) & set(params))
    if len(set(gpus)) > 1 or swept:
        what = f"GPU tiers ({', '.join(gpus)})" if len(set(gpus)) > 1 else f"--param {', '.join(swept)}"
        raise UsageError(
            f"a calibration profile is one server ({', '.join(f'{k} {v}' for k, v in hw.items())}): sweep its "
            f"knobs, not {what}"
        )
    return [hw.get("gpu", gpus[0])]


def prepare_sweep(
    workload,
    gpus: list[str],
    params: dict,
    *,
    engine: EngineConfig | None = None,
    result_dir: str = "results",
    sweep_id: str | None = None,
    tokenizer: str | None = None,
    cluster=None,
    prices: dict | None = None,
    layouts: list[str] | None = None,
    labels: dict | None = None,
    on_stage=None,
    target_attainment: float = TARGET_ATTAINMENT,
    gpu_telemetry: list[str] | None = None,
    electricity: dict | None = None,
):
    """Validate the grid (every cell's config and layout) and build the shared plan: an
    analysis.sweep.SweepSetup. gpus: the tiers ([]: the engine's own; a tier named that a calibration
    profile's server contradicts is refused, as `--gpu` is). cluster: the engine.layout.ClusterSpec every cell runs on; layouts:
    per-cell instance layouts ("4x", "1P:3D", ...: analysis.grid.layouts_for(N) compares N GPUs
    colocated and split); labels: {key: value} on every cell's run (docs/history.md); target_attainment:
    what a cell must reach to meet the SLO; gpu_telemetry: live cells sample GPU power (run's --gpu-telemetry),
    checked here; electricity: {usd_per_kwh, facility_factor}, every cell's energy cost."""
    from .. import tokenizer as tokmod
    from ..analysis.grid import check_cells, grid
    from ..analysis.sweep import require_slo, setup
    from ..engine.layout import parse_layout

    spec = as_workload(workload)
    require_slo(spec)
    engine = with_files(engine or EngineConfig())
    gpus = _profiles_server(engine, list(gpus) or [engine.gpu], params)
    base = replace(engine, gpu=gpus[0])
    for lay in layouts or ():
        parse_layout(lay, cluster)
    cells = grid(gpus, params, layouts)
    check_cells(base, cells)
    tok = tokmod.load(tokenizer, lazy=True)
    stage(on_stage, "building workload...")
    prepared = setup(
        spec,
        build_plan(spec, tok),
        base,
        cells,
        result_dir,
        sweep_id or new_run_id("sweep"),
        gpus,
        params,
        cluster,
        prices,
        target_attainment,
    )
    from ..runner.telemetry import check_sources

    gpus = tuple(check_sources(list(gpu_telemetry))) if gpu_telemetry else ()
    return replace(prepared, labels=dict(labels or {}), gpu_telemetry=gpus, electricity=electricity)


def sweep(s, backend=None, *, plots: bool = True, on_done=None) -> SweepOutcome:
    """Run every cell of a prepared sweep on the backend (analysis.backends: Simulated(jobs) by default,
    in parallel processes, or Live(server_cmd, startup_timeout_s), cells one after another), then write
    sweep.csv, sweep.json, the plots and report.html."""
    from ..analysis.backends import Simulated
    from ..analysis.sweep import run_sweep
    from ..report.html import sweep_report

    t = time.perf_counter()
    result = run_sweep(s, backend or Simulated(), on_done)
    wall = time.perf_counter() - t
    pngs, missing = [], False
    if plots:
        try:
            from ..report.sweepfigures import sweep_plots

            pngs = sweep_plots(result.rows, s.out_dir)
        except ImportError:
            missing = True
    return SweepOutcome(
        s.out_dir, result.rows, result.best, wall, pngs, sweep_report(s.out_dir), missing, result.cheapest
    )


def min_gpus(s, *, target: float = TARGET_ATTAINMENT, max_replicas: int = 16, on_probe=None) -> list[dict]:
    """Per cell of a prepared sweep: the fewest replicas (and GPUs) whose SLO attainment at the workload's
    rate reaches target, with their cost (analysis.capacity; writes min_gpus.json)."""
    from ..analysis.capacity import min_gpus as search

    _open_loop(s, "--min-gpus")
    return search(s, target, max_replicas, on_probe)


def _open_loop(s, what: str) -> None:
    """A search over rates or replicas at the workload's rate needs open-loop arrivals."""
    if s.plan.closed:
        raise UsageError(f"{what} needs open-loop arrivals (a rate), not --concurrency")


def max_rate(
    s,
    backend=None,
    *,
    target: float = TARGET_ATTAINMENT,
    max_probes: int = 16,
    on_start=None,
    on_probe=None,
    on_result=None,
    plots: bool = True,
) -> list[dict]:
    """DistServe's max goodput rate per cell of a prepared sweep (or once, on a backends.External
    server), written to max_rate.json: the highest offered arrival rate (the probe schedule's own,
    `offered_rate`; `nominal_rate` the Poisson rate that drew it) whose SLO attainment stays >= target,
    held with 4x the requests (analysis.maxrate.find_max_rate).
    Each simulated cell runs on its instance layout and also reports its GPUs and max rate per GPU;
    cells that differ in layout (--compare-disaggregation, --layouts) get max_rate_per_gpu.png."""
    from ..analysis.backends import Simulated
    from ..analysis.maxrate import search_max_rates

    _open_loop(s, "--find-max-rate")
    results = search_max_rates(
        s, backend or Simulated(), target, max_probes, on_start=on_start, on_probe=on_probe, on_result=on_result
    )
    if plots:
        try:
            from ..report.sweepfigures import max_rate_plot

            max_rate_plot(results, s.out_dir)
        except ImportError:
            pass
    return results


def advise(
    engine: EngineConfig,
    ttft_slo_ms: float,
    p95_input: int,
    *,
    concurrency: int = 32,
    context: int = 1024,
    min_chunk: int = 256,
    time_per_chunk_ms: float | None = None,
):
    """Chunk-size advice from the memory ceiling and the TTFT SLO (analysis.advise.Advice)."""
    from ..analysis.advise import advise as advise_chunk

    return advise_chunk(
        with_files(engine), ttft_slo_ms, p95_input, concurrency, context, min_chunk, time_per_chunk_ms=time_per_chunk_ms
    )


def advice_traffic(
    workload, *, ttft_slo_ms: float | None = None, tpot_slo_ms: float | None = None, tokenizer: str | None = None
):
    """For `advise --workload`: the workload's TTFT SLO (ttft_slo_ms / tpot_slo_ms, when given, replace
    its thresholds) and its 95th-percentile prompt length -> (WorkloadSpec with that SLO, TTFT SLO ms,
    p95 prompt tokens)."""
    from .. import tokenizer as tokmod
    from ..analysis.advise import p95_prompt

    spec = as_workload(workload)
    ttft = ttft_slo_ms if ttft_slo_ms is not None else (spec.slo or {}).get("ttft")
    if ttft is None:
        raise UsageError(f"workload {spec.name} has no TTFT SLO: give --ttft-slo MS or --goodput ttft:MS")
    tpot = {"tpot": tpot_slo_ms} if tpot_slo_ms is not None else {}
    spec = replace(spec, slo=dict(spec.slo or {}) | {"ttft": ttft} | tpot)
    return spec, float(ttft), p95_prompt(build_plan(spec, tokmod.load(tokenizer, lazy=True)))


def check_advice(
    a,
    engine: EngineConfig,
    ttft_slo_ms: float,
    tpot_slo_ms: float | None = None,
    *,
    num_prompts: int = 400,
    request_rate: float = 4.0,
    jobs: int = 0,
    workload=None,
    tokenizer: str | None = None,
):
    """The advice settled on a simulated sweep of chunk sizes (analysis.advise.AdviceCheck: the budget the
    sweep's best-cell rule picks, its rows with the long class's TTFT, and whether the budget meets the
    TTFT SLO it was derived from). workload: check on this traffic (a WorkloadSpec, name or file, e.g.
    the one a sweep ran) instead of a synthetic mix of num_prompts requests at request_rate."""
    from .. import tokenizer as tokmod
    from ..analysis.advise import check, check_workload, settle

    if workload is not None:
        spec = as_workload(workload)
    else:
        spec = check_workload(a, ttft_slo_ms, tpot_slo_ms, num_prompts, request_rate)
    return settle(a, check(a, with_files(engine), spec, tokmod.load(tokenizer, lazy=True), jobs))


@dataclass
class FrontierOutcome:
    """A sweep over loads: each load's sweep, the frontier rows (frontier.csv), its caption and pareto.png."""

    dir: str
    rows: list[dict]
    caption: str
    plot: str | None
    sweeps: list[SweepOutcome]
    wall_s: float
    report: str | None = None  # report.html at the top: the caption, pareto.png, every point, each load's report


def frontier(
    kind: str,
    loads: list[tuple[float, object]],
    gpus: list[str],
    params: dict,
    *,
    backend=None,
    plots: bool = True,
    result_dir: str = "results",
    sweep_id: str | None = None,
    on_load=None,
    **prepare,
) -> FrontierOutcome:
    """The frontier view: the same grid at each load (kind "concurrency" or "rate"; loads: (value, workload with
    that load)), each a sweep under <sweep>/load-<c4|r2>/, then frontier.csv, frontier.json and pareto.png at the
    top (analysis/frontier.py). prepare: prepare_sweep's other arguments (engine, tokenizer, prices, ...)."""
    import os

    from ..analysis.frontier import frontier_rows, load_label, mark

    t = time.perf_counter()
    root = os.path.join(result_dir, sweep_id or new_run_id("sweep"))
    setups = [
        (
            value,
            prepare_sweep(spec, gpus, params, result_dir=root, sweep_id=f"load-{load_label(kind, value)}", **prepare),
        )
        for value, spec in loads
    ]  # every load's grid checked before any cell runs
    outs, rows = [], []
    for value, s in setups:
        if on_load:
            on_load(load_label(kind, value), len(s.cells))
        out = sweep(s, backend, plots=plots)
        outs.append(out)
        rows += frontier_rows(kind, value, out.rows)
    mark(rows)
    slo, name = setups[0][1].slo, setups[0][1].spec.name
    meta = {"kind": kind, "loads": [v for v, _ in loads], "slo": slo}
    text, plot, report = frontier_files(rows, root, meta, f"{name}: throughput per GPU vs interactivity", plots)
    return FrontierOutcome(root, rows, text, plot, outs, time.perf_counter() - t, report)


def frontier_files(rows: list[dict], out_dir: str, meta: dict, title: str, plots: bool = True, note: str = ""):
    """A frontier's files in out_dir (frontier.csv and .json, pareto.png, report.html) from its marked rows:
    (caption, the figure's path or None, the report's path). meta["slo"]'s TPOT draws the floor; note: said after
    the caption."""
    from ..analysis.frontier import tpot_floor, write_frontier
    from ..report.frontier import frontier_caption
    from ..report.html import frontier_report

    floor = tpot_floor(meta.get("slo"))
    text = frontier_caption(rows, floor) + note
    write_frontier(rows, out_dir, meta | {"caption": text})
    plot = None
    if plots:
        try:
            from ..report.frontierfig import pareto_plot

            plot = pareto_plot(rows, floor, text, out_dir, title)
        except ImportError:
            plot = None
    return text, plot, frontier_report(out_dir)
