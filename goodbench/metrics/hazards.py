"""What can make a run's numbers misleading, one function per hazard. Each reads the summary built so
far and the run's evidence and returns the warnings it raises (usually none); a hazard with
`invalid=True` makes the summary's `valid` false (the gate then refuses to judge). Pure."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np

from ..records import STATUSES, TOKEN_SOURCES
from .derived import RequestMetrics

LAG_P99_LIMIT_MS = 10.0
RATE_SHORTFALL = 0.02
MIN_P99_SAMPLES = 100
MOST_FAILED = 0.5  # the failure hazards name a cause once at least this share of requests failed
CLIENT_LAG_WARN = 0.05  # the client's stamp error p99 as a share of a percentile that earns a warning
CLIENT_LAG_INVALID = 0.20  # ... and that makes the run invalid
CLIENT_LAG_MIN_MS = 0.5  # stamp errors below this move nothing worth a word
BUSY_PCT = 50.0  # a load-generator process this busy is the likely cause of its own lag (bursts queue)
GC_SHARE = 0.5  # a GC pause this share of the loop lag's p99 or more: the collector held the loop
PREEMPT_PER_S = 20.0  # fewer involuntary switches a second than this: no other task competed for the core
WORKER_BUSY = 0.6  # the share of a core each worker should need (headroom for bursts)


@dataclass(frozen=True)
class Hazard:
    text: str
    invalid: bool = False  # the numbers cannot be trusted, not merely read with care
    bound_ms: float | None = None  # invalid, but each latency is off by at most this (metrics/bounds.py)


@dataclass
class Evidence:
    summary: dict  # the summary so far (overall block, rates, per_class)
    c: RequestMetrics  # the non-warm-up requests
    mode: str = "open"  # RunMeta.mode: open | closed | simulate | imported
    max_concurrency: int | None = None
    caveats: tuple = ()  # what an import could not know (RunMeta.workload.caveats)
    tokenizer: str = ""  # the local tokenizer's name (RunMeta.tokenizer)
    model: str = ""  # the served model name (RunMeta.target.model)
    lag_limit_ms: float = LAG_P99_LIMIT_MS
    target: dict | None = None  # RunMeta.target: base_url, endpoint, model
    errors: tuple = ()  # a few failed requests' error texts, as recorded ("HTTP 404: {...}")
    engine: dict | None = None  # RunMeta.engine: the reference engine's config, when it ran the workload
    client_lag: dict | None = None  # RunMeta.client_lag: the load generator's self-check (client/lag.py)
    engine_lateness: dict | None = None  # goodbench's engine's step lateness (servertiming.step_lateness)

    @property
    def open_loop(self) -> bool:
        return self.mode == "open"


def generator_lag(e: Evidence) -> list[Hazard]:
    """The load generator sent late: latencies measured from sent_at are then optimistic. The text names
    the likely cause: the engine's core, the client's core (with the --workers the load needs), the
    host's other processes, or the rate."""
    lag99 = e.summary["schedule_lag_ms"]["p99"]
    if not e.open_loop or e.max_concurrency or lag99 is None or lag99 <= e.lag_limit_ms:
        return []
    head = f"load generator fell behind: schedule lag p99 {lag99:.1f} ms > {e.lag_limit_ms:g} ms; "
    return [Hazard(head + "latencies from sent_at are optimistic. " + lag_cause(e), invalid=True, bound_ms=lag99)]


def workers_needed(cl: dict, rate: float | None) -> int | None:
    """Load-generator processes for `rate` req/s at the CPU per request this run measured, each kept
    to WORKER_BUSY of a core; None when the run did not measure it."""
    per = cl.get("cpu_ms_per_request")
    if not per or not rate:
        return None
    return max(1, math.ceil(per / 1000 * rate / WORKER_BUSY))


