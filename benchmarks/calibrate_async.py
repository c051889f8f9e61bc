"""Does `goodbench calibrate` tell a server with async scheduling from one without? Without
--async-scheduling or --no-async-scheduling it fits both ways and keeps the one that explains the runs
better (analysis/calibrate.py, fit_scheduling). Here each verdict is checked against servers whose
setting is known: runs of the built-in `calibrate` workload simulated on the reference engine (tiers x
rates x on/off), and with --served the same against `goodbench serve` on loopback (wall-clock steps,
HTTP, the client's own jitter). Then what the wrong verdict would cost a what-if at other rates.

    python benchmarks/calibrate_async.py [--gpus l40s,h100-sxm] [--rates 1,4,12] [--requests 200] [--served]
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

import goodbench as gb  # noqa: E402
from goodbench.engine.serve.launch import start_engine  # noqa: E402

BUDGET = 2048


def verdict(run_dir: str, gpu: str, truth: bool) -> tuple[bool, str, float]:
    """Right only when told, and told the truth (a 'cannot tell' is not right, whatever it assumed)."""
    t = time.perf_counter()
    cal = gb.calibrate([run_dir], gb.EngineConfig(gpu=gpu, max_num_batched_tokens=BUDGET))
    told = "told from the runs" in cal.scheduling
    return told and cal.profile.engine["async_scheduling"] == truth, cal.scheduling, time.perf_counter() - t


def served_run(gpu: str, held: bool, rate: float, n: int, tmp: str) -> str:
    """A run of the calibrate workload against `goodbench serve` on loopback (bounded: n requests)."""
    srv = start_engine(gb.EngineConfig(gpu=gpu, async_scheduling=held, max_num_batched_tokens=BUDGET))
    try:
        wl = gb.load_workload("calibrate", request_rate=rate, num_prompts=n)
        return gb.run(wl, srv.base_url, result_dir=tmp, run_id=f"served-{gpu}-{rate:g}-{held}").dir
    finally:
        srv.close()


def simulated_run(gpu: str, held: bool, rate: float, n: int, tmp: str, run_id: str, profile: str | None = None):
    wl = gb.load_workload("calibrate", request_rate=rate, num_prompts=n)
    eng = (
        gb.EngineConfig(calibration=profile)
        if profile
        else gb.EngineConfig(gpu=gpu, async_scheduling=held, max_num_batched_tokens=BUDGET)
    )
    return gb.simulate(wl, eng, result_dir=tmp, run_id=run_id)


def wrong_choice(n: int, tmp: str) -> None:
    """What the wrong verdict would cost: a simulated L40S with async scheduling, calibrated at 4/s as
    told and forced off, predicting TTFT p50 at 1 and 12 req/s."""
    cal_run = simulated_run("l40s", True, 4.0, n, tmp, "cost-cal")
    truth = {r: simulated_run("l40s", True, r, n, tmp, f"cost-{r:g}").summary["ttft_ms"]["p50"] for r in (1.0, 12.0)}
    for held, name in ((None, "told"), (False, "forced off")):
        out = os.path.join(tmp, f"cost-{name.replace(' ', '-')}.toml")
        gb.calibrate(
            [cal_run.dir], gb.EngineConfig(gpu="l40s", max_num_batched_tokens=BUDGET, async_scheduling=held), out=out
        )
        got = []
        for r in (1.0, 12.0):
            p = simulated_run("l40s", True, r, n, tmp, f"cost-{name.replace(' ', '-')}-{r:g}", out).summary["ttft_ms"][
                "p50"
            ]
            got.append(f"{r:g}/s {p:.1f} ms vs {truth[r]:.1f} ({p / truth[r] - 1:+.1%})")
        print(f"calibrated {name}: TTFT p50 " + ", ".join(got))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", default="l40s,h100-sxm")
    ap.add_argument("--rates", default="1,4,12")
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--served", action="store_true", help="also against `goodbench serve` on loopback (L40S, 4/s)")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="gb-calasync-")
    try:
        right = total = 0
        cases = [(g, float(r), h, False) for g in a.gpus.split(",") for r in a.rates.split(",") for h in (False, True)]
        cases += [("l40s", 4.0, h, True) for h in (False, True)] if a.served else []
        for gpu, rate, held, served in cases:
            if served:
                run_dir = served_run(gpu, held, rate, a.requests, tmp)
            else:
                run_dir = simulated_run(gpu, held, rate, a.requests, tmp, f"{gpu}-{rate:g}-{held}").dir
            ok, said, wall = verdict(run_dir, gpu, held)
            right, total = right + ok, total + 1
            where = "served" if served else "simulated"
            print(
                f"{where:9s} {gpu:9s} {rate:4g}/s async {'on ' if held else 'off'}: {'right' if ok else 'WRONG'} "
                f"({wall:.1f} s) {said.split(';')[0]}",
                flush=True,
            )
        print(f"{right} of {total} verdicts right")
        wrong_choice(a.requests, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
