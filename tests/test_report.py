"""goodbench report for run directories: figures, tables, escaping, and a real browser."""

import json
import os
import re

import pytest
from browser import inspect_page, require_chromium
from conftest import run_cli

from goodbench.records import RequestRecord, RunMeta
from goodbench.store import RunStore

HOSTILE = "<script>console.error('xss')</script>"
FIGS = (
    "latency_cdfs.png",
    "itl_timeline.png",
    "latency_vs_prompt.png",
    "throughput_goodput_inflight.png",
    "attainment_by_class.png",
    "engine_and_server.png",
)  # simulated runs: no schedule_lag.png (every request on time; an all-zero panel said nothing)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("runs")
    for rid, extra in (("a", []), ("b", ["--no-enable-chunked-prefill"])):
        r = run_cli(
            "simulate",
            "--workload",
            "workloads/mixed-long-short.toml",
            "--num-prompts",
            "150",
            "--result-dir",
            str(d),
            "--run-id",
            rid,
            "--step-trace",
            *extra,
        )
        assert r.returncode in (0, 1), r.stderr
    return d


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """A run whose every dataset/server-supplied string tries to inject markup."""
    d = tmp_path_factory.mktemp("hostile")
    meta = RunMeta(
        run_id="evil",
        label=HOSTILE,
        target={"base_url": 'http://x/"><img src=x onerror=alert(1)>', "endpoint": HOSTILE, "model": HOSTILE},
        workload={"name": HOSTILE},
        slo={"ttft": 100},
    )
    st = RunStore(str(d), "evil")
    st.start(meta)
    recs = []
    for i in range(30):
        cls = HOSTILE if i % 2 else "short"
        t = i * 0.1
        recs.append(
            RequestRecord(
                id=f"{HOSTILE}{i}",
                cls=cls,
                scheduled_at=t,
                sent_at=t,
                first_token_at=t + 0.05,
                finished_at=t + 0.1,
                chunk_times=(t + 0.05, t + 0.07, t + 0.1),
                chunk_tokens=(1, 1, 1),
                output_tokens=3,
                output_tokens_source="usage",
                prompt_tokens=4000 if i % 2 else 20,
                status="ok" if i % 5 else "http_error",
                error=HOSTILE,
            )
        )
    st.append_many(recs)
    st.finish(meta, None)
    # the server's histograms, as scraped (labels from the server are data too)
    lab = '{model_name="' + HOSTILE + '"}'
    with open(os.path.join(st.dir, "server_metrics.jsonl"), "w", encoding="utf-8") as f:
        for t, k in ((0.0, 0), (3.0, 30)):
            f.write(
                json.dumps(
                    {
                        "t": t,
                        "metrics": {
                            "vllm:time_to_first_token_seconds_sum" + lab: 0.05 * k,
                            "vllm:time_to_first_token_seconds_count" + lab: k,
                            "vllm:request_queue_time_seconds_sum" + lab: 0.01 * k,
                            "vllm:request_queue_time_seconds_count" + lab: k,
                            "vllm:request_prefill_time_seconds_sum" + lab: 0.03 * k,
                            "vllm:request_prefill_time_seconds_count" + lab: k,
                        },
                    }
                )
                + "\n"
            )
    return st.dir


def test_single_run_report_has_every_figure_and_the_tables(runs):
    r = run_cli("report", str(runs / "a"))
    assert r.returncode == 0, r.stderr
    html = (runs / "a" / "report.html").read_text()
    assert not (runs / "a" / "schedule_lag.png").exists()
    # every figure has a caption saying what it shows, and its title as alt text, not its file name
    assert html.count("<figure>") == html.count("<figcaption>") == len(FIGS) and 'alt="latency_cdfs.png"' not in html
    for f in FIGS:
        png = runs / "a" / f
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f
    assert html.count("data:image/png;base64,") == len(FIGS)
    for text in (
        "Head-of-line attribution",
        "Other tools' definitions",
        "95% CI",
        "class short",
        "class long",
        "itl_per_request_ms",
        "GenAI-Perf",
    ):
        assert text in html, text
    # self-contained: nothing fetched from anywhere
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)


def test_combined_report_overlays_runs(runs, tmp_path):
    out = tmp_path / "both"
    r = run_cli("report", str(runs / "a"), str(runs / "b"), "--out", str(out))
    assert r.returncode == 0, r.stderr
    html = (out / "report.html").read_text()
    assert "Side by side" in html and html.count("<h2>a (") == 1 and html.count("<h2>b (") == 1
    assert sorted(p for p in os.listdir(out) if p.endswith(".png")) == sorted([*FIGS, "pareto.png"])  # their frontier


