import pytest

from goodbench.gating import GateSpec, evaluate, to_junit, to_markdown


def summary(**kw):
    s = {"requests": {"issued": 100, "completed": 98, "failed": 2}, "valid": True, "warnings": [],
         "slo": {"ttft": 500.0, "tpot": 50.0}, "slo_attainment": 0.96, "goodput": 4.2,
         "ttft_ms": {"p50": 100.0, "p95": 300.0, "p99": 450.0, "n": 98},
         "tpot_ms": {"p50": 20.0, "p95": 30.0, "p99": 40.0, "n": 98},
         "itl_ms": {"p50": 20.0, "p95": 25.0, "p99": 120.0, "n": 5000}, "e2el_ms": {"p99": 3000.0, "n": 98}}
    s.update(kw)
    return s


def test_all_clauses_pass():
    r = evaluate(summary(), GateSpec(min_attainment=0.95, percentiles={"p95": {"ttft": 500}}, max_failed=0.05,
                                     min_goodput=4.0))
    assert r.passed and r.exit_code == 0 and len(r.clauses) == 4
    assert r.clauses[0].observed == "96.0%" and r.clauses[0].threshold == ">= 95.0%"


def test_a_failing_clause_fails_the_gate():
    r = evaluate(summary(), GateSpec(percentiles={"p99": {"itl": 100}}))
    assert not r.passed and r.exit_code == 1
    assert [c.passed for c in r.clauses] == [True, False]
    assert r.verdict == "FAIL: 1 of 2 clauses failed"


@pytest.mark.parametrize("kw,reason", [
    ({"valid": False, "warnings": ["load generator fell behind: lag"]}, "invalid"),
    ({"requests": {"issued": 10, "completed": 0, "failed": 10}}, "no request completed"),
    ({"requests": {"issued": 0, "completed": 0, "failed": 0}}, "no requests"),
    ({"slo": None, "slo_attainment": None}, "nothing to check"),
])
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