def lag_cause(e: Evidence) -> str:
    """The likeliest reason a run's sends (or reads) were late, from its own evidence."""
    eng, cl = e.engine_lateness or {}, e.client_lag or {}
    if eng.get("behind"):
        return (
            f"Likely cause: the engine's core (its steps ran late, p99 {eng['late_p99_ms']:.0f} ms): the engine "
            "and the client compete for this host's CPUs; free a core or lower the rate."
        )
    busy, procs = cl.get("loop_busy_pct"), cl.get("processes") or 1
    if busy is not None and busy >= BUSY_PCT:
        need = workers_needed(cl, e.summary.get("scheduled_rate"))
        more = f"this load needs about --workers {max(need, procs + 1)}" if need else "use --workers N"
        return (
            f"Likely cause: the client's core ({busy:.0f}% busy over {procs} process(es), "
            f"{cl['cpu_ms_per_request']:.2f} ms CPU per request): {more}."
        )
    loop99 = cl.get("loop_lag_p99_ms")
    if busy is not None and loop99 is not None and loop99 > e.lag_limit_ms:
        return _held_by(cl, loop99, busy)
    return "Use --workers N, a quieter host, or a lower rate."


def _held_by(cl: dict, loop99: float, busy: float) -> str:
    """A loop that woke late while its process was not busy: held by its own garbage collector, by
    another task on its core (the OS preempted it often), or by itself, as the run's evidence says.
    Runs from before the evidence was kept say "other processes", as they always did."""
    late = f"its loop woke {loop99:.0f} ms late at p99 while using only {busy:.0f}% of its core"
    gc_max, rate = cl.get("gc_pause_max_ms"), cl.get("preempted_per_s")
    if gc_max is not None and gc_max >= GC_SHARE * loop99:
        return (
            f"Likely cause: the client's own garbage collector ({late}; its longest collection held the loop "
            f"{gc_max:.0f} ms, {cl.get('gc_pause_total_ms') or 0:.0f} ms in all): fewer streams per process "
            "(--workers N)."
        )
    if rate is not None and rate < PREEMPT_PER_S:
        return (
            f"Likely cause: the client itself ({late}, and the OS took its core from it only {rate:.1f} times a "
            "second: no other process held it): fewer streams per process (--workers N)."
        )
    seen = f", preempted {rate:.0f} times a second" if rate is not None else ""
    return f"Likely cause: other processes on the client's core ({late}{seen}): give the client a quiet core, or use --workers N."


def client_lag(e: Evidence) -> list[Hazard]:
    """Chunk stamps the client could not take on time: with the loop's clock (TLS, the aiohttp client)
    every read waited for the loop; with kernel stamps only chunks whose read also brought a later chunk
    of their stream (the socket read after both arrived). Name the percentiles that the stamps' error
    at the same quantile could move by more than CLIENT_LAG_WARN (invalid past CLIENT_LAG_INVALID when
    the error is also over the lag limit, 10 ms, as for schedule lag)."""
    cl = e.client_lag or {}
    moved, invalid, worst = [], False, 0.0
    for q in ("p50", "p99"):
        err = cl.get(f"stamp_error_{q}_ms") or 0.0
        for key, name in (("ttft_ms", "TTFT"), ("itl_ms", "ITL")):
            v = e.summary[key].get(q)
            if v and err >= CLIENT_LAG_MIN_MS and err > CLIENT_LAG_WARN * v:
                moved.append(f"{name} {q} ({v:.1f} ms, by up to {err:.1f} ms)")
                invalid |= err > CLIENT_LAG_INVALID * v and err > e.lag_limit_ms
                worst = max(worst, err)
    if not moved:
        return []
    how = (
        f"{cl.get('merged_chunks', 0)} chunks reached the client with a later chunk of their stream before it "
        "read the socket (the kernel then stamps both with the later time)"
        if cl.get("stamps") == "kernel"
        else f"the client stamped chunks with its event loop's clock ({cl.get('stamps')} stamps), which ran late"
    )
    share = CLIENT_LAG_INVALID if invalid else CLIENT_LAG_WARN
    return [
        Hazard(
            f"{how}: that could move {', '.join(moved)}, more than {share:.0%}. " + lag_cause(e),
            invalid=invalid,
            bound_ms=worst,
        )
    ]


def engine_behind(e: Evidence) -> list[Hazard]:
    """goodbench's own engine ran its steps late (a busy host): its latencies are the host's CPU
    contention, not the modelled GPU's. Invalid when the run started that engine itself."""
    eng = e.engine_lateness or {}
    if not eng.get("behind"):
        return []
    mine = eng.get("started_by_run")
    return [
        Hazard(
            f"the {'engine goodbench started for this run' if mine else 'goodbench engine under test'} fell "
            f"behind its own schedule: step lateness p99 {eng['late_p99_ms'] or 0:.1f} ms, mean "
            f"{eng['late_mean_ms']:.2f} ms ({eng['late_total_s']:.1f} s late over {eng['steps']} steps); its "
            "latencies include this host's CPU contention, not only the modelled GPU's. Free a core "
            "(fewer --workers, other load off the host) or lower the rate.",
            invalid=bool(mine),
        )
    ]


