"""Record types passed between stages, and SLO parsing. Stdlib only (and errors): every layer may import this."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from .errors import UsageError
from .version import __version__

STATUSES = ("ok", "http_error", "timeout", "disconnected", "bad_stream", "cancelled")
TOKEN_SOURCES = ("usage", "tokenizer", "chunks")
SLO_KEYS = ("ttft", "ttfo", "tpot", "e2el", "max_itl", "jct")
JOB_SLO_KEYS = ("jct",)  # judged per agent job (metrics/jobs.py), not per request
# the summary.json distribution each per-request SLO clause is judged on (the console shows it beside
# the clause; `gate --p99 KEY:MS` reads it): one map, so a new clause cannot be judged but not shown
SLO_SUMMARY_KEYS = {"ttft": "ttft_ms", "ttfo": "ttfo_ms", "tpot": "tpot_ms", "e2el": "e2el_ms", "max_itl": "itl_ms"}


@dataclass(frozen=True)
class RequestSpec:
    """One request to send. `prompt` is text (completions) or a list of chat messages."""

    id: str
    cls: str
    prompt: Any
    prompt_tokens: int
    max_tokens: int
    arrival_s: float | None = None  # set by generators that own their timing (hol); else arrivals
    warmup: bool = False
    reasoning_tokens: int = 0  # a reasoning model's thinking before its answer (the reference engine obeys)
    priority: int | None = None  # sent as vLLM's `priority` (lower is served first); None: not sent
    segments: tuple | None = None  # the prompt's prefix structure (workloads.segments), when it has one
    session: str | None = None  # a multi-turn session's id, the turn's number from 1, and its turns
    turn: int | None = None
    session_turns: int | None = None
    job: str | None = None  # an agent job's id, the call's node in its graph, the nodes it waits for,
    node: int | None = None  # its depth (0 = a root), and the tool/think time planned between its
    parents: tuple[int, ...] | None = None  # last parent's end and its send (workloads/agent.py)
    depth: int | None = None
    delay_s: float | None = None
    tools: bool = False  # the request offers the workload's tools (agent tool-call steps)
    adapter: str | None = None  # a LoRA adapter's name, sent as the request's model (None: the base model)
    media: dict | None = None  # its images and audio: {images, image_pixels, media_bytes, audio_ms} (media.stats)


JOB_FIELDS = ("job", "node", "parents", "depth", "delay_s")
MEDIA_FIELDS = ("images", "image_pixels", "media_bytes", "audio_ms")


def media_fields(spec: RequestSpec) -> dict:
    """What a record keeps of its request's media (workloads/media.stats): counts, pixels, bytes, audio."""
    m = spec.media
    return {} if not m else {f: m[f] for f in MEDIA_FIELDS}


def job_fields(spec: RequestSpec) -> dict:
    """What a record copies from its spec when the request is a call of an agent job."""
    if spec.job is None:
        return {}
    return {f: getattr(spec, f) for f in JOB_FIELDS}


