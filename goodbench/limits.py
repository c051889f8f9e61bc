"""Every numeric option's valid range, in one table: the CLI checks each parsed flag against it, and the
Python API checks the same names (workload options, run options) so both give the same one-line error."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .errors import UsageError

MAX_UPFRONT_REQUESTS = 10_000_000  # a schedule built up front; a duration bounds it lazily instead


@dataclass(frozen=True)
class Limit:
    lo: float | None = None  # inclusive
    hi: float | None = None  # inclusive
    lo_open: bool = False  # lo itself is not allowed (> lo)
    inf_ok: bool = False  # "inf" is a value (an arrival rate)


LIMITS = {
    # workload
    "num_prompts": Limit(1),
    "duration": Limit(0, lo_open=True),
    "warmup": Limit(0),
    "random_input_len": Limit(1),
    "random_output_len": Limit(1),
    "request_rate": Limit(0, lo_open=True, inf_ok=True),
    "burstiness": Limit(0, lo_open=True),
    "ramp_up": Limit(0),
    "concurrency": Limit(1),
    "think_time": Limit(0),
    # run
    "max_concurrency": Limit(1),
    "workers": Limit(1),
    "timeout": Limit(0, lo_open=True),
    "idle_timeout": Limit(0, lo_open=True),
    "keepalive": Limit(0, lo_open=True),
    "pool_batch": Limit(1, 100_000),
    "grace_period": Limit(0),
    "target_attainment": Limit(0, 1),
    "users": Limit(1),
    "spawn_rate": Limit(0, lo_open=True),
    "locust_workers": Limit(0),
    # gate
    "min_attainment": Limit(0, 1),
    "max_failed": Limit(0, 1),
    "min_goodput": Limit(0),
    # sweep / advise
    "jobs": Limit(0),
    "max_probes": Limit(1),
    "server_timeout": Limit(0, lo_open=True),
    "ttft_slo": Limit(0, lo_open=True),
    "tpot_slo": Limit(0, lo_open=True),
    "p95_input": Limit(1),
    "context": Limit(1),
    "min_chunk": Limit(1),
    "time_per_chunk_ms": Limit(0, lo_open=True),
    "port": Limit(0, 65535),
    "trace_speedup": Limit(0, lo_open=True),
    # history
    "history_window": Limit(2),
    "history_min_runs": Limit(2),
    "history_alpha": Limit(0, 0.5, lo_open=True),
    "last": Limit(1),
    "limit": Limit(1),
}


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def check(name: str, value) -> None:
    """UsageError when value is outside name's range (None is 'not given' and always fine)."""
    lim = LIMITS.get(name)
    if lim is None or value is None:
        return
    if isinstance(value, str):
        if lim.inf_ok and value.strip().lower() == "inf":
            return
        try:
            value = float(value)
        except ValueError:
            raise UsageError(f"{flag(name)} {value!r} is not a number") from None
    if isinstance(value, float) and math.isnan(value):
        raise UsageError(f"{flag(name)} must be a number, got nan")
    if math.isinf(value) and not lim.inf_ok:
        raise UsageError(f"{flag(name)} must be finite, got {value}")
    if lim.lo is not None and (value < lim.lo or (lim.lo_open and value == lim.lo)):
        raise UsageError(f"{flag(name)} must be {'>' if lim.lo_open else '>='} {lim.lo:g}, got {value:g}")
    if lim.hi is not None and value > lim.hi:
        raise UsageError(f"{flag(name)} must be <= {lim.hi:g}, got {value:g}")


def check_all(values: dict) -> None:
    for name, value in values.items():
        check(name, value)


def check_upfront(num_prompts: int | None, duration: float | None) -> None:
    """A request count with no duration is built up front: refuse counts no machine can hold."""
    if num_prompts is not None and duration is None and num_prompts > MAX_UPFRONT_REQUESTS:
        raise UsageError(
            f"--num-prompts {num_prompts} is more than {MAX_UPFRONT_REQUESTS:,} requests to build up "
            "front; give --duration too (arrivals are then drawn only as far as it reaches)"
        )
