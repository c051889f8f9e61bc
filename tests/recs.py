"""Hand-built records for tests: one builder instead of a copy per test file; one comparison of summaries."""

import pytest

from goodbench.records import RequestRecord


def rec(
    i,
    cls="a",
    sent=0.0,
    chunks=(),
    out=None,
    status="ok",
    prompt=10,
    warmup=False,
    origin="",
    sched=None,
    tokens=None,
    source="usage",
):
    """Request i sent at `sent` (scheduled at `sched`, default the same) with content chunks at `chunks`."""
    return RequestRecord(
        id=f"r{i}",
        cls=cls,
        scheduled_at=sent if sched is None else sched,
        sent_at=sent,
        first_token_at=chunks[0] if chunks else None,
        finished_at=chunks[-1] if chunks else sent,
        chunk_times=tuple(chunks),
        chunk_tokens=tuple(tokens) if tokens else (1,) * len(chunks),
        output_tokens=len(chunks) if out is None else out,
        output_tokens_source=source,
        prompt_tokens=prompt,
        status=status,
        warmup=warmup,
        origin=origin,
    )


def same_summary(written: dict, composed: dict) -> None:
    """A summary recomputed from a run directory equals the one the run wrote, key by key and in order
    (numbers to the 0.1 us records.jsonl keeps times to: a gap moves by up to 1e-4 ms)."""
    import json

    _same(written, json.loads(json.dumps(composed, default=str)))


def _same(a, b, path=""):
    assert type(a) is type(b) or isinstance(a, (int, float)) and isinstance(b, (int, float)), path
    if isinstance(a, dict):
        assert list(a) == list(b), f"{path}: {sorted(set(a) ^ set(b))}"
        for k in a:
            if k.endswith("_p99_over_p50") and isinstance(a[k], float):
                # a ratio of two quantiles, each moved by up to 2e-4 ms: on a loaded machine reads merge
                # and an ITL p50 of tens of us turns that into 0.1% or more of the ratio
                d = a[k.replace("_p99_over_p50", "_ms")]
                assert b[k] == pytest.approx(a[k], rel=1e-6 + 2e-4 / d["p50"] + 2e-4 / d["p99"]), f"{path}.{k}"
                continue
            _same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{path}[{i}]")
    elif isinstance(a, float):
        assert b == pytest.approx(a, rel=1e-6, abs=1e-3), path  # ms: 0.1 us of time rounding moves a gap by 1e-4
    else:
        assert a == b, path
