"""A run as `goodbench calibrate` fits it (analysis/calibrate.py): its finished requests at their send
times, what the client measured (TTFT, TPOT, the decode-only gaps per number of requests decoding), and
what the server said (its KV capacity, its mean queue + prefill time, its name and version, its
speculative-decoding counters)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from ..history.identity import gpu_of, server_of
from ..limits import problem
from ..metrics.speculative import observed, simulated
from ..prometheus import delta
from ..records import RequestSpec
from ..store import load, load_meta, load_server_metrics

MIN_GAPS = 10  # a batch size with fewer decode-only gaps than this is not a target
MAX_BATCH_BIN = 32  # decode-only gaps with more requests decoding share one bin


def _decode_only(sent: np.ndarray, flat: np.ndarray, start: np.ndarray):
    """Every inter-token gap taken while no request was waiting for its first token: (flat index of the
    gap's second token, the gap's midpoint, requests decoding then), for those gaps only."""
    first, last = flat[start[:-1]], flat[start[1:] - 1]
    later = np.ones(len(flat), bool)
    later[start[:-1]] = False  # a request's first token opens no gap
    idx = np.flatnonzero(later)
    mid = (flat[idx] + flat[idx - 1]) / 2
    fs, ls, ss = np.sort(first), np.sort(last), np.sort(sent)
    decoding = np.searchsorted(fs, mid, "right") - np.searchsorted(ls, mid, "left")
    keep = np.searchsorted(ss, mid, "right") - np.searchsorted(fs, mid, "left") == 0
    return idx[keep], mid[keep], decoding[keep]


def batch_bin(decoding: np.ndarray) -> np.ndarray:
    """The bin a decode-only gap's batch size falls in: its requests decoding, MAX_BATCH_BIN and over one."""
    return np.minimum(decoding, MAX_BATCH_BIN)


