"""One response stream's state, fed bytes as they arrive, and the RequestRecord it becomes. Pure (the
clock is passed in), shared by both clients and the locust integration.

The stream ends at `[DONE]` or at the end of the body, whichever comes first (`done_at`: a server that
sends `[DONE]` and never ends the body has still answered then). `record()` never raises: whatever goes
wrong after the last byte (counting, tokenising) becomes the record's error, never a lost record."""

from __future__ import annotations

import asyncio
import queue
import threading
from array import array

from ..records import RequestRecord, RequestSpec, job_fields, media_fields
from .sse import SSEParser, classify

TOKENIZE_INLINE_CHARS = 256 * 1024  # more streamed text than this is tokenised off the event loop


class StreamState:
    """Everything one response stream has told us so far; fed bytes as they arrive."""

    __slots__ = (
        "clock",
        "t0",
        "parser",
        "times",
        "toks",
        "texts",
        "thinking",
        "usage_ct",
        "usage_rt",
        "prompt_srv",
        "cached",
        "replica",
        "last_ct",
        "status",
        "error",
        "done",
        "classify",
        "done_at",
    )

    unary = False  # a one-body reply (client/unary.py), not a stream

    def __init__(self, clock, t0: float, classify=classify):
        """classify: one event's payload -> sse.Chunk (OpenAI's by default; client/events.py has the
        Responses and Messages APIs')."""
        self.clock, self.t0, self.classify = clock, t0, classify
        self.parser = SSEParser()
        self.times = array("d")
        self.toks = array("i")
        self.texts: list[str] = []
        self.thinking = array("b")  # per content chunk: 1 = reasoning, 0 = answer (text or tool call)
        self.usage_ct = self.usage_rt = self.prompt_srv = self.cached = None
        self.replica: str | None = None  # the replica that served it, when a response header says (--replica-header)
        self.last_ct = 0
        self.status, self.error, self.done = "ok", None, False
        self.done_at: float | None = None  # when [DONE] arrived (run clock)

    def on_data(self, data: bytes) -> None:
        t = self.clock() - self.t0
        self._events(self.parser.feed(data), t)

    def feed(self, data: bytes, t: float) -> None:
        """Bytes that arrived at t (run clock): the lean client stamps a socket read once, then feeds
        every body piece the HTTP parser cut from it."""
        self._events(self.parser.feed(data), t)

    def on_eof(self) -> None:
        self._events(self.parser.close(), self.clock() - self.t0)

    def fail(self, status: str, error: str) -> None:
        """The first fault wins; later ones (a disconnect after a bad event) do not overwrite it."""
        if self.status == "ok" and not self.done:
            self.status, self.error = status, error

    def _events(self, events, t: float) -> None:
        if self.done or self.status != "ok":
            return  # after [DONE] or a fault nothing more counts
        for ev in events:
            c = self.classify(ev)
            kind = c.kind
            if kind == "content":
                self.times.append(t)
                self.texts.append(c.text)
                self.thinking.append(c.reasoning)
                if c.completion_tokens is not None:
                    self.toks.append(max(1, c.completion_tokens - self.last_ct))
                    self.last_ct = c.completion_tokens
                else:
                    self.toks.append(0)  # unknown: settled when the stream ends
            elif kind == "done":
                self._end(c, t)
                return
            elif kind == "error" or kind == "bad":
                self.status, self.error = "bad_stream", c.error
                return
            self._usage(c)

    def set_replica(self, value: str | bytes | None) -> None:
        """The replica the reply's --replica-header named (every client reads it into here)."""
        if value is not None:
            self.replica = (value.decode("latin-1") if isinstance(value, bytes) else value)[:200]

    def _usage(self, c) -> None:
        if c.completion_tokens is not None:
            self.usage_ct = c.completion_tokens
        if c.prompt_tokens is not None:
            self.prompt_srv = c.prompt_tokens
        if c.reasoning_tokens is not None:
            self.usage_rt = c.reasoning_tokens
        if c.cached_tokens is not None:
            self.cached = c.cached_tokens

    def _end(self, c, t: float) -> None:
        """The end of the stream ([DONE], or an API's terminal event, which may carry the usage)."""
        self.done, self.done_at = True, t
        self._usage(c)

    def answer_text(self) -> str:
        """The reply as a user reads it (reasoning left out): what a multi-turn session resends."""
        return "".join(t for t, th in zip(self.texts, self.thinking) if not th)

    def _counts(self, tok) -> tuple[array, int, str]:
        """Per-chunk tokens (the server's usage deltas; else the tokenizer per chunk; else one each),
        the output total and its source."""
        n = len(self.times)
        toks = self.toks
        if n and min(toks) == 0:  # no per-chunk usage
            if self.usage_ct == n or tok is None:
                # n chunks and n tokens: one each, as every content chunk carries one at least. The common
                # case (usage at the end of one-token chunks) skips the tokenizer, which a wave of 512
                # streams ending together otherwise ran 512 times on the event loop
                toks = array("i", [1] * n)
            else:
                toks = array("i", [max(1, k) for k in tok.count_batch(self.texts)])
        if self.usage_ct is not None:
            return toks, int(self.usage_ct), "usage"
        if tok is not None and self.texts:
            return toks, tok.count("".join(self.texts)), "tokenizer"
        return toks, n, "chunks"

    def _reasoning(self, tok, toks: array) -> tuple[float | None, int]:
        """Time of the first answer chunk (None when there was none) and the reasoning tokens: the
        server's usage details when given, else the reasoning chunks' tokens."""
        answer = [i for i, th in enumerate(self.thinking) if not th]
        first = self.times[answer[0]] if answer else None
        if self.usage_rt is not None:
            return first, int(self.usage_rt)
        return first, sum(k for k, th in zip(toks, self.thinking) if th)

    def _tally(self, tok, local_count: bool) -> tuple:
        """Token counts: the server's usage when sent, else the tokenizer over the streamed text, else one
        per content chunk (and the source says which); the first answer chunk and the reasoning tokens.
        local_count: also count the streamed text with the tokenizer when the server sent usage (the
        tokenizer-mismatch check samples requests)."""
        toks, out, source = self._counts(tok)
        first_answer, reasoning = self._reasoning(tok, toks) if self.times else (None, 0)
        local = tok.count("".join(self.texts)) if local_count and tok is not None and source == "usage" else None
        return toks, out, source, first_answer, reasoning, local

    def _mismatch(self, spec: RequestSpec, status: str, error: str | None) -> tuple[str, str | None]:
        """Output the server counted but no event carried: the parser does not know this stream (a
        tool call may stream nothing: a server's parser holds a call cut short by max_tokens). Only for
        the named-event APIs (Responses, Messages): OpenAI chunks whose tokens decode to no text (a
        random-weight model's byte pieces) are the server's answer, not a parser pointed wrong."""
        if (
            status == "ok"
            and self.done
            and not self.times
            and self.usage_ct != 0  # a reply the server itself counts as empty is one
            and not spec.tools
            and self.classify is not classify
        ):
            said = (
                f"the server counted {self.usage_ct} output tokens but"
                if self.usage_ct is not None
                else "the stream ended with no usage and"  # text under an event name no API defines
            )
            return "bad_stream", f"{said} no output event arrived: is --endpoint-type right for this endpoint?"
        return status, error

    def heavy(self) -> bool:
        """The streamed text is long enough that tokenising it would stall an event loop (clients then
        build the record in a thread)."""
        return sum(map(len, self.texts)) > TOKENIZE_INLINE_CHARS

    def record(
        self,
        spec: RequestSpec,
        scheduled_at: float,
        sent_at: float,
        finished_at: float,
        status: str,
        http_status: int | None,
        error: str | None,
        tok=None,
        origin: str = "",
        retries: int = 0,
        local_count: bool = False,
    ) -> RequestRecord:
        """The record (token counts: _tally). finished_at: when the body ended, unless [DONE] came first.
        Never raises: whatever fails while counting is kept in the record instead (_unrecordable)."""
        finished_at = finished_at if self.done_at is None else min(finished_at, self.done_at)
        if sent_at is not None and self.times and self.times[0] < sent_at:
            # a kernel stamp converted with its realtime offset's error (microseconds) can read a reply as
            # earlier than its request: no reply comes before its request, so it came at the send at once
            self.times = array("d", [max(t, sent_at) for t in self.times])
        if self.times:
            finished_at = max(finished_at, self.times[-1])
        status, error = self._mismatch(spec, status, error)
        # a tool call's text is what the server's parser rewrote, not the tokens generated: not compared
        local_count = local_count and not spec.tools
        try:
            toks, out, source, first_answer, reasoning, local = self._tally(tok, local_count)
        except Exception as e:  # noqa: BLE001 - the record is written whatever went wrong
            return self._unrecordable(
                e, spec, scheduled_at, sent_at, finished_at, status, http_status, error, origin, retries
            )
        return RequestRecord(
            id=spec.id,
            cls=spec.cls,
            scheduled_at=scheduled_at,
            sent_at=sent_at,
            first_token_at=self.times[0] if self.times else None,
            finished_at=finished_at,
            chunk_times=tuple(self.times),
            chunk_tokens=tuple(toks),
            output_tokens=out,
            output_tokens_source=source,
            prompt_tokens=spec.prompt_tokens,
            prompt_tokens_server=self.prompt_srv,
            status=status,
            http_status=http_status,
            error=error,
            warmup=spec.warmup,
            origin=origin,
            retries=retries,
            first_answer_at=first_answer,
            reasoning_tokens=reasoning,
            output_tokens_local=local,
            cached_tokens=self.cached,
            replica=self.replica,
            **spec_fields(spec),
        )

    def _unrecordable(self, e, spec, scheduled_at, sent_at, finished_at, status, http_status, error, origin, retries):
        """The record when counting failed: one token per chunk, no usage, and (when the request was ok)
        status bad_stream with what failed."""
        if status == "ok":
            status, error = "bad_stream", f"client error while recording: {type(e).__name__}: {str(e)[:200]}"
        self.toks = array("i", [1] * len(self.times))
        self.usage_ct = self.usage_rt = self.prompt_srv = None
        return self.record(spec, scheduled_at, sent_at, finished_at, status, http_status, error, None, origin, retries)


