"""Questions asked of the catalogue: filters, and a metric's series per identity."""

import pytest
from histruns import write_run

from goodbench.history.catalogue import Catalogue
from goodbench.history.query import Filters, list_runs, series
from goodbench.history.scan import index_dirs


@pytest.fixture
def cat(tmp_path):
    r = str(tmp_path)
    for i in range(6):
        labels = {"branch": "main" if i % 2 == 0 else "pr-7"}
        write_run(
            r,
            f"a{i}",
            i,
            {"goodput": 10.0 + i},
            labels=labels,
            server={"name": "vllm", "version": f"0.{10 + i // 3}.0"},
        )
    write_run(
        r, "b0", 2.5, {"goodput": 5.0}, workload="other", model="m-70b", server={"name": "sglang", "version": "1.0"}
    )
    c = Catalogue(str(tmp_path / "h.sqlite"))
    index_dirs(c, [r])
    yield c
    c.close()


def ids(rows):
    return [r["run_id"] for r in rows]


def test_filters(cat):
    assert ids(list_runs(cat, Filters())) == ["a5", "a4", "a3", "b0", "a2", "a1", "a0"]  # newest first
    assert ids(list_runs(cat, Filters(workload="other"))) == ["b0"]
    assert ids(list_runs(cat, Filters(labels={"branch": "main"}))) == ["a4", "a2", "a0"]
    assert ids(list_runs(cat, Filters(server_version="0.11.*"))) == ["a5", "a4", "a3"]
    assert ids(list_runs(cat, Filters(model="m-*", since="2026-01-03", until="2026-01-04"))) == ["a3", "b0", "a2"]
    assert ids(list_runs(cat, Filters(), limit=2)) == ["a5", "a4"]
    r = list_runs(cat, Filters(workload="other"))[0]
    assert r["metrics"]["goodput"] == 5.0 and r["metrics"]["ttft_p99"] == 100.0 and r["dir"].endswith("b0")


def test_series_per_identity_oldest_first(cat):
    found = series(cat, "goodput", Filters())
    assert [len(s.points) for s in found] == [6, 1]  # the identity with the newest run first
    a = found[0]
    assert a.values == [10.0, 11.0, 12.0, 13.0, 14.0, 15.0] and a.identity["workload"] == "nightly"
    assert [p.server_version for p in a.points][2:4] == ["0.10.0", "0.11.0"]
    key = a.identity["key"]
    assert series(cat, "goodput", Filters(identity=key[:6], labels={"branch": "pr-7"}))[0].values == [11.0, 13.0, 15.0]
    assert series(cat, "goodput", Filters(), last=2)[0].values == [14.0, 15.0]
    with pytest.raises(KeyError):
        series(cat, "nope", Filters())


def test_interrupted_and_invalid_runs_are_not_in_a_series(tmp_path):
    import json
    from pathlib import Path

    for i, (interrupted, valid) in enumerate(((False, True), (True, True), (False, False), (False, None))):
        d = write_run(str(tmp_path), f"r{i}", i, {"goodput": float(i)})
        meta, summ = Path(d, "run.json"), Path(d, "summary.json")
        meta.write_text(json.dumps(json.loads(meta.read_text()) | {"interrupted": interrupted}))
        summ.write_text(json.dumps(json.loads(summ.read_text()) | {"valid": valid}))
    with Catalogue(str(tmp_path / "h.sqlite")) as c:
        index_dirs(c, [str(tmp_path)])
        assert series(c, "goodput", Filters())[0].values == [0.0, 3.0]
        assert len(list_runs(c, Filters())) == 4  # listed, marked
