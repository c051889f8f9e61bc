"""Speculative acceptance per workload class, and `goodbench calibrate` on a speculating server's runs
(analysis/calspec.py): the runs are simulated on a server whose step times (a known profile) and whose
acceptance per class are known; the summary and the fit must find both again."""

import pytest
from test_calibrate import KNOBS
from test_profile import write

import goodbench as gb
from goodbench.api.enginefiles import load_profile, resolve_engine
from goodbench.engine.speculative import SpecDecode, expected_tokens, parse_acceptance, scaled_rates
from goodbench.errors import InputError, UsageError

TWO = """
name = "two"
generator = "mixed"
num_requests = 160
seed = 3
[arrival]
process = "poisson"
rate = 3.0
[[class]]
name = "code"
weight = 0.5
input = { dist = "uniform", min = 64, max = 400 }
output = { dist = "uniform", min = 48, max = 128 }
[[class]]
name = "chat"
weight = 0.5
input = { dist = "uniform", min = 32, max = 300 }
output = { dist = "uniform", min = 48, max = 128 }
"""
TRUE_ACCEPTANCE = "0.7,0.6;code=0.9,0.85;chat=0.45,0.35"


def test_acceptance_per_class_parses_and_refuses_what_it_cannot_read():
    assert parse_acceptance("0.7,0.6;code=0.9;chat=0.5,0.4") == ((0.7, 0.6), {"code": (0.9,), "chat": (0.5, 0.4)})
    sd = SpecDecode.from_knobs("eagle3", 3, "0.7;code=0.9,0.8")
    assert sd.rates_for("code") == (0.9, 0.8, 0.8) and sd.rates_for("other") == (0.7, 0.7, 0.7)
    assert sd.rates_for(None) == (0.7, 0.7, 0.7)
    for bad, why in (("=0.9", "names no class"), ("0.7;0.8", "given twice"), ("0.7;c=1.5", "probability")):
        with pytest.raises(UsageError, match=why):
            parse_acceptance(bad)
    with pytest.raises(UsageError, match="no public default"):  # classes alone leave other requests unpriced
        SpecDecode.from_knobs("eagle3", 2, "code=0.9")


@pytest.mark.parametrize("target", [1.2, 2.0, 2.9])
def test_scaled_rates_meet_the_mean_length_and_keep_the_shape(target):
    rates = (0.8, 0.6, 0.5)
    out = scaled_rates(rates, target)
    assert expected_tokens(out) == pytest.approx(target, rel=1e-6)
    assert out[0] > out[1] > out[2]  # the positions' order is kept


def test_the_summary_recovers_each_classs_acceptance(tmp_path):
    (tmp_path / "two.toml").write_text(TWO)
    eng = gb.EngineConfig(
        gpu="h100-sxm", speculative_method="eagle3", num_speculative_tokens=2, speculative_acceptance=TRUE_ACCEPTANCE
    )
    res = gb.simulate(gb.load_workload(str(tmp_path / "two.toml")), eng, result_dir=str(tmp_path), run_id="s")
    b = res.summary["speculative"]
    truth = SpecDecode.from_knobs("eagle3", 2, TRUE_ACCEPTANCE)
    for c in ("code", "chat"):  # mean tokens per drafted step, recovered from the counters and the chunks
        got = expected_tokens(b["acceptance_by_class"][c])
        assert got == pytest.approx(truth.expected_tokens(c), rel=0.06), (c, got)
    assert b["acceptance"].count(";") == 2 and SpecDecode.from_knobs("eagle3", 2, b["acceptance"]).by_class


@pytest.fixture(scope="module")
def spec_runs(tmp_path_factory):
    """Two runs on a profiled server that speculates (EAGLE-3, k = 2, acceptance per class)."""
    tmp = tmp_path_factory.mktemp("calspec")
    truth = write(tmp)
    (tmp / "two.toml").write_text(TWO)
    eng = gb.EngineConfig(
        calibration=truth,
        speculative_method="eagle3",
        num_speculative_tokens=2,
        speculative_acceptance=TRUE_ACCEPTANCE,
    )
    dirs = []
    for i, rate in enumerate((2.0, 4.0)):
        wl = gb.load_workload(str(tmp / "two.toml"), request_rate=rate)
        dirs.append(gb.simulate(wl, eng, result_dir=str(tmp), run_id=f"r{i}").dir)
    return tmp, truth, dirs


def test_calibrate_refuses_a_speculating_servers_runs_without_its_method(spec_runs):
    _, _, dirs = spec_runs
    with pytest.raises(UsageError, match="--speculative-method"):
        gb.calibrate(dirs, gb.EngineConfig(**KNOBS))
    with pytest.raises(UsageError, match="2 draft positions"):
        gb.calibrate(dirs, gb.EngineConfig(**KNOBS, speculative_method="eagle3", num_speculative_tokens=4))


