"""Other tools' results in, goodbench's out.

Import turns a `vllm bench serve --save-result --save-detailed` JSON, an AIPerf `profile_export.jsonl`
or a GenAI-Perf `profile_export.json` into a goodbench run directory (run.json + records.jsonl), so summaries, reports, compare and the gate
work on runs made with those tools; an llm-d Benchmark Report (llmd.py) into an aggregate-only one
(run.json + summary.json) for the history. Export writes one row per request with derived metrics (CSV,
Parquet), a result JSON in vLLM's shape, or an llm-d Benchmark Report. What an import cannot know is
said in run.json's workload.caveats, and every summary of the run repeats it."""

from __future__ import annotations

import json
import os

import numpy as np

from . import llmd
from .columnar import RecordArrays, RunArrays
from .errors import InputError, UsageError
from .jsonlines import json_lines
from .records import STATUSES, TOKEN_SOURCES, RequestRecord, RunMeta
from .rundir import RunDir
from .store import new_run_id


def _read_json(path: str):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror}") from None
    except ValueError as e:
        raise InputError(f"{path} is not JSON: {e}") from None


def _write_run(records: list[RequestRecord], meta: RunMeta, result_dir: str) -> str:
    """An imported run directory: no summary.json (summaries are computed when the run is read, with
    the SLO asked for then)."""
    rd = RunDir.open(result_dir, meta)
    rd.append_many(records)
    rd.finish(summarized=False)
    return rd.dir


def _record(
    rid: str,
    tool: str,
    sent: float,
    chunks,
    finished: float,
    out: int,
    prompt: int = 0,
    source: str = "usage",
    status: str = "ok",
    error: str | None = None,
    http: int | None = None,
):
    """One imported request: sent at `sent` (also its scheduled time: other tools keep none), its content
    chunk times, one token each unless the tool said otherwise."""
    chunks = tuple(chunks)
    return RequestRecord(
        id=rid,
        cls=tool,
        scheduled_at=sent,
        sent_at=sent,
        first_token_at=chunks[0] if chunks else None,
        finished_at=finished,
        chunk_times=chunks,
        chunk_tokens=(1,) * len(chunks),
        output_tokens=out,
        output_tokens_source=source,
        prompt_tokens=prompt,
        status=status,
        http_status=http,
        error=error,
        origin=tool,
    )


def _vllm_records(d: dict, starts: list) -> list[RequestRecord]:
    n = len(d["ttfts"])
    t0 = min(starts) if n else 0.0
    errors = d.get("errors") or [""] * n
    out_lens = d.get("output_lens") or [0] * n
    in_lens = d.get("input_lens") or [0] * n
    recs = []
    for i in range(n):
        sent = float(starts[i]) - t0
        err = errors[i] if i < len(errors) else ""
        ttft, itl = d["ttfts"][i], d["itls"][i] or []
        ok = not err and ttft is not None and ttft > 0
        chunks = (
            (sent + float(ttft) + np.concatenate([[0.0], np.cumsum(np.asarray(itl, float))])).tolist() if ok else []
        )
        recs.append(
            _record(
                f"vllm-{i}",
                "vllm",
                sent,
                chunks,
                chunks[-1] if chunks else sent,
                int(out_lens[i] or 0) if ok else 0,
                int(in_lens[i] or 0),
                status="ok" if ok else "http_error",
                error=str(err)[:500] if err else None,
            )
        )
    return recs


