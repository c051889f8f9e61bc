"""Calibration profiles: the TOML a `goodbench calibrate` writes, read back as a cost model."""

import pytest

from goodbench.api.enginefiles import load_profile, resolve_engine
from goodbench.engine.config import EngineConfig
from goodbench.engine.costmodel import CostModel
from goodbench.engine.profile import (
    OPTIONAL,
    TERMS,
    Profile,
    coverage_note,
    prompt_coverage,
    render_profile,
    sparse_share,
)
from goodbench.errors import InputError

TERMS_GIVEN = {
    "step_s": 0.004,
    "floor_s": 0.025,
    "token_s": 0.0008,
    "decode_request_s": 0.0005,
    "context_token_s": 2e-7,
    "prefill_attention_s": 1e-9,
    "frontend_s": 0.003,
}


def write(tmp_path, engine=None, **kw):
    p = Profile(
        dict(TERMS_GIVEN), engine or {"num_gpu_blocks": 4000, "block_size": 16, "max_num_seqs": 16}, 4.2, "test", ("a",)
    )
    path = tmp_path / "p.toml"
    path.write_text(render_profile(p, "2026-01-01T00:00:00", "0.0"))
    return str(path)


def test_a_profile_round_trips(tmp_path):
    p = load_profile(write(tmp_path))
    # the front end's load terms, left out of TERMS_GIVEN (a profile from before they existed), are 0
    assert p.terms == {**TERMS_GIVEN, **dict.fromkeys(OPTIONAL, 0.0)} and p.step_time_pct == 4.2 and p.runs == ("a",)
    assert p.engine == {"num_gpu_blocks": 4000, "block_size": 16, "max_num_seqs": 16}


def test_the_cost_model_prices_the_profiles_formula(tmp_path):
    cfg = resolve_engine(EngineConfig(calibration=write(tmp_path)))
    cm = CostModel.for_config(cfg)
    p = cfg.profile()
    # 10 decodes at 1,000 tokens of context each: under the floor (10 tokens x 0.8 ms < 25 ms)
    assert cm.step_time(0, 10, 10_000, 0, 0, 10) == pytest.approx(p.step_time(10, 10, 10_000))
    # a 500-token chunk beside them: past the floor, and its attention work
    attn = 500 * (0 + 501 / 2)
    assert cm.step_time(500, 10, 10_000, attn, 500, 11) == pytest.approx(p.step_time(510, 10, 10_000, attn))
    assert cm.frontend_s == 0.003 and cm.profile["step_time_pct"] == 4.2


def test_the_profiled_servers_knobs_are_the_defaults(tmp_path):
    cfg = resolve_engine(EngineConfig(calibration=write(tmp_path)))
    assert (cfg.num_gpu_blocks, cfg.max_num_seqs) == (4000, 16)
    own = resolve_engine(EngineConfig(calibration=write(tmp_path), max_num_seqs=8, block_size=32))
    assert (own.num_gpu_blocks, own.max_num_seqs) == (2000, 8)  # the same KV tokens in 32-token blocks
    assert "--calibration" in EngineConfig(calibration="x.toml").to_argv()
    assert not cfg.async_scheduling
    held = write(tmp_path, engine={"num_gpu_blocks": 4000, "block_size": 16, "async_scheduling": True})
    assert load_profile(held).engine["async_scheduling"] is True
    assert resolve_engine(EngineConfig(calibration=held)).async_scheduling  # fitted on a server that ran so


