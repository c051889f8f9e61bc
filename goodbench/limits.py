"""Every numeric input's valid range, in one table: flags (the CLI checks each parsed flag against it), the
Python API (the same names: workload options, run options, engine knobs), workload files (parse.py: a
key's `limit`), traces (each row's timestamp and lengths) and server replies (a token count in `usage`
above MAX_TOKENS is not a count: client/sse.py ignores it).
A number outside its range is refused before the clock starts, with the same one-line message
wherever it came from; nothing downstream has to guard against NaN, infinities, negative durations or
counts no machine can hold."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .errors import UsageError

TARGET_ATTAINMENT = 0.95  # the SLO attainment a run must reach: run, gate, locust, --find-max-rate, --min-gpus
STEADY_SHARE = 0.8  # a rate probe is conclusive when its steady-state window covers this share of its sends
CONFIRM_SCALE = 4  # --find-max-rate re-probes the rate it found with this many times the requests
MAX_UPFRONT_REQUESTS = 10_000_000  # a schedule built up front; a duration bounds it lazily instead
MAX_TOKENS = 10_000_000  # one request's prompt or output, in tokens (the longest contexts are ~10M)
MAX_AGENT_CALLS = 1_000_000  # the calls of one run's agent jobs, built up front (nodes weigh more than requests)
MAX_USERS = 100_000  # concurrent users or streams of one load-generator run
MAX_SECONDS = 10**9  # any duration, timeout or time offset (~31 years)
MAX_STEP_MS = 60_000.0  # one simulated engine step
MIN_STEP_MS = 1e-3  # a fixed step shorter than a microsecond would not advance the clock


@dataclass(frozen=True)
class Limit:
    lo: float | None = None  # inclusive
    hi: float | None = None  # inclusive
    lo_open: bool = False  # lo itself is not allowed (> lo)
    inf_ok: bool = False  # "inf" is a value (an arrival rate)


COUNT = Limit(1, MAX_UPFRONT_REQUESTS)
TOKENS = Limit(1, MAX_TOKENS)
SECONDS = Limit(0, MAX_SECONDS)
POSITIVE_SECONDS = Limit(0, MAX_SECONDS, lo_open=True)
FRACTION = Limit(0, 1)

LIMITS = {
    # workload (flags; the same ranges apply to a workload file's keys, below)
    "num_prompts": Limit(1),  # more than MAX_UPFRONT_REQUESTS needs a duration (check_upfront)
    "duration": POSITIVE_SECONDS,
    "warmup": Limit(0, MAX_UPFRONT_REQUESTS),
    "random_input_len": TOKENS,
    "random_output_len": TOKENS,
    "request_rate": Limit(0, lo_open=True, inf_ok=True),
    "burstiness": Limit(0, 1e6, lo_open=True),
    "ramp_up": SECONDS,
    "concurrency": Limit(1, MAX_USERS),
    "think_time": SECONDS,
    "seed": Limit(0, 2**63 - 1),
    "trace_speedup": Limit(0, 1e9, lo_open=True),
    "prefix_hit_rate": Limit(0, 0.99, lo_open=True),  # a controlled hit rate: some of each prompt is its own
    "primed_prefixes": COUNT,
    # workload files (parse.py names each key's limit) and traces (row by row)
    "requests": COUNT,
    "count_or_zero": Limit(0, MAX_UPFRONT_REQUESTS),
    "users_or_zero": Limit(0, MAX_USERS),
    "tokens": TOKENS,
    "tokens_or_zero": Limit(0, MAX_TOKENS),
    "seconds": SECONDS,
    "positive_seconds": POSITIVE_SECONDS,
    "milliseconds": Limit(0, MAX_SECONDS * 1000.0),
    "weight": Limit(0, 1e12),
    "fraction": FRACTION,
    "rate": Limit(0, lo_open=True, inf_ok=True),
    "rate_or_zero": Limit(0, 1e9),
    "scale": Limit(0, 1e9, lo_open=True),
    "sigma": Limit(0, 20),
    "priority": Limit(-(2**31), 2**31 - 1),
    "trace_time": SECONDS,
    "agent_depth": Limit(2, 1000),  # levels of an agent job's graph: plan, steps, final
    # gate clauses (a workload's [gate] table, --p50 ... --p99)
    "ceiling_ms": Limit(0, MAX_SECONDS * 1000.0, lo_open=True),
    # run
    "max_concurrency": Limit(1),
    "workers": Limit(1, 256),
    "timeout": POSITIVE_SECONDS,
    "idle_timeout": POSITIVE_SECONDS,
    "keepalive": POSITIVE_SECONDS,
    "pool_batch": Limit(1, 100_000),
    "grace_period": SECONDS,
    "target_attainment": FRACTION,
    "users": Limit(1, MAX_USERS),
    "spawn_rate": Limit(0, 1e6, lo_open=True),
    "locust_workers": Limit(0, 256),
    # gate
    "min_attainment": FRACTION,
    "max_failed": FRACTION,
    "min_goodput": Limit(0),
    # sweep / advise
    "jobs": Limit(0, 1024),
    "max_probes": Limit(1, 10_000),
    "max_replicas": Limit(1, 10_000),
    "server_timeout": POSITIVE_SECONDS,
    "ttft_slo": Limit(0, lo_open=True),
    "tpot_slo": Limit(0, lo_open=True),
    "p95_input": TOKENS,
    "context": TOKENS,
    "min_chunk": TOKENS,
    "time_per_chunk_ms": Limit(0, MAX_STEP_MS, lo_open=True),
    "port": Limit(0, 65535),
    "log_interval": SECONDS,
    # the reference engine's numeric knobs (EngineConfig fields, flags of run, simulate, serve, sweep)
    "tensor_parallel_size": Limit(1, 1024),
    "max_num_batched_tokens": TOKENS,
    "max_num_seqs": Limit(1, MAX_USERS),
    "long_prefill_token_threshold": Limit(0, MAX_TOKENS),
    "block_size": Limit(1, 128),
    "gpu_memory_utilization": Limit(0, 1, lo_open=True),
    "max_model_len": TOKENS,
    "num_gpu_blocks": Limit(1, 10**9),
    "adaptive_chunk_target_ms": Limit(0, MAX_STEP_MS, lo_open=True),
    "adaptive_chunk_floor": TOKENS,
    "step_overhead_ms": Limit(0, MAX_STEP_MS),
    "frontend_ms": Limit(0, MAX_STEP_MS),
    "frontend_token_us": Limit(0, 1000),
    "expert_skew": Limit(0, 4),
    "num_speculative_tokens": Limit(0, 16),
    "max_loras": Limit(1, 1024),
    "max_lora_rank": Limit(1, 512),
    "max_cpu_loras": Limit(1, 100_000),
    "electricity_price": Limit(0, 100),  # $ per kWh
    "facility_factor": Limit(1, 5),  # PUE: the facility's energy over the IT load's
    "fixed_step_ms": Limit(MIN_STEP_MS, MAX_STEP_MS),
    # a calibration profile's [terms] (seconds per step, token, request...; none may make one step
    # alone longer than MAX_STEP_MS) and [profile] error percentages
    "profile_term_s": Limit(0, MAX_STEP_MS / 1000),
    "profile_pct": Limit(0, 1e4),
    "replicas": Limit(1, 1024),
    "prefill_tp": Limit(1, 1024),
    "decode_tp": Limit(1, 1024),
    # history
    "history_window": Limit(2, MAX_UPFRONT_REQUESTS),
    "history_min_runs": Limit(2, MAX_UPFRONT_REQUESTS),
    "history_alpha": Limit(0, 0.5, lo_open=True),
    "last": Limit(1, MAX_UPFRONT_REQUESTS),
    "limit": Limit(1, MAX_UPFRONT_REQUESTS),
}


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def problem(name: str, value) -> str | None:
    """What is wrong with value for the limit `name` ('must be >= 1, got 0'), or None when it is fine
    (None, a value not given, is always fine)."""
    lim = LIMITS.get(name)
    if lim is None or value is None:
        return None
    if isinstance(value, str):
        if lim.inf_ok and value.strip().lower() == "inf":
            return None
        try:
            value = float(value)
        except ValueError:
            return f"{value!r} is not a number"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"expected a number, got {value!r}"
    if isinstance(value, float) and math.isnan(value):
        return "must be a number, got nan"
    if math.isinf(value) and not lim.inf_ok:
        return f"must be finite, got {value}"
    if lim.lo is not None and (value < lim.lo or (lim.lo_open and value == lim.lo)):
        return f"must be {'>' if lim.lo_open else '>='} {lim.lo:g}, got {value:g}"
    if lim.hi is not None and value > lim.hi:
        return f"must be <= {lim.hi:g}, got {value:g}"
    return None


def check(name: str, value, label: str | None = None) -> None:
    """UsageError when value is outside name's range; the message starts with label (default: the flag)."""
    why = problem(name, value)
    if why is not None:
        raise UsageError(f"{label or flag(name)} {why}")


