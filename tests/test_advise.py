"""Chunk-size advice (analysis.advise): the worked example, the memory ceiling, the simulated check."""

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
    r = run_cli("advise", "--gpu", "l40s", "--engine-model", "llama-3.1-8b", "--ttft-slo", "500", "--p95-input", "6000",
                "--num-prompts", "120", "--jobs", "2", timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "memory ceiling" in r.stdout and "SLO bound" in r.stdout and "(advised)" in r.stdout


def test_the_check_reports_the_long_class_per_chunk_size(tok):
    from goodbench.analysis.advise import advise, check, check_sizes, check_workload
    from goodbench.engine.config import EngineConfig

    a = advise(EngineConfig(gpu="l40s"), 500, 4000)
    rows = check(a, EngineConfig(gpu="l40s"), check_workload(a, 500, None, 60, 4.0), tok, jobs=1)
    assert [r["max_num_batched_tokens"] for r in rows] == check_sizes(a) and a.chunk in check_sizes(a)
    assert all(r["long_ttft_p50_ms"] is not None and "summary" not in r for r in rows)
