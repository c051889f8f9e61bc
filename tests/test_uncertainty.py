"""engine_uncertainty: how sure a simulated run's step times are, from the calibration's table."""

import io

import pytest
from rich.console import Console

import goodbench as gb
from goodbench.engine import uncertainty as u
from goodbench.report.console import render_summary
from goodbench.report.html import _blocks as html_blocks


def test_regimes_follow_the_batch_the_prefill_share_and_tp():
    assert u.regimes(1.0, 0.1, 1) == ["batch 1"]
    assert u.regimes(40, 0.6, 4) == ["batch 17-64", "prefill-heavy", "TP > 1"]
    assert u.regimes(300, 0.0, 1) == ["batch 65+"]


def test_a_run_gets_its_regimes_worst_error_and_says_why():
    stats = {"busy_s": 10.0, "mean_batch": 30.0, "prefill_share": 0.6}
    x = u.engine_uncertainty({"gpu": "h100-sxm", "tensor_parallel_size": 1}, stats)
    assert x["regimes"] == ["batch 17-64", "prefill-heavy"]
    assert x["step_time_pct"] == pytest.approx(
        100 * max(u.REGIME_ERROR["batch 17-64"], u.REGIME_ERROR["prefill-heavy"]), abs=0.05
    )
    assert "out of sample" in x["basis"]
    blind = u.engine_uncertainty({"gpu": "l4", "tensor_parallel_size": 1}, stats)
    assert blind["step_time_pct"] >= x["step_time_pct"] and "l4" in blind["basis"]
    assert "extrapolates its scaling with memory bandwidth below the slowest fitted tier's (l40s" in blind["basis"]
    # 2 TB/s: within the fitted range
    pcie = u.engine_uncertainty({"gpu": "h100-pcie", "tensor_parallel_size": 1}, stats)
    assert "h100-pcie" in pcie["basis"] and "extrapolates" not in pcie["basis"]
    prof = u.engine_uncertainty({"gpu": "h100-sxm"}, stats | {"profile": {"path": "/p.toml", "step_time_pct": 3.5}})
    assert prof["step_time_pct"] == 3.5 and "/p.toml" in prof["basis"]
    assert u.engine_uncertainty(None, stats) is None


def test_ttft_says_the_front_end_is_not_priced_on_public_tiers_only():
    """The shipped model prices no V1 front end: TTFT carries the public TTFTs' own error and the front
    ends public servers were seen to spend; a profile fitted its own, so it adds nothing."""
    stats = {"busy_s": 10.0, "mean_batch": 3.0, "prefill_share": 0.2}
    x = u.engine_uncertainty({"gpu": "h100-sxm", "tensor_parallel_size": 1}, stats)
    assert x["ttft_pct"] == pytest.approx(100 * u.TTFT_ERROR["calibrated"], abs=0.05)
    assert x["ttft_pct"] > x["step_time_pct"]
    assert "no server front end is priced" in x["ttft_basis"] and "on calibrated tiers" in x["ttft_basis"]
    blind = u.engine_uncertainty({"gpu": "h100-pcie", "tensor_parallel_size": 1}, stats)
    assert blind["ttft_pct"] == max(100 * u.TTFT_ERROR["all"], blind["step_time_pct"])
    assert "every point" in blind["ttft_basis"]
    prof = u.engine_uncertainty({"gpu": "h100-sxm"}, stats | {"profile": {"path": "/p.toml", "step_time_pct": 3.5}})
    assert "ttft_pct" not in prof
    heavy = u.engine_uncertainty({"gpu": "h100-sxm", "tensor_parallel_size": 1}, stats | {"prefill_share": 0.9})
    assert heavy["ttft_pct"] == heavy["step_time_pct"] > 100 * u.TTFT_ERROR["calibrated"]  # never surer than a step


def test_every_simulated_summary_carries_it(tmp_path):
    wl = gb.load_workload("mixed-long-short", num_prompts=40)
    run = gb.simulate(wl, gb.EngineConfig(), result_dir=str(tmp_path))
    x = run.summary["engine_uncertainty"]
    assert x["step_time_pct"] > 0 and x["regimes"][0].startswith("batch")
    again = gb.summarize(gb.load_run(run.dir))  # recomputed from the directory: the same
    assert again["engine_uncertainty"] == x
    line = f"engine: step times ±{x['step_time_pct']:.0f}%"
    buf = io.StringIO()
    Console(file=buf, width=200, color_system=None).print(render_summary(run.summary, run.meta.to_dict(), 0.9))
    assert line in buf.getvalue() and x["basis"] in buf.getvalue()
    assert any(line in b for b in html_blocks(run.summary))
    ttft = f"engine: TTFT ±{x['ttft_pct']:.0f}%"
    assert ttft in buf.getvalue() and any(ttft in b for b in html_blocks(run.summary))
