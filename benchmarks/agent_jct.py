"""Agent jobs live vs simulated (issue 24): the built-in `agent-jobs` workload (200 jobs of 8 calls:
depth 4, fan-out 3, tool latency 50-500 ms) run against the reference engine (`goodbench serve`,
started for each run) and in `simulate` with the same engine configuration. Prints JCT p50 / p99 live
and simulated and their ratio, and how much of each live job's JCT its critical path explains (the
rest is the client's own time: dispatch and scheduling lag), per repeat.

    python benchmarks/agent_jct.py --repeat 3
    python benchmarks/agent_jct.py --jobs 50 --repeat 1      # quicker
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from dataclasses import replace  # noqa: E402

from goodbench import api  # noqa: E402
from goodbench.engine.config import EngineConfig  # noqa: E402


def once(jobs: int, cfg: EngineConfig, out: str) -> dict:
    spec = api.load_workload("agent-jobs")
    spec = replace(spec, agent=replace(spec.agent, jobs=jobs))
    sim = api.simulate(spec, cfg, result_dir=out).summary["jobs"]
    live = api.run(spec, engine=cfg, result_dir=out).summary
    lj = live["jobs"]
    return {
        "sim_p50": sim["jct_ms"]["p50"],
        "sim_p99": sim["jct_ms"]["p99"],
        "live_p50": lj["jct_ms"]["p50"],
        "live_p99": lj["jct_ms"]["p99"],
        "share_min": lj["critical_path_share"]["min"],
        "share_p50": lj["critical_path_share"]["p50"],
        "client_p50": lj["client_overhead_ms"]["p50"],
        "client_max": lj["client_overhead_ms"]["max"],
        "completed": lj["completed"],
        "failed": live["requests"]["failed"],
        "lag_p99": live["schedule_lag_ms"]["p99"] if live.get("schedule_lag_ms") else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--gpu", help="the engine's GPU (default: EngineConfig's)")
    a = ap.parse_args()
    cfg = EngineConfig(gpu=a.gpu) if a.gpu else EngineConfig()
    print(f"{os.cpu_count()} CPUs; agent-jobs x {a.jobs} jobs on the reference engine ({cfg.model} on {cfg.gpu})")
    print(f"{'run':>3} {'JCT p50 sim/live ms':>22} {'ratio':>6} {'JCT p99 sim/live ms':>22} "
          f"{'path share min/p50':>19} {'client p50/max ms':>18} {'done':>5} {'failed':>6}")  # fmt: skip
    for i in range(a.repeat):
        out = tempfile.mkdtemp(prefix="gb-agent-jct-")
        try:
            r = once(a.jobs, cfg, out)
        finally:
            shutil.rmtree(out, ignore_errors=True)
        print(
            f"{i + 1:3d} {r['sim_p50']:10,.0f}/{r['live_p50']:<10,.0f} {r['live_p50'] / r['sim_p50']:6.3f} "
            f"{r['sim_p99']:10,.0f}/{r['live_p99']:<10,.0f} {r['share_min']:9.3f}/{r['share_p50']:<8.3f} "
            f"{r['client_p50']:8.1f}/{r['client_max']:<8.1f} {r['completed']:5d} {r['failed']:6d}",
            flush=True,
        )


if __name__ == "__main__":
    main()
