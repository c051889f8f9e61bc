"""vLLM's own benchmark client (`vllm bench serve`, from the real_vllm venv) and goodbench's client, each
sending the same traffic to one `goodbench serve --fixed-step-ms` on loopback (issue 42: a client that
measures vLLM must measure the reference engine the same way). Used by tests/test_vllm_client.py; run
by hand it prints both clients' figures for a goodbench checkout, the measurement in docs/real-vllm.md:

    python tests/vllmbench.py                        # this checkout's server
    python tests/vllmbench.py --server-root /work/old --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from realvllm import ENV, MODEL, SERVED_NAME, VENV, _group_alive, _signal_group, free_port  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENDPOINTS = {"completions": ("openai", "/v1/completions"), "chat": ("openai-chat", "/v1/chat/completions")}
STEP_MS = 20.0  # the served engine's fixed step: every TTFT is at least one (the prefill step)
TRAFFIC = dict(num_prompts=20, concurrency=4, input_len=32, output_len=16)


class GoodbenchServer:
    """`goodbench serve --fixed-step-ms STEP` of the checkout at `root`, in its own process group."""

    def __init__(self, root: str = ROOT, step_ms: float = STEP_MS):
        self.root, self.step_ms, self.port = root, step_ms, free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.log = None

    def __enter__(self) -> GoodbenchServer:
        argv = [sys.executable, "-m", "goodbench", "serve", "--port", str(self.port), "--fixed-step-ms"]
        argv += [str(self.step_ms), "--served-model-name", SERVED_NAME, "--tokenizer", MODEL, "--log-interval", "0"]
        env = dict(os.environ, PYTHONPATH=self.root)
        self.log = tempfile.TemporaryFile()  # a file, not a pipe: nobody drains it while the clients run
        self.proc = subprocess.Popen(
            argv, cwd=self.root, env=env, stdout=subprocess.DEVNULL, stderr=self.log, start_new_session=True
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                with urllib.request.urlopen(self.base_url + "/health", timeout=2) as r:
                    if r.status == 200:
                        return self
            except (urllib.error.URLError, OSError):
                time.sleep(0.2)
        self.__exit__()
        self.log.seek(0)
        err = self.log.read().decode(errors="replace")[-2000:]
        self.log.close()
        raise RuntimeError(f"goodbench serve did not become healthy in 60 s: {err}")

    def __exit__(self, *exc) -> None:
        if self.proc is None:
            return
        _signal_group(self.proc.pid, 15)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            _signal_group(self.proc.pid, 9)
            self.proc.wait(10)
        if _group_alive(self.proc.pid):
            _signal_group(self.proc.pid, 9)
        self.proc = None
        if exc:  # a normal exit (a failed start keeps the log to read it)
            self.log.close()


def vllm_bench(base_url: str, api: str, out_dir: str, model: str | None = None) -> dict:
    """One `vllm bench serve` run, without --model unless given (it then reads /v1/models, as a new
    user's would): its saved result's request counts and p50s."""
    backend, endpoint = ENDPOINTS[api]
    t = TRAFFIC
    argv = [os.path.join(VENV, "bin", "vllm"), "bench", "serve", "--backend", backend, "--base-url", base_url]
    argv += ["--endpoint", endpoint, "--tokenizer", MODEL, "--dataset-name", "random", "--seed", "0"]
    argv += ["--model", model] if model else []
    argv += ["--random-input-len", str(t["input_len"]), "--random-output-len", str(t["output_len"])]
    argv += ["--num-prompts", str(t["num_prompts"]), "--max-concurrency", str(t["concurrency"])]
    argv += ["--request-rate", "inf", "--ignore-eos", "--percentile-metrics", "ttft,itl", "--metric-percentiles", "50"]
    argv += ["--save-result", "--result-dir", out_dir, "--result-filename", f"vllm-{api}.json"]
    env = dict(os.environ, **ENV)
    env.pop("VIRTUAL_ENV", None)
    env.pop("PYTHONPATH", None)
    r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise RuntimeError(f"vllm bench serve exited {r.returncode}:\n{(r.stdout + r.stderr)[-3000:]}")
    with open(os.path.join(out_dir, f"vllm-{api}.json"), encoding="utf-8") as f:
        res = json.load(f)
    errors = [e for e in res.get("errors", []) if e]
    return {
        "completed": res["completed"],
        "failed": res.get("failed", t["num_prompts"] - res["completed"]),
        "errors": sorted(set(errors))[:3],
        "ttft_p50_ms": res["median_ttft_ms"],
        "itl_p50_ms": res["median_itl_ms"],
    }


def goodbench_run(base_url: str, api: str, out_dir: str, root: str = ROOT) -> dict:
    """The same traffic through goodbench's own client (this checkout's, whatever server it measures)."""
    t = TRAFFIC
    argv = [sys.executable, "-m", "goodbench", "run", "--base-url", base_url, "--endpoint", ENDPOINTS[api][1]]
    argv += ["--dataset-name", "random", "--random-input-len", str(t["input_len"]), "--tokenizer", MODEL]
    argv += ["--random-output-len", str(t["output_len"]), "--num-prompts", str(t["num_prompts"])]
    argv += ["--max-concurrency", str(t["concurrency"]), "--request-rate", "inf", "--quiet"]
    argv += ["--result-dir", out_dir, "--run-id", f"gb-{api}"]
    env = dict(os.environ, PYTHONPATH=root, GOODBENCH_CACHE_DIR=os.path.join(out_dir, "cache"))
    r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, cwd=root, stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        raise RuntimeError(f"goodbench run exited {r.returncode}:\n{(r.stdout + r.stderr)[-3000:]}")
    with open(os.path.join(out_dir, f"gb-{api}", "summary.json"), encoding="utf-8") as f:
        s = json.load(f)
    return {
        "completed": s["requests"]["completed"],
        "failed": s["requests"]["failed"],
        "ttft_p50_ms": s["ttft_ms"]["p50"],
        "itl_p50_ms": s["itl_ms"]["p50"],
    }


def measure(server_root: str, api: str, out_dir: str, model: str | None = None) -> tuple[dict, dict]:
    """(vLLM's client, goodbench's client) on one fresh server of `server_root`, the vLLM client first."""
    with GoodbenchServer(server_root) as srv:
        return vllm_bench(srv.base_url, api, out_dir, model), goodbench_run(srv.base_url, api, out_dir)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server-root", default=ROOT, help="the goodbench checkout whose server is measured")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--apis", default="completions,chat")
    ap.add_argument("--model", help="pass vLLM's client --model (a server without /v1/models' `root` needs it)")
    a = ap.parse_args()
    print(f"server: {a.server_root}; traffic: {TRAFFIC}")
    for i in range(a.repeat):
        for api in a.apis.split(","):
            with tempfile.TemporaryDirectory() as d:
                try:
                    v, g = measure(a.server_root, api, d, a.model)
                except RuntimeError as e:
                    print(f"{api} #{i}: {e}")
                    continue
            print(
                f"{api} #{i}: vllm bench serve {v['completed']} ok / {v['failed']} failed {v['errors']}, "
                f"TTFT p50 {v['ttft_p50_ms']:.1f} ms, ITL p50 {v['itl_p50_ms']:.2f} ms | goodbench "
                f"{g['completed']} ok / {g['failed']} failed, TTFT p50 {g['ttft_p50_ms']:.1f} ms, "
                f"ITL p50 {g['itl_p50_ms']:.2f} ms",
                flush=True,
            )


if __name__ == "__main__":
    main()
