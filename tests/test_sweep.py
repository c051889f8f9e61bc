import csv
import json
import os

import pytest

from goodbench.metrics.stats import goodput_interval, wilson
from goodbench.analysis.grid import grid, parse_params
from goodbench.analysis.maxrate import find_max_rate
from goodbench.analysis.sweep import best_per_tier

from conftest import ROOT, run_cli


def test_wilson_known_values():
    lo, hi = wilson(95, 100)
    assert lo == pytest.approx(0.8882, abs=1e-3) and hi == pytest.approx(0.9785, abs=1e-3)
    assert wilson(0, 0) == (0.0, 1.0)
    lo, hi = wilson(100, 100)
    assert hi == 1.0 and lo == pytest.approx(0.9630, abs=1e-3)
    g = goodput_interval(95, 100, 10.0)
    assert g[0] == pytest.approx(8.882, abs=0.01) and g[1] == pytest.approx(9.785, abs=0.01)


def test_grid_and_params():
    p = parse_params(["max_num_batched_tokens=256,512", "enable_chunked_prefill=false"])
    assert p == {"max_num_batched_tokens": [256, 512], "enable_chunked_prefill": [False]}
    cells = grid(["h100-sxm", "l40s"], p)
    assert [c.label for c in cells] == [
        "h100-sxm,max_num_batched_tokens=256", "h100-sxm,max_num_batched_tokens=512",
        "h100-sxm,enable_chunked_prefill=false",
        "l40s,max_num_batched_tokens=256", "l40s,max_num_batched_tokens=512", "l40s,enable_chunked_prefill=false"]
    assert len(grid(["h100-sxm"], parse_params(["max_num_seqs=8,16", "block_size=16,32"]))) == 4
    with pytest.raises(ValueError, match="unknown engine knob"):
        parse_params(["chunk=5"])
    with pytest.raises(ValueError, match="whole number"):
        parse_params(["max_num_seqs=lots"])


def test_best_per_tier_breaks_ties_on_itl():
    rows = [{"gpu": "a", "cell": "a1", "goodput": 5.0, "itl_p99_ms": 40.0, "goodput_lo": 4.8, "goodput_hi": 5.0},
            {"gpu": "a", "cell": "a2", "goodput": 5.0, "itl_p99_ms": 30.0, "goodput_lo": 4.8, "goodput_hi": 5.0},
            {"gpu": "a", "cell": "a3", "goodput": 3.0, "itl_p99_ms": 10.0, "goodput_lo": 2.0, "goodput_hi": 3.5}]
    b = best_per_tier(rows)["a"]
    assert b["cell"] == "a2" and b["next"] == "a1" and b["margin_goodput"] == 0.0 and not b["separated"]


def test_find_max_rate_brackets_and_bisects():
    # attainment falls linearly past 7 req/s: the max rate with >= 90% is 7.5
    def evaluate(rate, scale=1):
        att = 1.0 if rate <= 7 else max(0.0, 1.0 - (rate - 7) * 0.2)
        return int(round(att * 2000 * scale)), 2000 * scale

    r = find_max_rate(evaluate, target=0.9, start=1.0, rel_tol=0.02, max_probes=40)
    assert r["max_rate"] == pytest.approx(7.5, rel=0.03)
    assert r["bracket"][0] <= 7.5 <= r["bracket"][1]
    # right at the boundary the 2,000-request intervals straddle the target: the ends were re-probed
    assert max(p["requests"] for p in r["probes"]) > 2000
    step = find_max_rate(lambda rate, scale=1: (2000 if rate <= 5 else 0, 2000), target=0.9, rel_tol=0.02)
    assert step["max_rate"] == pytest.approx(5, rel=0.03) and step["conclusive"]
    assert all(p["requests"] == 2000 for p in step["probes"])  # clear decisions need no longer probes
    assert find_max_rate(lambda rate, scale=1: (0, 100), target=0.9, max_probes=5)["max_rate"] is None


