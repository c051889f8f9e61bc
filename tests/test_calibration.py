"""The calibration of the cost model against public vLLM measurements (engine/virtual/calibration.csv):
the shipped constants are the fit (one more Gauss-Newton step from them moves nothing), every point's
in-sample and out-of-sample prediction and the regime table in docs/engine.md are recomputed from the
data, and engine/uncertainty.py ships that table's numbers. About half a minute: one replay of every
point at the shipped constants, and one of every fitted point at its source's leave-out constants."""

import os
from dataclasses import replace

import numpy as np
import pytest
from conftest import ROOT

from goodbench.engine import uncertainty
from goodbench.engine.costmodel import CostModel
from goodbench.engine.virtual import calibration as cal, calpoints as cp, calreport
from goodbench.engine.virtual.calreport import markdown, ttft_error, uncertainty_constants


@pytest.fixture(scope="module")
def recomputed():
    return cal.calibrate(start=cal.shipped_theta(), iterations=0)


def test_shipped_constants_are_the_fit(recomputed):
    # within a tenth of each constant's scale: medians and Poisson replays make the objective piecewise,
    # so Gauss-Newton settles to about that
    assert recomputed["step"] < 0.1, "the fit moved: refit: `python -m goodbench.engine.virtual.calreport --refit`"


def test_documented_tables_match_the_data(recomputed):
    with open(os.path.join(ROOT, "docs", "engine.md"), encoding="utf-8") as fh:
        doc = fh.read()
    begin, end = "<!-- calibration:begin -->\n", "\n<!-- calibration:end -->"
    assert begin in doc and end in doc
    block = doc.split(begin, 1)[1].split(end, 1)[0]
    assert block == markdown(recomputed), "docs/engine.md drifted: paste `python -m goodbench.engine.virtual.calreport`"


def test_the_engines_uncertainty_is_the_documented_table(recomputed):
    err, worst, tiers = uncertainty_constants(recomputed["rows"])
    assert uncertainty.REGIME_ERROR == err
    assert uncertainty.REGIME_WORST == worst
    assert uncertainty.CALIBRATED_TIERS == tiers
    assert uncertainty.TTFT_ERROR == ttft_error(recomputed["rows"])


def test_every_point_is_sourced_and_whole_sources_are_held_out():
    pts = cp.load_points()
    for p in pts:
        assert p.source.startswith("https://") and p.value > 0 and p.use in cp.USES
    by_source = {}
    for p in pts:
        by_source.setdefault(p.source_id, set()).add(p.use)
    assert sum(uses == {"check"} for uses in by_source.values()) >= 4  # sources never fitted


@pytest.mark.parametrize(  # the second off the H100's bandwidth; the third FP8 weights on an HBM tier
    "point", ["yobitel-h100-c4", "musgrave-a100-40g-c1", "anl-fp8-h100-sxm-llama-3.1-8b-tp1-b16-L1024"]
)
def test_one_replay_gives_the_exact_local_jacobian(point):
    """Following the clock: for a closed loop (its step sequence does not depend on step times) the
    metric moved by the derivative equals a replay with moved constants."""
    p = next(q for q in cp.load_points() if q.id == point)
    theta = cal.shipped_theta()
    value, jac, _ = cal.replay_with_jacobian(p, theta)
    moved = theta.copy()
    moved[0] += 0.2e-3  # step_s
    moved[3] += 1e-6  # attn_request_s
    moved[cal.NAMES.index("fp8_mem")] += 0.1  # GDDR tiers' FP8 reads: no effect here
    moved[cal.NAMES.index("fp8_mem_hbm")] += 0.1
    again, _ = cp.replay(p, CostModel.for_config(cp.point_config(p), constants=cal.constants(moved, p)))
    assert again == pytest.approx(value + jac @ (moved - theta), rel=1e-6)
    if p.dtype == "fp8":  # an HBM tier pays its own FP8 weight-read term
        assert jac[cal.NAMES.index("fp8_mem_hbm")] > 0 and jac[cal.NAMES.index("fp8_mem")] == 0


