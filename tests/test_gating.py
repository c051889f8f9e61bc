"""Verdicts (gating): clauses, exit codes, JUnit/Markdown, and gate specs from a [gate] table plus flags."""

import pytest

from goodbench.errors import UsageError
from goodbench.gating import GateSpec, evaluate, parse_fraction, spec_from_options, to_junit, to_markdown


def summary(**kw):
    s = {
        "requests": {"issued": 100, "completed": 98, "failed": 2},
        "valid": True,
        "warnings": [],
        "slo": {"ttft": 500.0, "tpot": 50.0},
        "slo_attainment": 0.96,
        "goodput": 4.2,
        "ttft_ms": {"p50": 100.0, "p95": 300.0, "p99": 450.0, "n": 98},
        "tpot_ms": {"p50": 20.0, "p95": 30.0, "p99": 40.0, "n": 98},
        "itl_ms": {"p50": 20.0, "p95": 25.0, "p99": 120.0, "n": 5000},
        "e2el_ms": {"p99": 3000.0, "n": 98},
    }
    s.update(kw)
    return s


def test_all_clauses_pass():
    r = evaluate(
        summary(), GateSpec(min_attainment=0.95, percentiles={"p95": {"ttft": 500}}, max_failed=0.05, min_goodput=4.0)
    )
    assert r.passed and r.exit_code == 0 and len(r.clauses) == 4
    assert r.clauses[0].observed == "96.0%" and r.clauses[0].threshold == ">= 95.0%"


def test_a_failing_clause_fails_the_gate():
    r = evaluate(summary(), GateSpec(percentiles={"p99": {"itl": 100}}))
    assert not r.passed and r.exit_code == 1
    assert [c.passed for c in r.clauses] == [True, False]
    assert r.verdict == "FAIL: 1 of 2 clauses failed"


@pytest.mark.parametrize(
    "kw,reason",
    [
        ({"valid": False, "warnings": ["load generator fell behind: lag"]}, "invalid"),
        ({"requests": {"issued": 10, "completed": 0, "failed": 10}}, "no request completed"),
        ({"requests": {"issued": 0, "completed": 0, "failed": 0}}, "no requests"),
        ({"slo": None, "slo_attainment": None}, "nothing to check"),
    ],
)
def test_cannot_judge_is_exit_2(kw, reason):
    r = evaluate(summary(**kw), GateSpec())
    assert not r.judgeable and r.exit_code == 2 and reason in r.reason


def test_baseline_regression():
    base = summary(goodput=5.0)
    r = evaluate(summary(goodput=4.2), GateSpec(max_regression=0.05), baseline=base)
    names = {c.name: c.passed for c in r.clauses}
    assert names["goodput vs baseline"] is False and names["p99 ttft vs baseline"] is True


def test_from_table_validates():
    g = GateSpec.from_table({"min_attainment": 0.9, "p99": {"itl": 100}, "max_failed": 0.01})
    assert g.min_attainment == 0.9 and g.percentiles == {"p99": {"itl": 100}}
    with pytest.raises(ValueError, match="unknown metric"):
        GateSpec.from_table({"p99": {"latency": 1}})
    with pytest.raises(ValueError, match="unknown keys"):
        GateSpec.from_table({"min_attainmnet": 0.9})


def test_junit_and_markdown():
    r = evaluate(summary(), GateSpec(percentiles={"p99": {"itl": 100}}))
    xml = to_junit(r)
    assert 'tests="2" failures="1"' in xml and "<failure message=" in xml
    import xml.etree.ElementTree as ET

    ET.fromstring(xml)  # well-formed
    md = to_markdown(r)
    assert "| ❌ | p99 itl | <= 100 ms | 120.0 ms (n=5000) |" in md


TABLE = {"min_attainment": 0.9, "p99": {"itl": 150}, "max_failed": 0.01, "min_goodput": 2.0, "max_regression": 0.1}


@pytest.mark.parametrize(
    "table,kw,want",
    [
        (None, {}, GateSpec()),
        (TABLE, {}, GateSpec(0.9, {"p99": {"itl": 150}}, 0.01, 2.0, None)),  # a table's regression needs a baseline
        (TABLE, {"baseline": True}, GateSpec(0.9, {"p99": {"itl": 150}}, 0.01, 2.0, 0.1)),
        (None, {"baseline": True}, GateSpec(max_regression=0.05)),
        (None, {"max_regression": "5%"}, GateSpec(max_regression=0.05)),
        (
            TABLE,
            {"min_attainment": 0.99, "max_failed": 0.0, "min_goodput": 3.0},
            GateSpec(0.99, {"p99": {"itl": 150}}, 0.0, 3.0, None),
        ),
        (
            TABLE,
            {"percentiles": {"p99": ["ttft:500", "itl:100"], "p50": ["tpot:20,e2el:900"]}},
            GateSpec(
                0.9, {"p99": {"itl": 100.0, "ttft": 500.0}, "p50": {"tpot": 20.0, "e2el": 900.0}}, 0.01, 2.0, None
            ),
        ),
    ],
)
def test_spec_from_a_table_and_flags(table, kw, want):
    assert spec_from_options(table, **kw) == want


@pytest.mark.parametrize(
    "kw,needle",
    [
        ({"percentiles": {"p99": ["latency:5"]}}, "metric must be one of"),
        ({"percentiles": {"p95": ["ttft:fast"]}}, "expected METRIC:MS"),
        ({"max_regression": "lots"}, "expected e.g. 5%"),
    ],
)
def test_bad_gate_flags_are_usage_errors(kw, needle):
    with pytest.raises(UsageError, match=needle):
        spec_from_options(None, **kw)


def test_parse_fraction():
    assert parse_fraction("5%", "--x") == pytest.approx(0.05) and parse_fraction("0.2", "--x") == 0.2


def test_baseline_regression_needs_the_records_to_call_it_significant():
    base = summary(goodput=5.0)
    spec = GateSpec(max_regression=0.05)
    noise = evaluate(summary(goodput=4.2), spec, baseline=base, significant={"goodput": False})
    clause = next(c for c in noise.clauses if c.name == "goodput vs baseline")
    assert clause.passed and "not significant" in clause.observed
    real = evaluate(summary(goodput=4.2), spec, baseline=base, significant={"goodput": True})
    assert not next(c for c in real.clauses if c.name == "goodput vs baseline").passed


def test_baseline_latency_floor_is_one_millisecond():
    """A p99 of 10 ms moving to 10.8 ms is +8 %, beyond 5 %, but under the 1 ms practical floor."""
    base = summary(itl_ms={"p99": 10.0, "n": 5000})
    r = evaluate(summary(itl_ms={"p99": 10.8, "n": 5000}), GateSpec(max_regression=0.05), baseline=base)
    assert next(c for c in r.clauses if c.name == "p99 itl vs baseline").passed
    worse = evaluate(summary(itl_ms={"p99": 11.5, "n": 5000}), GateSpec(max_regression=0.05), baseline=base)
    assert not next(c for c in worse.clauses if c.name == "p99 itl vs baseline").passed


def test_every_request_slo_metric_can_be_gated_on_its_percentile():
    """`gate --p99 ttfo:MS` (a clause summaries, history and --goodput all take) was refused."""
    s = summary(ttfo_ms={"p50": 150.0, "p95": 400.0, "p99": 600.0, "n": 98})
    assert evaluate(s, spec_from_options(None, percentiles={"p99": ["ttfo:700"]})).passed
    r = evaluate(s, spec_from_options(None, percentiles={"p99": ["ttfo:500"]}))
    assert not r.passed and r.clauses[-1].observed.startswith("600")