@dataclass(frozen=True)
class RequestRecord:
    """What happened to one request. Times are monotonic seconds since run start; derived numbers
    (TTFT, ITL, ...) are not stored: metrics derives them so there is one definition."""

    id: str
    cls: str
    scheduled_at: float
    sent_at: float | None
    first_token_at: float | None
    finished_at: float | None
    chunk_times: tuple[float, ...] = ()
    chunk_tokens: tuple[int, ...] = ()
    output_tokens: int = 0
    output_tokens_source: str = "chunks"
    prompt_tokens: int = 0
    prompt_tokens_server: int | None = None
    status: str = "ok"
    http_status: int | None = None
    error: str | None = None
    warmup: bool = False
    origin: str = ""  # which load-generator process (clock) produced it: times from two origins never mix
    retries: int = 0  # sent again on a fresh connection after a reused one closed before any response byte
    first_answer_at: float | None = None  # first answer (not reasoning) chunk; None: none arrived
    reasoning_tokens: int = 0  # of output_tokens, the reasoning model's thinking
    output_tokens_local: int | None = None  # the local tokenizer's count where the server's usage was used
    priority: int | None = None  # the request's priority lane, when it had one
    session: str | None = None  # the multi-turn session it belongs to, its turn (from 1) and its turns
    turn: int | None = None
    session_turns: int | None = None
    items: int | None = None  # embeddings / rerank / score: the inputs (documents) one request carried
    job: str | None = None  # agent jobs: the job, the call's node, its parents, depth and planned delay
    node: int | None = None
    parents: tuple[int, ...] | None = None
    depth: int | None = None
    delay_s: float | None = None
    cached_tokens: int | None = None  # prompt tokens the server's usage says its prefix cache held
    replica: str | None = None  # the replica that served it (--replica-header), when known
    adapter: str | None = None  # the LoRA adapter it asked for (its `model`); None: the base model
    images: int | None = None  # the images it carried (None: no media), their pixels, the media's bytes,
    image_pixels: int | None = None  # the audio's ms (workloads/media.py)
    media_bytes: int | None = None
    audio_ms: int | None = None

    def to_dict(self) -> dict:
        # built by hand: dataclasses.asdict deep-copies every chunk-time tuple (a hot path at high load)
        d = {f: getattr(self, f) for f in _RECORD_FIELDS}
        d["chunk_times"] = [round(t, 7) for t in self.chunk_times]
        d["chunk_tokens"] = list(self.chunk_tokens)
        return d

    def to_json(self) -> str:
        """One records.jsonl line (no newline): chunk times to 0.1 us, formatted in one pass (a third of
        the cost of rounding each float and encoding the list: this runs once per request at load)."""
        d = {f: getattr(self, f) for f in _SCALAR_FIELDS}
        if self.items is None and self.job is None:  # the sparse fields cost nothing where unused
            for f in _SPARSE_FIELDS:
                del d[f]
        if self.cached_tokens is None and self.replica is None and self.adapter is None:
            del d["cached_tokens"], d["replica"], d["adapter"]
        if self.images is None:
            for f in MEDIA_FIELDS:
                del d[f]
        for f in _CHUNK_TIME_FIELDS:  # at the chunk times' precision, or TPOT comes out as -0.0, TTFT < 0
            if d[f] is not None:
                d[f] = round(d[f], 7)
        head = json.dumps(d, separators=(",", ":"))
        times = ",".join(["%.7f" % t for t in self.chunk_times])
        ct = self.chunk_tokens
        toks = ("1," * len(ct))[:-1] if ct.count(1) == len(ct) else ",".join(map(str, ct))
        return head[:-1] + ',"chunk_times":[' + times + '],"chunk_tokens":[' + toks + "]}"

    @classmethod
    def from_dict(cls, d: dict) -> RequestRecord:
        names = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        kw["chunk_times"] = tuple(kw.get("chunk_times") or ())
        kw["chunk_tokens"] = tuple(kw.get("chunk_tokens") or ())
        if kw.get("parents") is not None:
            kw["parents"] = tuple(kw["parents"])
        return cls(**kw)


_RECORD_FIELDS = tuple(f.name for f in fields(RequestRecord))
_SCALAR_FIELDS = tuple(f for f in _RECORD_FIELDS if f not in ("chunk_times", "chunk_tokens"))
_SPARSE_FIELDS = ("items",) + JOB_FIELDS
# copies of a chunk time, and the times they are compared with (TTFT, E2E): all rounded alike, as the
# chunk times are, so that no difference of two comes out negative (a TTFT of -1.6e-05 ms)
# (scheduled_at too: schedule lag is sent_at minus it, and a simulation's sends are exactly on time)
_CHUNK_TIME_FIELDS = ("first_token_at", "first_answer_at", "scheduled_at", "sent_at", "finished_at")