def test_leave_one_source_out_never_sees_the_source():
    """A hand-made linearisation: three sources agree on a step time, a fourth does not; the fourth's
    leave-out fit is the others' (its own pull is gone), not the all-sources compromise."""
    pts = [
        cp.Point(
            str(k),
            f"src{k}",
            "h100-sxm",
            "llama-3.1-8b",
            1,
            "bf16",
            "auto",
            "closed",
            1,
            0,
            "fixed",
            8,
            8,
            1,
            "tpot_p50_ms",
            v,
            "https://x",
        )
        for k, v in enumerate((6.0, 6.0, 6.0, 9.0))
    ]
    jac = np.zeros((4, len(cal.NAMES)))
    jac[:, 0] = 1000.0  # metric (ms) = 5 + 1000 * step_s
    theta = cal.PRIOR.copy()
    theta[0] = 1e-3
    lin = cal.Linear(theta, 5 + 1000 * np.full(4, theta[0]), jac, [{}] * 4)
    everyone = cal.solve(pts, lin, [0, 1, 2, 3])[0]
    without = cal.solve(pts, lin, [0, 1, 2])[0]
    assert without == pytest.approx(1e-3, abs=2e-5) and everyone > without + 2e-4


def test_bad_rows_are_refused(tmp_path):
    path = tmp_path / "c.csv"
    with open(cp.DATA, encoding="utf-8") as fh:
        head = fh.readline()
    cols = head.strip().split(",")
    row = dict.fromkeys(cols, "")
    row.update(
        id="x",
        source_id="s",
        use="fit",
        gpu="h100-sxm",
        model="llama-3.1-8b",
        tp="1",
        dtype="bf16",
        workload="closed",
        concurrency="1",
        dataset="fixed",
        input_len="8",
        output_len="8",
        num_requests="1",
        metric="speed",
        value="1",
        source="https://x",
    )
    path.write_text(head + ",".join(row[c] for c in cols) + "\n")
    with pytest.raises(ValueError, match="unknown metric"):
        cp.load_points(str(path))
    row.update(metric="tpot_p50_ms", engine_args="max_num_seqs=4;turbo=1")
    path.write_text(head + ",".join(row[c] for c in cols) + "\n")
    with pytest.raises(ValueError, match="unknown engine argument"):
        cp.load_points(str(path))


def test_a_spread_replays_different_lengths_around_the_stated_ones():
    p = next(q for q in cp.load_points() if q.dataset == "spread")
    lens = np.array([[r.prompt_tokens, r.max_tokens] for r in cp.requests(p)])
    assert lens[:, 0].min() < p.input_len < lens[:, 0].max()
    assert np.all(np.abs(lens[:, 0] / p.input_len - 1) <= p.length_spread + 1e-3)
    assert cp.requests(replace(p, length_spread=0.0))[0].prompt_tokens == p.input_len


def test_a_sharegpt_sample_is_rescaled_to_the_runs_measured_means_where_given():
    p = next(q for q in cp.load_points() if q.dataset == "sharegpt" and q.input_len and q.output_len)
    lens = np.array([[r.prompt_tokens, r.max_tokens] for r in cp.requests(p)], float)
    assert lens.mean(axis=0) == pytest.approx([p.input_len, p.output_len], rel=0.01)
    raw = np.array([[r.prompt_tokens, r.max_tokens] for r in cp.requests(replace(p, input_len=0, output_len=0))], float)
    assert np.corrcoef(raw[:, 0], lens[:, 0])[0, 1] > 0.99  # the same sample, its shape kept
    assert not np.allclose(raw.mean(axis=0), lens.mean(axis=0), rtol=0.01)


def test_multi_step_runs_pay_the_host_terms_once_per_scheduling_round():
    """vLLM 0.6's --num-scheduler-steps n schedules, prepares inputs and processes outputs once per n
    forward passes: a V0 point with n = 10 is priced with a tenth of the V0 host terms, its Jacobian
    says so exactly, and the engine itself never sees the argument."""
    base = next(q for q in cp.load_points() if q.id == "anl-h100-sxm-llama-3.1-8b-tp1-b16-L1024")
    p = replace(base, engine_args=base.engine_args | {"num_scheduler_steps": 10}, output_len=64)
    theta = cal.shipped_theta()
    k = cal.constants(theta, p)
    assert k.step_s == pytest.approx(theta[cal.V0_STEP] / 10) and k.request_s == pytest.approx(theta[cal.V0_REQ] / 10)
    assert "num_scheduler_steps" not in cp.point_config(p).__dict__
    value, jac, _ = cal.replay_with_jacobian(p, theta)
    moved = theta.copy()
    moved[cal.V0_STEP] += 1e-3
    again, _ = cp.replay(p, CostModel.for_config(cp.point_config(p), constants=cal.constants(moved, p)))
    assert again == pytest.approx(value + jac @ (moved - theta), rel=1e-6)
    single, _ = cp.replay(base, CostModel.for_config(cp.point_config(base), constants=cal.constants(theta, base)))
    assert jac[cal.V0_STEP] < single  # a tenth of the per-step cost per step, not the whole of it


