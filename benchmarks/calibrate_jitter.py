"""What the step-time scatter a profile keeps (engine/jitter.py) does to calibrate -> predict.

For each pair of runs against one server, a calibration run and a live run of another workload, it
calibrates on the first (`goodbench calibrate`, as a user would) and predicts the second's TTFT and ITL
p50 by replaying its requests at their measured send times, with the profile as written and as calibrate
fitted it before it kept the scatter (the first fit's terms, no [jitter] table: every step its model
time). The pairs the real-vLLM test leaves
behind (tests/test_real_vllm.py::test_calibrate_on_one_workload_predicts_another) are directories
holding cal/ and live/ and the knobs that test gives calibrate (budget 512, 16 sequences, 8,192-token
context):

    GOODBENCH_VLLM_VENV=... GOODBENCH_VLLM_MODEL=... python -m pytest tests/test_real_vllm.py -m real_vllm \\
        -k calibrate_on_one -p no:cacheprovider --basetemp=/tmp/rv1        # and /tmp/rv2, ...
    python benchmarks/calibrate_jitter.py /tmp/rv*/test_calibrate_on_one_workload0

or give CAL_DIR,LIVE_DIR pairs and the server's knobs (--max-num-batched-tokens, --max-num-seqs,
--max-model-len)."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import tempfile
from dataclasses import replace

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import goodbench as gb  # noqa: E402
from goodbench.analysis.calibrate import fit_scheduling  # noqa: E402
from goodbench.analysis.calrun import load_run  # noqa: E402
from goodbench.api.enginefiles import load_profile, resolve_engine  # noqa: E402
from goodbench.engine.jitter import deciles  # noqa: E402
from goodbench.engine.profile import render_profile  # noqa: E402
from goodbench.engine.virtual import simulate  # noqa: E402
from goodbench.metrics import summarize  # noqa: E402
from goodbench.records import RunMeta, RunResult  # noqa: E402
from goodbench.store import load  # noqa: E402
from goodbench.workloads import Plan  # noqa: E402

WITHIN = 0.15  # issue 20's target for the loop


def pairs(args) -> list[tuple[str, str, str]]:
    out = []
    for p in args.pairs:
        cal, live = p.split(",", 1) if "," in p else (os.path.join(p, "cal"), os.path.join(p, "live"))
        out.append((p, cal, live))
    return out


def p50s(recs) -> tuple[float, float]:
    s = summarize(RunResult(RunMeta("b", mode="simulate"), recs))
    return s["ttft_ms"]["p50"], s["itl_ms"]["p50"]


def predict(live_dir: str, profile: str, knobs: gb.EngineConfig) -> tuple[float, float]:
    """The live run's TTFT and ITL p50 as the profile predicts them: its requests at their send times
    (prefix caching off: records keep no prompt text, so every replayed prompt would look alike)."""
    run = load_run(live_dir)
    cfg = resolve_engine(replace(knobs, calibration=profile, enable_prefix_caching=False))
    return p50s(simulate(cfg, Plan.at(run.requests, run.offsets)).records)


def as_before(cal_dir: str, profile: str, knobs: gb.EngineConfig, tmp: str) -> str:
    """The profile as calibrate wrote it before it kept the scatter: the first fit (async scheduling told
    as now), no [jitter] table, no refit with it."""
    _, terms, _ = fit_scheduling([load_run(cal_dir)], knobs)
    path = os.path.join(tmp, "before.toml")
    with open(path, "w", encoding="utf-8") as f:
        f.write(render_profile(replace(load_profile(profile), terms=terms, step_jitter=()), "benchmark", "-"))
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pairs", nargs="+", help="DIR holding cal/ and live/, or CAL_DIR,LIVE_DIR")
    ap.add_argument("--max-num-batched-tokens", type=int, default=512)
    ap.add_argument("--max-num-seqs", type=int, default=16)
    ap.add_argument("--max-model-len", type=int, default=8192)
    a = ap.parse_args()
    knobs = gb.EngineConfig(
        max_num_batched_tokens=a.max_num_batched_tokens, max_num_seqs=a.max_num_seqs, max_model_len=a.max_model_len
    )
    errs = {"with": [], "before": []}
    print(f"{'pair':<48} {'spread p10-p90':>15} {'TTFT with':>10} {'before':>8} {'ITL with':>9} {'before':>8}")
    for name, cal, live in pairs(a):
        with tempfile.TemporaryDirectory() as tmp:
            prof = os.path.join(tmp, "fit.toml")
            with contextlib.redirect_stdout(io.StringIO()):
                gb.calibrate([cal], knobs, out=prof)
            res = load(live)
            ok = [r for r in res.records if r.status == "ok" and not r.warmup]
            meas = p50s(ok)
            got = {
                "with": predict(live, prof, knobs),
                "before": predict(live, as_before(cal, prof, knobs, tmp), knobs),
            }
            q = load_profile(prof).step_jitter
        e = {k: [v[i] / meas[i] - 1 for i in range(2)] for k, v in got.items()}
        for k in e:
            errs[k].append(e[k])
        spread = "x{:.2f}-x{:.2f}".format(*deciles(q)) if q else "none"
        print(
            f"{name[-48:]:<48} {spread:>15} {e['with'][0]:>+10.1%} {e['before'][0]:>+8.1%} "
            f"{e['with'][1]:>+9.1%} {e['before'][1]:>+8.1%}"
        )
    for k, v in errs.items():
        v = np.array(v)
        inside = int((np.abs(v) <= WITHIN).all(axis=1).sum())
        print(
            f"{'with the scatter' if k == 'with' else 'as before (first fit, no scatter)'}: TTFT mean {v[:, 0].mean():+.1%} (|max| {np.abs(v[:, 0]).max():.1%}), ITL mean "
            f"{v[:, 1].mean():+.1%} (|max| {np.abs(v[:, 1]).max():.1%}); both within ±{WITHIN:.0%} in {inside} of {len(v)}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