def test_everything_from_data_or_server_is_escaped(hostile):
    r = run_cli("report", hostile)
    assert r.returncode == 0, r.stderr
    with open(os.path.join(hostile, "report.html"), encoding="utf-8") as f:
        html = f.read()
    assert "<script" not in html.lower()
    assert "&lt;script&gt;console.error(&#x27;xss&#x27;)&lt;/script&gt;" in html
    assert "<img src=x" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    # the server's view of TTFT: 50 ms = 10 queue + 30 prefill + 10 other, over the 30 requests
    assert "Where TTFT went (the server's view)" in html
    assert "<td class=l>queue</td><td>10.0</td><td>30</td>" in html and "<td class=l>other</td><td>10.0</td>" in html


def test_report_on_a_non_run_directory_is_a_clear_error(tmp_path):
    r = run_cli("report", str(tmp_path))
    assert r.returncode == 2 and "neither a run directory" in r.stderr and "Traceback" not in r.stderr


# each figure's alt text, caption, and how many of its pixels are drawn in colour (data series are coloured;
# axes, ticks and labels are grey or black: a figure with no data drawn has none)
FIGURE_CHECK = """Array.from(document.querySelectorAll('img')).map(img => {
  const fig = img.closest('figure'), cap = fig && fig.querySelector('figcaption');
  const c = document.createElement('canvas'); c.width = img.naturalWidth; c.height = img.naturalHeight;
  const g = c.getContext('2d'); g.drawImage(img, 0, 0);
  const d = g.getImageData(0, 0, c.width, c.height).data; let n = 0;
  for (let i = 0; i < d.length; i += 4) {
    const mx = Math.max(d[i], d[i+1], d[i+2]), mn = Math.min(d[i], d[i+1], d[i+2]);
    if (mx - mn > 60) n++;
  }
  return {alt: img.alt, caption: cap ? cap.innerText : '', colored: n};
})"""


@pytest.mark.browser
def test_reports_render_in_a_real_browser(runs, hostile, tmp_path):
    chromium = require_chromium()
    out = tmp_path / "both"
    assert run_cli("report", str(runs / "a"), str(runs / "b"), "--out", str(out)).returncode == 0
    assert run_cli("report", hostile).returncode == 0
    for page in (out / "report.html", os.path.join(hostile, "report.html")):
        res = inspect_page(str(page), chromium, steps=[FIGURE_CHECK])
        assert res["console_errors"] == [], res  # the hostile page would log 'xss' if its script ran
        assert res["exceptions"] == [] and res["failed_requests"] == [] and res["network_requests"] == []
        assert res["images"], "no images in the page"
        bad = [i for i in res["images"] if not (i["complete"] and i["w"] > 0 and i["h"] > 0)]
        assert bad == [], bad
        figs = res["steps"][0]
        assert len(figs) == len(res["images"]), figs  # every image is a captioned figure
        for f in figs:
            assert f["caption"] and len(f["caption"]) > 60 and not f["alt"].endswith(".png"), f
            assert f["colored"] >= 100, f"an empty figure (no data drawn): {f['alt']}"
    # the hostile strings are on the page as text
    assert HOSTILE in inspect_page(os.path.join(hostile, "report.html"), chromium)["text"]


def test_summary_json_written_by_simulate_holds_the_new_blocks(runs):
    s = json.loads((runs / "a" / "summary.json").read_text())
    assert s["ttft_ms"]["ci"]["p99"][0] <= s["ttft_ms"]["p99"] <= s["ttft_ms"]["ci"]["p99"][1]
    assert s["hol"]["long_class"] == "long"
    assert set(s["metric_variants"]) == {
        "itl_per_request_ms",
        "itl_per_request_chunk_mean_ms",
        "itl_chunk_pooled_ms",
        "tpot_incl_ttft_ms",
    }


def test_log_axis_tick_labels_never_overlap(runs, tmp_path, monkeypatch):
    """The TPOT CDF of a narrow range once labelled every minor tick (3x10^1 4x10^1) on top of each other."""
    pytest.importorskip("matplotlib")
    from goodbench.report import runfigures
    from goodbench.report.view import load_view

    figs = []
    monkeypatch.setattr(runfigures, "_save", lambda fig, plt, path: figs.append(fig) or path)
    runfigures.cdfs([load_view(str(runs / "a"))], str(tmp_path))
    fig = figs[0]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        boxes = sorted(
            (
                t.get_window_extent(renderer)
                for t in ax.get_xticklabels(which="both")
                if t.get_visible() and t.get_text() and ax.get_xlim()[0] <= t.get_position()[0] <= ax.get_xlim()[1]
            ),
            key=lambda b: b.x0,
        )
        assert len(boxes) >= 2, ax.get_xlabel()
        assert all(a.x1 <= b.x0 for a, b in zip(boxes, boxes[1:])), f"overlapping tick labels on {ax.get_xlabel()}"


