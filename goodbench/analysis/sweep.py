"""Sweeps on the simulated engine: a grid of GPU tiers x engine knobs (cells in parallel processes),
the best chunk size per tier, and DistServe's max goodput rate (highest arrival rate whose SLO
attainment stays >= a target) by bracketing then bisection."""

from __future__ import annotations

import csv
import itertools
import json
import math
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, fields, replace

import multiprocessing as mp

from .. import __version__
from ..arrivals import ArrivalSpec, offsets as arrival_offsets
from ..engine.config import ConfigError, EngineConfig
from ..engine.core import Engine
from ..engine.simulate import simulate
from ..metrics import summarize
from ..records import RunMeta, RunResult
from ..store import RunStore, load as load_run
from .stats import goodput_interval, wilson

CONFIG_TYPES = {f.name: f.type for f in fields(EngineConfig)}
TIE_TOLERANCE = 0.005  # goodputs within 0.5% of the best are ties


@dataclass(frozen=True)
class Cell:
    gpu: str
    params: tuple  # ((knob, value), ...)

    @property
    def label(self) -> str:
        parts = [self.gpu] + [f"{k}={_fmt(v)}" for k, v in self.params]
        return ",".join(parts)


def _fmt(v) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def parse_value(knob: str, text: str):
    """A knob's value from the command line, typed as EngineConfig declares it."""
    if knob not in CONFIG_TYPES:
        raise ValueError(f"unknown engine knob {knob!r}; knobs: {', '.join(CONFIG_TYPES)}")
    t = str(CONFIG_TYPES[knob])
    low = text.strip().lower()
    if "bool" in t:
        if low in ("true", "on", "1", "yes"):
            return True
        if low in ("false", "off", "0", "no"):
            return False
        raise ValueError(f"{knob}: {text!r} is not true/false")
    if "int" in t:
        try:
            return int(low)
        except ValueError:
            raise ValueError(f"{knob}: {text!r} is not a whole number") from None
    if "float" in t:
        try:
            return float(low)
        except ValueError:
            raise ValueError(f"{knob}: {text!r} is not a number") from None
    return text.strip()


def parse_params(items: list[str]) -> dict[str, list]:
    """["max_num_batched_tokens=256,512", "enable_chunked_prefill=false"] -> {knob: [values]}."""
    out: dict[str, list] = {}
    for item in items:
        knob, sep, vals = item.partition("=")
        knob = knob.strip().replace("-", "_")
        if not sep or not vals:
            raise ValueError(f"--param {item!r}: expected KNOB=V1,V2,...")
        out[knob] = [parse_value(knob, v) for v in vals.split(",") if v.strip()]
    return out


def grid(gpus: list[str], params: dict[str, list]) -> list[Cell]:
    """The product of the --param axes per GPU tier. `enable_chunked_prefill=false` alone is not an
    axis: it adds one unchunked baseline cell per tier (its budget is then max_model_len, as vLLM's)."""
    params = dict(params)
    baseline = params.get("enable_chunked_prefill") == [False]
    if baseline:
        del params["enable_chunked_prefill"]
    axes = [[(k, v) for v in vals] for k, vals in params.items()]
    cells = []
    for gpu in gpus:
        for combo in itertools.product(*axes) if axes else [()]:
            cells.append(Cell(gpu, tuple(combo)))
        if baseline:
            cells.append(Cell(gpu, (("enable_chunked_prefill", False),)))
    return cells


# The workload is built once in the parent; forked workers read it from here.
_SHARED: dict = {}


def _cell_config(base: EngineConfig, cell: Cell) -> EngineConfig:
    kw = dict(cell.params)
    if kw.get("enable_chunked_prefill") is False and "max_num_batched_tokens" not in kw:
        kw["max_num_batched_tokens"] = None  # vLLM: max_model_len when chunking is off
    return replace(base, gpu=cell.gpu, **kw).resolved()


