"""Import vllm bench serve / AIPerf results; export CSV, Parquet and vLLM-shaped JSON; compare and gate on
imported runs through the CLI."""

import csv
import json

import numpy as np
import pandas as pd
import pytest
from conftest import run_cli

from goodbench.errors import InputError as ImportFormatError
from goodbench.interop import import_vllm
from goodbench.metrics import summarize
from goodbench.store import load_arrays


def vllm_result(n=40, ttft=0.1, gap=0.02, seed=0, start_times=True):
    rng = np.random.default_rng(seed)
    d = {
        "backend": "vllm",
        "model_id": "meta-llama/Llama-3.1-8B-Instruct",
        "request_rate": 4.0,
        "duration": 10.0,
        "input_lens": [100 + i for i in range(n)],
        "output_lens": [9] * n,
        "ttfts": [ttft + 0.001 * (i % 5) for i in range(n)],
        "itls": [[gap] * 8 for _ in range(n)],
        "errors": [""] * n,
        "generated_texts": ["x"] * n,
    }
    if start_times:
        d["start_times"] = list(1000.0 + np.sort(rng.uniform(0, 10, n)))
    d["ttfts"][3], d["itls"][3], d["errors"][3], d["output_lens"][3] = 0.0, [], "HTTP 500 Internal Server Error", 0
    return d


def test_vllm_import_rebuilds_chunk_times(tmp_path):
    f = tmp_path / "vllm.json"
    f.write_text(json.dumps(vllm_result()))
    run_dir = import_vllm(str(f), str(tmp_path / "results"), run_id="v", slo={"ttft": 103.5})
    s = summarize(load_arrays(run_dir))
    assert s["requests"] == {
        "issued": 40,
        "completed": 39,
        "failed": 1,
        "by_status": {"ok": 39, "http_error": 1},
        "retried": 0,
    }
    assert s["ttft_ms"]["max"] == pytest.approx(104) and s["ttft_ms"]["n"] == 39
    assert s["itl_ms"]["p50"] == pytest.approx(20) and s["itl_ms"]["n"] == 39 * 8
    assert s["tpot_ms"]["p50"] == pytest.approx(20)  # 8 gaps of 20 ms over 9 tokens
    # TTFTs 100..104 ms cycling: 100, 101, 102, 103 meet 103.5; 104 and the failure do not
    assert s["slo_met"] == 31
    assert any("no scheduled times" in w for w in s["warnings"])


def test_vllm_import_without_start_times_says_what_it_cannot_know(tmp_path):
    f = tmp_path / "old.json"
    f.write_text(json.dumps(vllm_result(start_times=False)))
    s = summarize(load_arrays(import_vllm(str(f), str(tmp_path), run_id="old")))
    assert any("no start_times" in w for w in s["warnings"])


def test_import_refuses_a_summary_only_vllm_file(tmp_path):
    f = tmp_path / "summary.json"
    f.write_text(json.dumps({"mean_ttft_ms": 10}))
    with pytest.raises(ImportFormatError, match="save-detailed"):
        import_vllm(str(f), str(tmp_path))
    r = run_cli("import", "vllm", str(f), "--result-dir", str(tmp_path))
    assert r.returncode == 2 and "save-detailed" in r.stderr and "Traceback" not in r.stderr


def aiperf_line(i, start_ns, ttft_ms=50.0, icl=(5.0, 5.0, 6.0), error=None):
    md = {
        "session_num": i,
        "x_request_id": f"req-{i}",
        "request_start_ns": start_ns,
        "request_end_ns": start_ns + int((ttft_ms + sum(icl)) * 1e6),
        "benchmark_phase": "profiling",
        "was_cancelled": False,
        "worker_id": "worker_1",
    }
    if error:
        return {
            "metadata": md,
            "metrics": {"error_isl": {"value": 550, "unit": "tokens"}},
            "error": {"code": 500, "type": "ServerError", "message": error},
        }
    return {
        "metadata": md,
        "error": None,
        "metrics": {
            "input_sequence_length": {"value": 550, "unit": "tokens"},
            "time_to_first_token": {"value": ttft_ms, "unit": "ms"},
            "inter_chunk_latency": {"value": list(icl), "unit": "ms"},
            "output_sequence_length": {"value": len(icl) + 1, "unit": "tokens"},
            "request_latency": {"value": ttft_ms + sum(icl), "unit": "ms"},
        },
    }