def test_sweep_cli_finds_a_chunk_size_per_tier(tmp_path):
    r = run_cli("sweep", "--workload", os.path.join(ROOT, "workloads", "hol-stress.toml"), "--gpu", "l40s,h100-sxm",
                "--param", "max_num_batched_tokens=512,2048", "--param", "enable_chunked_prefill=false",
                "--slo-scales", "0.6,1.0", "--result-dir", str(tmp_path), "--sweep-id", "s1", "--jobs", "2", timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    out = tmp_path / "s1"
    with open(out / "sweep.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 6
    l40s_unchunked = [r for r in rows if r["cell"] == "l40s,enable_chunked_prefill=false"][0]
    assert float(l40s_unchunked["attainment@0.6"]) <= float(l40s_unchunked["attainment@1"]) < 0.95
    data = json.loads((out / "sweep.json").read_text())
    assert set(data["best"]) == {"l40s", "h100-sxm"}
    unchunked = [c for c in data["cells"] if c["enable_chunked_prefill"] is False]
    assert all(c["max_num_batched_tokens"] > 100_000 for c in unchunked)  # vLLM: max_model_len
    assert data["best"]["l40s"]["enable_chunked_prefill"] is True  # HOL: chunking wins on L40S
    assert len(os.listdir(out / "cells")) == 6
    import importlib.util

    if importlib.util.find_spec("matplotlib") is not None:
        for png in ("sweep_metrics.png", "sweep_goodput_heatmap.png", "sweep_frontier.png"):
            assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png
    assert "best on l40s" in r.stdout


def test_sweep_max_rate_cli(tmp_path):
    r = run_cli("sweep", "--dataset-name", "random", "--random-input-len", "512", "--random-output-len", "64",
                "--num-prompts", "300", "--request-rate", "4", "--goodput", "ttft:300", "tpot:80", "--gpu", "l4",
                "--find-max-rate", "--result-dir", str(tmp_path), "--sweep-id", "m", timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    data = json.loads((tmp_path / "m" / "max_rate.json").read_text())
    res = data["results"][0]
    assert res["max_rate"] and res["max_rate"] > 0 and len(res["probes"]) >= 3
    at_max = [p for p in res["probes"] if p["rate"] == res["max_rate"]]
    assert at_max and all(p["pass"] for p in at_max)  # every probe at the reported rate passed
    assert any(not p["pass"] and p["rate"] > res["max_rate"] for p in res["probes"])


def test_sweep_needs_an_slo(tmp_path):
    r = run_cli("sweep", "--dataset-name", "random", "--num-prompts", "10", "--result-dir", str(tmp_path))
    assert r.returncode == 2 and "SLO" in r.stderr


def test_chunk_advice_matches_the_worked_example():
    from goodbench.analysis.advise import chunk_for

    assert chunk_for(6000, 500, 45, 256, 4096) == (11, 546)
    assert chunk_for(32000, 500, 45, 256, 4096) == (11, 2910)
    assert chunk_for(1000, 500, 45, 256, 4096) == (11, 256)  # clamped to the floor
    assert chunk_for(100000, 500, 45, 256, 4096)[1] == 4096  # and to the ceiling


def test_advise_memory_ceiling_shrinks_with_decode_reserve():
    from goodbench.analysis.advise import advise
    from goodbench.engine.config import EngineConfig

    small = advise(EngineConfig(gpu="l4", model="llama-3.2-3b"), 500, 6000, concurrency=8, context=1024)
    big = advise(EngineConfig(gpu="l4", model="llama-3.2-3b"), 500, 6000, concurrency=64, context=2048)
    assert 256 <= big.memory_ceiling < small.memory_ceiling
    fixed = advise(EngineConfig(), 500, 6000, time_per_chunk_ms=45)
    assert (fixed.chunks_allowed, fixed.chunk) == (11, 546)


def test_advise_cli(tmp_path):
    r = run_cli("advise", "--gpu", "l40s", "--model", "llama-3.1-8b", "--ttft-slo", "500", "--p95-input", "6000",
                "--num-prompts", "120", "--jobs", "2", timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "memory ceiling" in r.stdout and "SLO bound" in r.stdout and "(advised)" in r.stdout


def test_live_sweep_with_server_cmd_records_failed_cells(tmp_path):
    import sys

    ok_cmd = (f"{sys.executable} -m goodbench serve --port {{port}} --fixed-step-ms 5 "
              f"--max-num-batched-tokens {{max_num_batched_tokens}}")
    r = run_cli("sweep", "--dataset-name", "random", "--random-input-len", "64", "--random-output-len", "8",
                "--num-prompts", "16", "--request-rate", "20", "--goodput", "ttft:500", "--gpu", "l40s",
                "--param", "max_num_batched_tokens=256,1024", "--server-cmd", ok_cmd, "--result-dir", str(tmp_path),
                "--sweep-id", "ok", timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    data = json.loads((tmp_path / "ok" / "sweep.json").read_text())
    assert [c["issued"] for c in data["cells"]] == [16, 16]
    run_dirs = [c["run_dir"] for c in data["cells"]]
    assert all(os.path.exists(os.path.join(d, "server.log")) for d in run_dirs)
    bad_cmd = f"{sys.executable} -c \"import sys; print('boom: no GPU here'); sys.exit(3)\" {{port}}"
    r = run_cli("sweep", "--dataset-name", "random", "--num-prompts", "4", "--request-rate", "20", "--goodput",
                "ttft:500", "--gpu", "l40s", "--param", "max_num_batched_tokens=256,512", "--server-cmd", bad_cmd,
                "--result-dir", str(tmp_path), "--sweep-id", "bad", timeout=240)
    assert r.returncode == 1, r.stdout + r.stderr
    data = json.loads((tmp_path / "bad" / "sweep.json").read_text())
    assert len(data["cells"]) == 2 and all("boom: no GPU here" in c["error"] for c in data["cells"])


def test_max_rate_against_a_live_engine(tmp_path):
    # 4 sequences at a time, 16 tokens at 5 ms per step: about 50 req/s of capacity, after which TTFT queues
    r = run_cli("sweep", "--dataset-name", "random", "--random-input-len", "16", "--random-output-len", "16",
                "--num-prompts", "40", "--request-rate", "20", "--goodput", "ttft:60", "--gpu", "l40s",
                "--max-num-seqs", "4", "--fixed-step-ms", "5", "--live", "--find-max-rate", "--max-probes", "7",
                "--result-dir", str(tmp_path), "--sweep-id", "live", timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    res = json.loads((tmp_path / "live" / "max_rate.json").read_text())["results"][0]
    assert res["max_rate"] is not None and 10 < res["max_rate"] < 120
    assert any(not p["pass"] for p in res["probes"]) and any(p["pass"] for p in res["probes"])
    probes = os.listdir(tmp_path / "live" / "probes" / "l40s")
    assert "server.log" in probes and sum(x.startswith("probe-") for x in probes) == len(res["probes"])


def test_reports_are_self_contained_and_escape_their_inputs(tmp_path):
    w = tmp_path / "w.toml"
    w.write_text('name = "<script>alert(1)</script>"\nnum_requests = 30\n[slo]\nttft = 500\n'
                 '[[class]]\nname = "<b>evil</b>"\ninput = 32\noutput = 8\n'
                 '[[class]]\nname = "plain"\ninput = 16\noutput = 4\n')
    r = run_cli("sweep", "--workload", str(w), "--gpu", "l40s", "--param", "max_num_batched_tokens=256,512",
                "--result-dir", str(tmp_path), "--sweep-id", "x", timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    html = (tmp_path / "x" / "report.html").read_text()
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "http://" not in html and "https://" not in html  # loads nothing from the network
    cell = json.loads((tmp_path / "x" / "sweep.json").read_text())["cells"][0]["run_dir"]
    r = run_cli("report", cell)
    assert r.returncode == 0, r.stderr
    page = (tmp_path / "x" / "cells" / os.path.basename(cell) / "report.html").read_text()
    assert "&lt;b&gt;evil&lt;/b&gt;" in page and "<b>evil</b>" not in page
    assert run_cli("report", str(tmp_path / "nothing")).returncode == 2
