"""A calibration profile: the step-time model fitted to runs against one's own server (`goodbench
calibrate`), in the cost model's own terms, saved as TOML and read back by `--calibration FILE`.

    T = t_step + max(t_floor, t_token N) + t_decode D + t_ctx C + t_attn A     per step
    t_frontend + t_flight F + t_ftoken P                                        once per request

N tokens in the step, D decoding requests, C context tokens they read (and prefill chunks re-read),
A the prefill attention work (sum over chunks of n (p + (n + 1) / 2)). t_floor is what a step costs
however few tokens it carries (the weights are read once per step); above t_floor / t_token tokens
each one costs t_token. The front end delays a request between its send and the engine: F requests
were in flight at its send, P tokens in its prompt (a server whose HTTP process shares a CPU with its
engine slows as the load grows; engine/frontend.py). The engine section keeps what the server ran with (its GPU and
TP size, KV capacity and, when known, its budget and sequence limit), so a what-if changes only what the user asks to
change and is labelled and priced as that server."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError, UsageError
from ..limits import flag, problem
from .hardware import GPUS
from .jitter import PERCENTILES
from .speculative import SpecDecode

TERMS = (
    "step_s",
    "floor_s",
    "token_s",
    "decode_request_s",
    "context_token_s",
    "prefill_attention_s",
    "frontend_s",
    "frontend_flight_s",
    "frontend_token_s",
)
STEP_TERMS = TERMS[:6]  # what a step's time is made of; the rest are the front end's (engine/frontend.py)
OPTIONAL = ("frontend_flight_s", "frontend_token_s")  # 0 in profiles written before they existed
ENGINE_KEYS = (
    "num_gpu_blocks",
    "block_size",
    "max_num_batched_tokens",
    "max_num_seqs",
    "enable_chunked_prefill",
    "async_scheduling",
)
# the speculative decoding the server ran (calibrate fits the acceptance to the runs' counters): what-ifs keep it
SPEC_KEYS = ("speculative_method", "num_speculative_tokens", "speculative_acceptance", "speculative_model")
# the server the terms were fitted to (its hardware and model): what-ifs' labels, GPU counts and prices, by flag
SERVER_FLAGS = {
    "gpu": "--gpu",
    "tensor_parallel_size": "--tensor-parallel-size",
    "model": "--engine-model",
    "dtype": "--dtype",
    "kv_cache_dtype": "--kv-cache-dtype",
}
SERVER_KEYS = tuple(SERVER_FLAGS)
HELP = {
    "step_s": "per step: scheduling, launch, sampling set-up",
    "floor_s": "per step, the least the linear layers take (weights read once a step)",
    "token_s": "per token in the step once past the floor (prefill and decode tokens)",
    "decode_request_s": "per decoding request in the step (its attention kernel, sampling, output)",
    "context_token_s": "per context token a decoding request reads (KV bytes)",
    "prefill_attention_s": "per unit of prefill attention work, sum over chunks of n (p + (n + 1) / 2)",
    "frontend_s": "once per request, between its send and the engine (HTTP, tokenizing)",
    "frontend_flight_s": "... and per request already in flight at its send (a front end sharing a CPU)",
    "frontend_token_s": "... and per prompt token (template, tokenizing)",
}


@dataclass(frozen=True)
class Profile:
    terms: dict  # TERMS -> seconds
    engine: dict = field(default_factory=dict)  # ENGINE_KEYS the server ran with, where known
    step_time_pct: float | None = None  # a step's error: the larger of itl_pct and tpot_pct (older: all three's median)
    basis: str = ""
    runs: tuple = ()
    path: str = ""
    # the prompt lengths the runs exercised ({"requests": n, "prompt_quantiles": 0th..100th percentile}):
    # a what-if with prompts the runs hardly had is extrapolated (coverage_note); empty in older profiles
    coverage: dict = field(default_factory=dict)
    # percentiles (jitter.PERCENTILES) of a step's time over its model time, from the runs' decode-only gaps
    # (engine/jitter.py): simulations scatter their steps as the server did; empty: every step its model time
    step_jitter: tuple = ()
    # per metric, the median |error| of each run's p50 as predicted (held out with several runs: a fit
    # without that run; the basis says which); None in profiles written before they existed
    ttft_pct: float | None = None
    itl_pct: float | None = None
    tpot_pct: float | None = None

    def __post_init__(self):  # terms a profile may leave out (written before they existed) are 0
        object.__setattr__(self, "terms", {**dict.fromkeys(OPTIONAL, 0.0), **self.terms})

    def step_time(self, n: int, decodes: int, ctx: float, attn: float = 0.0) -> float:
        t = self.terms
        return (
            t["step_s"]
            + np.maximum(t["floor_s"], t["token_s"] * n)  # numbers or arrays
            + t["decode_request_s"] * decodes
            + t["context_token_s"] * ctx
            + t["prefill_attention_s"] * attn
        )


def _limited(v, limit: str, where: str, what: str, ints: bool = False) -> None:
    """InputError naming the file and key unless v is a number (ints: an integer) inside limits.LIMITS'
    `limit`: the same table the flags obey, so a profile cannot carry a value a flag would refuse."""
    why = problem(limit, v) if isinstance(v, (int, float)) and not isinstance(v, bool) else f"got {v!r}"
    if why is None and ints and not isinstance(v, int):
        why = f"got {v!r}"
    if why is not None:
        raise InputError(f"{where}: {what}: {why}")


def _num(d: dict, key: str, path: str) -> float:
    v = d.get(key, 0.0 if key in OPTIONAL else None)
    _limited(v, "profile_term_s", path, f"[terms] {key} (required, seconds, finite, >= 0)")
    return float(v)


def _check_knobs(eng: dict, path: str) -> None:
    """[engine]'s knobs within the limits their flags obey (a whole number each), the switches true/false."""
    for k in ENGINE_KEYS:
        if k not in eng:
            continue
        if k in ("enable_chunked_prefill", "async_scheduling"):
            if not isinstance(eng[k], bool):
                raise InputError(f"{path}: [engine] {k} = {eng[k]!r}: true or false")
        else:
            _limited(eng[k], k, path, f"[engine] {k} (a whole number, as {flag(k)})", ints=True)