def import_vllm(path: str, result_dir: str, run_id: str | None = None, slo: dict | None = None) -> str:
    """vLLM's detailed result: ttfts (s), itls (list of gaps in s per request), start_times (perf_counter
    s), input_lens, output_lens, errors. Chunk times are rebuilt as start + ttft + cumsum(itls)."""
    d = _read_json(path)
    if not isinstance(d, dict) or "ttfts" not in d or "itls" not in d:
        raise InputError(
            f"{path}: no per-request 'ttfts'/'itls': save it with `vllm bench serve --save-result --save-detailed`"
        )
    n = len(d["ttfts"])
    starts = d.get("start_times")
    caveats = [
        "imported from vllm bench serve: no scheduled times, so schedule lag reads 0 and validity "
        "(generator lag) cannot be judged"
    ]
    if not starts or len(starts) != n:
        caveats.append(
            "no start_times in this vLLM result (older vLLM): every request is placed at t=0, "
            "so duration, throughput, goodput and time plots are not meaningful"
        )
        starts = [0.0] * n
    recs = _vllm_records(d, starts)
    rid = run_id or new_run_id("vllm")
    rate = d.get("request_rate")
    meta = RunMeta(
        run_id=rid,
        label=f"imported vllm {d.get('backend', '')}".strip(),
        target={"base_url": "imported", "endpoint": d.get("endpoint_type") or "", "model": d.get("model_id") or ""},
        workload={"name": "vllm-import", "source": os.path.basename(path), "caveats": caveats},
        slo=slo,
        mode="imported",
        requested_rate=float(rate) if isinstance(rate, (int, float)) else None,
        max_concurrency=d.get("max_concurrency"),
    )
    return _write_run(recs, meta, result_dir)


_UNIT = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0}


def _metric(m: dict, name: str):
    v = (m or {}).get(name)
    if not isinstance(v, dict) or v.get("value") is None:
        return None
    scale = _UNIT.get(str(v.get("unit", "")).lower())
    val = v["value"]
    if scale is None:  # a count (tokens)
        return val
    return [x * scale for x in val] if isinstance(val, list) else val * scale


def _aiperf_rows(path: str) -> list[dict]:
    """The profiling phase's per-request records of an AIPerf profile_export.jsonl."""
    try:
        with open(path, encoding="utf-8") as f:
            rows = [d for _, d in json_lines(f, path)]
    except OSError as e:
        raise InputError(f"cannot read {path}: {e.strerror}") from None
    rows = [
        r
        for r in rows
        if isinstance(r, dict)
        and isinstance(r.get("metadata"), dict)
        and r["metadata"].get("benchmark_phase", "profiling") == "profiling"
    ]
    if not rows:
        raise InputError(f"{path}: no AIPerf per-request records (expected JSON lines with 'metadata' and 'metrics')")
    return rows


def _aiperf_record(i: int, r: dict, t0: int) -> RequestRecord:
    """One AIPerf record; marks r["_no_icl"] when it has no inter-chunk latencies."""
    md, m = r["metadata"], r.get("metrics") or {}
    sent = ((md.get("request_start_ns") or t0) - t0) * 1e-9
    end = ((md.get("request_end_ns") or md.get("request_start_ns") or t0) - t0) * 1e-9
    ttft, icl, err = _metric(m, "time_to_first_token"), _metric(m, "inter_chunk_latency"), r.get("error")
    ok = not err and not md.get("was_cancelled") and ttft is not None
    chunks: list = []
    if ok:
        first = sent + ttft
        if isinstance(icl, list):
            chunks = (first + np.concatenate([[0.0], np.cumsum(icl)])).tolist()
        else:
            r["_no_icl"] = True
            chunks = [first, end] if end > first else [first]
    osl = _metric(m, "output_sequence_length") or _metric(m, "output_token_count") or 0
    isl = _metric(m, "input_sequence_length") or _metric(m, "error_isl") or 0
    code = err.get("code") if isinstance(err, dict) else None
    text = f"{err.get('type', '')}: {err.get('message', '')}" if isinstance(err, dict) else (str(err) if err else None)
    return _record(
        str(md.get("x_request_id") or f"aiperf-{i}"),
        "aiperf",
        sent,
        chunks,
        end,
        int(osl) if ok else 0,
        int(isl),
        status="ok" if ok else ("cancelled" if md.get("was_cancelled") else "http_error"),
        error=text[:500] if text else None,
        http=int(code) if isinstance(code, int) else None,
    )


