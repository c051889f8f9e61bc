"""A controlled prefix-cache hit rate (a class's hit_rate, or --prefix-hit-rate): each prompt's first share is
one of a few primed prefixes, the priming phase sends each once before the clock, and the run checks the
hit rate it states (summary prefix_cache.verified) -- simulated, and against the reference engine served."""

import pytest

import goodbench as gb
from goodbench import api
from goodbench.engine.layout import ClusterSpec
from goodbench.errors import InputError, UsageError
from goodbench.metrics.prefix import describe
from goodbench.workloads import build_plan
from goodbench.workloads.options import WorkloadOptions, resolve_workload
from goodbench.workloads.priming import primed

HALF = """name = "half-cached"
num_requests = {n}
seed = 4
[arrival]
rate = 6
[[class]]
name = "half"
weight = 0.8
input = {{ dist = "uniform", min = 400, max = 1600 }}
output = {{ dist = "uniform", min = 10, max = 40 }}
hit_rate = {h}
primed_prefixes = 3
[[class]]
name = "own"
weight = 0.2
input = 300
output = 20
"""


def _spec(tmp_path, h=0.5, n=80, extra=""):
    w = tmp_path / "w.toml"
    w.write_text(HALF.format(n=n, h=h) + extra)
    return api.load_workload(str(w))


def test_each_prompt_starts_with_a_primed_prefix_of_its_share(tmp_path, tok):
    plan = build_plan(_spec(tmp_path), tok)
    half = [r for r in plan.requests if r.cls == "half"]
    assert half and all(primed(r.segments) for r in half)
    assert not any(primed(r.segments) for r in plan.requests if r.cls == "own")
    for r in half:  # in whole 128-token blocks (the server caches whole blocks), the nearest to half the prompt
        assert r.segments[0][1] % 128 == 0 and abs(r.segments[0][1] - 0.5 * r.prompt_tokens) <= 64
    share = sum(r.segments[0][1] for r in half) / sum(r.prompt_tokens for r in half)
    assert abs(share - 0.5) <= 0.03  # rounding to the nearest block keeps the mean unbiased
    assert 1 <= len(plan.primes) <= 3 and all(p.warmup and p.max_tokens == 1 for p in plan.primes)
    longest = {p.segments[0][0]: p.segments[0][1] for p in plan.primes}
    assert all(r.segments[0][1] <= longest[r.segments[0][0]] for r in half)  # every prefix is primed whole
    # the target is token-weighted over every measured request: the "own" class counts as 0
    share = sum(r.prompt_tokens for r in half) / sum(r.prompt_tokens for r in plan.requests)
    assert plan.target_hit_rate == pytest.approx(0.5 * share)
    # with the primes seen first, the structure allows the target, to within the blocks' rounding
    assert abs(plan.expected_reuse() - plan.target_hit_rate) <= 0.03


def test_workloads_without_it_keep_their_plans_and_hashes(tok):
    spec = gb.load_workload("shared-documents")
    assert "hit_rate" not in spec.to_dict()["classes"][0]
    assert build_plan(spec, tok).primes == []


@pytest.mark.parametrize(
    "extra,why",
    [
        ("", "between 0 and 1"),  # hit_rate = 1.0 below
        ("documents = 2\ndocument_tokens = 100\n", "leave out system_prompts and documents"),
    ],
)
def test_bad_hit_rates_are_refused_when_read(tmp_path, extra, why):
    text = HALF.format(n=10, h=1.0 if not extra else 0.5).replace(
        "primed_prefixes = 3\n", "primed_prefixes = 3\n" + extra
    )
    (tmp_path / "w.toml").write_text(text)
    with pytest.raises(InputError, match=why):
        api.load_workload(str(tmp_path / "w.toml"))


def test_primed_prefixes_alone_is_refused(tmp_path):
    (tmp_path / "w.toml").write_text("num_requests = 5\n[[class]]\nname = 'a'\nprimed_prefixes = 2\n")
    with pytest.raises(InputError, match="goes with hit_rate"):
        api.load_workload(str(tmp_path / "w.toml"))


def test_the_flag_sets_it_on_synthetic_classes_and_refuses_others():
    spec = resolve_workload(WorkloadOptions(dataset_name="random", prefix_hit_rate=0.3, primed_prefixes=2))
    assert [(c.hit_rate, c.primed_prefixes) for c in spec.classes] == [(0.3, 2)]
    with pytest.raises(UsageError, match="synthetic classes"):
        resolve_workload(WorkloadOptions(dataset_name="sharegpt", prefix_hit_rate=0.3))
    with pytest.raises(UsageError, match="prefix-hit-rate"):
        resolve_workload(WorkloadOptions(dataset_name="random", prefix_hit_rate=1.5))
    with pytest.raises(UsageError, match="goes with --prefix-hit-rate"):
        resolve_workload(WorkloadOptions(dataset_name="random", primed_prefixes=2))


def test_simulated_runs_verify_the_target_and_fail_it_without_a_cache(tmp_path):
    spec = _spec(tmp_path)
    on = gb.simulate(spec, gb.EngineConfig(enable_prefix_caching=True), result_dir=str(tmp_path))
    pc = on.summary["prefix_cache"]
    assert pc["verified"] is True and abs(pc["measured_hit_rate"] - pc["target_hit_rate"]) <= 0.02
    assert pc["primed"]["requests"] >= 1 and "verified" in describe(pc)
    off = gb.simulate(spec, gb.EngineConfig(enable_prefix_caching=False), result_dir=str(tmp_path))
    assert off.summary["prefix_cache"]["verified"] is False and "NOT met" in describe(off.summary["prefix_cache"])


def test_a_router_that_ignores_the_cache_misses_the_target_a_cache_aware_one_meets(tmp_path):
    spec = _spec(tmp_path, h=0.8, n=60)
    cfg = gb.EngineConfig(enable_prefix_caching=True)
    got = {}
    for policy in ("round-robin", "cache-aware"):
        s = gb.simulate(spec, cfg, result_dir=str(tmp_path), cluster=ClusterSpec(replicas=4, router=policy)).summary
        got[policy] = s["prefix_cache"]["measured_hit_rate"]
    assert got["cache-aware"] > got["round-robin"] and got["cache-aware"] >= 0.8 * 0.8 - 0.05


def test_a_live_run_primes_before_the_clock_and_verifies(tmp_path):
    spec = _spec(tmp_path, n=40)
    run = gb.run(spec, engine=gb.EngineConfig(enable_prefix_caching=True), result_dir=str(tmp_path))
    assert run.meta.priming["requests"] >= 1 and run.meta.priming["wall_s"] > 0
    assert len(run.records()) == 40  # the priming requests are not records: they ran before the clock
    pc = run.summary["prefix_cache"]
    assert pc["measured_by"] == "counters" and pc["verified"] is True, pc


def test_a_hit_rate_on_a_workload_without_class_mixtures_is_refused(tmp_path):
    (tmp_path / "w.toml").write_text('generator = "sessions"\n[[class]]\nname = "a"\nhit_rate = 0.5\n')
    with pytest.raises(UsageError, match="class mixtures"):
        build_plan(api.load_workload(str(tmp_path / "w.toml")), None)
