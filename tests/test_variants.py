"""Other tools' metric definitions (metrics.variants)."""

import pytest

from goodbench.metrics import summarize
from goodbench.records import RequestRecord, RunMeta, RunResult


def test_metric_variants_follow_each_tools_definition():
    # 6 tokens in 3 chunks of 2: sent 0, chunks at 0.1, 0.2, 0.3
    r = RequestRecord(
        id="x",
        cls="a",
        scheduled_at=0,
        sent_at=0,
        first_token_at=0.1,
        finished_at=0.3,
        chunk_times=(0.1, 0.2, 0.3),
        chunk_tokens=(2, 2, 2),
        output_tokens=6,
        output_tokens_source="usage",
    )
    v = summarize(RunResult(RunMeta("t"), [r]))["metric_variants"]
    assert v["itl_per_request_ms"]["p50"] == pytest.approx(40)  # (0.3 - 0.1) / 5
    assert v["itl_per_request_chunk_mean_ms"]["p50"] == pytest.approx(100)
    assert v["itl_chunk_pooled_ms"]["p50"] == pytest.approx(100)
    assert v["tpot_incl_ttft_ms"]["p50"] == pytest.approx(50)  # 0.3 / 6
    assert "GenAI-Perf" in v["itl_per_request_ms"]["used_by"]
