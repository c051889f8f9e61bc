"""A run's records as flat arrays: one value per request plus one flat array of every chunk time.

Summaries, reports, exports and HOL attribution all read this form. A million requests with a hundred
chunks each is 100M floats: as Python tuples that is ~10 GiB and minutes of parsing; as one float64
array it is 800 MB and loads from the `columns/` sidecar (store.py) in a second. Pure numpy."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, fields

import numpy as np

from .records import MEDIA_FIELDS, STATUSES, TOKEN_SOURCES, RequestRecord, RunMeta

NAN = float("nan")


@dataclass
class RecordArrays:
    """The records as flat arrays: one value per request, and every chunk time of every request in one
    array (what records.jsonl holds, without a Python object per request or per chunk). Nothing here is
    derived: metrics.RequestMetrics derives TTFT, ITL, ... from it."""

    ids: np.ndarray  # str
    cls: np.ndarray  # int32 code into cls_names
    cls_names: list
    origin: np.ndarray  # int32 code into origin_names (one clock per origin)
    origin_names: list
    session_names: list
    status: np.ndarray  # int8 code into records.STATUSES
    scheduled: np.ndarray  # float64 seconds since run start
    sent: np.ndarray  # float64, NaN = never sent
    first: np.ndarray  # float64, NaN = no content chunk
    finished: np.ndarray  # float64, NaN = never finished
    out_tokens: np.ndarray  # int64
    out_source: np.ndarray  # int8 code into records.TOKEN_SOURCES
    prompt_tokens: np.ndarray  # int64
    http_status: np.ndarray  # int32, 0 = none
    warmup: np.ndarray  # bool
    chunk_tok_sum: np.ndarray  # int64: tokens the stream's content chunks carried
    nchunks: np.ndarray  # int64
    retries: np.ndarray  # int8: sent again on a fresh connection
    first_answer: np.ndarray  # float64, NaN = no answer chunk (or not recorded: see RequestMetrics.ttfo)
    reasoning_tokens: np.ndarray  # int64
    out_local: np.ndarray  # int64, -1 = not counted locally
    priority: np.ndarray  # float64 priority lane, NaN = none
    session: np.ndarray  # int64 code into session_names, -1 = not part of a session
    turn: np.ndarray  # int32, 0 = not a session turn
    session_turns: np.ndarray  # int32: the session's planned turns (0 = none)
    items: np.ndarray  # int64: inputs of an embeddings / rerank / score request (-1 = not one)
    job: np.ndarray  # int64 code into job_names, -1 = not an agent job's call
    node: np.ndarray  # int32: the call's node in its job (-1 = none)
    depth: np.ndarray  # int32: its depth in the job's graph (-1 = none)
    delay: np.ndarray  # float64: planned tool / think time before it (NaN = none)
    parents: np.ndarray  # int32 code into parents_names ("1,2,3"), -1 = none
    cached: np.ndarray  # int64: prompt tokens the server's usage said were cached (-1 = not said)
    replica: np.ndarray  # int32 code into replica_names: the replica that served it, -1 = not known
    adapter: np.ndarray  # int32 code into adapter_names: the LoRA adapter it asked for, -1 = the base model
    images: np.ndarray  # int64: images it carried, -1 = no media
    image_pixels: np.ndarray  # int64: their pixels (-1: no media), and the media's bytes and the audio's ms
    media_bytes: np.ndarray  # int64
    audio_ms: np.ndarray  # int64
    tokens: np.ndarray  # int16 per chunk, aligned with chunk_times; EMPTY when every chunk is one token
    chunk_times: np.ndarray  # float64, all requests' chunk times back to back (offsets = cumsum(nchunks))
    job_names: list = field(default_factory=list)
    parents_names: list = field(default_factory=list)
    replica_names: list = field(default_factory=list)
    adapter_names: list = field(default_factory=list)

    ARRAYS = (
        "ids",
        "cls",
        "origin",
        "status",
        "scheduled",
        "sent",
        "first",
        "finished",
        "out_tokens",
        "out_source",
        "prompt_tokens",
        "http_status",
        "warmup",
        "chunk_tok_sum",
        "nchunks",
        "retries",
        "first_answer",
        "reasoning_tokens",
        "out_local",
        "priority",
        "session",
        "turn",
        "session_turns",
        "items",
        "job",
        "node",
        "depth",
        "delay",
        "parents",
        "cached",
        "replica",
        "adapter",
        "images",
        "image_pixels",
        "media_bytes",
        "audio_ms",
        "tokens",
        "chunk_times",
    )
    NAMES = (
        "cls_names",
        "origin_names",
        "session_names",
        "job_names",
        "parents_names",
        "replica_names",
        "adapter_names",
    )

    def __len__(self) -> int:
        return int(self.ids.size)

    @property
    def offsets(self) -> np.ndarray:
        """Start of each request's chunk times in chunk_times; offsets[n] = len(chunk_times)."""
        o = np.zeros(len(self) + 1, np.int64)
        np.cumsum(self.nchunks, out=o[1:])
        return o

    @property
    def ok(self) -> np.ndarray:
        return self.status == STATUSES.index("ok")

    def class_of(self) -> np.ndarray:
        return np.asarray(self.cls_names, dtype=object)[self.cls] if len(self) else np.array([], dtype=object)

    def select(self, mask: np.ndarray) -> RecordArrays:
        """The requests where mask holds (a copy; the chunk array is shared when mask keeps all)."""
        if mask.all():
            return self
        chunk_mask = np.repeat(mask, self.nchunks)
        kw = {f: getattr(self, f)[mask] for f in self.ARRAYS if f not in ("chunk_times", "tokens")}
        return RecordArrays(
            **{k: getattr(self, k) for k in self.NAMES},
            chunk_times=self.chunk_times[chunk_mask],
            tokens=self.tokens[chunk_mask] if self.tokens.size else self.tokens,
            **kw,
        )

    def chunk_tokens(self) -> np.ndarray:
        """Tokens per chunk, aligned with chunk_times (ones when the run stored none)."""
        return self.tokens if self.tokens.size else np.ones(self.chunk_times.size, np.int16)

    @classmethod
    def from_records(cls, recs: list[RequestRecord]) -> RecordArrays:
        n = len(recs)

        def codes(values) -> tuple[np.ndarray, list]:
            names = sorted(set(values))
            index = {v: i for i, v in enumerate(names)}
            return np.fromiter((index[v] for v in values), np.int32, n), names

        def opt(attr: str) -> np.ndarray:
            return np.fromiter((NAN if (v := getattr(r, attr)) is None else v for r in recs), float, n)

        cls_codes, cls_names = codes([r.cls for r in recs])
        named = [r.session for r in recs if r.session is not None]
        sess_names = sorted(set(named))
        sindex = {v: i for i, v in enumerate(sess_names)}
        sess_codes = np.fromiter((-1 if r.session is None else sindex[r.session] for r in recs), np.int64, n)
        org_codes, org_names = codes([r.origin for r in recs])
        nchunks = np.fromiter((len(r.chunk_times) for r in recs), np.int64, n)
        return cls(
            ids=np.array([r.id for r in recs], dtype=str) if n else np.array([], dtype=str),
            cls=cls_codes,
            cls_names=cls_names,
            origin=org_codes,
            origin_names=org_names,
            status=np.fromiter((STATUSES.index(r.status) for r in recs), np.int8, n),
            scheduled=np.fromiter((r.scheduled_at for r in recs), float, n),
            sent=opt("sent_at"),
            first=opt("first_token_at"),
            finished=opt("finished_at"),
            out_tokens=np.fromiter((r.output_tokens for r in recs), np.int64, n),
            out_source=np.fromiter((TOKEN_SOURCES.index(r.output_tokens_source) for r in recs), np.int8, n),
            prompt_tokens=np.fromiter((r.prompt_tokens_server or r.prompt_tokens for r in recs), np.int64, n),
            http_status=np.fromiter((r.http_status or 0 for r in recs), np.int32, n),
            warmup=np.fromiter((r.warmup for r in recs), bool, n),
            chunk_tok_sum=np.fromiter((sum(r.chunk_tokens) for r in recs), np.int64, n),
            nchunks=nchunks,
            retries=np.fromiter((r.retries for r in recs), np.int8, n),
            first_answer=opt("first_answer_at"),
            reasoning_tokens=np.fromiter((r.reasoning_tokens for r in recs), np.int64, n),
            out_local=np.fromiter(
                (-1 if r.output_tokens_local is None else r.output_tokens_local for r in recs), np.int64, n
            ),
            priority=opt("priority"),
            session=sess_codes,
            session_names=sess_names,
            turn=np.fromiter((r.turn or 0 for r in recs), np.int32, n),
            session_turns=np.fromiter((r.session_turns or 0 for r in recs), np.int32, n),
            **_sparse_columns(recs, opt("delay_s")),
            tokens=_chunk_tokens(recs, int(nchunks.sum())),
            chunk_times=np.fromiter(
                itertools.chain.from_iterable(r.chunk_times for r in recs), float, int(nchunks.sum())
            ),
        )

    def to_records(self) -> list[RequestRecord]:
        """Back to records (for small runs and round-trip tests; big runs stay columnar)."""
        off = self.offsets
        names = self.class_of()

        def opt(v: float) -> float | None:
            return None if np.isnan(v) else float(v)

        toks = self.chunk_tokens()
        return [
            RequestRecord(
                id=str(self.ids[i]),
                cls=str(names[i]),
                scheduled_at=float(self.scheduled[i]),
                sent_at=opt(self.sent[i]),
                first_token_at=opt(self.first[i]),
                finished_at=opt(self.finished[i]),
                chunk_times=tuple(self.chunk_times[off[i] : off[i + 1]].tolist()),
                output_tokens=int(self.out_tokens[i]),
                output_tokens_source=TOKEN_SOURCES[self.out_source[i]],
                prompt_tokens=int(self.prompt_tokens[i]),
                status=STATUSES[self.status[i]],
                http_status=int(self.http_status[i]) or None,
                warmup=bool(self.warmup[i]),
                origin=self.origin_names[self.origin[i]],
                retries=int(self.retries[i]),
                first_answer_at=opt(self.first_answer[i]),
                reasoning_tokens=int(self.reasoning_tokens[i]),
                output_tokens_local=None if self.out_local[i] < 0 else int(self.out_local[i]),
                priority=None if np.isnan(self.priority[i]) else int(self.priority[i]),
                session=self.session_names[self.session[i]] if self.session[i] >= 0 else None,
                turn=int(self.turn[i]) or None,
                session_turns=int(self.session_turns[i]) or None,
                items=None if self.items[i] < 0 else int(self.items[i]),
                job=self.job_names[self.job[i]] if self.job[i] >= 0 else None,
                node=None if self.node[i] < 0 else int(self.node[i]),
                parents=_parents_of(self.parents_names[self.parents[i]]) if self.parents[i] >= 0 else None,
                depth=None if self.depth[i] < 0 else int(self.depth[i]),
                delay_s=opt(self.delay[i]),
                cached_tokens=None if self.cached[i] < 0 else int(self.cached[i]),
                replica=self.replica_names[self.replica[i]] if self.replica[i] >= 0 else None,
                adapter=self.adapter_names[self.adapter[i]] if self.adapter[i] >= 0 else None,
                **_media_of(self, i),
                chunk_tokens=tuple(toks[off[i] : off[i + 1]].tolist()),
            )
            for i in range(len(self))
        ]


