"""summary.json's `pooling` block (metrics/pooling.py) on hand-built one-body records."""

import dataclasses

import pytest
from recs import rec

from goodbench.columnar import RecordArrays
from goodbench.metrics.derived import RequestMetrics
from goodbench.metrics.pooling import pooling_block


def one_body(i, sent, latency, items, status="ok"):
    r = rec(i, sent=sent, chunks=(sent + latency,), out=0, status=status)
    return dataclasses.replace(r, items=items)


def test_items_batch_sizes_and_latency():
    recs = [one_body(0, 0.0, 0.010, 4), one_body(1, 1.0, 0.030, 8), one_body(2, 2.0, 0.5, 2, status="http_error")]
    b = pooling_block(RequestMetrics(RecordArrays.from_records(recs)), 4.0)
    assert b["requests"] == 3 and b["items"] == 12 and b["items_per_s"] == pytest.approx(3.0)
    assert b["batch_size"] == {"mean": 6.0, "p50": 6.0, "p90": pytest.approx(7.6), "max": 8}
    assert b["latency_ms"]["p50"] == pytest.approx(20.0) and b["latency_ms"]["n"] == 2


def test_streaming_runs_have_no_pooling_block():
    assert pooling_block(RequestMetrics(RecordArrays.from_records([rec(0, chunks=(0.1,))])), 1.0) is None
