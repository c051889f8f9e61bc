"""Public end-to-end vLLM measurements (calibration.csv) and their replay on the simulator.

Each row says how the source ran its benchmark: one batch at t = 0 (`benchmark_latency`), a closed
loop of `concurrency` users with no think time, Poisson arrivals at `rate` req/s, or every request
at t = 0 to an engine with the source's `max_num_seqs` (offline throughput); fixed lengths or a
ShareGPT sample (the token lengths goodbench ships for ShareGPT V3, vLLM's filter, the row's seed);
the engine arguments that differ from vLLM v1's server defaults (`engine_args`, e.g. a V0 server's
scheduler and budget). replay() runs it and computes the metric the source reports."""

from __future__ import annotations

import csv
import glob
import importlib.resources
import os
from dataclasses import dataclass, field

import numpy as np

from ...records import RequestSpec
from ...workloads.plan import Plan
from ..config import EngineConfig
from ..core import Engine, EngineStats
from ..costmodel import CostModel
from .arrivals import arrivals_for
from .clock import Times, times_of
from .instance import run_instance

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "calibration.csv")
WORKLOADS = ("batch", "closed", "poisson", "offline")
# metric -> the class the targets are stated in (docs/engine.md): latency per token, TTFT, throughput
METRICS = {
    "e2e_mean_ms": "tpot",
    "batch_ms": "tpot",
    "tpot_mean_ms": "tpot",
    "tpot_p50_ms": "tpot",
    "tpot_p99_ms": "tpot",
    "itl_p50_ms": "tpot",
    "ttft_mean_ms": "ttft",
    "ttft_p50_ms": "ttft",
    "ms_per_request": "throughput",
    "request_throughput": "throughput",
    "output_throughput": "throughput",
}
HIGHER_IS_FASTER = ("request_throughput", "output_throughput")
ARG_TYPES = {
    "max_num_batched_tokens": int,
    "max_num_seqs": int,
    "max_model_len": int,
    "enable_chunked_prefill": lambda v: v == "true",
    "enable_prefix_caching": lambda v: v == "true",
    "scheduler": str,
    "gpu_memory_utilization": float,
    "async_scheduling": lambda v: v == "true",
    "num_scheduler_steps": int,  # vLLM 0.6's multi-step scheduling: priced by the calibration, not an engine knob
}
REPLAY_ONLY = ("num_scheduler_steps",)
ASYNC_SCHEDULING = ((0, 14), "2026-01")  # the vLLM release, and month, that turned it on by default
# "excluded": predicted and shown, but not counted in the error tables; its note says why ("excluded: ...")
USES = ("fit", "check", "excluded")


@dataclass(frozen=True)
class Point:
    id: str
    source_id: str  # one publisher's one document: what leave-one-source-out leaves out
    gpu: str
    model: str
    tp: int
    dtype: str
    kv_cache_dtype: str
    workload: str
    concurrency: int  # batch size, users, or 0
    rate: float  # Poisson req/s, or 0
    dataset: str  # "fixed", "spread" (uniform within +-length_spread of the lengths) or "sharegpt" (lengths,
    # where given, are the run's measured means, and the sample is rescaled to them)
    input_len: int
    output_len: int
    num_requests: int
    metric: str
    value: float
    source: str
    use: str = "fit"  # "fit": used by the fit; "check": predicted only (whole sources kept out); "excluded"
    version: str = ""
    date: str = ""  # the source's date, "YYYY-MM[-DD] (...)" where known
    engine_args: dict = field(default_factory=dict)
    warm: bool = False  # measured in a round that repeats an earlier round's prompts
    seed: int = 0
    length_spread: float = 0.0
    note: str = ""

    @property
    def vllm_version(self) -> tuple[int, int] | None:
        """(major, minor) of the vLLM the source states ("0.8.5", "0.19.1 (assumed)"), or None."""
        head = self.version.strip().split(" ")[0].split("+")[0].split(".")[:2]
        try:
            return int(head[0]), int(head[1])
        except (ValueError, IndexError):
            return None

    def dated_from(self, month: str) -> bool:
        """Whether the source is dated in or after this YYYY-MM (False where it states no date). A date is
        "YYYY-MM..." or "YYYYMMDD"; a year alone counts as its January."""
        d = self.date.strip()
        if d[:8].isdigit():
            d = f"{d[:4]}-{d[4:6]}"
        elif not (d[:4].isdigit() and d[4:5] == "-" and d[5:7].isdigit()):
            d = f"{d[:4]}-01" if d[:4].isdigit() else ""
        return bool(d) and d[:7] >= month

    @property
    def async_scheduling(self) -> bool:
        """vLLM 0.14.0 (2026-01) scheduled each step while the one before runs by default on GPUs
        (PR #27614): on for sources stating 0.14 or later, or, stating none, dated from 2026-01."""
        v = self.vllm_version
        return v >= ASYNC_SCHEDULING[0] if v is not None else self.dated_from(ASYNC_SCHEDULING[1])

    @property
    def scheduler_steps(self) -> int:
        """Forward passes per scheduling round (vLLM 0.6 `--num-scheduler-steps`; 1 elsewhere)."""
        return int(self.engine_args.get("num_scheduler_steps", 1))

    @property
    def klass(self) -> str:
        if self.metric in ("e2e_mean_ms", "batch_ms") and self.output_len == 1:
            return "ttft"  # the batch's prefill alone
        return METRICS[self.metric]