def import_aiperf(path: str, result_dir: str, run_id: str | None = None, slo: dict | None = None) -> str:
    """AIPerf's profile_export.jsonl (one record per request: metadata with request_start_ns /
    request_end_ns, metrics with units, error). Chunk times come from time_to_first_token and
    inter_chunk_latency when present; without the latter only TTFT and the end are known."""
    if os.path.isdir(path):
        path = os.path.join(path, "profile_export.jsonl")
    rows = _aiperf_rows(path)
    t0 = min(r["metadata"].get("request_start_ns") or 0 for r in rows)
    caveats = ["imported from AIPerf: no scheduled times, so schedule lag reads 0"]
    recs = [_aiperf_record(i, r, t0) for i, r in enumerate(rows)]
    missing_chunks = sum(1 for r in rows if r.get("_no_icl"))
    if missing_chunks:
        caveats.append(
            f"{missing_chunks} records have no inter_chunk_latency: ITL for them is one gap from first token to end"
        )
    rid = run_id or new_run_id("aiperf")
    meta = RunMeta(
        run_id=rid,
        label="imported aiperf",
        target={"base_url": "imported", "endpoint": "", "model": ""},
        workload={"name": "aiperf-import", "source": os.path.basename(path), "caveats": caveats},
        slo=slo,
        mode="imported",
    )
    return _write_run(recs, meta, result_dir)


def _sse_content(raw) -> tuple[bool, int | None]:
    """(carries content, usage.completion_tokens if the payload reports it) for one GenAI-Perf /
    perf_analyzer response output: the raw SSE text of an OpenAI streaming chunk."""
    text = raw.get("response", "") if isinstance(raw, dict) else str(raw or "")
    content, usage = False, None
    for line in str(text).splitlines():
        line = line.strip()
        if not line.startswith("data:"):
            continue
        body = line[5:].strip()
        if not body or body == "[DONE]":
            continue
        try:
            ev = json.loads(body)
        except ValueError:
            continue
        for ch in ev.get("choices") or []:
            delta = ch.get("delta") or {}
            if ch.get("text") or delta.get("content") or delta.get("reasoning_content"):
                content = True
        u = ev.get("usage") or {}
        if isinstance(u.get("completion_tokens"), int):
            usage = u["completion_tokens"]
    return content, usage


def _genai_record(i: int, r: dict, t0: int) -> tuple[RequestRecord, bool]:
    """One perf_analyzer request, and whether its response outputs could be parsed (else every
    response counts as a content chunk)."""
    sent = (r["timestamp"] - t0) * 1e-9
    ts = [(t - t0) * 1e-9 for t in r.get("response_timestamps") or []]
    outs = r.get("response_outputs") or []
    chunks, usage, parsed = [], None, bool(outs) and len(outs) == len(ts)
    if parsed:
        for t, o in zip(ts, outs):
            has, u = _sse_content(o)
            usage = u if u is not None else usage
            if has:
                chunks.append(t)
    else:
        chunks = ts
    ok = bool(chunks)
    rec = _record(
        f"genai-perf-{i}",
        "genai-perf",
        sent,
        chunks,
        ts[-1] if ts else sent,
        usage if usage is not None else len(chunks),
        source="usage" if usage is not None else "chunks",
        status="ok" if ok else "bad_stream",
        error=None if ok else "no content in any response",
    )
    return rec, parsed