def run_cell(cell: Cell) -> dict:
    sh = _SHARED
    row: dict = {"cell": cell.label, "gpu": cell.gpu, **{k: v for k, v in cell.params}}
    try:
        cfg = _cell_config(sh["base"], cell)
    except ConfigError as e:
        row["error"] = str(e)
        return row
    eng = Engine(cfg)
    recs = simulate(eng, sh["requests"], sh["offsets"])
    run_id = "cell-" + "".join(c if c.isalnum() or c in "._=-" else "_" for c in cell.label.replace(",", "_"))
    store = RunStore(sh["cells_dir"], run_id)
    meta = RunMeta(run_id=run_id, label=sh["label"], target={"base_url": "simulated", "endpoint": "", "model": cfg.model},
                   engine=cfg.to_dict(), workload=sh["workload"], workload_hash=sh["workload_hash"], slo=sh["slo"],
                   seed=sh["seed"], mode="simulate", requested_rate=sh["rate"], goodbench_version=__version__)
    store.start(meta)
    store.append_many(recs)
    s = summarize(RunResult(meta, recs), slo=sh["slo"], ci=False)
    store.finish(meta, s)
    row.update(summary_row(s))
    row.update(slo_scale_row(recs, sh["slo"], sh.get("slo_scales") or ()))
    row.update({"max_num_batched_tokens": cfg.max_num_batched_tokens,
                "enable_chunked_prefill": cfg.enable_chunked_prefill, "model": cfg.model, "run_dir": store.dir})
    return row


def slo_scale_row(recs, slo: dict | None, scales) -> dict:
    """SLO-scale curve (DistServe): attainment with every threshold multiplied by each scale."""
    from ..metrics import Columns

    if not slo or not scales:
        return {}
    c = Columns([r for r in recs if not r.warmup])
    out = {}
    for k in scales:
        m = c.meets({key: v * k for key, v in slo.items()})
        out[f"attainment@{k:g}"] = float(m.mean()) if m.size else None
    return out


def summary_row(s: dict) -> dict:
    n = s["requests"]["issued"]
    k = s.get("slo_met") or 0
    row = {"ttft_p50_ms": s["ttft_ms"]["p50"], "ttft_p99_ms": s["ttft_ms"]["p99"], "itl_p50_ms": s["itl_ms"]["p50"],
           "itl_p99_ms": s["itl_ms"]["p99"], "itl_p99_over_p50": s["itl_p99_over_p50"], "tpot_p99_ms": s["tpot_ms"]["p99"],
           "request_throughput": s["request_throughput"], "output_throughput": s["output_throughput"],
           "goodput": s["goodput"], "slo_attainment": s["slo_attainment"], "issued": n}
    if s.get("slo_attainment") is not None:
        row["attainment_lo"], row["attainment_hi"] = wilson(k, n)
        row["goodput_lo"], row["goodput_hi"] = goodput_interval(k, n, s["duration_s"])
    return row


def run_sweep(cells: list[Cell], base: EngineConfig, requests, offs, slo: dict | None, out_dir: str,
              meta: dict, jobs: int = 0, on_done=None, slo_scales=()) -> list[dict]:
    """Run every cell (in parallel processes when jobs > 1) and write sweep.csv / sweep.json."""
    os.makedirs(out_dir, exist_ok=True)
    _SHARED.update(slo_scales=tuple(slo_scales), base=base, requests=requests, offsets=offs, slo=slo, cells_dir=os.path.join(out_dir, "cells"),
                   label=meta.get("label", ""), workload=meta.get("workload", {}),
                   workload_hash=meta.get("workload_hash", ""), seed=meta.get("seed", 0), rate=meta.get("rate"))
    jobs = jobs or (os.cpu_count() or 1)
    rows: list[dict] = []
    if jobs <= 1 or len(cells) <= 1:
        for c in cells:
            rows.append(run_cell(c))
            if on_done:
                on_done(rows[-1])
    else:
        ctx = mp.get_context("fork")
        with ProcessPoolExecutor(max_workers=min(jobs, len(cells)), mp_context=ctx) as ex:
            for row in ex.map(run_cell, cells):
                rows.append(row)
                if on_done:
                    on_done(row)
    write_results(rows, out_dir, meta)
    return rows