FIELDS = tuple(f.name for f in fields(RecordArrays))


def _sparse_columns(recs, delay: np.ndarray) -> dict:
    """The columns most runs leave empty: items (one-body APIs), agent jobs' graph fields, the cache
    and replica a server or router reported."""
    n = len(recs)
    job_codes, job_names = _optional_codes([r.job for r in recs])
    par_codes, par_names = _optional_codes([_parents_key(r.parents) for r in recs])
    rep_codes, rep_names = _optional_codes([r.replica for r in recs])
    ada_codes, ada_names = _optional_codes([r.adapter for r in recs])
    return {
        "items": np.fromiter((-1 if r.items is None else r.items for r in recs), np.int64, n),
        "job": job_codes,
        "job_names": job_names,
        "node": np.fromiter((-1 if r.node is None else r.node for r in recs), np.int32, n),
        "depth": np.fromiter((-1 if r.depth is None else r.depth for r in recs), np.int32, n),
        "delay": delay,
        "parents": par_codes.astype(np.int32),
        "parents_names": par_names,
        "cached": np.fromiter((-1 if r.cached_tokens is None else r.cached_tokens for r in recs), np.int64, n),
        "replica": rep_codes.astype(np.int32),
        "replica_names": rep_names,
        "adapter": ada_codes.astype(np.int32),
        "adapter_names": ada_names,
        **{f: np.fromiter((-1 if getattr(r, f) is None else getattr(r, f) for r in recs), np.int64, n) for f in MEDIA},
    }


