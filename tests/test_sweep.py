"""Sweeps (analysis.sweep, analysis.live): best cell per tier, the CLI grid on the simulator, live cells
with any server command, and the sweep report."""

import csv
import json
import os

from conftest import ROOT, run_cli

from goodbench.analysis.sweep import best_per_tier, mark_flips


def test_best_per_tier_breaks_ties_on_itl():
    rows = [
        {"gpu": "a", "cell": "a1", "goodput": 5.0, "itl_p99_ms": 40.0, "goodput_lo": 4.8, "goodput_hi": 5.0},
        {"gpu": "a", "cell": "a2", "goodput": 5.0, "itl_p99_ms": 30.0, "goodput_lo": 4.8, "goodput_hi": 5.0},
        {"gpu": "a", "cell": "a3", "goodput": 3.0, "itl_p99_ms": 10.0, "goodput_lo": 2.0, "goodput_hi": 3.5},
    ]
    b = best_per_tier(rows)["a"]
    assert b["cell"] == "a2" and b["next"] == "a1" and b["margin_goodput"] == 0.0 and not b["separated"]


def test_indistinguishable_goodputs_prefer_the_better_latency():
    """The issue's sweep: 4096 had 2.78 req/s with ITL p99 179.5 ms, 512 had 2.76 with 41.6 ms, inside
    each other's intervals: the verdict says they tie and picks 512, stating the rule."""
    from goodbench.report.tables import best_text

    rows = [
        {"gpu": "g", "cell": "g,max_num_batched_tokens=4096", "goodput": 2.78, "itl_p99_ms": 179.5,
         "goodput_lo": 2.55, "goodput_hi": 2.95},
        {"gpu": "g", "cell": "g,max_num_batched_tokens=512", "goodput": 2.76, "itl_p99_ms": 41.6,
         "goodput_lo": 2.52, "goodput_hi": 2.93},
        {"gpu": "g", "cell": "g,max_num_batched_tokens=128", "goodput": 1.9, "itl_p99_ms": 20.0,
         "goodput_lo": 1.7, "goodput_hi": 2.1},
    ]  # fmt: skip
    b = best_per_tier(rows)["g"]
    assert b["cell"] == "g,max_num_batched_tokens=512" and b["highest_goodput"] == "g,max_num_batched_tokens=4096"
    assert [t["cell"] for t in b["tied"]] == ["g,max_num_batched_tokens=4096"] and "lowest ITL p99" in b["rule"]
    text = best_text("g", b)
    assert "budget=512" in text.split("—")[0] and "indistinguishable from g,budget=4096" in text


def test_within_a_goodput_tie_the_shortest_stall_wins():
    """Issue 39's H100 cells: every goodput ties; the budget that fits the 3,000-token prompt (4096, as
    unchunked) has the lowest pooled ITL p99 (8.0 ms) but stalls short streams for 75.6 ms; 256 stalls
    them 11.1 ms and wins. Goodput still comes first: a cell outside the tie loses whatever its stall."""
    from goodbench.analysis.sweep import rank

    def cell(budget, goodput, stall, itl, ttft=100.0):
        return {"gpu": "h100-sxm", "cell": f"b{budget}", "goodput": goodput, "goodput_lo": 5.05,
                "goodput_hi": 5.12, "stall_p99_ms": stall, "itl_p99_ms": itl, "ttft_p99_ms": ttft}  # fmt: skip

    rows = [cell(256, 5.118, 11.1, 10.7), cell(512, 5.118, 16.5, 15.8), cell(4096, 5.116, 75.6, 8.0)]
    rows.append(cell(128, 4.0, 5.0, 5.0) | {"goodput_lo": 3.8, "goodput_hi": 4.2})
    ranked, tied, top = rank(rows)
    assert [r["cell"] for r in ranked] == ["b256", "b512", "b4096", "b128"] and len(tied) == 3
    b = best_per_tier(rows)["h100-sxm"]
    assert b["cell"] == "b256" and b["stall_p99_ms"] == 11.1 and "shortest stall" in b["rule"]
    assert [t["cell"] for t in b["tied"]] == ["b512", "b4096"]
    no_long = [{k: v for k, v in r.items() if k != "stall_p99_ms"} for r in rows[:3]]
    assert best_per_tier(no_long)["h100-sxm"]["cell"] == "b4096"  # no long class: the pooled ITL p99 decides