def check_all(values: dict) -> None:
    for name, value in values.items():
        check(name, value)


def within(name: str, value) -> bool:
    """value is inside name's range (for numbers from a server: out of range means "not a value")."""
    return problem(name, value) is None


def check_upfront(num_prompts: int | None, duration: float | None) -> None:
    """A request count with no duration is built up front: refuse counts no machine can hold."""
    if num_prompts is not None and duration is None and num_prompts > MAX_UPFRONT_REQUESTS:
        raise UsageError(
            f"--num-prompts {num_prompts} is more than {MAX_UPFRONT_REQUESTS:,} requests to build up "
            "front; give --duration too (arrivals are then drawn only as far as it reaches)"
        )


# compare and gate --baseline: the smallest change that counts as a regression (docs/reports.md). A
# difference must be statistically significant AND larger than max(relative margin x base, the unit's
# floor): a 0.1 % ITL move is real in a simulation's tiny intervals but matters to no one.
PRACTICAL_MARGIN = 0.02  # compare's default relative margin (--margin)
GATE_MARGIN = 0.05  # gate --baseline's default relative margin (--max-regression)
PRACTICAL_FLOOR = {"ms": 1.0, "fraction": 0.01}  # latency: 1 ms; SLO attainment: one percentage point


def practical_threshold(unit: str, base: float | None, rel: float) -> float:
    """The absolute change a metric in `unit` must exceed to be a regression: max(rel x |base|, floor)."""
    return max(rel * abs(base or 0.0), PRACTICAL_FLOOR.get(unit, 0.0))


def margin_text(rel: float) -> str:
    """The rule in words: 'max(2%, 1 ms; 1 point of attainment)'."""
    return f"max({rel:.0%}, {PRACTICAL_FLOOR['ms']:g} ms; {PRACTICAL_FLOOR['fraction']:.0%} attainment)"


def agent_calls_problem(calls: int) -> str | None:
    """Why an agent workload this many calls big cannot be built (jobs x calls per job: each limit
    alone passes at 10M jobs, or 1,000 levels of 1,000 sub-agents, and the product takes gigabytes)."""
    if calls <= MAX_AGENT_CALLS:
        return None
    return (
        f"the agent jobs come to {calls:,} calls or more, over the {MAX_AGENT_CALLS:,} one run builds up front "
        "(fewer jobs, a smaller fan-out or depth)"
    )