def spec_fields(spec: RequestSpec) -> dict:
    """What a record copies from its request: its priority lane, session turn and agent-job node."""
    return {
        "priority": spec.priority,
        "session": spec.session,
        "turn": spec.turn,
        "session_turns": spec.session_turns,
        "adapter": spec.adapter,
        **media_fields(spec),
        **job_fields(spec),
    }


def unsent_record(spec: RequestSpec, scheduled_at: float, at: float, why: str) -> RequestRecord:
    """The record of a request the run decided not to send (an agent call due after --duration): kept,
    so that its job reads as not completed rather than as a shorter graph that finished."""
    return StreamState(None, 0.0).record(spec, scheduled_at, None, at, "cancelled", None, why)


class Finished:
    """A finished stream whose record is built later: its status and send time now (the dispatcher's
    counters), the record when the loop is idle (runner/dispatch.py flushes in batches), so that a wave
    of streams ending together does not hold the loop while other streams' chunks wait."""

    __slots__ = ("st", "args", "kw", "_rec")

    def __init__(self, st: StreamState, *args, **kw):
        self.st, self.args, self.kw, self._rec = st, args, kw, None

    @property
    def status(self) -> str:
        return self.args[4]

    @property
    def sent_at(self) -> float | None:
        return self.args[2]

    def record(self) -> RequestRecord:
        if self._rec is None:
            self._rec = self.st.record(*self.args, **self.kw)
            self.st = None
        return self._rec