def rate_shortfall(e: Evidence) -> list[Hazard]:
    """Fewer requests went out per second than the schedule asked for."""
    got, asked = e.summary.get("achieved_rate"), e.summary.get("scheduled_rate")
    if not e.open_loop or e.max_concurrency or not got or not asked or got >= asked * (1 - RATE_SHORTFALL):
        return []
    return [
        Hazard(
            f"achieved rate {got:.2f} req/s is more than {RATE_SHORTFALL:.0%} under the schedule's {asked:.2f} req/s.",
            invalid=True,
        )
    ]


def concurrency_cap(e: Evidence) -> list[Hazard]:
    """--max-concurrency held requests back: a capped open loop, not the asked arrival process."""
    lag99 = e.summary["schedule_lag_ms"]["p99"]
    if not e.open_loop or not e.max_concurrency or lag99 is None or lag99 <= e.lag_limit_ms:
        return []
    return [
        Hazard(
            f"--max-concurrency {e.max_concurrency} held requests back (lag p99 {lag99:.0f} ms); "
            "this is a capped open loop, not the requested arrival process."
        )
    ]


def thin_percentiles(e: Evidence) -> list[Hazard]:
    """A p99 resting on fewer than MIN_P99_SAMPLES samples is mostly the maximum."""
    out = []
    for key in ("ttft_ms", "itl_ms", "tpot_ms"):
        n = e.summary[key]["n"]
        if 0 < n < MIN_P99_SAMPLES:
            out.append(
                Hazard(
                    f"{key[:-3].upper()} p99 rests on only {n} samples (< {MIN_P99_SAMPLES}); "
                    "run more requests before trusting it."
                )
            )
    return out


def tokens_from_chunks(e: Evidence) -> list[Hazard]:
    """No usage from the server and no tokenizer: output tokens were counted as chunks."""
    cols = e.c.cols
    n = int((e.c.ok & (cols.out_source == TOKEN_SOURCES.index("chunks"))).sum())
    if not n:
        return []
    return [
        Hazard(
            f"{n} requests counted output tokens from chunks (server sent no usage and no tokenizer "
            "was available): TPOT may be off."
        )
    ]


def packed_chunks(e: Evidence) -> list[Hazard]:
    """More tokens than content chunks (by the server's usage, or by the tokenizer when the server sent
    none): the server packs several tokens per chunk, so ITL is per chunk, not per token."""
    cols = e.c.cols
    out = []
    for source, by in (("usage", "server usage reports"), ("tokenizer", "the tokenizer counts")):
        sel = e.c.ok & (e.c.nchunks > 0) & (cols.out_source == TOKEN_SOURCES.index(source))
        tokens, chunks = int(cols.out_tokens[sel].sum()), int(e.c.nchunks[sel].sum())
        if tokens and abs(tokens - chunks) > 0.02 * tokens:
            out.append(
                Hazard(
                    f"{by} {tokens} output tokens but the stream carried {chunks} content chunks: the "
                    "server packs several tokens per chunk, so ITL is per chunk."
                )
            )
    return out


def overloaded(e: Evidence) -> list[Hazard]:
    """The server did not keep up with the arrivals: goodput then depends on how long the run lasted."""
    sat = e.summary.get("saturation") or {}
    if not sat.get("saturated"):
        return []
    trend = sat.get("ttft_trend")
    window = sat.get("steady_window_s")
    steady = (
        f"; in the steady window {window[0]:.0f}-{window[1]:.0f} s goodput was {sat['steady_goodput']:.2f} req/s"
        if window and sat.get("steady_goodput") is not None
        else "; there was no steady window"
    )
    return [
        Hazard(
            f"the server could not keep up: its backlog grew by {sat['backlog_growth_per_s']:.2f} req/s "
            f"(completions {sat['completion_rate']:.2f} vs arrivals {sat['arrival_rate']:.2f} req/s"
            + (f", TTFT x{trend:.1f} from first to last fifth" if trend else "")
            + ")"
            + steady
            + ". Goodput from an overloaded run depends on its length: lower the rate (`goodbench sweep "
            "--find-max-rate` finds the highest sustainable one)."
        )
    ]