def import_genai_perf(path: str, result_dir: str, run_id: str | None = None, slo: dict | None = None) -> str:
    """GenAI-Perf's profile_export.json (perf_analyzer's export: experiments[].requests[] with a
    `timestamp` and `response_timestamps` in ns, and the raw SSE `response_outputs`). Responses that
    carry no content (role-only, usage-only, [DONE]) are dropped, as goodbench's own client does."""
    if os.path.isdir(path):
        path = os.path.join(path, "profile_export.json")
    d = _read_json(path)
    exps = d.get("experiments") if isinstance(d, dict) else None
    if not exps or not isinstance(exps, list) or not all(isinstance(e, dict) and "requests" in e for e in exps):
        raise InputError(
            f"{path}: no experiments[].requests[] (expected GenAI-Perf's profile_export.json; "
            "profile_export_genai_perf.json holds only aggregates)"
        )
    if len(exps) > 1:
        raise InputError(
            f"{path} holds {len(exps)} experiments (load levels); goodbench imports one run "
            "per file: split it, or profile one level per run"
        )
    reqs = [r for r in exps[0]["requests"] if isinstance(r, dict) and "timestamp" in r]
    if not reqs:
        raise InputError(f"{path}: the experiment has no requests")
    t0 = min(r["timestamp"] for r in reqs)
    caveats = ["imported from GenAI-Perf: no scheduled times, so schedule lag reads 0"]
    pairs = [_genai_record(i, r, t0) for i, r in enumerate(reqs)]
    recs, parsed = [p[0] for p in pairs], [p[1] for p in pairs]
    unparsed = sum(1 for ok in parsed if not ok)
    if unparsed:
        caveats.append(f"{unparsed} requests had no parseable response_outputs: every response counted as a chunk")
    exp = exps[0].get("experiment") or {}
    rid = run_id or new_run_id("genai-perf")
    meta = RunMeta(
        run_id=rid,
        label=f"imported genai-perf {exp.get('mode', '')}@{exp.get('value', '')}",
        target={"base_url": "imported", "endpoint": d.get("endpoint") or "", "model": ""},
        workload={"name": "genai-perf-import", "source": os.path.basename(path), "caveats": caveats},
        slo=slo,
        mode="imported",
        max_concurrency=exp.get("value") if exp.get("mode") == "concurrency" else None,
        requested_rate=float(exp["value"]) if exp.get("mode") == "request_rate" else None,
    )
    return _write_run(recs, meta, result_dir)


def import_llmd(path: str, result_dir: str, run_id: str | None = None, slo: dict | None = None) -> str:
    """An llm-d Benchmark Report (v0.1, v0.2, v0.2.1; JSON or YAML): run.json and the summary its
    aggregates give (no records: the report holds none). slo: kept in run.json; the report's goodput,
    if goodbench wrote it, was judged against the SLO the report names."""
    meta, summary = llmd.from_report(llmd.read_report(path), os.path.basename(path))
    meta["slo"] = slo or meta.get("slo")
    rd = RunDir.open(result_dir, RunMeta(run_id=run_id or new_run_id("llmd"), **meta))
    rd.finish(summary=summary | {"run_id": rd.meta.run_id})
    return rd.dir


IMPORTERS = {"vllm": import_vllm, "aiperf": import_aiperf, "genai-perf": import_genai_perf, "llmd": import_llmd}


# ----------------------------------------------------------------------------------------------- export
def per_request_table(run: RunArrays, slo: dict | None = None):
    """pandas DataFrame, one row per request (warm-up included and flagged), derived metrics in ms."""
    import pandas as pd

    from .metrics import RequestMetrics

    cols: RecordArrays = run.cols
    c = RequestMetrics(cols)
    slo = slo if slo is not None else run.meta.slo
    meets = c.meets(slo)
    df = pd.DataFrame(
        {
            "id": cols.ids,
            "class": cols.class_of(),
            "status": np.asarray(STATUSES, dtype=object)[cols.status],
            # an integer column with blanks where there was no response (not 200.000000)
            "http_status": pd.Series(cols.http_status, dtype="Int64").mask(cols.http_status == 0),
            "warmup": cols.warmup,
            "origin": np.asarray(cols.origin_names, dtype=object)[cols.origin] if len(cols) else [],
            "scheduled_s": c.sched,
            "sent_s": c.sent,
            "first_chunk_s": c.first,
            "last_chunk_s": c.last,
            "finished_s": c.fin,
            "prompt_tokens": cols.prompt_tokens,
            "output_tokens": cols.out_tokens,
            "output_tokens_source": np.asarray(TOKEN_SOURCES, dtype=object)[cols.out_source],
            "chunks": cols.nchunks,
            "ttft_ms": c.ttft * 1000,
            "tpot_ms": c.tpot * 1000,
            "e2el_ms": c.e2e * 1000,
            "itl_mean_ms": c.chunk_mean_itl * 1000,
            "itl_max_ms": np.where(c.gap_count > 0, c.max_itl * 1000, np.nan),
            "schedule_lag_ms": c.lag * 1000,
        }
    )
    if meets is not None:
        df["met_slo"] = meets
    return df


