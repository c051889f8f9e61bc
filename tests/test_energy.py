"""Energy from GPU telemetry (issue 43): the counter's rise over the measured window, resets, power-only GPUs, a
GPU or an exporter that goes away; `goodbench run --gpu-telemetry` against a fake DCGM exporter on loopback whose
counters advance by a known amount."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from conftest import ROOT, run_cli

from goodbench.metrics.energy import ENERGY, POWER, energy_block, window_energy


def test_a_linear_counter_gives_its_rise_over_the_window_exactly():
    t = [0.0, 1.0, 2.0, 3.0, 4.0]
    e = [1000.0 + 250 * x for x in t]  # J: 250 W
    w = window_energy(t, e, [250.0] * 5, 0.5, 3.25)
    assert w["joules"] == pytest.approx(250 * 2.75, rel=1e-12) and w["covered_share"] == 1.0
    assert w["source"] == "energy counter"


def test_a_counter_reset_is_bridged_by_power_or_continued_from_its_new_value():
    t = [0.0, 1.0, 2.0, 3.0]
    e = [5000.0, 5300.0, 100.0, 400.0]  # reset between 1 and 2
    assert window_energy(t, e, [300.0] * 4, 0.0, 3.0)["joules"] == pytest.approx(300 * 3)  # power across it
    assert window_energy(t, e, [None] * 4, 0.0, 3.0)["joules"] == pytest.approx(300 + 100 + 300)  # 100 J since


def test_power_only_is_integrated():
    w = window_energy([0.0, 1.0, 2.0], [None, None, None], [100.0, 200.0, 200.0], 0.0, 2.0)
    assert w["joules"] == pytest.approx(150 + 200) and w["source"] == "power integrated"


def _rows(gpus_until):
    rows = []
    for i in range(11):
        t = i * 0.5
        m = {}
        for g, until in enumerate(gpus_until):
            if t <= until:
                m[f'{ENERGY}{{gpu="{g}"}}'] = 300 * t * 1000
                m[f'{POWER}{{gpu="{g}"}}'] = 300.0
        rows.append({"t": t, "source": 0, "metrics": m})
    return rows


def test_a_gpu_that_disappears_covers_part_of_the_window_and_says_so():
    b = energy_block(_rows([5.0, 2.5]), 0.0, 5.0, output_tokens=1000, good_tokens=500)
    assert b["gpus"] == 2 and b["joules"] == pytest.approx(300 * 5 + 300 * 2.5)
    assert b["covered_share"] == pytest.approx(0.5) and "50%" in b["note"]
    assert b["per_gpu"]['0:{gpu="1"}']["avg_power_w"] == pytest.approx(300)
    assert b["joules_per_good_token"] == pytest.approx(b["joules"] / 500)
    assert b["good_tokens_per_kwh"] == pytest.approx(500 / (b["joules"] / 3.6e6))


def test_no_telemetry_in_the_window_gives_no_number():
    b = energy_block(_rows([5.0]), 10.0, 20.0, 10, 10)
    assert b["joules"] is None and "no energy figure" in b["note"]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _exporter(*args):
    port = _port()
    p = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests", "fakedcgm.py"), str(port), *args])
    for _ in range(100):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=0.5)
            return p, port
        except OSError:
            time.sleep(0.05)
    p.kill()
    p.wait()
    raise RuntimeError("fake exporter did not start")


def _run(tmp_path, port, seconds=3.0):
    return run_cli(
        "run", "--dataset-name", "random", "--random-input-len", "64", "--random-output-len", "40",
        "--request-rate", "8", "--num-prompts", str(int(8 * seconds)), "--fixed-step-ms", "10", "--no-pin",
        "--gpu-telemetry", f"127.0.0.1:{port}", "--result-dir", str(tmp_path), "--run-id", "r", "--quiet",
        "--no-history", cwd=str(tmp_path), timeout=180,
    )  # fmt: skip


def test_live_energy_matches_the_exporters_counter(tmp_path):
    """Two GPUs at 300 W: the joules are 600 W times the measured window, to the sampling's timing."""
    p, port = _exporter("--watts", "300", "--gpus", "2")
    try:
        r = _run(tmp_path, port)
    finally:
        p.kill()
        p.wait()
    assert r.returncode == 0, r.stderr
    s = json.loads((tmp_path / "r" / "summary.json").read_text())
    e = s["energy"]
    assert e["gpus"] == 2 and e["source"] == "energy counter" and e["covered_share"] == pytest.approx(1.0)
    assert e["joules"] == pytest.approx(600 * e["window_s"], rel=5e-3)  # a sample is timed mid-request
    assert e["avg_power_w_per_gpu"] == pytest.approx(300, rel=5e-3)
    assert "energy:" in r.stdout and "J per token (no SLO: every completed request's)" in r.stdout
    meta = json.loads((tmp_path / "r" / "run.json").read_text())
    assert meta["gpu_telemetry"] == [f"http://127.0.0.1:{port}/metrics"]
    rep = run_cli("report", str(tmp_path / "r"), "--out", str(tmp_path / "rep"), cwd=str(tmp_path), timeout=180)
    assert rep.returncode == 0, rep.stderr
    html = next((tmp_path / "rep").glob("*.html")).read_text()
    assert "J per token (no SLO" in html and "fourth panel" in html