def decode_gaps(sent: np.ndarray, flat: np.ndarray, start: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The inter-token gaps taken while no request was waiting for its first token (decode-only steps,
    as far as a client can tell): (gap seconds, requests decoding at the gap, binned at MAX_BATCH_BIN,
    flat index of the gap's second token)."""
    idx, _, decoding = _decode_only(sent, flat, start)
    return flat[idx] - flat[idx - 1], batch_bin(decoding), idx


def decode_steps(sent: np.ndarray, flat: np.ndarray, start: np.ndarray, prompts: np.ndarray) -> np.ndarray:
    """The decode-only gaps as steps the profile can price, one row each: (gap seconds, requests
    decoding, the context tokens they had: prompts plus chunks so far, the flat index of the gap's
    second chunk: consecutive indices are one request's consecutive gaps). What the client saw over
    what the step-time model says of each is how the server's steps scatter (calibrate.step_spread)."""
    idx, mid, decoding = _decode_only(sent, flat, start)
    first, last = flat[start[:-1]], flat[start[1:] - 1]
    outs = np.diff(start)
    by_first, by_last = np.argsort(first, kind="stable"), np.argsort(last, kind="stable")
    began = np.searchsorted(first[by_first], mid, "right")  # requests with a first token by mid
    ended = np.searchsorted(last[by_last], mid, "left")  # ... and a last token before it
    cum = lambda x: np.r_[0.0, np.cumsum(x)]  # noqa: E731
    prompt = cum(prompts[by_first])[began] - cum(prompts[by_last])[ended]
    tokens = np.searchsorted(np.sort(flat), mid, "right") - cum(outs[by_last])[ended]
    return np.column_stack([flat[idx] - flat[idx - 1], decoding, prompt + tokens, idx])


def gap_medians(gaps: np.ndarray, batch: np.ndarray) -> dict:
    """Median decode-only gap per number of requests decoding: {batch: (median s, count)}."""
    return {
        int(b): (float(np.median(gaps[batch == b])), int((batch == b).sum()))
        for b in np.unique(batch)
        if (batch == b).sum() >= MIN_GAPS
    }


@dataclass
class RunData:
    """One run as the fit needs it: its requests at their send times and what the client measured."""

    path: str
    requests: list[RequestSpec]
    offsets: np.ndarray
    ttft: np.ndarray  # observed, s
    tpot: np.ndarray  # observed, s (nan for one-token requests)
    itl_p50: float
    server_engine_s: float | None  # the server's mean queue + prefill time per request (its histograms)
    kv: dict  # num_gpu_blocks, block_size from the server's cache_config_info
    gaps: dict  # observed gap_medians: what a decode step costs with each number of requests decoding
    front_end_s: float | None = None  # the client's mean TTFT less the server's mean queue + prefill
    server: str = ""  # what the server said it is ("vllm 0.32.0"), where the run asked
    steps: np.ndarray | None = None  # decode_steps: what the steps' scatter is measured on (engine/jitter.py)
    spec: dict | None = None  # the server's speculative-decoding counters (metrics/speculative.block; None: none)
    chunks: np.ndarray | None = None  # streamed chunks per request (a drafted step's tokens come in one)


def _cache_info(rows: list[dict], path: str) -> dict:
    """The KV capacity the server reported (vllm:cache_config_info), inside the limits its flags have:
    a value out of range is named with where it came from, not as a flag the user never gave."""
    for r in rows:
        for key in r.get("metrics") or {}:
            if key.startswith("vllm:cache_config_info{"):
                labels = dict(re.findall(r'(\w+)="([^"]*)"', key))
                if labels.get("num_gpu_blocks", "").isdigit():
                    kv = {
                        "num_gpu_blocks": int(labels["num_gpu_blocks"]),
                        "block_size": int(labels.get("block_size") or 16),
                    }
                    for k, v in kv.items():
                        why = problem(k, v)
                        if why is not None:
                            raise InputError(f"{path}: the server's vllm:cache_config_info says {k} {why}")
                    return kv
    return {}


def _server_engine_s(rows: list[dict]) -> float | None:
    """Mean queue + prefill time per request over the run, from the server's histogram sums and counts."""
    q, p = delta(rows, "vllm:request_queue_time_seconds_sum"), delta(rows, "vllm:request_prefill_time_seconds_sum")
    n = delta(rows, "vllm:request_prefill_time_seconds_count")
    return (q + p) / n if q is not None and p is not None and n else None


def load_run(path: str) -> RunData:
    """A run directory's finished requests (InputError when it has none to fit)."""
    res = load(path)
    srv = res.meta.server or {}
    ok = [r for r in res.records if r.status == "ok" and not r.warmup and r.first_token_at is not None]
    ok = [r for r in ok if r.sent_at is not None and r.finished_at is not None and r.output_tokens >= 1]
    if len(ok) < 5:
        raise InputError(f"{path}: {len(ok)} finished requests; calibrate needs a run with at least 5")
    ok.sort(key=lambda r: r.sent_at)
    t0 = ok[0].sent_at
    reqs = [
        RequestSpec(str(k), r.cls, "x", int(r.prompt_tokens_server or r.prompt_tokens), int(r.output_tokens))
        for k, r in enumerate(ok)
    ]
    if min(q.prompt_tokens for q in reqs) < 1:
        raise InputError(f"{path}: records without prompt token counts cannot be replayed")
    ttft = np.array([r.first_token_at - r.sent_at for r in ok])
    outs = np.array([r.output_tokens for r in ok], dtype=float)
    tpot = np.where(
        outs > 1, (np.array([r.finished_at - r.first_token_at for r in ok])) / np.maximum(outs - 1, 1), np.nan
    )
    # a time of zero or less is no engine's (every chunk in one read, another client's clock step): such a
    # request is still replayed as load, but its times are left out of the fit (nan)
    ttft, tpot = np.where(ttft > 0, ttft, np.nan), np.where(tpot > 0, tpot, np.nan)
    if np.isnan(ttft).all():
        raise InputError(f"{path}: no request has a positive time to first token; nothing to fit")
    gaps = np.concatenate([np.diff(r.chunk_times) for r in ok if len(r.chunk_times) > 1] or [np.array([np.nan])])
    rows = load_server_metrics(path)
    start = np.zeros(len(ok) + 1, dtype=np.int64)
    start[1:] = np.cumsum([len(r.chunk_times) for r in ok])
    flat = np.fromiter((x for r in ok for x in r.chunk_times), float, int(start[-1]))
    steps = decode_steps(
        np.array([r.sent_at for r in ok]), flat, start, np.array([q.prompt_tokens for q in reqs], float)
    )
    engine_s = _server_engine_s(rows)
    spec = observed(rows) or simulated((res.meta.engine_stats or {}).get("speculative"))
    return RunData(
        path,
        reqs,
        np.array([r.sent_at - t0 for r in ok]),
        ttft,
        tpot,
        float(np.nanmedian(gaps)),
        engine_s,
        _cache_info(rows, path),
        gap_medians(steps[:, 0], batch_bin(steps[:, 1])),
        float(np.nanmean(ttft)) - engine_s if engine_s is not None else None,
        " ".join(str(v) for v in (srv.get("name"), srv.get("version")) if v),
        steps,
        spec,
        np.diff(start),
    )


def observed_stats(run: RunData) -> dict:
    """The run's measured TTFT, ITL and TPOT p50 (ms)."""
    return {
        "ttft_p50_ms": float(np.nanmedian(run.ttft)) * 1000,
        "itl_p50_ms": run.itl_p50 * 1000,
        "tpot_p50_ms": float(np.nanmedian(run.tpot)) * 1000,
    }


def errors(obs: dict, pred: dict) -> dict:
    """Each p50's relative error, predicted over observed, less 1."""
    return {k: pred[k] / obs[k] - 1 for k in obs if obs[k]}


METRICS = {"ttft": "ttft_p50_ms", "itl": "itl_p50_ms", "tpot": "tpot_p50_ms"}  # a profile's error per metric


def held_out_errors(rows: list[dict]) -> tuple[dict, str]:
    """({ttft, itl, tpot}: median |error| of that p50 over the runs, in %; its basis): each run predicted
    by a fit without it where there are several (its loro_error), else the one run's in-sample fit. Per
    metric, not one median over all three: TTFT, which the front end and queueing shape, can be off by
    16% where ITL and TPOT are off by 1%, and a pooled median says 1%."""
    key = "loro_error" if len(rows) > 1 else "fit_error"
    pct = {m: round(float(np.median([abs(r[key].get(k, 0.0)) for r in rows])) * 100, 1) for m, k in METRICS.items()}
    basis = (
        f"held out: each of the {len(rows)} runs predicted by a fit made without it, median |error| of its p50"
        if len(rows) > 1
        else "in sample: the one run it was fitted to (calibrate on two or more runs for a held-out figure)"
    )
    return pct, basis


def one_server(paths: list[str]) -> None:
    """InputError when the runs were served by different servers (kind and version, model, GPUs): one
    profile fitted to two servers' runs fits neither (a probe mixed two and got a profile at +-1011%
    expected error, written with exit 0)."""
    if len(paths) < 2:
        return
    by: dict[tuple, list[str]] = {}
    for p in paths:
        meta = load_meta(p).to_dict()
        kind, version = server_of(meta)
        sig = (kind, version or "?", str((meta.get("target") or {}).get("model") or "?"), gpu_of(meta) or "?")
        by.setdefault(sig, []).append(p)
    if len(by) > 1:
        said = "; ".join(f"{k} {v}, model {m}, GPUs {g}: {', '.join(ps)}" for (k, v, m, g), ps in by.items())
        raise InputError(
            f"these runs come from {len(by)} different servers ({said}): calibrate each server's runs apart"
        )