def local_count_due(n: int) -> bool:
    """Whether the n-th finished request (0-based) also gets a local token count beside the server's
    usage: the first 100, then every 20th (the tokenizer-mismatch check, at bounded cost)."""
    return n < 100 or n % 20 == 0


_JOBS: queue.SimpleQueue = queue.SimpleQueue()  # (state, record args, abandoned, deliver), for _builder
_BUILDER: list[threading.Thread] = []  # the one builder thread, started on first use


def _builder() -> None:
    """Build heavy records one at a time (the tokenizer's batch encoder already uses every core), and
    skip those whose request was cancelled while it waited: after Ctrl-C's grace no pile of abandoned
    counts competes with the summary for the cores."""
    while True:
        st, args, abandoned, deliver = _JOBS.get()
        if not abandoned.is_set():
            deliver(st.record(*args))


def _submit(job: tuple) -> None:
    if not _BUILDER or not _BUILDER[0].is_alive():  # first use, or a process forked since (--workers)
        _BUILDER[:] = [threading.Thread(target=_builder, name="goodbench-records", daemon=True)]
        _BUILDER[0].start()
    _JOBS.put(job)


async def record_off_loop(st: StreamState, args: tuple) -> RequestRecord:
    """The record of a stream too long to tokenise on the event loop (heavy()), built by a daemon thread.
    Cancelled while it waits (Ctrl-C's grace ran out), the record is still returned at once, counted
    without the tokenizer (the server's usage, else one token per chunk, and its source says which);
    the abandoned count holds neither the loop nor the process's exit. Awaited through
    asyncio.to_thread, the cancel lost the record and the executor's threads kept the process alive."""
    loop = asyncio.get_running_loop()
    done, abandoned = loop.create_future(), threading.Event()

    def settle(rec: RequestRecord) -> None:
        if not done.done():
            done.set_result(rec)

    def deliver(rec: RequestRecord) -> None:
        try:
            loop.call_soon_threadsafe(settle, rec)
        except RuntimeError:  # the loop has closed: the fallback record was kept instead
            pass

    _submit((st, args, abandoned, deliver))
    try:
        return await done
    except asyncio.CancelledError:
        abandoned.set()
        return st.record(*args[:7], None, *args[8:])
