"""LoRA adapters on the real vLLM (CPU build, the tiny model): three random-weight adapters written locally
(ci/real_vllm/lora_adapter.py), `vllm serve --enable-lora --max-loras 1`, a run whose requests are spread
over them: every request served by the adapter it named (per_adapter), and vLLM's own gauge saying it never
ran two adapters at once. The same run against `goodbench serve` with the same flags reads the same."""

import os
import subprocess

import pytest
from conftest import ROOT
from realvllm import MODEL, SERVED_NAME, VENV, VllmServer

import goodbench as gb

pytestmark = pytest.mark.real_vllm
NAMES = ("a0", "a1", "a2")


def _adapters(out: str) -> list[str]:
    paths = []
    for i, name in enumerate(NAMES):
        path = os.path.join(out, name)
        script = os.path.join(ROOT, "ci", "real_vllm", "lora_adapter.py")
        subprocess.run([os.path.join(VENV, "bin", "python"), script, MODEL, path, "--seed", str(i)], check=True)
        paths.append(f"{name}={path}")
    return paths


def _check(run, server: str) -> None:
    recs = run.records()
    assert all(r.status == "ok" for r in recs), [r.error for r in recs if r.status != "ok"][:2]
    per = run.summary["per_adapter"]
    assert set(per) <= {*NAMES, "(base)"} and sum(b["requests"]["completed"] for b in per.values()) == len(recs)
    lora = run.summary["lora"]
    print(server, {k: b["requests"]["completed"] for k, b in per.items()}, lora)
    assert lora["max_lora"] == 1 and lora["max_running_adapters"] == 1  # one adapter at a time
    assert set(lora["running_adapters_seen"]) <= set(NAMES) and lora["running_adapters_seen"]


def test_lora_adapters_on_real_vllm_and_on_goodbench_serve_read_alike(tmp_path):
    modules = _adapters(str(tmp_path))
    spec = gb.load_workload(
        None, num_prompts=12, request_rate=6, random_input_len=64, random_output_len=24, lora_adapters=",".join(NAMES)
    )
    flags = ("--enable-lora", "--max-loras", "1", "--max-lora-rank", "8", "--lora-modules", *modules)
    srv = VllmServer(str(tmp_path), 512, flags, "lora").start()
    try:
        _check(gb.run(spec, gb.Target(base_url=srv.base_url, model=SERVED_NAME), result_dir=str(tmp_path)), "vLLM")
    finally:
        srv.stop()
    engine = gb.EngineConfig(enable_lora=True, max_loras=1, max_lora_rank=8, fixed_step_ms=5.0)
    _check(gb.run(spec, engine=engine, result_dir=str(tmp_path)), "goodbench serve")
