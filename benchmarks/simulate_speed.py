"""Speed of `goodbench simulate` (issue 3): 10,000 ShareGPT requests at 8 req/s, llama-3.1-8b on
h100-sxm, defaults as vLLM v1 (prefix caching on). Prints the engine's wall time, the simulated time
and their ratio; the workload build (ShareGPT sampling, cold and cached) is timed separately.

    python benchmarks/simulate_speed.py [--requests 10000] [--rate 8] [--repeat 3]

Then the same requests on a 2:2 prefill/decode split and on 4 replicas (engine/virtual/cluster.py; target <= 10 s).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

from goodbench import tokenizer  # noqa: E402
from goodbench.api.enginefiles import with_files  # noqa: E402
from goodbench.arrivals import ArrivalSpec, offsets  # noqa: E402
from goodbench.engine.config import EngineConfig  # noqa: E402
from goodbench.engine.jitter import PERCENTILES  # noqa: E402
from goodbench.engine.layout import ClusterSpec  # noqa: E402
from goodbench.engine.profile import Profile, render_profile  # noqa: E402
from goodbench.engine.virtual import simulate  # noqa: E402
from goodbench.metrics import summarize  # noqa: E402
from goodbench.records import RunMeta, RunResult  # noqa: E402
from goodbench.workloads import Plan, build_requests  # noqa: E402
from goodbench.workloads.spec import ClassSpec, LengthDist, WorkloadSpec  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=10_000)
    ap.add_argument("--rate", type=float, default=8.0)
    ap.add_argument("--gpu", default="h100-sxm")
    ap.add_argument("--engine-model", "--model", dest="model", default="llama-3.1-8b")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    os.environ["GOODBENCH_CACHE_DIR"] = tempfile.mkdtemp(prefix="gb-cache-")  # a cold cache first
    tok = tokenizer.load()
    spec = WorkloadSpec(
        generator="sharegpt",
        num_requests=a.requests,
        classes=(ClassSpec("sharegpt", input=LengthDist("dataset"), output=LengthDist("dataset"), source="sharegpt"),),
    )
    for label in ("cold", "cached"):
        t = time.perf_counter()
        reqs = build_requests(spec, tok, a.requests)
        print(f"workload build ({label} token-count cache): {time.perf_counter() - t:.2f} s")
    plan = Plan.at(reqs, offsets(ArrivalSpec(rate=a.rate), n=a.requests, seed=0))
    for pc in (True, False):
        walls = []
        for _ in range(a.repeat):
            cfg = EngineConfig(gpu=a.gpu, model=a.model, enable_prefix_caching=pc)
            t = time.perf_counter()
            out = simulate(cfg, plan)
            walls.append(time.perf_counter() - t)
        s = summarize(RunResult(RunMeta("b", mode="simulate", slo={"ttft": 500, "tpot": 50}), out.records))
        best = min(walls)
        print(
            f"simulate {a.requests} ShareGPT @ {a.rate}/s, {a.model} on {a.gpu}, prefix caching "
            f"{'on ' if pc else 'off'}: wall {best:.2f} s (min of {a.repeat}: "
            f"{', '.join(f'{w:.2f}' for w in walls)}), simulated {s['duration_s']:.0f} s "
            f"= {s['duration_s'] / best:,.0f}x real time, {out.stats['steps']} steps; "
            f"TTFT p50 {s['ttft_ms']['p50']:.1f} ms, TPOT p50 {s['tpot_ms']['p50']:.2f} ms, "
            f"attainment {s['slo_attainment']:.1%}"
        )
    scattered_profile(plan, a)
    for spec in (ClusterSpec(prefill=2, decode=2), ClusterSpec(replicas=4)):
        walls = []
        for _ in range(a.repeat):
            t = time.perf_counter()
            out = simulate(EngineConfig(gpu=a.gpu, model=a.model), plan, spec)
            walls.append(time.perf_counter() - t)
        st = out.stats
        s = summarize(RunResult(RunMeta("b", mode="simulate", slo={"ttft": 500, "tpot": 50}), out.records))
        print(
            f"simulate {a.requests} ShareGPT @ {a.rate}/s on {spec.label()} {a.gpu}: wall {min(walls):.2f} s "
            f"(min of {a.repeat}: {', '.join(f'{w:.2f}' for w in walls)}), {st['steps']} steps; "
            f"TTFT p50 {s['ttft_ms']['p50']:.1f} ms, TPOT p50 {s['tpot_ms']['p50']:.2f} ms"
        )


# a calibration profile shaped like an 8B model on a Hopper GPU (per-step host time, a weight-read floor up to
# 300 tokens, per-request and per-context costs), timed with and without a step-time scatter (engine/jitter.py):
# the scattered one draws a factor per step (one hash each), the other takes every step at its model time
PROFILE_TERMS = {
    "step_s": 0.002,
    "floor_s": 0.006,
    "token_s": 2e-5,
    "decode_request_s": 5e-5,
    "context_token_s": 5e-9,
    "prefill_attention_s": 1e-12,
    "frontend_s": 0.002,
}


def scattered_profile(plan, a) -> None:
    spread = tuple(float(v) for v in np.percentile(np.random.default_rng(0).lognormal(0, 0.06, 100_000), PERCENTILES))
    engine = {"num_gpu_blocks": 60_000, "block_size": 16, "max_num_seqs": 256, "max_num_batched_tokens": 8192}
    d = tempfile.mkdtemp(prefix="gb-prof-")  # removed at the end
    paths = {}
    for label, q in (("no scatter", ()), ("scatter", spread)):
        paths[label] = os.path.join(d, f"{label.replace(' ', '-')}.toml")
        with open(paths[label], "w", encoding="utf-8") as f:
            f.write(render_profile(Profile(dict(PROFILE_TERMS), engine, step_jitter=q), "benchmark", "-"))
    walls, steps = {label: [] for label in paths}, {}
    for _ in range(a.repeat):  # alternated: the machine's drift falls on both
        for label, path in paths.items():
            t = time.perf_counter()
            out = simulate(with_files(EngineConfig(calibration=path, enable_prefix_caching=False)), plan)
            walls[label].append(time.perf_counter() - t)
            steps[label] = out.stats["steps"]
    shutil.rmtree(d, ignore_errors=True)
    for label, w in walls.items():
        print(
            f"simulate {a.requests} ShareGPT @ {a.rate}/s with a calibration profile, {label}: wall {min(w):.2f} s "
            f"(min of {a.repeat}: {', '.join(f'{x:.2f}' for x in w)}), {steps[label]} steps"
        )


if __name__ == "__main__":
    main()
