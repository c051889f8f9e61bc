"""GPU prices and the cost block (engine/prices.py, metrics/cost.py), with hand-computed answers."""

import pytest
from recs import rec

from goodbench.api.enginefiles import load_price_file
from goodbench.engine.prices import PRICES, cost_block, parse_overrides, price_table
from goodbench.errors import InputError, UsageError
from goodbench.metrics import RequestMetrics
from goodbench.metrics.cost import cost_summary


def test_cost_arithmetic_by_hand():
    """3 H100s at $2 and 1 L40S at $1 = $7/h; a 1800 s run delivering 2.1 M tokens within the SLO costs
    $3.50, i.e. $1.6667 per million; goodput 6 req/s is 1.5 per GPU and 0.857 per dollar-hour."""
    c = cost_block({"h100-sxm": 3, "l40s": 1}, {"h100-sxm": 2.0, "l40s": 1.0}, 2_100_000, 6.0, 1800.0)
    assert c["gpus"] == 4 and c["usd_per_hour"] == 7.0
    assert c["usd_per_million_output_tokens"] == pytest.approx(3.5 / 2.1)
    assert c["goodput_per_gpu"] == 1.5 and c["goodput_per_usd_hour"] == pytest.approx(6 / 7)
    none = cost_block({"b200": 8}, price_table(), 1000, 1.0, 10.0)
    assert (
        none["usd_per_hour"] is None and none["usd_per_million_output_tokens"] is None and none["unpriced"] == ["b200"]
    )
    assert cost_block({"l40s": 1}, price_table(), 0, 0.0, 10.0)["usd_per_million_output_tokens"] is None


def test_only_requests_meeting_the_slo_count_as_delivered():
    """Two requests of 10 and 30 tokens; only the first meets ttft:500. $3.6/h for 100 s = $0.10 for
    10 delivered tokens: $10,000 per million."""
    good = rec(0, chunks=[0.1 + 0.01 * k for k in range(10)])
    slow = rec(1, chunks=[0.9 + 0.01 * k for k in range(30)])
    s = {"goodput": 0.01, "duration_s": 100.0}
    c = cost_summary(RequestMetrics([good, slow]), {"ttft": 500}, {"h100-sxm": 1}, {"h100-sxm": 3.6}, s)["cost"]
    assert c["delivered_output_tokens"] == 10
    assert c["usd_per_million_output_tokens"] == pytest.approx(0.10 / 10 * 1e6)


def test_every_default_price_is_dated_and_sourced():
    for p in PRICES.values():
        assert p.usd_per_hour > 0 and p.date and p.source.startswith("https://")


def test_overrides_and_files(tmp_path):
    assert parse_overrides("h100-sxm=2.5, L4=0.8") == {"h100-sxm": 2.5, "l4": 0.8}
    for bad in ("h100-sxm", "h100-sxm=cheap", "l4=-1"):
        with pytest.raises(UsageError):
            parse_overrides(bad)
    t = tmp_path / "p.toml"
    t.write_text("l4 = 0.7\n[h200]\nusd_per_hour = 3.1\n")
    assert load_price_file(str(t)) == {"l4": 0.7, "h200": 3.1}
    c = tmp_path / "p.csv"
    c.write_text("gpu,usd_per_hour\nA10G,1.01\n")
    assert load_price_file(str(c)) == {"a10g": 1.01}
    (tmp_path / "bad.toml").write_text("l4 = 'cheap'\n")
    with pytest.raises(InputError):
        load_price_file(str(tmp_path / "bad.toml"))
    assert price_table({"l4": 0.7})["l4"] == 0.7
