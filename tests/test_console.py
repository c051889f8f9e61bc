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
    recs = [
        RequestRecord(f"r{i}", "short" if i % 2 else "long", 0.0, 0.0, 0.1, 0.3, (0.1, 0.2, 0.3), (1, 1, 1), 3, "usage")
        for i in range(10)
    ]
    meta = RunMeta(
        "x",
        label="poisson@2.00",
        slo={"ttft": 150.0, "tpot": 120.0},
        requested_rate=2.0,
        target={"base_url": "http://127.0.0.1:8000", "endpoint": "/v1/completions", "model": "m"},
        workload={"name": "mixed"},
    )
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
    assert out.startswith("CANNOT JUDGE  0.0% of 1 requests")  # as the gate (exit 2): one verdict
    assert "no request completed" in out
    assert "failed 1 (http_error 1)" in out and "{" not in out  # counts as words, not a Python dict


def test_no_slo_hint_names_the_flag_of_the_tool_in_use():
    recs = [RequestRecord("r0", "a", 0.0, 0.0, 0.1, 0.2, (0.1, 0.2), (1, 1), 2, "usage")]
    meta = RunMeta("x")
    s = summarize(RunResult(meta, recs))
    assert "pass --goodput ttft:MS tpot:MS for goodput" in render(s, meta.to_dict())
    buf = io.StringIO()
    Console(file=buf, width=100, color_system=None).print(
        render_summary(s, meta.to_dict(), slo_hint='--goodbench-slo "ttft:MS tpot:MS"')
    )
    assert 'pass --goodbench-slo "ttft:MS tpot:MS" for goodput' in buf.getvalue() and "--goodput" not in buf.getvalue()


def test_numbers_that_print_as_zero_carry_no_minus_sign():
    from goodbench.records import fmt_num

    assert [
        fmt_num(-0.0001, ".2f"),
        fmt_num(-0.0001, "+.1%"),
        fmt_num(-0.0, ".1f"),
        fmt_num(-0.02, ".2f"),
        fmt_num(0.0004, "+.1%"),
    ] == ["0.00", "+0.0%", "0.0", "-0.02", "+0.0%"]


def test_compare_and_sweep_lines_print_no_negative_zero():
    from goodbench.report.comparetable import compare_table
    from goodbench.report.tables import best_lines

    d = {
        "metric": "goodput",
        "unit": "req/s",
        "base": 3.4301,
        "new": 3.4300,
        "delta": -0.0001,
        "rel": -0.00003,
        "ci": (-0.004, 0.0),
        "p_value": None,
        "verdict": "no significant change",
        "regression": False,
    }
    res = {
        "base": "a",
        "new": "b",
        "level": 0.95,
        "metrics": [d, {**d, "metric": "slo_attainment", "unit": "fraction", "delta": -0.00001}],
    }
    buf = io.StringIO()
    Console(file=buf, width=160, color_system=None).print(compare_table(res))
    line = " ".join(
        best_lines(
            {
                "h100": {
                    "cell": "h100,max_num_batched_tokens=512",
                    "goodput": 3.0,
                    "itl_p99_ms": 9.0,
                    "next": "h100,max_num_batched_tokens=1024",
                    "margin_goodput": -0.001,
                    "separated": False,
                }
            }
        )
    )
    for text in (buf.getvalue(), line):
        assert "-0.00" not in text and "-0.0%" not in text and ("0.00" in text or "+0.0%" in text)


def test_the_readme_sample_output_is_what_the_console_prints():
    """README's sample is a real run's output (its run.json and summary.json are kept in tests/data):
    rendering them now must give the README's text, so the sample cannot drift from the renderer."""
    import json
    import os
    import re

    from conftest import ROOT

    d = os.path.join(ROOT, "tests", "data", "readme_run")
    with open(os.path.join(d, "summary.json"), encoding="utf-8") as f:
        summary = json.load(f)
    with open(os.path.join(d, "run.json"), encoding="utf-8") as f:
        meta = json.load(f)
    buf = io.StringIO()
    Console(file=buf, width=100, color_system=None).print(
        render_summary(summary, meta, 0.95, f"results/{meta['run_id']}")
    )
    rendered = "\n".join(line.rstrip() for line in buf.getvalue().splitlines())
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    sample = re.search(r"What the first command printed.*?```\n(.*?)\n```", readme, re.S).group(1)
    assert sample == rendered


def test_server_timing_line_splits_ttft_beside_goodbench():
    recs = [RequestRecord(f"r{i}", "a", 0.0, 0.0, 0.1, 0.3, (0.1, 0.2, 0.3), (1, 1, 1), 3, "usage") for i in range(4)]
    meta = RunMeta("x")
    s = summarize(RunResult(meta, recs))
    s["server_timing"] = {
        "ttft_ms": {"mean": 90.0, "n": 4},
        "queue_ms": {"mean": 20.0, "n": 4},
        "prefill_ms": {"mean": 60.0, "n": 4},
        "other_ms": 10.0,
        "client_ttft_ms": {"mean": 100.0, "n": 4},
        "client_minus_server_ms": 10.0,
    }
    out = render(s, meta.to_dict(), width=200)
    assert (
        "  server's view (means of 4): TTFT 90.0 = queue 20.0 + prefill 60.0 + other 10.0 ms · "
        "goodbench TTFT 100.0 ms (+10.0 outside the server)"
    ) in out
    s["server_timing"] = {
        "ttft_ms": None,
        "queue_ms": {"mean": 5.0, "n": 3},
        "prefill_ms": None,
        "other_ms": None,
        "client_ttft_ms": None,
        "client_minus_server_ms": None,
    }
    assert "  server's view (means of 3): queue 5.0 ms" in render(s, meta.to_dict())
    s["server_timing"] = None
    assert "server's view" not in render(s, meta.to_dict())