MEDIA = MEDIA_FIELDS  # one column each (-1: the request carried no media)


def _media_of(cols: RecordArrays, i: int) -> dict:
    """A record's media fields back from the columns (None when it carried none)."""
    return {f: None if getattr(cols, f)[i] < 0 else int(getattr(cols, f)[i]) for f in MEDIA}


def _optional_codes(values) -> tuple[np.ndarray, list]:
    """Codes into the sorted distinct non-None values; -1 for None."""
    names = sorted({v for v in values if v is not None})
    index = {v: i for i, v in enumerate(names)}
    return np.fromiter((-1 if v is None else index[v] for v in values), np.int64, len(values)), names


def _parents_key(parents) -> str | None:
    return None if parents is None else ",".join(map(str, parents))


def _parents_of(key: str) -> tuple[int, ...]:
    return tuple(int(x) for x in key.split(",")) if key else ()


def _chunk_tokens(recs, total: int) -> np.ndarray:
    """Every chunk's token count, or an empty array when all are one (the common case costs nothing)."""
    if all(r.chunk_tokens.count(1) == len(r.chunk_tokens) for r in recs):
        return np.zeros(0, np.int16)
    out = np.fromiter(itertools.chain.from_iterable(r.chunk_tokens for r in recs), np.int64, total)
    return np.clip(out, 0, np.iinfo(np.int16).max).astype(np.int16)