def test_external_cells_are_labelled_with_what_is_known():
    from goodbench.analysis.grid import Cell
    from goodbench.analysis.live import external_gpu

    cell = Cell("h100-sxm", (("max_num_batched_tokens", 512),))
    assert external_gpu(cell, "goodbench serve --port {port} --gpu l40s") == "external"
    assert external_gpu(cell, "goodbench serve --port {port} --gpu {gpu}") == "h100-sxm"
    assert external_gpu(cell, None) == "h100-sxm"


def test_verdicts_and_best_cells_within_the_engines_error_are_marked():
    """A cell meets the SLO at step times the engine's error faster but not slower: its verdict could
    flip; the best cell at one edge is another cell: the best could flip."""
    rows = [
        {
            "gpu": "a",
            "cell": "a1",
            "goodput": 5.0,
            "goodput_fast": 5.1,
            "goodput_slow": 4.0,
            "attainment_fast": 0.97,
            "attainment_slow": 0.80,
        },
        {
            "gpu": "a",
            "cell": "a2",
            "goodput": 4.9,
            "goodput_fast": 4.95,
            "goodput_slow": 4.6,
            "attainment_fast": 0.99,
            "attainment_slow": 0.95,
        },
    ]
    mark_flips(rows, 0.9)
    assert rows[0]["verdict_could_flip"] and not rows[1]["verdict_could_flip"]
    b = best_per_tier(rows)["a"]
    assert b["cell"] == "a1" and b["best_if_fast"] == "a1" and b["best_if_slow"] == "a2" and b["could_flip"]