def test_sessions_lanes_prefix_cache_and_reasoning_reach_the_report(tmp_path):
    """Multi-turn sessions (per turn, session goodput, the prefix cache's hit rate kept from summary.json)
    and priority lanes get their tables; a reasoning workload gets a TTFO row in the report and console."""
    w = tmp_path / "w.toml"
    w.write_text(
        'name = "mix"\nendpoint = "chat"\nnum_requests = 60\nseed = 1\n[arrival]\nrate = 20\n'
        '[slo]\nttft = 500\n[[class]]\nname = "q"\npriority = 0\ninput = 50\noutput = 20\nreasoning = 0.5\n'
        '[[class]]\nname = "b"\npriority = 2\ninput = 3000\noutput = 20\n'
    )
    r = run_cli(
        "simulate",
        "--workload",
        str(w),
        "--fixed-step-ms",
        "5",
        "--scheduling-policy",
        "priority",
        "--result-dir",
        str(tmp_path),
        "--run-id",
        "lanes",
    )
    assert r.returncode in (0, 1), r.stderr
    assert "TTFO (first answer)" in r.stdout
    r = run_cli(
        "simulate",
        "--workload",
        "workloads/sessions.toml",
        "--num-prompts",
        "20",
        "--gpu",
        "l40s",
        "--result-dir",
        str(tmp_path),
        "--run-id",
        "sess",
    )
    assert r.returncode in (0, 1), r.stderr
    for rid, needles in (
        ("lanes", ("Priority lanes", "TTFO (first answer)")),
        ("sess", ("Sessions", "session goodput", "prefix cache: hit rate", "the workload allows")),
    ):
        r = run_cli("report", str(tmp_path / rid))
        assert r.returncode == 0, r.stderr
        html = (tmp_path / rid / "report.html").read_text()
        for text in needles:
            assert text in html, (rid, text)


def test_a_report_that_cannot_be_written_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    from goodbench.cli import main
    from goodbench.report import write

    st = RunStore(str(tmp_path), "r")
    st.start(RunMeta("r"))
    st.append(RequestRecord("r0", "c", 0.0, 0.0, 0.1, 0.2, (0.1, 0.2), (1, 1), 2))
    st.close()

    def full(*a, **kw):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(write, "run_report", full)
    assert main(["report", st.dir, "--no-figures"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"goodbench: error: cannot write the report in {st.dir}: No space left on device"


def test_a_run_with_no_records_and_an_slo_reports_without_a_traceback(tmp_path, capfd):
    """Every SLO clause's attainment is None when nothing was recorded (a run killed before its first
    answer, `--duration` shorter than the first arrival)."""
    from goodbench.cli import main
    from goodbench.rundir import RunDir

    rd = RunDir.open(str(tmp_path), RunMeta("empty", mode="live", slo={"ttft": 500, "tpot": 50}, planned_requests=10))
    rd.finish()
    assert main(["report", rd.dir]) == 0
    html = (tmp_path / "empty" / "report.html").read_text()
    assert "ttft ≤ 500 ms met by -" in html and "incomplete" in capfd.readouterr().out


@pytest.mark.parametrize("lo, hi", [(22.0, 23.0), (0.01, 1000.0), (5.0, 400.0)])
def test_log_ms_ticks_are_distinct_and_readable(lo, hi):
    """A 22-23 ms range once read '22 22 23 23 23 23'; 0.01-1000 ms ran '0.010.020.050.10.2' together."""
    pytest.importorskip("matplotlib")
    from goodbench.report.figures import _plt, log_ms_axis

    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.4, 3))
    ax.plot([lo, hi], [0, 1])
    log_ms_axis(ax, "x")
    ax.set_xlim(lo, hi)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    labels = [t for t in ax.get_xticklabels() if t.get_text() and lo <= t.get_position()[0] <= hi]
    texts = [t.get_text() for t in labels]
    assert len(texts) >= 2 and len(set(texts)) == len(texts), texts
    boxes = sorted((t.get_window_extent(renderer) for t in labels), key=lambda b: b.x0)
    assert all(a.x1 <= b.x0 for a, b in zip(boxes, boxes[1:])), texts
    plt.close(fig)