def test_each_era_has_its_own_front_end():
    """The front end is host time, and V1 moved the engine core out of the API server's process: a
    V0-era online point is priced with the V0 front end, and its TTFT's derivative lands on that term
    alone (the V1 one, which ships, is fitted only by V1 sources)."""
    p = next(q for q in cp.load_points() if q.id == "crusoe-l40s-1.0qps-8b-bf16-ttft")
    assert cal.era(p) == "v0"
    theta = cal.shipped_theta()
    theta[cal.NAMES.index("frontend_s")] = 0.0
    theta[cal.V0_FRONTEND] = 0.03
    assert cal.constants(theta, p).frontend_s == pytest.approx(0.03)
    value, jac, _ = cal.replay_with_jacobian(p, theta)
    assert jac[cal.NAMES.index("frontend_s")] == 0.0
    assert jac[cal.V0_FRONTEND] == pytest.approx(1e3, rel=0.05)  # a TTFT p50 in ms moves 1 ms per ms of front end
    v1 = replace(p, version="0.8.5")
    assert cal.constants(theta, v1).frontend_s == 0.0


def test_a_source_stating_no_version_is_v1_after_v0_was_removed():
    p = next(q for q in cp.load_points() if q.id == "yobitel-h100-c1")
    assert cal.era(replace(p, version="not stated", date="2026-05-18 (post)")) == "v1"
    assert cal.era(replace(p, version="not stated", date="2024-09 (README)")) == "v0"
    assert cal.era(replace(p, version="not stated", date="not shown")) == "v0"
    assert cal.era(replace(p, version="0.6.0", date="2026-05-18")) == "v0"


def test_sources_from_vllm_0_14_on_replay_with_async_scheduling():
    """vLLM 0.14.0 (2026-01) turned async scheduling on by default: a source's replay follows its version
    (or, stating none, its date), and the held request's extra step is in its TTFT."""
    p = next(q for q in cp.load_points() if q.id == "yobitel-h100-c1")
    assert p.async_scheduling and cp.point_config(p).async_scheduling  # 0.21.0
    assert not replace(p, version="0.11.0").async_scheduling
    assert not replace(p, version="0.8.5 (assumed)", date="2026-05").async_scheduling
    assert replace(p, version="not stated", date="2026-02-24").async_scheduling
    assert not replace(p, version="not stated", date="2025-12 (post)").async_scheduling
    assert not replace(p, version="not stated", date="not shown").async_scheduling
    for date, held in (("20260224", True), ("20251201", False), ("2026 (doc)", True), ("2025 (doc)", False)):
        assert replace(p, version="not stated", date=date).async_scheduling is held, date  # compact, or a year
    iog = next(q for q in cp.load_points() if q.id == "iog-l3-8b-h100pcie-r8-ttft")
    cost = CostModel.for_config(cp.point_config(iog))
    sync = cp.replay(iog, cost)[0]
    held = cp.replay(replace(iog, version="0.14.1"), cost)[0]
    assert held > sync * 1.2  # at 8 req/s most prompts land mid-step and wait one step more


def test_excluded_points_say_why_and_are_not_counted(recomputed):
    rows = recomputed["rows"]
    excluded = [r for r in rows if r["point"].use == "excluded"]
    assert excluded and all(r["point"].note.startswith("excluded: ") for r in excluded)
    ttft = [r for r in rows if r["point"].klass == "ttft"]
    assert len([r for r in calreport.counted(ttft)]) == len(ttft) - sum(r["point"].klass == "ttft" for r in excluded)