def _args(text: str, where: str) -> dict:
    out = {}
    for item in filter(None, (t.strip() for t in text.split(";"))):
        k, _, v = item.partition("=")
        if k not in ARG_TYPES:
            raise ValueError(f"{where}: unknown engine argument {k!r}")
        out[k] = ARG_TYPES[k](v)
    return out


def load_points(path: str = DATA) -> list[Point]:
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    out = []
    for r in rows:
        where = f"{path}: {r['id']}"
        if r["metric"] not in METRICS or r["workload"] not in WORKLOADS or r["use"] not in USES:
            raise ValueError(f"{where}: unknown metric, workload or use")
        out.append(
            Point(
                id=r["id"],
                source_id=r["source_id"],
                gpu=r["gpu"],
                model=r["model"],
                tp=int(r["tp"]),
                dtype=r["dtype"],
                kv_cache_dtype=r["kv_cache_dtype"] or "auto",
                workload=r["workload"],
                concurrency=int(r["concurrency"] or 0),
                rate=float(r["rate"] or 0),
                dataset=r["dataset"],
                input_len=int(r["input_len"] or 0),
                output_len=int(r["output_len"] or 0),
                num_requests=int(r["num_requests"]),
                metric=r["metric"],
                value=float(r["value"]),
                source=r["source"],
                use=r["use"],
                version=r["version"],
                date=r["date"],
                engine_args=_args(r["engine_args"], where),
                warm=r["prefix_cache"] == "warm",
                seed=int(r["seed"] or 0),
                length_spread=float(r["length_spread"] or 0),
                note=r["note"],
            )
        )
    return out


def point_config(p: Point) -> EngineConfig:
    """vLLM's defaults for the tier and version (async scheduling from 0.14) and the source's own
    arguments. Random and ShareGPT prompts share no prefix, so prefix caching is moot (off), except
    for a `warm` point."""
    args = {"enable_prefix_caching": p.warm, "async_scheduling": p.async_scheduling} | {
        k: v for k, v in p.engine_args.items() if k not in REPLAY_ONLY
    }
    return EngineConfig(
        gpu=p.gpu, model=p.model, tensor_parallel_size=p.tp, dtype=p.dtype, kv_cache_dtype=p.kv_cache_dtype, **args
    ).resolved()


def sharegpt_lengths(n: int, seed: int) -> np.ndarray:
    """n (prompt, output) token-length pairs: vLLM's ShareGPT filter (both >= 4 tokens, prompt <= 1024,
    sum <= 2048) over the table goodbench ships, sampled without replacement with this seed."""
    data = importlib.resources.files("goodbench").joinpath("data")
    (path,) = glob.glob(os.path.join(str(data), "sharegpt-lengths-*.npy"))
    t = np.load(path)
    ok = (t[:, 0] >= 4) & (t[:, 1] >= 4) & (t[:, 0] <= 1024) & (t.sum(axis=1) <= 2048)
    pool = t[ok]
    return pool[np.random.default_rng(seed).choice(len(pool), size=n, replace=n > len(pool))]