@dataclass
class RunArrays:
    """A run as arrays: its RunMeta and RecordArrays (records.RunResult is the same run as a list of
    RequestRecords). What store.load_arrays returns and metrics.summarize accepts."""

    meta: RunMeta
    cols: RecordArrays


def gaps_of(cols: RecordArrays, block: int = 1 << 22, dtype=np.float32) -> np.ndarray:
    """Every within-request gap between successive chunks, request by request (ITL samples), built in
    blocks so no second full-size temporary exists. Differences are taken in float64 and stored as
    float32 by default: 2 ns resolution at 20 ms (timestamps themselves are kept to 0.1 us), half the
    memory and twice the partition speed on 100M-gap runs."""
    per = np.maximum(cols.nchunks - 1, 0)
    out = np.empty(int(per.sum()), dtype)
    t = cols.chunk_times
    if not out.size:
        return out
    # a flat diff's element j is a within-request gap unless j is the last chunk of some request
    boundary = np.zeros(t.size, bool)
    ends = cols.offsets[1:] - 1
    boundary[ends[ends >= 0]] = True
    pos = 0
    for s in range(0, t.size - 1, block):
        e = min(s + block, t.size - 1)
        d = t[s + 1 : e + 1] - t[s:e]
        d = d[~boundary[s:e]]
        out[pos : pos + d.size] = d
        pos += d.size
    return out


def gap_counts(cols: RecordArrays) -> np.ndarray:
    return np.maximum(cols.nchunks - 1, 0)
