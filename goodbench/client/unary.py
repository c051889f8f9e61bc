"""A response that is one JSON body (embeddings, rerank, score) as a record: its one "chunk" is the
whole body, stamped when its last byte arrived, so TTFT = E2E = the request's latency and an `e2el`
SLO judges it like any other request; `items` counts the inputs (documents) the request carried and
output tokens are 0 (these APIs produce none). Pure: the clients feed it as they feed a stream."""

from __future__ import annotations

import dataclasses
import json

from ..records import RequestRecord
from .events import CLASSIFIERS, NamedEventParser, unary_result
from .sse import classify
from .stream import StreamState

BODY_LIMIT = 256 * 1024 * 1024  # one response; a bigger body is refused rather than held in memory


class UnaryState(StreamState):
    """Collects the body (timestamps of its reads), parses it at the end."""

    __slots__ = ("api", "parts", "size", "items", "last_t")

    unary = True

    def __init__(self, clock, t0: float, api: str):
        super().__init__(clock, t0)
        self.api, self.parts, self.size, self.items, self.last_t = api, [], 0, None, None

    def on_data(self, data: bytes) -> None:
        self.feed(data, self.clock() - self.t0)

    def feed(self, data: bytes, t: float) -> None:
        self.size += len(data)
        if self.size > BODY_LIMIT:
            self.fail("bad_stream", f"{self.api} response larger than {BODY_LIMIT >> 20} MiB")
            self.parts = []
            return
        self.parts.append(data)
        self.last_t = t

    def on_eof(self) -> None:
        if self.done or self.status != "ok":
            return
        raw = b"".join(self.parts)
        self.parts = []
        try:
            items, prompt = unary_result(self.api, json.loads(raw))
        except ValueError as e:
            self.fail("bad_stream", f"{str(e)[:300]}")
            return
        t = self.last_t if self.last_t is not None else self.clock() - self.t0
        self.items, self.prompt_srv, self.done = items, prompt, True
        self.times.append(t)
        self.toks.append(0)
        self.texts.append("")
        self.thinking.append(0)
        self.usage_ct = 0

    def record(self, spec, *args, **kw) -> RequestRecord:
        rec = super().record(spec, *args, **kw)
        return dataclasses.replace(rec, items=self.items, output_tokens_source="usage")


def new_state(cfg, clock, t0: float) -> StreamState:
    """The state one response is parsed into, by the API the endpoint speaks."""
    if cfg.unary:
        return UnaryState(clock, t0, cfg.api)
    if cfg.api in CLASSIFIERS:
        st = StreamState(clock, t0, CLASSIFIERS[cfg.api])
        st.parser = NamedEventParser()
        return st
    return StreamState(clock, t0, classify)