def test_bad_profiles_say_what_is_wrong(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[terms]\nstep_s = 0.001\n")
    with pytest.raises(InputError, match="floor_s"):
        load_profile(str(bad))
    bad.write_text("x = [")
    with pytest.raises(InputError, match="not valid TOML"):
        load_profile(str(bad))
    bad.write_text("[something]\n")
    with pytest.raises(InputError, match="not a goodbench calibration profile"):
        load_profile(str(bad))
    with pytest.raises(InputError, match="cannot read"):
        load_profile(str(tmp_path / "missing.toml"))
    bad.write_text("[terms]\n" + "".join(f"{k} = 0\n" for k in TERMS))
    with pytest.raises(InputError, match="a step must take some time"):
        load_profile(str(bad))
    assert len(TERMS) == 9
    bad.write_text(
        "[terms]\n" + "".join(f"{k} = 0.001\n" for k in TERMS if k != "frontend_token_s") + "frontend_token_s = -1\n"
    )
    with pytest.raises(InputError, match="frontend_token_s"):  # an optional term, when given, is checked
        load_profile(str(bad))


def test_a_profile_keeps_the_prompt_lengths_its_runs_had(tmp_path):
    cov = prompt_coverage(list(range(100, 1100)))
    p = Profile(dict(TERMS_GIVEN), {}, 4.2, "test", ("a",), coverage=cov)
    path = tmp_path / "cov.toml"
    path.write_text(render_profile(p, "2026-01-01T00:00:00", "0.0"))
    got = load_profile(str(path))
    assert got.coverage["requests"] == 1000 and got.coverage["prompt_quantiles"][0] == 100.0
    assert sparse_share(got.coverage, [500, 600]) == (0.0, 0.0)  # inside: hundreds within a factor of 2
    assert sparse_share(got.coverage, [20, 500, 5000, 9000]) == (0.75, 5000.0)  # 20 and 9000 have none, 5000 few
    assert coverage_note(got, [500] * 9 + [9000]) is not None and coverage_note(got, [500] * 10) is None
    assert write(tmp_path) and load_profile(write(tmp_path)).coverage == {}  # a profile from before says nothing
    path.write_text(path.read_text().replace("requests = 1000", "requests = -1"))
    with pytest.raises(InputError, match="coverage"):
        load_profile(str(path))


def test_a_profile_that_is_not_utf8_is_one_clear_error(tmp_path):
    """Issue 42: tomllib lets UnicodeDecodeError through: a traceback (exit 1)."""
    bad = tmp_path / "bad.toml"
    bad.write_bytes(b"[terms]\nstep_s = 0.002 # \xff\xfe\n")
    with pytest.raises(InputError, match="not UTF-8"):
        load_profile(str(bad))


@pytest.mark.parametrize(
    "value,says",
    [("nan", "got nan"), ("inf", "must be finite"), ("1e300", "must be <= 60"), ('"many"', "got 'many'")],
)
def test_a_term_must_be_a_finite_number_of_seconds(tmp_path, value, says):
    """Issue 42: nan was a traceback in the simulator; inf and 1e300 ran and gave 0 req/s."""
    path = tmp_path / "p.toml"
    text = (tmp_path / write(tmp_path)).read_text()
    path.write_text(text.replace(f"\ntoken_s = {TERMS_GIVEN['token_s']}", f"\ntoken_s = {value}"))
    assert f"\ntoken_s = {value}" in path.read_text()
    with pytest.raises(InputError, match=f"token_s .*{says}"):
        load_profile(path)
    path.write_text(text.replace("step_time_pct = 4.2", "step_time_pct = nan"))
    with pytest.raises(InputError, match="step_time_pct .*got nan"):
        load_profile(path)


@pytest.mark.parametrize(
    "key,value,says",
    [
        ("num_gpu_blocks", -5, "must be >= 1, got -5"),
        ("max_num_seqs", 0, "must be >= 1, got 0"),
        ("max_num_seqs", "many", "got 'many'"),
        ("block_size", 2.5, "got 2.5"),
        ("async_scheduling", "yes", "true or false"),
    ],
)
def test_engine_knobs_obey_the_limits_their_flags_do(tmp_path, key, value, says):
    """Issue 42: a profile's [engine] bypassed limits.py (-5 KV blocks: every request failed; "many": a
    traceback)."""
    path = write(tmp_path, engine={"num_gpu_blocks": 4000, "block_size": 16, "max_num_seqs": 16, key: value})
    with pytest.raises(InputError, match=f"\\[engine\\] {key}.*{says}"):
        load_profile(path)
