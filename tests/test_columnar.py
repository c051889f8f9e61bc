"""The columnar run form and its sidecar: same summaries as records, rebuilt when stale."""

import json

import numpy as np
from recs import rec

from goodbench.columnar import RecordArrays, gaps_of
from goodbench.metrics import summarize
from goodbench.records import RunMeta
from goodbench.store import RunStore, load, load_arrays


def _recs(n=50, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        k = int(rng.integers(0, 6))
        t = float(i) * 0.05
        chunks = tuple(np.cumsum(rng.exponential(0.02, k)) + t + 0.01) if k else ()
        status = "ok" if k or i % 3 else "timeout"
        out.append(rec(i, cls="ab"[i % 2], sent=t, chunks=chunks, status=status, warmup=i < 3, prompt=10 + i))
    return out


def test_columns_round_trip_and_gap_helpers():
    recs = _recs()
    cols = RecordArrays.from_records(recs)
    back = cols.to_records()
    assert [r.chunk_times for r in back] == [tuple(r.chunk_times) for r in recs]
    assert [r.status for r in back] == [r.status for r in recs]
    gaps = gaps_of(cols, block=7, dtype=float)  # small blocks exercise the block boundaries
    want = np.concatenate([np.diff(r.chunk_times) for r in recs if len(r.chunk_times) > 1])
    assert np.array_equal(gaps, want)


def test_summary_from_the_sidecar_equals_the_summary_from_records(tmp_path):
    recs = _recs(200, seed=4)
    meta = RunMeta("r", slo={"ttft": 30})
    st = RunStore(str(tmp_path), "r")
    st.start(meta)
    st.append_many(recs)
    st.finish(meta, None)
    first = load_arrays(st.dir)  # parses records.jsonl, writes columns/
    assert (tmp_path / "r" / "columns" / "columns.json").exists()
    second = load_arrays(st.dir)  # from the sidecar
    a = summarize(load(st.dir))  # records as written (times rounded to 0.1 us)
    b, c = summarize(first), summarize(second)
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True) == json.dumps(c, sort_keys=True)
    assert a["warmup_excluded"] == 3


def test_a_stale_sidecar_is_rebuilt(tmp_path):
    recs = _recs(20)
    meta = RunMeta("r")
    st = RunStore(str(tmp_path), "r")
    st.start(meta)
    st.append_many(recs[:10])
    st.close()
    assert len(load_arrays(st.dir).cols) == 10
    st.open_records()
    st.append_many(recs[10:])
    st.close()
    assert len(load_arrays(st.dir).cols) == 20