def test_aiperf_import_from_profile_export_jsonl(tmp_path):
    art = tmp_path / "artifacts"
    art.mkdir()
    t0 = 1_759_813_207_532_900_363
    lines = [aiperf_line(i, t0 + i * 100_000_000, ttft_ms=50 + i) for i in range(20)]
    lines.append(aiperf_line(20, t0 + 2_100_000_000, error="boom"))
    (art / "profile_export.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    r = run_cli(
        "import", "aiperf", str(art), "--result-dir", str(tmp_path / "res"), "--run-id", "ap", "--goodput", "ttft:60.5"
    )
    assert r.returncode == 0, r.stderr
    s = summarize(load_arrays(str(tmp_path / "res" / "ap")))
    assert s["requests"]["completed"] == 20 and s["requests"]["failed"] == 1
    assert s["ttft_ms"]["p50"] == pytest.approx(59.5)
    assert s["itl_ms"]["max"] == pytest.approx(6.0) and s["itl_ms"]["n"] == 60
    assert s["slo_met"] == 11  # TTFT 50..60 ms
    assert s["duration_s"] == pytest.approx(2.1 + 0.066)  # the failed request ends last


def test_export_csv_parquet_and_vllm_round_trip(tmp_path):
    f = tmp_path / "vllm.json"
    f.write_text(json.dumps(vllm_result()))
    run_dir = import_vllm(str(f), str(tmp_path), run_id="v", slo={"ttft": 103.5})
    assert run_cli("export", run_dir).returncode == 0
    df = pd.read_csv(f"{run_dir}/requests.csv")
    assert len(df) == 40 and {"ttft_ms", "tpot_ms", "itl_max_ms", "met_slo", "status"} <= set(df.columns)
    assert df.loc[df.status == "ok", "ttft_ms"].max() == pytest.approx(104)
    assert df["met_slo"].sum() == 31
    r = run_cli("export", run_dir, "--format", "parquet", "-o", str(tmp_path / "r.parquet"))
    assert r.returncode == 0, r.stderr
    pq = pd.read_parquet(tmp_path / "r.parquet")
    assert list(pq.columns) == list(df.columns)
    assert np.allclose(pq["ttft_ms"].fillna(-1), df["ttft_ms"].fillna(-1), atol=1e-6)
    # goodbench -> vLLM shape -> goodbench keeps the numbers
    assert run_cli("export", run_dir, "--format", "vllm", "-o", str(tmp_path / "out.json")).returncode == 0
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["completed"] == 39 and len(out["itls"]) == 40 and out["median_itl_ms"] == pytest.approx(20)
    again = summarize(load_arrays(import_vllm(str(tmp_path / "out.json"), str(tmp_path), run_id="again")))
    first = summarize(load_arrays(run_dir))
    for k in ("ttft_ms", "itl_ms", "e2el_ms"):
        assert again[k]["p99"] == pytest.approx(first[k]["p99"], rel=1e-6)