def _check_spec(eng: dict, path: str) -> None:
    """[engine]'s speculative decoding as its flags would take it (InputError naming the file)."""
    if "speculative_method" not in eng:
        return
    try:
        SpecDecode.from_knobs(
            eng["speculative_method"], eng.get("num_speculative_tokens", 0), eng.get("speculative_acceptance")
        )
    except (UsageError, TypeError, ValueError) as e:
        raise InputError(f"{path}: [engine] speculative decoding: {e}") from None


def profile_from_toml(d: dict, path: str) -> Profile:
    """A profile from its file's TOML table (read at the edge: api/enginefiles.py); InputError naming the
    file and key when it is not one."""
    if not isinstance(d.get("terms"), dict):
        raise InputError(f"{path}: no [terms] table: not a goodbench calibration profile (goodbench calibrate)")
    terms = {k: _num(d["terms"], k, path) for k in TERMS}
    if terms["step_s"] + terms["floor_s"] <= 0:
        raise InputError(f"{path}: [terms] step_s and floor_s are both 0: a step must take some time")
    eng = {k: d.get("engine", {})[k] for k in ENGINE_KEYS + SERVER_KEYS + SPEC_KEYS if k in d.get("engine", {})}
    _check_server(eng, path)
    _check_knobs(eng, path)
    _check_spec(eng, path)
    meta = d.get("profile", {})
    pct = {k: _pct(meta, k, path) for k in ("step_time_pct", "ttft_pct", "itl_pct", "tpot_pct")}
    return Profile(
        terms,
        eng,
        pct.pop("step_time_pct"),
        str(meta.get("basis", "")),
        tuple(meta.get("runs", ())),
        os.path.abspath(path),
        _coverage(d.get("coverage"), path),
        _jitter(d.get("jitter"), path),
        **pct,
    )


def _pct(meta: dict, key: str, path: str) -> float | None:
    """[profile] key as a percentage >= 0, None where the profile leaves it out (written before it existed)."""
    v = meta.get(key)
    if v is None:
        return None
    _limited(v, "profile_pct", path, f"[profile] {key} (a percentage >= 0)")
    return float(v)


