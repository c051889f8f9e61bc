"""The history dashboard: data embedded safely, links that cannot become scripts, and a real browser that
loads the page, applies filters and sees the plots, change points and links follow."""

import json

import pytest
from browser import inspect_page, require_chromium
from histruns import noisy_series, write_run

import goodbench as gb
from goodbench.report.dashboard import embed_json, link

HOSTILE = "</script><img src=x onerror=console.error('xss')>"


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """Two identities: 'nightly' (40 runs, a 5% drop at run 28, even runs on main, odd on pr-1, the
    newest with a report.html) and 'other' (8 runs); one run carries hostile text in a label and a
    directory name."""
    base = tmp_path_factory.mktemp("dash")
    res = base / "results"
    for i, g in enumerate(noisy_series(0, n=40, at=28)):
        write_run(str(res), f"a{i:02d}", i, {"goodput": float(g)}, labels={"branch": "main" if i % 2 == 0 else "pr-1"})
    (res / "a39" / "report.html").write_text("<html></html>")
    for i in range(8):
        write_run(str(res), f"b{i}", i + 0.5, {"goodput": 5.0 + i * 0.01}, workload="other", server={"name": "sglang"})
    write_run(str(res), "evil-\"'<b>", 50, {"goodput": 1.0}, workload="x<b>y", labels={"note": HOSTILE})
    db, _ = gb.index_history([str(res)], str(base / "history.sqlite"))
    path = gb.history_dashboard(str(base / "page"), db=db)
    return path


def _data(path):
    with open(path, encoding="utf-8") as f:
        html = f.read()
    start = html.index('<script type="application/json" id="gb-data">') + len(
        '<script type="application/json" id="gb-data">'
    )
    return html, json.loads(html[start : html.index("</script>", start)])


def test_embedded_data_cannot_break_out_of_its_script_tag(page):
    html, data = _data(page)
    assert HOSTILE not in html and "<b>" not in html.split("<script")[2]
    assert html.count("</script>") == 2  # the data's and the code's: nothing from a run closes a tag
    assert any(r["labels"].get("note") == HOSTILE for r in data["runs"])  # and the text survives, as data
    assert "\u2028" not in embed_json({"a": "x\u2028y<>&"}) and json.loads(embed_json({"a": "x\u2028y<>&"})) == {
        "a": "x\u2028y<>&"
    }


def test_links_are_relative_and_never_a_scheme(tmp_path):
    run = tmp_path / "results" / "javascript:alert(1)"
    run.mkdir(parents=True)
    href, has_report = link(str(tmp_path / "page"), str(run))
    assert href == "../results/javascript%3Aalert%281%29/summary.json" and not has_report


def test_series_and_change_points_in_the_data(page):
    _, data = _data(page)
    assert len(data["runs"]) == 49 and len(data["identities"]) == 3
    nightly = next(k for k, v in data["identities"].items() if v["workload"] == "nightly")
    idx = data["series"]["goodput"][nightly]
    assert len(idx) == 40
    (cp,) = data["changes"]["goodput"][nightly]
    assert abs(idx.index(cp["run"]) - 28) <= 2 and cp["direction"] == "regression" and cp["p"] < 0.01
    newest = data["runs"][idx[-1]]
    assert newest["run_id"] == "a39" and newest["report"] and newest["href"].endswith("a39/report.html")


COUNTS = (
    "({plots: document.querySelectorAll('section.plot').length,"
    " points: document.querySelectorAll('svg.trend a.pt').length,"
    " dim: document.querySelectorAll('svg.trend a.pt.dim').length,"
    " changes: document.querySelectorAll('line.cp.regression').length,"
    " rows: document.querySelectorAll('#runs tr').length,"
    " links: Array.from(document.querySelectorAll('#runs a.runlink')).map(a => a.getAttribute('href')),"
    " count: document.getElementById('count').textContent, hash: location.hash})"
)


def _choose(select: str, value: str) -> str:
    return (
        f"(() => {{ const s = document.getElementById('{select}'); s.value = {json.dumps(value)};"
        " s.dispatchEvent(new Event('change', {bubbles: true})); return s.value; })()"
    )


@pytest.mark.browser
def test_dashboard_in_a_real_browser(page):
    chromium = require_chromium()
    steps = [
        COUNTS,
        _choose("f-workload", "other"),
        COUNTS,
        _choose("f-workload", ""),
        _choose("f-label", "branch=pr-1"),
        COUNTS,
    ]
    res = inspect_page(page, chromium, steps=steps)
    assert res["console_errors"] == [] and res["exceptions"] == [], res  # the hostile label logs 'xss' if it ran
    assert res["failed_requests"] == [] and res["network_requests"] == []
    assert HOSTILE in res["text"]  # shown as text in the run table
    everything, _, other, _, _, pr = res["steps"]
    assert everything["plots"] == 3 and everything["points"] == 49 and everything["changes"] == 1
    assert everything["rows"] == 49 and everything["dim"] == 0
    assert any(h.endswith("a39/report.html") for h in everything["links"])
    assert other["plots"] == 1 and other["points"] == 8 and other["changes"] == 0 and other["rows"] == 8
    assert all("/b" in h for h in other["links"]) and "workload=other" in other["hash"]
    # a label filter keeps the series whole (the other runs dimmed) and lists only its runs
    assert pr["plots"] == 1 and pr["points"] == 40 and pr["dim"] == 20 and pr["changes"] == 1 and pr["rows"] == 20
    assert all(h.split("/")[-2] in {f"a{i:02d}" for i in range(1, 40, 2)} for h in pr["links"])
    # the state lives in the URL: opening it with a hash shows the same view
    (again,) = inspect_page(page, chromium, steps=[COUNTS], fragment="label=branch%3Dpr-1&metric=ttft_p99")["steps"]
    assert again["rows"] == 20 and again["changes"] == 0 and "ttft_p99" in again["count"]