def test_compare_and_gate_work_on_imported_runs(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(vllm_result(n=200, ttft=0.1, seed=1)))
    b.write_text(json.dumps(vllm_result(n=200, ttft=0.2, seed=2)))
    for f, rid in ((a, "base"), (b, "new")):
        assert (
            run_cli(
                "import", "vllm", str(f), "--result-dir", str(tmp_path), "--run-id", rid, "--goodput", "ttft:150"
            ).returncode
            == 0
        )
    js = tmp_path / "cmp.json"
    r = run_cli(
        "compare",
        str(tmp_path / "base"),
        str(tmp_path / "new"),
        "--fail-on-regression",
        "--margin",
        "5%",
        "--json",
        str(js),
    )
    assert r.returncode == 1, r.stdout + r.stderr
    res = json.loads(js.read_text())
    assert "ttft_p50" in res["regressions"] and "slo_attainment" in res["regressions"]
    assert run_cli("compare", str(tmp_path / "base"), str(tmp_path / "base"), "--fail-on-regression").returncode == 0
    assert run_cli("gate", str(tmp_path / "new")).returncode == 1
    assert (
        run_cli(
            "report", str(tmp_path / "base"), str(tmp_path / "new"), "--out", str(tmp_path / "rep"), "--no-figures"
        ).returncode
        == 0
    )


def _sse(content=None, usage=None, role=False):
    ev = {
        "choices": [{"delta": ({"role": "assistant"} if role else {"content": content})}] if not usage else [],
        "usage": usage,
    }
    return {"response": "data: " + json.dumps(ev) + "\n\n"}


def test_genai_perf_import_keeps_only_content_bearing_responses(tmp_path):
    ms = 1_000_000
    reqs = []
    for i in range(10):
        t = 5_000 * ms + i * 100 * ms
        # role-only first response at +10 ms, content at +40, +60, +90 ms, then usage, then [DONE]
        reqs.append(
            {
                "timestamp": t,
                "request_inputs": {"payload": "{}"},
                "response_timestamps": [t + 10 * ms, t + 40 * ms, t + 60 * ms, t + 90 * ms, t + 91 * ms, t + 92 * ms],
                "response_outputs": [
                    _sse(role=True),
                    _sse("a"),
                    _sse("b"),
                    _sse("c"),
                    _sse(usage={"completion_tokens": 3}),
                    {"response": "data: [DONE]\n\n"},
                ],
            }
        )
    f = tmp_path / "profile_export.json"
    f.write_text(
        json.dumps(
            {
                "experiments": [
                    {"experiment": {"mode": "concurrency", "value": 4}, "requests": reqs, "window_boundaries": []}
                ],
                "version": "x",
            }
        )
    )
    r = run_cli("import", "genai-perf", str(tmp_path), "--result-dir", str(tmp_path / "res"), "--run-id", "g")
    assert r.returncode == 0, r.stderr
    s = summarize(load_arrays(str(tmp_path / "res" / "g")))
    assert s["ttft_ms"]["p50"] == pytest.approx(40)  # the role-only response is not a first token
    assert s["itl_ms"]["n"] == 20 and s["itl_ms"]["max"] == pytest.approx(30)
    assert s["tpot_ms"]["p50"] == pytest.approx(25)  # (90 - 40) / (3 - 1), tokens from usage
    f.write_text(json.dumps({"experiments": [{"requests": reqs}, {"requests": reqs}]}))
    r = run_cli("import", "genai-perf", str(f), "--result-dir", str(tmp_path / "res"))
    assert r.returncode == 2 and "2 experiments" in r.stderr


def test_csv_http_status_is_an_integer(tmp_path):
    from goodbench.records import RequestRecord, RunMeta
    from goodbench.rundir import RunDir

    rd = RunDir.open(str(tmp_path), RunMeta("codes"))
    rd.append_many(
        [
            RequestRecord("r0", "a", 0.0, 0.0, 0.1, 0.2, (0.1, 0.2), (1, 1), 2, "usage", http_status=200),
            RequestRecord("r1", "a", 0.0, 0.0, None, 0.1, status="http_error", http_status=503, error="x"),
            RequestRecord("r2", "a", 0.0, 0.0, None, 0.1, status="disconnected", error="refused"),
        ]
    )
    rd.finish()
    assert run_cli("export", rd.dir).returncode == 0
    with open(f"{rd.dir}/requests.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [r["http_status"] for r in rows] == ["200", "503", ""]
