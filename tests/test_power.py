"""The simulated engine's power model (engine/power.py): energy per token falls with batch as measured, power never
passes the board's limit, the fit is reproducible, and a simulation's summary carries the energy block."""

import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT, run_cli

from goodbench.engine.hardware import GPUS, get_gpu
from goodbench.engine.power import COEFFS, FIT_ERROR, power_model


def _sim(tmp_path, conc, name):
    r = run_cli(
        "simulate", "--dataset-name", "random", "--random-input-len", "500", "--random-output-len", "500",
        "--concurrency", str(conc), "--num-prompts", str(conc * 3), "--result-dir", str(tmp_path), "--run-id", name,
        "--no-history", cwd=str(tmp_path),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return json.loads((tmp_path / name / "summary.json").read_text())["energy"]


def test_energy_per_token_falls_with_batch_and_power_stays_under_the_limit(tmp_path):
    es = [_sim(tmp_path, c, f"c{c}") for c in (1, 8, 64)]
    per_token = [e["joules_per_output_token"] for e in es]
    assert per_token[0] > 2 * per_token[1] > 2 * per_token[2] > 0
    assert all(get_gpu("h100-sxm").tdp_w >= e["avg_power_w_per_gpu"] > 110 for e in es)
    assert es[0]["uncertainty_pct"] == pytest.approx(FIT_ERROR * 100) and es[0]["source"] == "engine power model"


def test_every_tier_has_a_power_model_and_says_when_it_borrows():
    for g in GPUS.values():
        p = power_model(g)
        assert p is not None and 0 < p.idle_w < p.max_w
        assert (p.borrowed is None) == (g.arch in COEFFS)
    assert (
        power_model(get_gpu("mi300x")).idle_w == 128 and "borrowed from hopper" in power_model(get_gpu("mi300x")).basis
    )
    assert power_model(get_gpu("l4")).energy(1.0, 1e15, 1e18) == pytest.approx(72.0)  # capped at its 72 W


def test_the_fit_reproduces_the_shipped_coefficients_and_its_held_out_error():
    r = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "power_fit.py")], capture_output=True,
                       text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr
    for arch, (a, b, _) in COEFFS.items():
        assert f'"{arch}": ({a:.1f}, {b:.1f}, ...)' in r.stdout
    assert "median |error| 5.1% (6 runs)" in r.stdout
    h100 = next(x for x in r.stdout.splitlines() if x.startswith("H100"))
    assert f"in sample median |error| {FIT_ERROR:.1%}" in h100


def test_the_electricity_price_costs_the_energy_per_million_good_tokens(tmp_path):
    r = run_cli("simulate", "--num-prompts", "40", "--request-rate", "8", "--goodput", "ttft:500", "tpot:50",
                "--electricity-price", "0.1", "--facility-factor", "1.3", "--result-dir", str(tmp_path), "--run-id",
                "e", "--no-history", cwd=str(tmp_path))  # fmt: skip
    assert r.returncode == 0, r.stderr
    e = json.loads((tmp_path / "e" / "summary.json").read_text())["energy"]
    want = 0.1 * 1.3 * e["joules_per_good_token"] * 1e6 / 3.6e6
    assert e["energy_usd_per_million_good_tokens"] == pytest.approx(want)
    assert "of electricity per million good tokens" in " ".join(r.stdout.split())  # the console wraps lines


def test_a_sweep_prices_every_cells_energy(tmp_path):
    import csv

    r = run_cli("sweep", "--goodput", "ttft:500", "tpot:50", "--num-prompts", "30", "--request-rate", "4", "--gpu",
                "h100-sxm,b200", "--electricity-price", "0.12", "--result-dir", str(tmp_path), "--sweep-id", "s",
                "--no-plots", "--no-history", "--jobs", "1", cwd=str(tmp_path))  # fmt: skip
    assert r.returncode == 0, r.stderr
    with open(tmp_path / "s" / "sweep.csv") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        want = 0.12 * float(row["joules_per_good_token"]) * 1e6 / 3.6e6
        assert float(row["energy_usd_per_million_good_tokens"]) == pytest.approx(want)