def _check_server(eng: dict, path: str) -> None:
    """InputError naming the file where [engine] names a GPU goodbench does not know, a TP size below 1, or
    a dtype it does not price."""
    gpu, tp = eng.get("gpu"), eng.get("tensor_parallel_size", 1)
    if gpu is not None and (not isinstance(gpu, str) or gpu.lower() not in GPUS):
        raise InputError(f"{path}: [engine] gpu = {gpu!r}: not a GPU goodbench knows ({', '.join(GPUS)})")
    if not isinstance(tp, int) or isinstance(tp, bool) or tp < 1:
        raise InputError(f"{path}: [engine] tensor_parallel_size = {tp!r}: a whole number >= 1")
    if not isinstance(eng.get("model", ""), str):
        raise InputError(f"{path}: [engine] model = {eng['model']!r}: a model's name")
    for key, allowed in (("dtype", ("bf16", "fp8")), ("kv_cache_dtype", ("auto", "bf16", "fp8"))):
        if eng.get(key, allowed[0]) not in allowed:
            raise InputError(f"{path}: [engine] {key} = {eng[key]!r}: one of {', '.join(allowed)}")


def server(engine: dict) -> dict:
    """The server a profile's terms were fitted to, as far as its [engine] names it (SERVER_KEYS: GPU, TP
    size, model, dtypes): a profile is one server, and its what-ifs are labelled, counted and priced as it."""
    return {k: engine[k] for k in SERVER_KEYS if k in engine}


def _plain(key: str, value):
    """A server value as compared: names without case, a bf16 KV cache as vLLM's auto."""
    v = value.lower() if isinstance(value, str) else value
    return "auto" if key == "kv_cache_dtype" and v == "bf16" else v


def contradiction(prof: Profile, given: dict) -> str | None:
    """A line when a server knob the user gave ({SERVER_KEYS key: value}; None where not given) differs
    from the profile's server. The one check: EngineConfig's resolution calls it (config.check_server), for
    the library and the CLI alike."""
    mine = server(prof.engine)
    off = [
        f"{SERVER_FLAGS[k]} {given[k]} (its server's: {mine[k]})"
        for k in mine
        if given.get(k) is not None and _plain(k, given[k]) != _plain(k, mine[k])
    ]
    if not off:
        return None
    return (
        f"{prof.path} is one server's calibration: {', '.join(off)} would be labelled and priced as a server the "
        "profile's terms were never fitted to; leave the flag out, or calibrate on runs against that server"
    )


def _coverage(d, path: str) -> dict:
    """A profile's [coverage] table (empty when it has none: written before profiles kept it)."""
    if d is None:
        return {}
    d = d if isinstance(d, dict) else {}
    q, n = d.get("prompt_quantiles"), d.get("requests")
    ok = isinstance(q, list) and len(q) >= 2 and all(isinstance(x, (int, float)) for x in q) and q == sorted(q)
    if not ok or not isinstance(n, int) or n < 1:
        raise InputError(f"{path}: [coverage] needs requests (a count) and prompt_quantiles (ascending numbers)")
    return {"requests": n, "prompt_quantiles": [float(x) for x in q]}


def _jitter(d, path: str) -> tuple:
    """A profile's [jitter] table's step-time factors (empty when it has none: written before profiles
    kept it, or from runs with too few decode-only gaps)."""
    if d is None:
        return ()
    q = d.get("step_factor_percentiles") if isinstance(d, dict) else None
    n = len(PERCENTILES)
    ok = isinstance(q, list) and len(q) == n and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in q)
    if not ok or not all(math.isfinite(x) for x in q) or q != sorted(q) or q[0] <= 0:
        raise InputError(
            f"{path}: [jitter] step_factor_percentiles: {n} ascending finite numbers > 0 (the 1st to 99th "
            "percentiles of a step's time over its model's)"
        )
    return tuple(float(x) for x in q)


def prompt_coverage(prompts) -> dict:
    """What a profile records of its runs' prompt lengths: their count and 0th..100th percentiles."""
    x = np.asarray(prompts, dtype=float)
    return {"requests": len(x), "prompt_quantiles": [round(float(v), 1) for v in np.percentile(x, np.arange(101))]}


SPARSE_LEAST = 10  # fewer of the runs' prompts than this within ...
SPARSE_FACTOR = 2.0  # ... a factor of 2 of a prompt's length: that prompt is outside what the fit saw
NOTE_SHARE = 0.10  # a what-if is told when at least this share of its requests are such prompts