@dataclass
class RunMeta:
    """Everything needed to interpret and reproduce a run. Never holds secrets."""

    run_id: str
    label: str = ""
    target: dict = field(default_factory=dict)  # base_url, endpoint, model
    engine: dict | None = None  # EngineConfig when the target is the reference engine
    workload: dict = field(default_factory=dict)
    workload_hash: str = ""
    slo: dict | None = None
    seed: int = 0
    tokenizer: str = ""
    mode: str = "open"  # open | closed | simulate | imported
    requested_rate: float | None = None
    planned_requests: int | None = None  # what the schedule holds (None: a duration-bound closed loop)
    max_concurrency: int | None = None
    target_attainment: float | None = None  # the attainment shown as pass (--min-attainment); None: the default
    gate: dict | None = None  # the gate the run was judged by ([gate] table form; gating.recorded_spec)
    goodbench_version: str = __version__
    started_wall: str = ""
    host: str = ""
    finished_wall: str | None = None
    interrupted: bool = False
    # what a summary is composed from besides the records (metrics/compose.py), kept so that
    # recomputing it from the directory gives the summary the run wrote:
    expected_prefix_reuse: float | None = None  # the prefix-cache hit rate the workload's structure allows
    expected_prefix_sources: dict | None = None  # agent jobs: reuse from a job's own calls / other jobs
    target_hit_rate: float | None = None  # the hit rate a controlled-hit-rate workload states (workloads/priming.py)
    priming: dict | None = None  # its priming phase before the clock: {requests, prompt_tokens, wall_s}
    gpus: dict | None = None  # simulated: GPUs by tier, and $ per GPU-hour by tier (the cost block)
    prices: dict | None = None
    engine_stats: dict | None = None  # simulated: the engine's counters, wall time and notes
    client_lag: dict | None = None  # live: the load generator's self-check (client/lag.client_lag)
    gpu_telemetry: list | None = None  # live: the GPU telemetry sources sampled (URLs without credentials)
    electricity: dict | None = None  # {usd_per_kwh, facility_factor}: the energy block's cost (simulate)
    # where the run sits in a history (docs/history.md):
    labels: dict = field(default_factory=dict)  # --label k=v (and $GOODBENCH_LABELS), str -> str
    server: dict | None = None  # what the target said about itself: name, version, owned_by, header
    provenance: dict | None = None  # git commit, branch and CI build from the environment (history/provenance.py)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> RunMeta:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


@dataclass
class RunResult:
    meta: RunMeta
    records: list[RequestRecord]


def parse_slo(text: str | list[str] | None) -> dict[str, float] | None:
    """Parse vLLM's --goodput syntax: "ttft:500 tpot:50" (ms). Also accepts commas and key=value."""
    if text is None:
        return None
    parts = text if isinstance(text, list) else [text]
    out: dict[str, float] = {}
    for part in parts:
        for item in part.replace(",", " ").split():
            key, sep, val = item.replace("=", ":").partition(":")
            key = key.strip().lower()
            if key == "e2e":
                key = "e2el"
            if not sep or key not in SLO_KEYS:
                raise UsageError(f"bad SLO clause {item!r}: expected KEY:MS with KEY one of {', '.join(SLO_KEYS)}")
            try:
                ms = float(val)
            except ValueError:
                raise UsageError(f"bad SLO clause {item!r}: {val!r} is not a number of milliseconds") from None
            if not math.isfinite(ms) or ms <= 0:
                raise UsageError(f"bad SLO clause {item!r}: threshold must be a positive number of ms")
            out[key] = ms
    return out or None


def request_slo(slo: dict | None) -> dict | None:
    """The clauses judged per request (an agent job's `jct` is judged per job)."""
    out = {k: v for k, v in (slo or {}).items() if k not in JOB_SLO_KEYS}
    return out or None


def format_slo(slo: dict[str, float] | None) -> str:
    if not slo:
        return "none"
    return " ".join(f"{k}:{v:g}" for k, v in slo.items())


def fmt_num(v: float, spec: str) -> str:
    """format(v, spec), except that a value printing as zero never carries a minus sign ("-0.00 req/s",
    "-0.0%"): a tiny negative difference rounds to zero, and zero has no direction."""
    out = format(v, spec)
    if out.startswith("-") and not any(ch in "123456789" for ch in out):
        out = ("+" if "+" in spec else "") + out[1:]
    return out