def write_results(rows: list[dict], out_dir: str, meta: dict) -> None:
    cols: list[str] = []
    for r in rows:
        cols += [k for k in r if k not in cols]
    with open(os.path.join(out_dir, "sweep.csv"), "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)
    best = best_per_tier(rows)
    with open(os.path.join(out_dir, "sweep.json"), "w", encoding="utf-8") as f:
        json.dump({"meta": meta, "cells": rows, "best": best}, f, indent=2, default=str)


def best_per_tier(rows: list[dict]) -> dict:
    """Per GPU: the cell with the highest goodput (ties: lower ITL p99), and its margin to the next."""
    out = {}
    for gpu in dict.fromkeys(r["gpu"] for r in rows):
        ok = [r for r in rows if r["gpu"] == gpu and r.get("goodput") is not None]
        if not ok:
            continue
        top = max(r["goodput"] for r in ok)
        # goodputs within TIE_TOLERANCE of the best count as tied: the lower ITL p99 wins among them
        tied = sorted((r for r in ok if r["goodput"] >= top * (1 - TIE_TOLERANCE)),
                      key=lambda r: r.get("itl_p99_ms") or math.inf)
        rest = sorted((r for r in ok if r["goodput"] < top * (1 - TIE_TOLERANCE)),
                      key=lambda r: (-r["goodput"], r.get("itl_p99_ms") or math.inf))
        ranked = tied + rest
        b = ranked[0]
        nxt = ranked[1] if len(ranked) > 1 else None
        out[gpu] = {"cell": b["cell"], "max_num_batched_tokens": b.get("max_num_batched_tokens"),
                    "enable_chunked_prefill": b.get("enable_chunked_prefill"), "goodput": b["goodput"],
                    "itl_p99_ms": b.get("itl_p99_ms"),
                    "next": nxt["cell"] if nxt else None,
                    "margin_goodput": (b["goodput"] - nxt["goodput"]) if nxt else None,
                    "separated": (nxt is not None and b.get("goodput_lo") is not None
                                  and b["goodput_lo"] > nxt.get("goodput_hi", math.inf))}
    return out


def find_max_rate(evaluate, target: float = 0.9, start: float = 1.0, rel_tol: float = 0.05,
                  max_probes: int = 24, on_probe=None, max_scale: int = 4) -> dict:
    """Highest arrival rate whose SLO attainment stays >= target.

    evaluate(rate, scale) -> (met, issued), scale multiplying the number of requests. Bracket by
    doubling/halving from `start`, then bisect (geometrically) until the bracket is within rel_tol.
    If the Wilson interval at either bracket end still straddles the target, that end is probed again
    with 2x, then 4x (max_scale) the requests, so that each decision rests on enough samples;
    `conclusive` says whether, in the end, the interval at the passing end lies above the target and
    the one at the failing end below it."""
    probes = []

    def probe(rate, scale=1):
        k, n = evaluate(rate, scale)
        lo, hi = wilson(k, n)
        p = {"rate": rate, "requests": n, "attainment": k / n if n else 0.0, "lo": lo, "hi": hi,
             "pass": n > 0 and k / n >= target}
        probes.append(p)
        if on_probe:
            on_probe(p)
        return p

    def bisect(good, bad, scale):
        while good and bad and len(probes) < max_probes and bad["rate"] / good["rate"] > 1 + rel_tol:
            p = probe(math.sqrt(good["rate"] * bad["rate"]), scale)
            if p["pass"]:
                good = p
            else:
                bad = p
        return good, bad

    good = bad = None
    p = probe(start)
    if p["pass"]:
        good = p
        while len(probes) < max_probes:
            p = probe(good["rate"] * 2)
            if p["pass"]:
                good = p
            else:
                bad = p
                break
    else:
        bad = p
        while len(probes) < max_probes and bad["rate"] > start / 64:
            p = probe(bad["rate"] / 2)
            if p["pass"]:
                good = p
                break
            bad = p
    good, bad = bisect(good, bad, 1)
    scale = 1
    while good and bad and scale < max_scale and len(probes) < max_probes and not (
            good["lo"] >= target and bad["hi"] < target):
        scale *= 2  # a decision at a bracket end is not clear yet: probe it again with more requests
        if good["lo"] < target:
            p = probe(good["rate"], scale)
            if not p["pass"]:  # disproved: fall back to the best passing rate below it
                bad = p
                below = [q for q in probes if q["pass"] and q["rate"] < p["rate"]]
                good = max(below, key=lambda q: (q["rate"], q["requests"])) if below else None
            else:
                good = p
        if good and bad and bad["hi"] >= target and len(probes) < max_probes:
            p = probe(bad["rate"], scale)
            if p["pass"]:
                good = p
                above = [q for q in probes if not q["pass"] and q["rate"] > p["rate"]]
                bad = min(above, key=lambda q: (q["rate"], -q["requests"])) if above else None
            else:
                bad = p
        good, bad = bisect(good, bad, scale)
    return {"target": target, "max_rate": good["rate"] if good else None,
            "bracket": [good["rate"] if good else 0.0, bad["rate"] if bad else None],
            "conclusive": bool(good and bad and good["lo"] >= target and bad["hi"] < target),
            "probes": probes}


def _scaled(requests, scale: int):
    if scale <= 1:
        return list(requests)
    return [replace(r, id=f"{r.id}.{k}") for k in range(scale) for r in requests]


def rate_evaluator(engine_cfg: EngineConfig, requests, arrival: ArrivalSpec, slo: dict, seed: int):
    """evaluate(rate) for find_max_rate: the workload at `rate` (same requests, same seed) simulated."""

    def evaluate(rate: float, scale: int = 1):
        a = replace(arrival, kind="poisson" if arrival.kind in ("closed", "workload", "trace") else arrival.kind,
                    rate=rate)
        reqs = _scaled(requests, scale)
        offs = arrival_offsets(a, n=len(reqs), seed=seed)
        recs = simulate(Engine(engine_cfg), reqs, offs)
        s = summarize(RunResult(RunMeta("probe", mode="simulate", slo=slo), recs), slo=slo, ci=False)
        return s.get("slo_met") or 0, s["requests"]["issued"]

    return evaluate


def run_live_sweep(cells: list[Cell], base: EngineConfig, plan, slo: dict | None, out_dir: str, meta: dict,
                   server_cmd: str | None = None, startup_timeout: float = 600.0, fixed_step_ms: float | None = None,
                   on_done=None) -> list[dict]:
    """Cells one after another on the real clock: for each, start the server (the reference engine with
    the cell's config, or `server_cmd` with {port} and the cell's knobs filled in), wait for /health,
    run the workload, stop the server (SIGINT, then SIGKILL after a grace). A server that fails to
    start or dies makes a failed row with its log tail; the sweep goes on."""
    import asyncio
    import shlex
    import sys

    from .. import runner
    from ..client.openai import ClientConfig, resolve_endpoint
    from ..serverproc import ServerError, ServerProcess, free_port

    os.makedirs(out_dir, exist_ok=True)
    cells_dir = os.path.join(out_dir, "cells")
    rows = []
    for cell in cells:
        row: dict = {"cell": cell.label, "gpu": cell.gpu, **{k: v for k, v in cell.params}}
        rows.append(row)
        try:
            cfg = _cell_config(base, cell)
        except ConfigError as e:
            row["error"] = str(e)
            continue
        port = free_port()
        run_id = "cell-" + "".join(c if c.isalnum() or c in "._=-" else "_" for c in cell.label.replace(",", "_"))
        store = RunStore(cells_dir, run_id)
        run_meta = RunMeta(run_id=run_id, label=meta.get("label", ""), engine=None if server_cmd else cfg.to_dict(),
                           workload=meta.get("workload", {}), workload_hash=meta.get("workload_hash", ""), slo=slo,
                           seed=meta.get("seed", 0), mode="open", requested_rate=meta.get("rate"),
                           goodbench_version=__version__)
        store.start(run_meta)
        if server_cmd:
            try:
                cmd = shlex.split(server_cmd.format(**{**cfg.to_dict(), "port": port}))
            except (KeyError, IndexError, ValueError) as e:
                row["error"] = f"--server-cmd: cannot fill the placeholders ({e})"
                store.finish(run_meta, None)
                continue
        else:
            cmd = [sys.executable, "-m", "goodbench", "serve", "--host", "127.0.0.1", "--port", str(port)] + cfg.to_argv()
            if fixed_step_ms is not None:
                cmd += ["--fixed-step-ms", str(fixed_step_ms)]
        try:
            proc = ServerProcess(cmd, port, os.path.join(store.dir, "server.log"))
            proc.wait_ready(startup_timeout)
        except ServerError as e:
            row["error"] = f"server failed to start: {e}"
            store.finish(run_meta, None)
            continue
        try:
            model = asyncio.run(runner.resolve_model(proc.base_url, None))
            run_meta.target = {"base_url": proc.base_url, "endpoint": resolve_endpoint(None, meta.get("endpoint", "completions")),
                               "model": model}
            ccfg = ClientConfig(base_url=proc.base_url, endpoint=run_meta.target["endpoint"], model=model)
            runner.run_plan(plan, ccfg, store, runner.RunOptions(slo=slo), None, None, runner.Progress())
            died = not proc.alive
        finally:
            proc.stop()
        result = load_run(store.dir)
        s = summarize(result, slo=slo, ci=False)
        store.finish(run_meta, s)
        if died:
            row["error"] = f"server died during the run: {proc.tail()}"
        row.update(summary_row(s))
        row.update({"max_num_batched_tokens": cfg.max_num_batched_tokens,
                    "enable_chunked_prefill": cfg.enable_chunked_prefill, "model": cfg.model, "run_dir": store.dir})
        if on_done:
            on_done(row)
    write_results(rows, out_dir, meta)
    return rows


def live_rate_evaluator(base_url: str, requests, arrival: ArrivalSpec, slo: dict, seed: int, out_dir: str,
                        endpoint: str = "/v1/completions", model: str | None = None, api_key: str | None = None):
    """evaluate(rate) for find_max_rate against a real endpoint: each probe is a real-time run of the
    same requests at a Poisson (or the workload's) rate, kept as a run directory under out_dir."""
    import asyncio

    from .. import runner
    from ..client.openai import ClientConfig
    from ..store import load as load_run

    name = model or asyncio.run(runner.resolve_model(base_url, api_key))
    ccfg = ClientConfig(base_url=base_url, endpoint=endpoint, model=name, api_key=api_key)

    def evaluate(rate: float, scale: int = 1):
        a = replace(arrival, kind="poisson" if arrival.kind in ("closed", "workload", "trace") else arrival.kind,
                    rate=rate)
        reqs = _scaled(requests, scale)
        offs = arrival_offsets(a, n=len(reqs), seed=seed)
        plan = runner.Plan(reqs, offs, a)
        run_id = f"probe-{rate:.4f}" + (f"-x{scale}" if scale > 1 else "")
        store = RunStore(out_dir, run_id)
        meta = RunMeta(run_id=run_id, label=a.label, slo=slo, mode="open", requested_rate=rate,
                       target={"base_url": base_url, "endpoint": endpoint, "model": name}, goodbench_version=__version__)
        store.start(meta)
        runner.run_plan(plan, ccfg, store, runner.RunOptions(slo=slo, scrape_metrics=False), None, None,
                        runner.Progress())
        s = summarize(load_run(store.dir), slo=slo, ci=False)
        store.finish(meta, s)
        return s.get("slo_met") or 0, s["requests"]["issued"]

    return evaluate
