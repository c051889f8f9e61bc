"""`goodbench calibrate` as a function: a calibration profile fitted to runs against your own server."""

from __future__ import annotations

import os
import time

from ..analysis.calibrate import Calibration, calibrate_runs
from ..engine.config import EngineConfig
from ..engine.profile import render_profile
from ..errors import UsageError
from ..store import check_writable, write_output
from ..version import __version__
from .enginefiles import with_files


def calibrate(
    run_dirs: list[str], engine: EngineConfig | None = None, out: str | None = None, on_stage=None
) -> Calibration:
    """Fit the step-time model to these runs (directories of `goodbench run` against your server) and,
    with `out`, write the profile there (TOML; `--calibration FILE` and EngineConfig(calibration=FILE)
    read it). engine: the server's knobs (budget, sequence limit, chunked prefill, KV blocks); vLLM's
    defaults otherwise, its KV capacity from the runs' scraped /metrics. engine.async_scheduling None (the
    default): fitted with and without it, keeping the one that explains the runs better; the result's
    `scheduling` says which and why."""
    if not run_dirs:
        raise UsageError("give at least one run directory to calibrate on")
    if out and os.path.isdir(out):
        raise UsageError(f"--out {out} is a directory; give a file name such as profile.toml")
    if out:  # a read-only directory is said before the fit, not after it
        check_writable(out)
    cal = calibrate_runs(list(run_dirs), with_files(engine or EngineConfig()), on_stage)
    if out:
        write_output(out, render_profile(cal.profile, time.strftime("%Y-%m-%dT%H:%M:%S"), __version__))
    return cal