def test_an_exporter_that_stops_answering_keeps_the_run_and_says_how_much_had_energy(tmp_path):
    p, port = _exporter("--watts", "200", "--gpus", "2", "--reset-at", "3", "--drop-gpu-at", "4", "--die-at", "5")
    try:
        r = _run(tmp_path, port, seconds=4.0)
    finally:
        p.kill()
        p.wait()
    assert r.returncode == 0, r.stderr
    s = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert s["requests"]["completed"] == 32  # every record kept
    e = s["energy"]  # scrapes 0 (the check) and 1 (before the clock), 2, 3 (reset), 4 (one GPU gone), then none
    assert 0 < e["covered_share"] < 1 and "of the window" in e["note"]
    for g in e["per_gpu"].values():  # each GPU's counter rise over what its samples covered, the reset continued
        assert g["joules"] == pytest.approx(200 * e["window_s"] * g["covered_share"], rel=5e-3)  # sample timing
    assert (
        e["per_gpu"]['0:{gpu="1",UUID="GPU-fake-1",Hostname="fake"}']["covered_share"]
        < e["per_gpu"]['0:{gpu="0",UUID="GPU-fake-0",Hostname="fake"}']["covered_share"]
    )


def test_a_telemetry_source_that_is_not_there_is_refused_before_the_run(tmp_path):
    r = run_cli("run", "--num-prompts", "2", "--fixed-step-ms", "5", "--gpu-telemetry", f"127.0.0.1:{_port()}",
                "--result-dir", str(tmp_path), cwd=str(tmp_path), timeout=60)  # fmt: skip
    assert r.returncode == 2 and "no answer" in r.stderr and not any(tmp_path.glob("run-*"))
    r = run_cli("run", "--num-prompts", "2", "--gpu-telemetry", "ftp://x", "--result-dir", str(tmp_path),
                cwd=str(tmp_path), timeout=60)  # fmt: skip
    assert r.returncode == 2 and "DCGM exporter URL" in r.stderr


def test_nvml_sampler_reads_power_and_the_energy_counter_in_dcgm_names(monkeypatch):
    """A fake pynvml: two GPUs, one without an energy counter (its power is integrated instead)."""
    import types

    from goodbench.runner.gpulocal import nvml_sampler

    class NVMLError(Exception):
        pass

    def energy(h):
        if h == 1:
            raise NVMLError("not supported")
        return 123456

    fake = types.SimpleNamespace(
        NVMLError=NVMLError, nvmlInit=lambda: None, nvmlDeviceGetCount=lambda: 2,
        nvmlDeviceGetHandleByIndex=lambda i: i, nvmlDeviceGetPowerUsage=lambda h: 250_000 + h,
        nvmlDeviceGetTotalEnergyConsumption=energy,
        nvmlDeviceGetUtilizationRates=lambda h: types.SimpleNamespace(gpu=90),
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(used=2**30),
    )  # fmt: skip
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    s = nvml_sampler()()
    assert s[f'{POWER}{{gpu="0"}}'] == 250.0 and s[f'{ENERGY}{{gpu="0"}}'] == 123456.0
    assert f'{ENERGY}{{gpu="1"}}' not in s and s[f'{POWER}{{gpu="1"}}'] == pytest.approx(250.001)
    monkeypatch.setitem(sys.modules, "pynvml", None)  # not installed
    from goodbench.errors import UsageError

    with pytest.raises(UsageError, match="nvidia-ml-py"):
        nvml_sampler()


def test_a_live_sweep_cell_has_its_energy(tmp_path):
    p, port = _exporter("--watts", "100", "--gpus", "1")
    try:
        r = run_cli(
            "sweep", "--live", "--goodput", "ttft:2000", "--dataset-name", "random", "--random-input-len", "64",
            "--random-output-len", "20", "--num-prompts", "12", "--request-rate", "6", "--fixed-step-ms", "10",
            "--gpu-telemetry", f"127.0.0.1:{port}", "--result-dir", str(tmp_path), "--sweep-id", "s", "--no-plots",
            "--no-history", cwd=str(tmp_path), timeout=300,
        )  # fmt: skip
    finally:
        p.kill()
        p.wait()
    assert r.returncode == 0, r.stderr
    s = json.loads(next((tmp_path / "s" / "cells").glob("*/summary.json")).read_text())
    assert s["energy"]["joules"] == pytest.approx(100 * s["energy"]["window_s"], rel=5e-3)


def test_a_counter_refreshed_less_often_than_sampled_falls_back_to_power():
    """dcgm-exporter's default refresh (30 s) hands the same counter back every second: its rise would read 0."""
    t = [float(i) for i in range(11)]
    w = window_energy(t, [5000.0] * 11, [300.0] * 11, 0.5, 9.5)
    assert w["joules"] == pytest.approx(300 * 9) and "stale" in w["source"]
