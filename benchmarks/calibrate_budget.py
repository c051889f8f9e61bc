"""How far a calibration profile's step times hold beyond the step sizes its runs had (issue 20): runs of
the built-in `calibrate` workload are simulated on the reference engine at one budget
(`max_num_batched_tokens`), a profile is fitted to them, and its prefill steps of 256 to 4,096 tokens are
priced beside the engine's own. Steps larger than the budget are the fit's extrapolation (what a
chunk-size what-if above the server's budget asks); `simulate --calibration` notes them.

    python benchmarks/calibrate_budget.py [--budget 512] [--gpus l40s,h100-sxm,a100-80g-sxm] [--without-slope-start]

--without-slope-start fits from the floor and no-floor starts only (calibrate before its start from the runs'
TTFT slope per prompt token), for a before/after in one run.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import goodbench as gb  # noqa: E402
from goodbench.analysis import calibrate as cal  # noqa: E402
from goodbench.api.enginefiles import load_profile  # noqa: E402
from goodbench.engine.costmodel import CostModel  # noqa: E402

RUN_SETS = (((150, 3.0), (200, 8.0)), ((100, 2.0), (150, 6.0)), ((200, 4.0),))  # (requests, req/s) per run
STEPS = (256, 512, 1024, 2048, 4096)


def errors(gpu: str, budget: int, runs) -> list[float]:
    """Profile / engine - 1 for a prefill step of each of STEPS tokens from an empty context."""
    knobs = {"max_num_batched_tokens": budget, "max_num_seqs": 256}
    server = gb.EngineConfig(gpu=gpu, **knobs)
    tmp = tempfile.mkdtemp(prefix="gb-budget-")
    dirs = [
        gb.simulate(
            gb.load_workload("calibrate", num_prompts=n, request_rate=rate), server, result_dir=tmp, run_id=f"r{i}"
        ).dir
        for i, (n, rate) in enumerate(runs)
    ]
    gb.calibrate(dirs, server, out=os.path.join(tmp, "fit.toml"))  # told the server's GPU, as a user should
    fit, tier = load_profile(os.path.join(tmp, "fit.toml")), CostModel.for_config(server)
    out = []
    for n in STEPS:
        attn = n * (n + 1) / 2
        out.append(fit.step_time(n, 0, 0, attn) / tier.step_time(n, 0, 0, attn, 0, 1) - 1)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=int, default=512, help="the calibration runs' max_num_batched_tokens")
    ap.add_argument("--gpus", default="l40s,h100-sxm,a100-80g-sxm")
    ap.add_argument("--without-slope-start", action="store_true", help="calibrate as before the TTFT-slope start")
    args = ap.parse_args()
    if args.without_slope_start:
        cal._ttft_slope = lambda runs: 0.0  # _starts drops a start whose per-token cost is 0
    starts = "without" if args.without_slope_start else "with"
    print(
        f"calibrated at budget {args.budget} ({starts} the TTFT-slope start): a prefill step of N tokens, profile vs engine"
    )
    print("gpu            runs (requests @ req/s)        " + "".join(f"{n:>8}" for n in STEPS))
    for gpu in args.gpus.split(","):
        for runs in RUN_SETS:
            label = " + ".join(f"{n} @ {r:g}" for n, r in runs)
            errs = errors(gpu, args.budget, runs)
            print(f"{gpu:<14} {label:<30} " + "".join(f"{e:>+8.0%}" for e in errs))


if __name__ == "__main__":
    main()