def sparse_share(coverage: dict, prompts) -> tuple[float, float]:
    """(share of these prompt lengths the runs hardly covered, their median length; 0 and 0 when none):
    a prompt is hardly covered when fewer than SPARSE_LEAST of the runs' prompts were within SPARSE_FACTOR
    of its length."""
    x = np.asarray(prompts, dtype=float)
    if not coverage or not len(x):
        return 0.0, 0.0
    q, n = np.asarray(coverage["prompt_quantiles"]), coverage["requests"]
    pct = np.linspace(0.0, 1.0, len(q))
    cdf = lambda v: np.interp(v, q, pct, left=0.0, right=1.0)  # noqa: E731
    near = (cdf(x * SPARSE_FACTOR) - cdf(x / SPARSE_FACTOR)) * n
    sparse = near < SPARSE_LEAST
    return float(sparse.mean()), float(np.median(x[sparse])) if sparse.any() else 0.0


def coverage_note(prof: Profile, prompts) -> str | None:
    """A line for a what-if whose prompts the profile's runs hardly had (None when they had them, or
    the profile does not say): their TTFT is the fit's extrapolation."""
    share, length = sparse_share(prof.coverage, prompts)
    if share < NOTE_SHARE:
        return None
    q = prof.coverage["prompt_quantiles"]
    return (
        f"{share:.0%} of the requests have prompts (median {length:,.0f} tokens) that the calibration runs hardly "
        f"had (theirs: {q[0]:,.0f}-{q[-1]:,.0f} tokens, median {q[len(q) // 2]:,.0f}; fewer than "
        f"{SPARSE_LEAST} of their {prof.coverage['requests']} "
        "within a factor of 2): those steps and their TTFT are the fit's extrapolation (on a real vLLM it put such "
        "TTFTs up to 29% low). Calibrate on runs that cover these lengths (`goodbench run --workload calibrate`)."
    )


def budget_note(prof: Profile, max_step_tokens: int) -> str | None:
    """A line for a what-if whose steps carried more tokens than the calibration runs' budget allowed
    (None otherwise, or when the profile does not say, or its server ran without chunked prefill): those
    step times are the fit's extrapolation."""
    budget = prof.engine.get("max_num_batched_tokens")
    if not budget or not prof.engine.get("enable_chunked_prefill", True) or max_step_tokens <= budget:
        return None
    return (
        f"steps of up to {max_step_tokens:,} tokens, beyond the {budget:,}-token budget the calibration runs had: "
        "their times are the fit's extrapolation (calibrated at a 512-token budget on the reference engine, its "
        "2,048-token prefill steps came out 9-25% short; benchmarks/calibrate_budget.py). Calibrate on runs "
        "at the largest budget you will ask about."
    )


def _toml(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    return repr(float(v)) if isinstance(v, float) else str(v)


def render_profile(p: Profile, created: str, version: str) -> str:
    """The TOML text of a profile (comments say what each term is)."""
    out = [
        "# goodbench calibration profile: the step-time model fitted to runs against your server.",
        "# Use it with --calibration FILE in simulate, sweep, advise, serve and engine explain.",
        "[profile]",
        f"created = {_toml(created)}",
        f"goodbench_version = {_toml(version)}",
        f"runs = {_toml(list(p.runs))}",
    ]
    for key in ("ttft_pct", "itl_pct", "tpot_pct", "step_time_pct"):
        if getattr(p, key) is not None:
            out.append(f"{key} = {getattr(p, key):.1f}")
    out += [f"basis = {_toml(p.basis)}", "", "[terms]  # seconds"]
    out += [f"{k} = {p.terms[k]:.6g}  # {HELP[k]}" for k in TERMS]
    if p.engine:
        out += ["", "[engine]  # what the server ran with"]
        out += [f"{k} = {_toml(p.engine[k])}" for k in SERVER_KEYS + ENGINE_KEYS + SPEC_KEYS if k in p.engine]
    if p.coverage:
        out += ["", "[coverage]  # the runs' prompt lengths: a what-if outside them is extrapolated"]
        out += [f"requests = {p.coverage['requests']}", f"prompt_quantiles = {_toml(p.coverage['prompt_quantiles'])}"]
    if p.step_jitter:
        out += ["", "[jitter]  # a step's time over its model time: 1st-99th percentiles of the runs' decode-only gaps"]
        out += ["# over the fitted model's time for that step (simulations scatter their steps so)"]
        out += [f"step_factor_percentiles = {_toml(list(p.step_jitter))}"]
    return "\n".join(out) + "\n"