def test_sweep_cli_finds_a_chunk_size_per_tier(tmp_path):
    r = run_cli(
        "sweep",
        "--workload",
        os.path.join(ROOT, "workloads", "hol-stress.toml"),
        "--gpu",
        "h200,h100-sxm",
        "--param",
        "max_num_batched_tokens=2048,8192",
        "--param",
        "enable_chunked_prefill=false",
        "--slo-scales",
        "0.6,1.0",
        "--result-dir",
        str(tmp_path),
        "--sweep-id",
        "s1",
        "--jobs",
        "2",
        timeout=240,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    out = tmp_path / "s1"
    with open(out / "sweep.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 6
    h100_unchunked = [r for r in rows if r["cell"] == "h100-sxm,enable_chunked_prefill=false"][0]
    assert float(h100_unchunked["attainment@0.6"]) <= float(h100_unchunked["attainment@1"]) < 0.95
    data = json.loads((out / "sweep.json").read_text())
    assert set(data["best"]) == {"h200", "h100-sxm"}
    unchunked = [c for c in data["cells"] if c["enable_chunked_prefill"] is False]
    assert all(c["max_num_batched_tokens"] > 100_000 for c in unchunked)  # vLLM: max_model_len
    assert data["best"]["h100-sxm"]["enable_chunked_prefill"] is True  # HOL: chunking wins on the default tier
    assert len(os.listdir(out / "cells")) == 6
    for c in rows:  # the stall a short stream felt, and the verdict gating gives the cell
        assert float(c["stall_p99_ms"]) >= 0 and c["long_class"] == "long"
        assert c["verdict"] == ("pass" if float(c["slo_attainment"]) >= 0.95 else "fail")
    assert "stall p99" in r.stdout
    import importlib.util

    if importlib.util.find_spec("matplotlib") is not None:
        for png in ("sweep_metrics.png", "sweep_goodput_heatmap.png", "sweep_frontier.png"):
            assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png
    assert "best on h100-sxm" in r.stdout and "offered " in r.stdout and "(the workload's own timing)" in r.stdout
    # every simulated cell was run again at the engine's error either side: the marks are computed
    for c in data["cells"]:
        assert c["engine_uncertainty_pct"] > 0 and isinstance(c["verdict_could_flip"], bool)
        assert c["attainment_fast"] >= c["attainment_slow"] - 1e-9
    assert all("could_flip" in b for b in data["best"].values())


def test_sweep_title_labels_load_by_what_the_schedule_offered():
    from goodbench.report.tables import sweep_title

    title = sweep_title("s", "mixed", "poisson@6.00", 300, {"ttft": 500.0}, offered=5.61)
    assert "offered 5.61 req/s (poisson@6.00 asked)" in title
    assert "· poisson@6.00 ·" in sweep_title("s", "mixed", "poisson@6.00", 300, {"ttft": 500.0})


def test_sweep_needs_an_slo(tmp_path):
    r = run_cli("sweep", "--dataset-name", "random", "--num-prompts", "10", "--result-dir", str(tmp_path))
    assert r.returncode == 2 and "SLO" in r.stderr


def test_live_sweep_with_server_cmd_records_failed_cells(tmp_path):
    import sys

    ok_cmd = (
        f"{sys.executable} -m goodbench serve --port {{port}} --fixed-step-ms 5 "
        f"--max-num-batched-tokens {{max_num_batched_tokens}}"
    )
    r = run_cli(
        "sweep",
        "--dataset-name",
        "random",
        "--random-input-len",
        "64",
        "--random-output-len",
        "8",
        "--num-prompts",
        "16",
        "--request-rate",
        "20",
        "--goodput",
        "ttft:500",
        "--gpu",
        "l40s",
        "--param",
        "max_num_batched_tokens=256,1024",
        "--server-cmd",
        ok_cmd,
        "--result-dir",
        str(tmp_path),
        "--sweep-id",
        "ok",
        timeout=240,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    data = json.loads((tmp_path / "ok" / "sweep.json").read_text())
    assert [c["issued"] for c in data["cells"]] == [16, 16]
    # the command chose its own GPU (no {gpu} in it): the cells say so, not the grid's default tier
    assert {c["gpu"] for c in data["cells"]} == {"external"} and "best on external" in r.stdout
    assert data["cells"][0]["cell"].startswith("external,")
    run_dirs = [c["run_dir"] for c in data["cells"]]
    assert all(os.path.exists(os.path.join(d, "server.log")) for d in run_dirs)
    bad_cmd = f"{sys.executable} -c \"import sys; print('boom: no GPU here'); sys.exit(3)\" {{port}}"
    r = run_cli(
        "sweep",
        "--dataset-name",
        "random",
        "--num-prompts",
        "4",
        "--request-rate",
        "20",
        "--goodput",
        "ttft:500",
        "--gpu",
        "l40s",
        "--param",
        "max_num_batched_tokens=256,512",
        "--server-cmd",
        bad_cmd,
        "--result-dir",
        str(tmp_path),
        "--sweep-id",
        "bad",
        timeout=240,
    )
    assert r.returncode == 1, r.stdout + r.stderr
    data = json.loads((tmp_path / "bad" / "sweep.json").read_text())
    assert len(data["cells"]) == 2 and all("boom: no GPU here" in c["error"] for c in data["cells"])


def test_reports_are_self_contained_and_escape_their_inputs(tmp_path):
    w = tmp_path / "w.toml"
    w.write_text(
        'name = "<script>alert(1)</script>"\nnum_requests = 30\n[slo]\nttft = 500\n'
        '[[class]]\nname = "<b>evil</b>"\ninput = 32\noutput = 8\n'
        '[[class]]\nname = "plain"\ninput = 16\noutput = 4\n'
    )
    r = run_cli(
        "sweep",
        "--workload",
        str(w),
        "--gpu",
        "l40s",
        "--param",
        "max_num_batched_tokens=256,512",
        "--result-dir",
        str(tmp_path),
        "--sweep-id",
        "x",
        timeout=180,
    )
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