def export_csv(run: RunArrays, out: str, slo: dict | None = None) -> str:
    per_request_table(run, slo).to_csv(out, index=False, float_format="%.6f")
    return out


def export_parquet(run: RunArrays, out: str, slo: dict | None = None) -> str:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise UsageError("Parquet export needs pyarrow: pip install 'goodbench[parquet]'") from None
    per_request_table(run, slo).to_parquet(out, index=False)
    return out


def export_vllm(run: RunArrays, summary: dict, out: str) -> str:
    """A result JSON in `vllm bench serve --save-detailed`'s shape (seconds in the per-request lists, ms in
    the aggregates), so scripts written for vLLM's output read goodbench runs."""
    from .metrics import RequestMetrics

    cols = run.cols.select(~run.cols.warmup) if run.cols.warmup.any() else run.cols
    c = RequestMetrics(cols)
    off = cols.offsets
    ok = c.ok & ~np.isnan(c.first)
    itls = [np.diff(cols.chunk_times[off[i] : off[i + 1]]).tolist() if ok[i] else [] for i in range(len(cols))]
    s = summary
    res = {
        "date": run.meta.started_wall,
        "backend": "goodbench",
        "model_id": (run.meta.target or {}).get("model"),
        "num_prompts": len(cols),
        "request_rate": s.get("requested_rate"),
        "max_concurrency": run.meta.max_concurrency,
        "duration": s["duration_s"],
        "completed": s["requests"]["completed"],
        "total_input_tokens": int(cols.prompt_tokens[c.ok].sum()),
        "total_output_tokens": int(cols.out_tokens[c.ok].sum()),
        "request_throughput": s["request_throughput"],
        "request_goodput": s.get("goodput"),
        "output_throughput": s["output_throughput"],
        "input_lens": cols.prompt_tokens.tolist(),
        "output_lens": np.where(ok, cols.out_tokens, 0).tolist(),
        "ttfts": np.where(ok, c.ttft, 0.0).tolist(),
        "itls": itls,
        "start_times": np.nan_to_num(c.sent).tolist(),
        "errors": ["" if ok[i] else STATUSES[cols.status[i]] for i in range(len(cols))],
    }
    for key, name in (("ttft_ms", "ttft"), ("tpot_ms", "tpot"), ("itl_ms", "itl"), ("e2el_ms", "e2el")):
        d = s[key]
        res[f"mean_{name}_ms"], res[f"median_{name}_ms"] = d["mean"], d["p50"]
        res[f"p90_{name}_ms"], res[f"p95_{name}_ms"], res[f"p99_{name}_ms"] = d["p90"], d["p95"], d["p99"]
    from .store import json_safe

    with open(out, "w", encoding="utf-8") as f:
        json.dump(json_safe(res), f)
    return out


EXPORTS = {
    "csv": "requests.csv",
    "parquet": "requests.parquet",
    "vllm": "vllm_result.json",
    "llmd": "benchmark_report_v0.2.1.json",
}


def export_run(run_dir: str, fmt: str, out: str | None = None, slo: dict | None = None) -> str:
    """`goodbench export`: the run as csv / parquet / vllm / llmd, by default beside its records."""
    from .metrics import summarize
    from .store import load_arrays, load_summary

    run = load_arrays(run_dir)
    out = out or os.path.join(run_dir, EXPORTS[fmt])
    if fmt == "llmd":  # distributions from the records; an aggregate-only run exports its summary
        dists = llmd.dists_of(run) if len(run.cols) else ({}, {})
        summary = summarize(run, slo=slo, ci=False) if len(run.cols) else load_summary(run_dir)
        return llmd.write_report(llmd.to_report(run.meta.to_dict(), summary or {}, *dists), out)
    if fmt == "csv":
        return export_csv(run, out, slo)
    if fmt == "parquet":
        return export_parquet(run, out, slo)
    return export_vllm(run, summarize(run, slo=slo, ci=False), out)