def test_calibrate_fits_the_acceptance_and_the_steps_of_a_speculating_server(spec_runs):
    tmp, truth, dirs = spec_runs
    out = str(tmp / "fit.toml")
    cal = gb.calibrate(dirs, gb.EngineConfig(**KNOBS, speculative_method="eagle3"), out=out)
    prof, true_prof = load_profile(out), load_profile(truth)
    assert prof.engine["speculative_method"] == "eagle3" and prof.engine["num_speculative_tokens"] == 2
    fitted = SpecDecode.from_knobs("eagle3", 2, prof.engine["speculative_acceptance"])
    want = SpecDecode.from_knobs("eagle3", 2, TRUE_ACCEPTANCE)
    for c in ("code", "chat"):
        assert fitted.expected_tokens(c) == pytest.approx(want.expected_tokens(c), rel=0.06), c
    for n, d, ctx in ((1, 1, 300), (16, 16, 16 * 600)):  # the step times, under the drafts' extra rows
        assert prof.step_time(n, d, ctx) == pytest.approx(true_prof.step_time(n, d, ctx), rel=0.1)
    for row in cal.rows:
        assert all(abs(e) < 0.08 for e in row["fit_error"].values()), row
    assert any("the runs speculated" in n for n in cal.notes)
    # a what-if on k alone keeps the server's method and fitted acceptance; k = 0 turns speculation off
    three = resolve_engine(gb.EngineConfig(calibration=out, num_speculative_tokens=3))
    assert three.spec().k == 3 and three.spec().by_class == tuple((c, rs + rs[-1:]) for c, rs in fitted.by_class)
    assert resolve_engine(gb.EngineConfig(calibration=out, num_speculative_tokens=0)).spec() is None
    assert resolve_engine(gb.EngineConfig(calibration=out)).spec().k == 2
    # a sweep's K = 0 cell naming the server's method is off too; another method keeps the server's k, its own rates
    off = gb.EngineConfig(calibration=out, speculative_method="eagle3", num_speculative_tokens=0)
    assert resolve_engine(off).spec() is None
    other = resolve_engine(gb.EngineConfig(calibration=out, speculative_method="mtp")).spec()
    assert other.method == "mtp" and other.k == 2 and other.by_class == ()
    # the left-out run is predicted with the acceptance of the other run alone (its own counters unseen)
    assert cal.out_of_sample and all(r["loro_error"] for r in cal.rows)


def test_a_server_without_per_position_counters_replays_at_its_drafts_k(spec_runs):
    from dataclasses import replace

    from goodbench.analysis.calrun import load_run
    from goodbench.analysis.calspec import speculation

    runs = [load_run(d) for d in spec_runs[2]]
    runs = [replace(r, spec={**r.spec, "per_position": [], "conditional_rates": []}) for r in runs]
    with pytest.raises(UsageError, match="--speculative-acceptance"):
        speculation(runs, gb.EngineConfig(speculative_method="eagle3"))
    cfg, b = speculation(runs, gb.EngineConfig(speculative_method="eagle3", speculative_acceptance="0.7"))
    assert cfg.num_speculative_tokens == 2 and cfg.spec().k == 2  # draft tokens / drafts


def test_a_disaggregated_decode_side_accepts_at_its_requests_class(tmp_path):
    from goodbench.engine.layout import ClusterSpec

    (tmp_path / "two.toml").write_text(TWO)
    eng = gb.EngineConfig(
        gpu="h100-sxm", speculative_method="eagle3", num_speculative_tokens=2, speculative_acceptance=TRUE_ACCEPTANCE
    )
    wl = gb.load_workload(str(tmp_path / "two.toml"))
    b = gb.simulate(wl, eng, result_dir=str(tmp_path), cluster=ClusterSpec(prefill=1, decode=1)).summary["speculative"]
    truth = SpecDecode.from_knobs("eagle3", 2, TRUE_ACCEPTANCE)
    for c in ("code", "chat"):
        assert expected_tokens(b["acceptance_by_class"][c]) == pytest.approx(truth.expected_tokens(c), rel=0.06), c


def test_a_profile_with_speculation_it_cannot_read_names_the_file(tmp_path):
    bad = write(tmp_path, engine={"speculative_method": "eagle3", "num_speculative_tokens": 2})
    with pytest.raises(InputError, match=r"p\.toml.*speculative.*--speculative-acceptance"):
        load_profile(bad)
