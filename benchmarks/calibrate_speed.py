"""Speed of `goodbench calibrate` (issue 20; target <= 30 s): the step-time model fitted to one 1,000-request
run. The run is simulated on the reference engine under a known profile (a server whose step times are
known), so the recovered terms are printed beside the true ones. Timed as a user runs it (async
scheduling told from the run: two fits) and, alternating with it, with --no-async-scheduling (one fit).

    python benchmarks/calibrate_speed.py [--requests 1000] [--rate 2] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import goodbench as gb  # noqa: E402
from goodbench.engine.profile import Profile, render_profile  # noqa: E402

TRUE = {
    "step_s": 0.004,
    "floor_s": 0.025,
    "token_s": 0.0008,
    "decode_request_s": 0.0005,
    "context_token_s": 2e-7,
    "prefill_attention_s": 0.0,
    "frontend_s": 0.003,
}
WORKLOAD = """
name = "calibrate-speed"
generator = "mixed"
num_requests = {n}
seed = 0
[arrival]
process = "poisson"
rate = {rate}
[[class]]
name = "chat"
input = {{ dist = "lognormal", median = 200, sigma = 0.8 }}
output = {{ dist = "uniform", min = 16, max = 128 }}
"""
KNOBS = {"max_num_batched_tokens": 512, "max_num_seqs": 16, "num_gpu_blocks": 4000, "block_size": 16}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--rate", type=float, default=2.0)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="gb-calibrate-")
    truth = os.path.join(tmp, "true.toml")
    with open(truth, "w", encoding="utf-8") as f:
        f.write(render_profile(Profile(TRUE, KNOBS), "", ""))
    wl_path = os.path.join(tmp, "wl.toml")
    with open(wl_path, "w", encoding="utf-8") as f:
        f.write(WORKLOAD.format(n=a.requests, rate=a.rate))
    wl = gb.load_workload(wl_path)
    run = gb.simulate(wl, gb.EngineConfig(calibration=truth), result_dir=tmp, run_id="run")
    knobs = {k: v for k, v in KNOBS.items() if k != "block_size"}
    walls: dict = {None: [], False: []}
    cals = {}
    for _ in range(a.repeat):
        for told in walls:
            t = time.perf_counter()
            cals[told] = gb.calibrate([run.dir], gb.EngineConfig(**knobs, async_scheduling=told))
            walls[told].append(time.perf_counter() - t)
    cal = cals[None]
    for told, w in walls.items():
        how = "as run by default (both ways)" if told is None else "--no-async-scheduling (one fit)"
        print(f"calibrate on {a.requests} requests, {how}: {min(w):.1f} s (runs: {', '.join(f'{x:.1f}' for x in w)})")
    print(f"  {cal.scheduling}")
    fit = cal.profile.terms
    for k in TRUE:
        print(f"  {k:20s} true {TRUE[k]:.3g}  fitted {fit[k]:.3g}")
    r = cal.rows[0]
    print("  fit error: " + ", ".join(f"{k} {v:+.1%}" for k, v in r["fit_error"].items()))


if __name__ == "__main__":
    main()
