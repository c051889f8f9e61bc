import io

from rich.console import Console

from goodbench.metrics import summarize
from goodbench.records import RequestRecord, RunMeta, RunResult
from goodbench.report.console import render_summary


def render(summary, meta, width=100):
    buf = io.StringIO()
    Console(file=buf, width=width, color_system=None).print(render_summary(summary, meta, 0.95, "results/x"))
    return buf.getvalue()


def test_summary_render_leads_with_the_verdict():
    recs = [RequestRecord(f"r{i}", "short" if i % 2 else "long", 0.0, 0.0, 0.1, 0.3, (0.1, 0.2, 0.3), (1, 1, 1), 3,
                          "usage") for i in range(10)]
    meta = RunMeta("x", label="poisson@2.00", slo={"ttft": 150.0, "tpot": 120.0}, requested_rate=2.0,
                   target={"base_url": "http://127.0.0.1:8000", "endpoint": "/v1/completions", "model": "m"},
                   workload={"name": "mixed"})
    out = render(summarize(RunResult(meta, recs)), meta.to_dict())
    lines = out.splitlines()
    assert lines[0].startswith("PASS  100.0% of 10 requests met the SLO (target 95%); goodput")
    assert "  95% CI: attainment 72.2%–100.0% (Wilson)" in out  # 10 of 10
    assert "mixed · poisson@2.00 · 10 requests · http://127.0.0.1:8000/v1/completions model=m" in lines[1]
    assert "  ✓ ttft ≤ 150 ms   met by 100.0%   (p50 100.0 / p99 100.0 ms)" in out
    assert " TTFT                 100.0   100.0   100.0   100.0–100.0   100.0   100.0   10 " in out
    assert "per class" in out and "results: results/x" in out


def test_failed_run_shows_fail_and_warning():
    recs = [RequestRecord("r0", "a", 0.0, 0.0, None, 0.1, status="http_error", http_status=500, error="boom")]
    meta = RunMeta("x", slo={"ttft": 100.0})
    out = render(summarize(RunResult(meta, recs)), meta.to_dict())
    assert out.startswith("FAIL  0.0% of 1 requests")
    assert "no request completed" in out


def test_server_timing_line_splits_ttft_beside_goodbench():
    recs = [RequestRecord(f"r{i}", "a", 0.0, 0.0, 0.1, 0.3, (0.1, 0.2, 0.3), (1, 1, 1), 3, "usage") for i in range(4)]
    meta = RunMeta("x")
    s = summarize(RunResult(meta, recs))
    s["server_timing"] = {"ttft_ms": {"mean": 90.0, "n": 4}, "queue_ms": {"mean": 20.0, "n": 4},
                          "prefill_ms": {"mean": 60.0, "n": 4}, "other_ms": 10.0,
                          "client_ttft_ms": {"mean": 100.0, "n": 4}, "client_minus_server_ms": 10.0}
    out = render(s, meta.to_dict(), width=200)
    assert ("  server's view (means of 4): TTFT 90.0 = queue 20.0 + prefill 60.0 + other 10.0 ms · "
            "goodbench TTFT 100.0 ms (+10.0 outside the server)") in out
    s["server_timing"] = {"ttft_ms": None, "queue_ms": {"mean": 5.0, "n": 3}, "prefill_ms": None, "other_ms": None,
                          "client_ttft_ms": None, "client_minus_server_ms": None}
    assert "  server's view (means of 3): queue 5.0 ms" in render(s, meta.to_dict())
    s["server_timing"] = None
    assert "server's view" not in render(s, meta.to_dict())