def test_engine_figure_leaves_out_empty_panels_and_names_gauges_in_words(tmp_path, monkeypatch):
    """No preemptions: no preemptions panel. The server's KV use (0..1) gets its own % axis instead of a
    flat line beside request counts, and the legend says 'requests running', not vllm:num_requests_running."""
    pytest.importorskip("matplotlib")
    import numpy as np

    from goodbench.report import runfigures

    class View:
        label = "r"
        steps = {
            "start": np.arange(50.0),
            "prefill_tokens": np.ones(50),
            "decode_tokens": np.ones(50),
            "kv_usage": np.full(50, 0.3),
            "preemptions": np.zeros(50),
        }
        server = [
            {"t": float(t), "metrics": {"vllm:num_requests_running": 4.0, "vllm:kv_cache_usage_perc": 0.3}}
            for t in range(10)
        ]

    figs = []
    monkeypatch.setattr(runfigures, "_save", lambda fig, plt, path: figs.append(fig) or path)
    runfigures.engine_steps([View()], str(tmp_path))
    fig = figs[0]
    ylabels = [ax.get_ylabel() for ax in fig.axes]
    assert "preemptions (cumulative)" not in ylabels and "%" in ylabels
    legends = " ".join(t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts())
    assert "requests running (vllm)" in legends and "KV cache used (vllm) (%)" in legends and "vllm:" not in legends


def test_engine_figure_names_scraped_label_sets_and_keeps_kv_use_on_its_percent_axis(tmp_path, monkeypatch):
    """Scraped series carry label sets (vLLM: model_name, engine): the legend keeps only what tells two
    series apart (engine 0 / engine 1), and KV-cache use, whatever its labels, is drawn in % on the right
    axis as the caption says, never on the request axis, and never crowded out by one count per engine."""
    pytest.importorskip("matplotlib")
    from goodbench.report import runfigures

    def key(name, engine):
        return f'vllm:{name}{{model_name="meta-llama/Llama-3.1-8B",engine="{engine}"}}'

    NUMS = {"num_requests_running": 4.0, "num_requests_waiting": 1.0, "kv_cache_usage_perc": 0.3}

    class View:
        label = "r"
        steps = None
        server = [{"t": float(t), "metrics": {key(n, e): v for n, v in NUMS.items() for e in "01"}} for t in range(10)]

    figs = []
    monkeypatch.setattr(runfigures, "_save", lambda fig, plt, path: figs.append(fig) or path)
    runfigures.engine_steps([View()], str(tmp_path))
    left, right = figs[0].axes
    words = lambda ax: [t.get_text() for t in ax.get_legend().get_texts()]  # noqa: E731
    assert sorted(words(left)) == [f"r: requests {s} (vllm) engine {e}" for s in ("running", "waiting") for e in "01"]
    assert right.get_ylabel() == "%" and sorted(words(right)) == [
        f"r: KV cache used (vllm) engine {e} (%)" for e in "01"
    ]
    assert [max(line.get_ydata()) for line in right.get_lines()] == [30.0, 30.0]
    import matplotlib.pyplot as plt

    plt.close(figs[0])


def _judged_run(tmp_path, target):
    """10 requests, 8 within a 500 ms TTFT (attainment 80%), recorded with this --target-attainment."""
    from goodbench.rundir import RunDir

    rd = RunDir.open(str(tmp_path), RunMeta(f"t{target}", slo={"ttft": 500}, target_attainment=target))
    for k in range(10):
        first = 0.1 if k < 8 else 1.0
        rd.append(RequestRecord(f"r{k}", "c", 0.0, 0.0, first, first + 0.1, (first, first + 0.1), (1, 1), 2))
    rd.finish()
    return rd.dir


@pytest.mark.parametrize(
    "recorded, asked, shown",
    [(0.7, None, "pass"), (None, None, "fail"), (0.7, 0.85, "fail"), (None, 0.75, "pass")],
)
def test_the_html_verdict_uses_the_runs_own_target_unless_asked(tmp_path, recorded, asked, shown):
    """The console judges against --target-attainment; report.html judged against a fixed 95% and so
    could say fail where the console said PASS. run.json records the target; `goodbench report
    --target-attainment` overrides it; a run recorded before it existed is judged at the default 95%."""
    from goodbench.cli import main

    d = _judged_run(tmp_path, recorded)
    assert main(["report", d, "--no-figures", *(["--target-attainment", str(asked)] if asked else [])]) == 0
    with open(os.path.join(d, "report.html"), encoding="utf-8") as f:
        html = f.read()
    target = asked or recorded or 0.95
    assert f"<span class={shown}>80.0%</span>" in html and f"(target {target:.0%})" in html
    assert f"<span class={shown}>✓" in html or f"<span class={shown}>✗" in html  # the clause line agrees


def test_simulate_records_its_target_attainment(tmp_path):
    import goodbench as gb
    from goodbench.errors import UsageError

    wl = gb.load_workload(dataset_name="random", num_prompts=5)
    run = gb.simulate(wl, result_dir=str(tmp_path), target_attainment=0.6)
    with open(os.path.join(run.dir, "run.json"), encoding="utf-8") as f:
        assert json.load(f)["target_attainment"] == 0.6
    with pytest.raises(UsageError, match="target-attainment"):
        gb.simulate(wl, result_dir=str(tmp_path), target_attainment=1.5)
