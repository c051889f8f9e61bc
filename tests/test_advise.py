"""Chunk-size advice (analysis.advise): the worked example, the memory ceiling, the simulated check."""

import os
import tempfile

from conftest import run_cli


def test_chunk_advice_matches_the_worked_example():
    from goodbench.analysis.advise import chunk_for

    assert chunk_for(6000, 500, 45, 256, 4096) == (11, 546)
    assert chunk_for(32000, 500, 45, 256, 4096) == (11, 2910)
    assert chunk_for(1000, 500, 45, 256, 4096) == (11, 256)  # clamped to the floor
    assert chunk_for(100000, 500, 45, 256, 4096)[1] == 4096  # and to the ceiling


def test_advise_memory_ceiling_shrinks_with_decode_reserve():
    from goodbench.analysis.advise import advise
    from goodbench.engine.config import EngineConfig

    small = advise(EngineConfig(gpu="l4", model="llama-3.2-3b"), 500, 6000, concurrency=8, context=1024)
    big = advise(EngineConfig(gpu="l4", model="llama-3.2-3b"), 500, 6000, concurrency=64, context=2048)
    assert 256 <= big.memory_ceiling < small.memory_ceiling
    fixed = advise(EngineConfig(), 500, 6000, time_per_chunk_ms=45)
    assert (fixed.chunks_allowed, fixed.chunk) == (11, 546)


def test_advise_cli(tmp_path):
    r = run_cli(
        "advise",
        "--gpu",
        "l40s",
        "--engine-model",
        "llama-3.1-8b",
        "--ttft-slo",
        "500",
        "--p95-input",
        "6000",
        "--num-prompts",
        "120",
        "--jobs",
        "2",
        timeout=180,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "memory ceiling" in r.stdout and "SLO bound" in r.stdout and "(advised)" in r.stdout


def test_the_check_reports_the_long_class_per_chunk_size_and_cleans_up(tok, tmp_path):
    from goodbench.analysis.advise import advise, check, check_sizes, check_workload
    from goodbench.engine.config import EngineConfig

    a = advise(EngineConfig(gpu="l40s"), 500, 4000)
    tempfile.tempdir = str(tmp_path)  # where the check's cells go, watched: nothing may be left there
    try:
        rows = check(a, EngineConfig(gpu="l40s"), check_workload(a, 500, None, 60, 4.0), tok, jobs=1)
    finally:
        tempfile.tempdir = None
    assert not os.listdir(tmp_path)  # the cells' temporary folder is gone
    assert [r["max_num_batched_tokens"] for r in rows] == check_sizes(a) and a.chunk in check_sizes(a)
    assert all(r["long_ttft_p50_ms"] is not None and "summary" not in r for r in rows)
    assert all(r["itl_max_ms"] is not None for r in rows)
    assert all(isinstance(r.get("verdict_could_flip"), bool) for r in rows)  # within the engine's error?


def _row(chunk, ttft99, itl99, itl_max, att=1.0, goodput=3.5):
    return {
        "max_num_batched_tokens": chunk,
        "long_ttft_p99_ms": ttft99,
        "itl_p99_ms": itl99,
        "itl_max_ms": itl_max,
        "slo_attainment": att,
        "goodput": goodput,
    }


def test_advice_and_its_check_never_disagree_silently():
    """The issue's case: 256 advised, 2048/4096 better on TTFT and ITL p99 at the same goodput. The note
    explains it by the worst stall; a size better on every column is named as the one to take."""
    from goodbench.analysis.advise import advise, reconcile
    from goodbench.engine.config import EngineConfig

    a = advise(EngineConfig(), 500, 6000, time_per_chunk_ms=10.9)
    assert a.chunk == 256
    tradeoff = [_row(256, 422, 9.5, 10.0), _row(2048, 276, 7.2, 52.8), _row(4096, 264, 7.2, 94.4)]
    note = reconcile(a, tradeoff)
    assert note and "4096 tokens does better on TTFT and ITL p99" in note and "ITL max 94.4 vs 10.0 ms" in note
    dominated = [_row(256, 422, 9.5, 10.0), _row(512, 300, 8.0, 9.0)]
    assert "favours 512 tokens" in reconcile(a, dominated) and "take 512" in reconcile(a, dominated)
    consistent = [_row(256, 422, 9.5, 10.0), _row(512, 337, 15.0, 16.2), _row(1024, 297, 25.3, 28.3, goodput=3.4)]
    assert reconcile(a, consistent) is None


def test_the_check_table_marks_verdicts_within_the_engines_error():
    import io

    from rich.console import Console

    from goodbench.analysis.advise import advise
    from goodbench.engine.config import EngineConfig
    from goodbench.report.tables import advice_check_table, flip_legend

    a = advise(EngineConfig(gpu="l40s"), 500, 4000)
    edge = {"long_ttft_p50_ms": 500.0, "engine_uncertainty_pct": 26.8}
    rows = [_row(256, 900, 40, 90, att=0.91) | edge | {"verdict_could_flip": True}]
    rows.append(_row(2048, 700, 45, 95) | edge | {"verdict_could_flip": False})
    buf = io.StringIO()
    Console(file=buf, width=160, color_system=None).print(advice_check_table(a, rows, 60, 4.0))
    assert "91.0% ~" in buf.getvalue() and "100.0% ~" not in buf.getvalue()
    assert "±27%" in flip_legend(rows, 0.9) and "1 cell(s)" in flip_legend(rows, 0.9)
