"""Shared prefixes in synthetic workloads (workloads.mixture with segments): system prompts shared by a
fraction of requests, documents shared across queries, and the reuse each allows."""

import pytest

from goodbench import api
from goodbench.engine.config import EngineConfig
from goodbench.workloads import build_plan

SYSTEM = """num_requests = 300
seed = 2
[arrival]
rate = 8
[[class]]
name = "chat"
input = 50
output = 20
system_prompts = 3
prefix_tokens = 1000
prefix_share = {share}
"""
DOCS = """num_requests = 300
[arrival]
rate = 8
[[class]]
name = "rag"
input = 40
output = 20
documents = 10
document_tokens = 2000
document_skew = 1.0
"""


def plan(tmp_path, text, tok):
    w = tmp_path / "w.toml"
    w.write_text(text)
    return build_plan(api.load_workload(str(w)), tok)


@pytest.mark.parametrize("share", [1.0, 0.5])
def test_a_share_of_requests_carries_one_of_k_system_prompts(tmp_path, tok, share):
    p = plan(tmp_path, SYSTEM.format(share=share), tok)
    with_prefix = [r for r in p.requests if r.segments]
    assert len(with_prefix) == pytest.approx(300 * share, abs=30)
    assert {r.segments[0][0] for r in with_prefix} == {("system-prompt", "chat", k) for k in range(3)}
    assert all(r.prompt_tokens == 1050 and tok.count(r.prompt) == 1050 for r in with_prefix[:5])
    # every request with the same system prompt starts with the same 1000 tokens of text
    same = [r for r in with_prefix if r.segments[0][0][2] == 0][:2]
    assert same[0].prompt.split()[:1000] == same[1].prompt.split()[:1000]
    # reuse: 1000 tokens of 1050 (62 whole blocks of 16 = 992), except each prompt's first request
    expected = (len(with_prefix) - 3) * 992 / sum(r.prompt_tokens for r in p.requests)
    assert p.expected_reuse() == pytest.approx(expected, rel=0.01)


def test_documents_follow_their_popularity(tmp_path, tok):
    p = plan(tmp_path, DOCS, tok)
    docs = [r.segments[0][0][2] for r in p.requests]
    assert docs.count(0) > docs.count(9) * 3  # Zipf(1): the top document ~10x the last
    assert p.expected_reuse() > 0.9


def test_the_simulated_cache_finds_what_the_workload_allows(tmp_path):
    w = tmp_path / "w.toml"
    w.write_text(DOCS)
    s = api.simulate(str(w), EngineConfig(gpu="l40s"), result_dir=str(tmp_path)).summary
    assert s["prefix_cache"]["hit_rate"] == pytest.approx(s["prefix_cache"]["expected_hit_rate"], abs=0.03)


def test_the_console_line_says_off_or_the_hit_rate_and_stays_quiet_on_unique_prompts():
    from goodbench.metrics.prefix import prefix_block
    from goodbench.report.console import prefix_line

    def line(block):
        t = prefix_line(block)
        return t.plain if t is not None else None

    assert line(prefix_block(None, 0.82, "sim", enabled=False)) == "  prefix cache: off (the workload allows 82.0%)"
    assert (
        line(prefix_block(0.8, 0.82, "sim", enabled=True))
        == "  prefix cache: hit rate 80.0% (the workload allows 82.0%)"
    )
    assert line(prefix_block(0.0, None, "sim", enabled=True)) is None  # unique prompts: nothing worth a line
    assert prefix_block(None, None, "sim") is None