def tokenizer_mismatch(e: Evidence) -> list[Hazard]:
    """The server's usage and the local tokenizer disagree (sampled requests): prompts built to N tokens
    are not N tokens for this server, and counts from the tokenizer would be off."""
    cols = e.c.cols
    sel = e.c.ok & (cols.out_local >= 0) & (cols.out_source == TOKEN_SOURCES.index("usage"))
    server, local = int(cols.out_tokens[sel].sum()), int(cols.out_local[sel].sum())
    if not server or abs(server - local) <= 0.02 * server:
        return []
    return [
        Hazard(
            f"the server counts {server} output tokens in {int(sel.sum())} sampled responses where the local "
            f"tokenizer ({e.tokenizer or 'default'}) counts {local} ({local / server - 1:+.1%}): pass the "
            f"server's tokenizer ({_tokenizer_hint(e.model)}) so that synthetic prompts have the lengths asked for."
        )
    ]


def _tokenizer_hint(model: str | None) -> str:
    """What to pass as --tokenizer: the served name only where it reads as a hub name (org/name), and
    then with what loading it needs; a served alias (`--served-model-name llama`) names no tokenizer."""
    local = "--tokenizer PATH: the server's tokenizer.json or model folder"
    if model and "/" in model.strip("/") and not model.startswith(("/", ".", "~")):
        return f"{local}, or --tokenizer {model} if that hub name is in the hub's local cache or the hub is reachable"
    return local + (
        f"; the served name {model!r} may not be a hub name" if model and model not in ("default", "?") else ""
    )


def retried_requests(e: Evidence) -> list[Hazard]:
    """Requests sent again after the server closed a reused keep-alive connection under them (their
    times run from the first send, so the lost round trip counts against the server)."""
    n = e.summary["requests"].get("retried", 0)
    if not n:
        return []
    return [
        Hazard(
            f"{n} requests were sent again on a fresh connection after the server closed a reused "
            "keep-alive connection under them (the server's idle timeout is near the gaps between "
            "requests; --keepalive lowers the reuse limit); their times run from the first send."
        )
    ]


def import_caveats(e: Evidence) -> list[Hazard]:
    """What an imported run's source could not record (no scheduled times, missing chunk gaps, ...)."""
    return [Hazard(str(w)) for w in e.caveats]


def nothing_completed(e: Evidence) -> list[Hazard]:
    """Every request failed: there is nothing to measure (the run is invalid, `run` exits 2)."""
    if not e.c.n or e.summary["requests"]["completed"]:
        return []
    return [Hazard("no request completed: check the target and the error column in records.jsonl.", invalid=True)]


def thin_per_class(e: Evidence) -> list[Hazard]:
    """Per-class p99s on few samples: their intervals, not their point values, are the result."""
    thin = [
        f"{k} {m[:-3].upper()} ({b[m]['n']})"
        for k, b in (e.summary.get("per_class") or {}).items()
        for m in ("ttft_ms", "tpot_ms")
        if 0 < b[m]["n"] < MIN_P99_SAMPLES
    ]
    if not thin:
        return []
    return [
        Hazard(
            f"per-class p99s rest on fewer than {MIN_P99_SAMPLES} samples: {', '.join(thin)}; "
            "read their intervals, not the point values."
        )
    ]


def _most_failed(e: Evidence) -> tuple[int, int] | None:
    """(failed, issued) when at least MOST_FAILED of the requests failed, else None."""
    req = e.summary["requests"]
    if not req["issued"] or req["failed"] < MOST_FAILED * req["issued"]:
        return None
    return req["failed"], req["issued"]


def server_message(error: str) -> str:
    """The server's own words in a recorded error: the `message` of an OpenAI/vLLM error body
    ("HTTP 404: {"message": ...}" or {"error": {"message": ...}}), else the text as recorded."""
    head, sep, body = error.partition(": ")
    if not (sep and head.startswith("HTTP ")):
        return error
    try:
        doc = json.loads(body)
    except ValueError:
        return body.strip()
    if not isinstance(doc, dict):
        return body.strip()
    inner = doc.get("error")
    msg = (inner.get("message") if isinstance(inner, dict) else None) or doc.get("message")
    return str(msg) if msg else body.strip()