def _sweep_rows():
    return [
        {"gpu": gpu, "cell": f"{gpu},max_num_batched_tokens={b},max_num_seqs=256", "goodput": 12.345, "goodput_lo": 11.5,
         "goodput_hi": 12.9, "slo_attainment": 0.987, "ttft_p50_ms": 1234.5, "ttft_p99_ms": 4321.5, "itl_p99_ms": 179.5,
         "itl_p99_over_p50": 12.34, "tpot_p99_ms": 92.2, "goodput_per_gpu": 12.345, "usd_per_million_output_tokens": 0.43}
        for gpu in ("h100-sxm", "l40s") for b in (512, 4096)
    ]  # fmt: skip


def test_the_sweep_table_fits_a_100_column_terminal_without_an_ellipsis():
    from goodbench.report.tables import sweep_table
    from goodbench.report.width import print_wide

    buf = io.StringIO()
    con = Console(file=buf, width=100, force_terminal=True, color_system=None)
    print_wide(con, sweep_table("sweep", _sweep_rows()))
    text = buf.getvalue()
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 100
    for cell in ("h100-sxm", "l40s", "12.35 [11.50-12.90]", "98.7%", "4321.5", "179.5", "12.34", "$0.43"):
        assert cell in text, cell
    assert "continued" in text and "budget=4096,seqs=256" in text


def test_piped_wide_tables_are_complete():
    from goodbench.report.tables import sweep_table
    from goodbench.report.width import print_wide

    buf = io.StringIO()
    con = Console(file=buf, width=120, color_system=None)  # not a terminal: make_console's 120 columns
    print_wide(con, sweep_table("sweep", _sweep_rows()))
    text = buf.getvalue()
    assert "…" not in text and "continued" not in text and "$0.43" in text and "4321.5" in text


def test_long_config_labels_get_short_names_and_a_legend():
    from goodbench.report.tables import config_names

    rows = [{"cell": "h100,max_num_batched_tokens=512,long_prefill_token_threshold=256,max_num_seqs=64"}]
    names, legend = config_names(rows)
    assert names[rows[0]["cell"]] == "c1" and legend == ["  c1 = budget=512,lpt=256,seqs=64"]


def test_the_progress_line_shows_an_eta():
    """200 requests at 1 req/s run ~200 s: after 10 s and 10 finished, about 3m10s are left."""
    import time

    from goodbench.report.console import progress_text
    from goodbench.runner import Progress

    p = Progress()
    p.total, p.sent, p.done = 200, 11, 10
    p.t0 = time.monotonic() - 10.0
    assert "ETA 3m10s" in progress_text(p, slo_given=False).plain
    p.total = 0  # a duration-bound run has no planned count: no ETA rather than a wrong one
    assert "ETA" not in progress_text(p, slo_given=False).plain


def test_a_run_with_no_requests_renders_without_a_traceback():
    """A locust run stopped before its first request: no records, attainment None in every clause."""
    meta = RunMeta("x", slo={"ttft": 100.0, "tpot": 50.0})
    out = render(summarize(RunResult(meta, [])), meta.to_dict())
    assert "ttft ≤ 100 ms   met by n/a (no request finished)" in out


def test_every_request_slo_clause_is_shown_with_its_distribution():
    """Each per-request SLO key prints beside its clause (a `ttfo` clause raised KeyError after the run:
    the console kept its own key map, which had fallen behind SLO_KEYS)."""
    from goodbench.records import JOB_SLO_KEYS, SLO_KEYS, SLO_SUMMARY_KEYS

    assert set(SLO_SUMMARY_KEYS) == set(SLO_KEYS) - set(JOB_SLO_KEYS)
    recs = [RequestRecord(f"r{i}", "a", 0.0, 0.0, 0.1, 0.3, (0.1, 0.2, 0.3), (1, 1, 1), 3, "usage") for i in range(10)]
    slo = {"ttft": 150.0, "ttfo": 200.0, "tpot": 120.0, "e2el": 500.0, "max_itl": 150.0}
    meta = RunMeta(
        "x", label="l", slo=slo, target={"base_url": "http://h", "endpoint": "/v1/completions", "model": "m"}
    )
    summary = summarize(RunResult(meta, recs))
    assert all(summary[v]["n"] for v in SLO_SUMMARY_KEYS.values())  # each names a distribution summarize writes
    out = render(summary, meta.to_dict())
    assert "  ✓ ttfo ≤ 200 ms   met by 100.0%   (p50 100.0 / p99 100.0 ms)" in out
    assert "  ✓ max_itl ≤ 150 ms   met by 100.0%   (ITL max 100.0 ms)" in out
