"""The fewest GPUs that meet the SLO at a given rate: per cell, add replicas (behind the sweep's
router) until SLO attainment at the workload's own arrivals reaches the target; GPUs = replicas x TP.
Attainment is not monotone in principle (routing), so replicas are tried one by one from 1."""

from __future__ import annotations

import json
import os
from dataclasses import replace

from ..engine.layout import ClusterSpec
from ..engine.prices import price_table
from ..engine.virtual import simulate
from ..gating import GateSpec, evaluate
from ..limits import TARGET_ATTAINMENT
from ..metrics.compose import compose
from ..records import RunMeta, RunResult
from .grid import cell_config
from .sweep import SweepSetup


def min_gpus(s: SweepSetup, target: float = TARGET_ATTAINMENT, max_replicas: int = 16, on_probe=None) -> list[dict]:
    """One row per cell: replicas and GPUs needed (None when max_replicas do not suffice), attainment,
    goodput and the cost block at that size; writes min_gpus.json in the sweep directory."""
    os.makedirs(s.out_dir)
    base = s.cluster or ClusterSpec()
    rows = []
    for c in s.cells:
        cfg = cell_config(s.base, c)
        row: dict = {"cell": c.label, "gpu": c.gpu, "replicas": None, "gpus": None}
        for n in range(1, max_replicas + 1):
            spec = replace(base, replicas=n, prefill=0, decode=0)
            out = simulate(cfg, s.plan, spec)
            meta = RunMeta("probe", mode="simulate", slo=s.slo, gpus=spec.gpus(cfg), prices=price_table(s.prices))
            sm = compose(RunResult(meta, out.records), ci=False)
            att = sm["slo_attainment"] or 0.0
            if on_probe:
                on_probe(c.label, n, att)
            if evaluate(sm, GateSpec(min_attainment=target)).passed:  # the one judge, as a gated run
                cost = sm["cost"]
                row.update(
                    replicas=n,
                    gpus=cost["gpus"],
                    slo_attainment=att,
                    goodput=sm["goodput"],
                    usd_per_hour=cost["usd_per_hour"],
                    usd_per_million_output_tokens=cost["usd_per_million_output_tokens"],
                )
                break
            row["slo_attainment"] = att
        rows.append(row)
    with open(os.path.join(s.out_dir, "min_gpus.json"), "w", encoding="utf-8") as f:
        json.dump(
            {"meta": s.meta, "target": target, "max_replicas": max_replicas, "cells": rows}, f, indent=2, default=str
        )
    return rows