def lanes_honoured(lanes: dict | None, engine: dict | None) -> tuple[bool | None, str]:
    """Whether the server served priority lanes in priority order: the engine's policy when goodbench
    ran it; else, from the lanes themselves, False when the first lane waited longer (TTFT p50) than the
    last, None when nothing says (a server may honour priority and still serve a lane of long prompts
    slowly)."""
    if not lanes or len(lanes) < 2:
        return None, ""
    policy = (engine or {}).get("scheduling_policy")
    if policy:
        return policy == "priority", f"the engine ran --scheduling-policy {policy}"
    keys = sorted(lanes, key=float)
    first, last = (lanes[k]["ttft_ms"].get("p50") for k in (keys[0], keys[-1]))
    if first is None or last is None:
        return None, "the server does not say"
    said = f"lane {keys[0]} TTFT p50 {first:.1f} ms, lane {keys[-1]} {last:.1f} ms"
    return (False, said) if first > last else (None, f"the server does not say ({said})")


def priority_ignored(e: Evidence) -> list[Hazard]:
    """Priority lanes that the server served first-come first-served: the lane numbers mean nothing."""
    honoured, why = lanes_honoured(e.summary.get("per_priority"), e.engine)
    if honoured is not False:
        return []
    return [
        Hazard(
            f"the server did not serve the priority lanes in order ({why}): vLLM and the reference engine "
            "honour `priority` only with --scheduling-policy priority."
        )
    ]


def base_url_v1(e: Evidence) -> list[Hazard]:
    """A base URL ending in /v1 doubles the API prefix (/v1/v1/completions): every request fails."""
    n = _most_failed(e)
    url, endpoint = (e.target or {}).get("base_url") or "", (e.target or {}).get("endpoint") or ""
    if n is None or not url.rstrip("/").endswith("/v1") or not endpoint.startswith("/v1/"):
        return []
    return [
        Hazard(
            f"{n[0]} of {n[1]} requests failed, and the base URL {url} ends in /v1, so they went to "
            f"{url.rstrip('/')}{endpoint}: give --base-url without /v1 (the endpoint adds it)."
        )
    ]


def server_rejected(e: Evidence) -> list[Hazard]:
    """Most requests got an HTTP error: say which status and what the server said (an unknown model
    name, a bad parameter, a missing key), instead of leaving it in records.jsonl."""
    n = _most_failed(e)
    cols = e.c.cols
    failed_http = cols.http_status[(cols.status == STATUSES.index("http_error"))]
    if n is None or failed_http.size < MOST_FAILED * n[0] or base_url_v1(e):
        return []
    code = int(np.bincount(failed_http).argmax())
    said = next((server_message(t) for t in e.errors if t.startswith(f"HTTP {code}")), None)
    text = f"{n[0]} of {n[1]} requests failed, {failed_http.size} with an HTTP error (most often {code})"
    text += f"; the server said: {said[:300]}" if said else "; see the error column in records.jsonl"
    model = (e.target or {}).get("model")
    if said and "model" in said.lower() and model:
        text += (
            f" (the model name sent was {model!r}: pass the name the server lists at /v1/models, or leave "
            "--model out to use its first entry)"
        )
    return [Hazard(text)]


CHECKS = (
    generator_lag,
    client_lag,
    engine_behind,
    rate_shortfall,
    concurrency_cap,
    overloaded,
    thin_percentiles,
    tokens_from_chunks,
    packed_chunks,
    tokenizer_mismatch,
    retried_requests,
    import_caveats,
    nothing_completed,
    base_url_v1,
    server_rejected,
    priority_ignored,
    thin_per_class,
)


def assess(e: Evidence, checks=CHECKS) -> tuple[bool, list[str], float | None]:
    """(valid, warnings, error bound) from every check, in order. The bound (ms) is given only for an
    invalid run whose every invalidating hazard bounds its latencies' error (schedule lag, stamp error):
    the sum of those bounds, which the gate weighs against each clause's margin."""
    found = [h for check in checks for h in check(e)]
    bad = [h for h in found if h.invalid]
    bound = sum(h.bound_ms for h in bad) if bad and all(h.bound_ms is not None for h in bad) else None
    return not bad, [h.text for h in found], bound
