"""One response stream's state, fed bytes as they arrive, and the RequestRecord it becomes. Pure (the
clock is passed in), shared by the aiohttp client and the locust integration."""

from __future__ import annotations

from array import array

from ..records import RequestRecord, RequestSpec
from .sse import SSEParser, classify


class StreamState:
    """Everything one response stream has told us so far; fed bytes as they arrive."""

    __slots__ = ("clock", "t0", "parser", "times", "toks", "texts", "usage_ct", "prompt_srv", "last_ct",
                 "status", "error", "done")

    def __init__(self, clock, t0: float):
        self.clock, self.t0 = clock, t0
        self.parser = SSEParser()
        self.times = array("d")
        self.toks = array("i")
        self.texts: list[str] = []
        self.usage_ct = self.prompt_srv = None
        self.last_ct = 0
        self.status, self.error, self.done = "ok", None, False

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
            c = classify(ev)
            kind = c.kind
            if kind == "content":
                self.times.append(t)
                self.texts.append(c.text)
                if c.completion_tokens is not None:
                    self.toks.append(max(1, c.completion_tokens - self.last_ct))
                    self.last_ct = c.completion_tokens
                else:
                    self.toks.append(0)  # unknown: settled when the stream ends
            elif kind == "done":
                self.done = True
                return
            elif kind == "error" or kind == "bad":
                self.status, self.error = "bad_stream", c.error
                return
            if c.completion_tokens is not None:
                self.usage_ct = c.completion_tokens
            if c.prompt_tokens is not None:
                self.prompt_srv = c.prompt_tokens

    def record(self, spec: RequestSpec, scheduled_at: float, sent_at: float, finished_at: float, status: str,
               http_status: int | None, error: str | None, tok=None, origin: str = "", retries: int = 0) -> RequestRecord:
        """Token counts: the server's usage when sent, else the tokenizer over the streamed text, else
        one per content chunk (and the source says which)."""
        times, toks = self.times, self.toks
        n = len(times)
        if n and min(toks) == 0:  # no per-chunk usage: one token per chunk
            toks = array("i", [1] * n)
        if self.usage_ct is not None:
            out, source = int(self.usage_ct), "usage"
        elif tok is not None and self.texts:
            out, source = tok.count("".join(self.texts)), "tokenizer"
        else:
            out, source = n, "chunks"
        return RequestRecord(
            id=spec.id, cls=spec.cls, scheduled_at=scheduled_at, sent_at=sent_at,
            first_token_at=times[0] if n else None, finished_at=finished_at, chunk_times=tuple(times),
            chunk_tokens=tuple(toks), output_tokens=out, output_tokens_source=source,
            prompt_tokens=spec.prompt_tokens, prompt_tokens_server=self.prompt_srv, status=status,
            http_status=http_status, error=error, warmup=spec.warmup, origin=origin, retries=retries)