def requests(p: Point) -> list[RequestSpec]:
    if p.dataset == "sharegpt":
        lens = sharegpt_lengths(p.num_requests, p.seed)
        for col, mean in enumerate((p.input_len, p.output_len)):
            if mean:  # the run's measured mean length: the sample rescaled to it (its tokenizer, its EOS stops)
                lens[:, col] = np.maximum(np.rint(lens[:, col] * mean / lens[:, col].mean()), 1)
    else:
        lens = np.tile([p.input_len, p.output_len], (p.num_requests, 1))
        if p.length_spread:
            rng = np.random.default_rng(p.seed)
            lens = np.rint(lens * rng.uniform(1 - p.length_spread, 1 + p.length_spread, lens.shape)).astype(int)
    text = (lambda k: f"prompt {k} " * int(lens[k][0])) if p.warm else (lambda k: "x")
    return [RequestSpec(str(k), "cal", text(k), int(lens[k][0]), int(lens[k][1])) for k in range(p.num_requests)]


def plan(p: Point, reqs: list[RequestSpec]) -> Plan:
    n = len(reqs)
    if p.workload == "closed":
        return Plan.closed_loop(reqs, p.concurrency)
    if p.workload == "poisson":
        gaps = np.random.default_rng(p.seed).exponential(1 / p.rate, n)
        return Plan.at(reqs, np.cumsum(gaps) - gaps[0])
    return Plan.at(reqs, np.zeros(n))  # batch, offline


def run(p: Point, cost: CostModel, on_step=None) -> tuple[list, Engine]:
    """The point's records as the source ran it, and the engine (its stats). A warm point runs one
    round of the same (distinct) prompts first and measures the second, whose prompts are all cached.
    on_step: follow every step (run_instance's hook; steps are then taken singly)."""
    reqs = requests(p)
    engine = Engine(point_config(p), cost)
    if p.warm:  # the second round's clock and counters start afresh; its prompts are cached
        run_instance(engine, reqs, arrivals_for(plan(p, reqs), cost.front_end))
        engine.stats = EngineStats()
    return run_instance(engine, reqs, arrivals_for(plan(p, reqs), cost.front_end), on_step=on_step), engine


def metric(p: Point, t: Times) -> float:
    """The source's metric (ms, req/s or output tok/s) from each finished request's times."""
    first, last = t.flat[t.start[:-1]], t.flat[t.start[1:] - 1]
    outs = np.diff(t.start) if t.out is None else t.out  # output tokens (a chunk may carry several)
    e2e, ttft = (last - t.sent) * 1000, (first - t.sent) * 1000
    dur = last.max() - t.sent.min()
    m = p.metric
    if m == "e2e_mean_ms":
        return float(e2e.mean())
    if m == "batch_ms":  # benchmark_latency: the whole batch's generate() call
        return float(dur * 1000)
    if m.startswith("ttft"):
        return float(ttft.mean() if m == "ttft_mean_ms" else np.median(ttft))
    if m == "ms_per_request":
        return float(dur * 1000 / len(outs))
    if m == "request_throughput":
        return len(outs) / dur
    if m == "output_throughput":
        return float(outs.sum() / dur)
    if m == "itl_p50_ms":
        gaps = np.diff(t.flat)
        keep = np.ones(len(gaps), bool)
        keep[t.start[1:-1] - 1] = False  # not across two requests
        return float(np.median(gaps[keep]) * 1000)
    tpot = t.per_token(t.flat)[1] * 1000
    if m == "tpot_p99_ms":
        return float(np.percentile(tpot, 99))
    return float(tpot.mean() if m == "tpot_mean_ms" else np.median(tpot))


def measured(recs: list) -> Times:
    return times_of(recs)


def regime(engine: Engine) -> dict:
    """A replay's regime: the time-weighted mean number of requests per step, and the share of busy
    time spent in steps that carried prefill tokens."""
    st = engine.stats
    return {"mean_batch": st.busy_seqs_s / st.busy_s, "prefill_share": st.prefill_busy_s / st.busy_s}


def replay(p: Point, cost: CostModel) -> tuple[float, dict]:
    """(the metric, the replay's regime) on the simulator with this cost model."""
    recs, engine = run(p, cost)
    return metric(p, measured(recs)), regime(engine)
