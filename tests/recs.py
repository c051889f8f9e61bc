"""Hand-built records for tests: one builder instead of a copy per test file."""

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
