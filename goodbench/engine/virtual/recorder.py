"""What a simulated run hands back: one RequestRecord per request that was sent, exactly as a perfect
client would have measured it (sent at its arrival, each token at the end of the step that produced
it), and the prefix-cache keys of each prompt."""

from __future__ import annotations

import math
from array import array

from ...records import RequestRecord, RequestSpec, job_fields, media_fields
from ...workloads.segments import block_hashes as segment_block_hashes

CHARS_PER_TOKEN = 4  # text-approximate block boundaries for prefix caching (see text_block_hashes)
NOT_FIT = "request needs more KV cache than the engine has"


def text_block_hashes(prompt, prompt_tokens: int, block_size: int) -> tuple:
    """Prefix-cache keys without tokenizing: block j covers a fixed window of characters, so prompts
    sharing a text prefix share their leading keys (hits are right to about one block; the server
    uses exact token-id hashes)."""
    text = prompt if isinstance(prompt, str) else "\n".join(_text(m.get("content", "")) for m in prompt)
    w = block_size * CHARS_PER_TOKEN
    out, h = [], 0
    for j in range(prompt_tokens // block_size):
        h = hash((h, text[j * w : (j + 1) * w], j))
        out.append(h)
    return tuple(out)


def _text(content) -> str:
    """A message's text: its content, or its text parts' (its images are keyed apart: engine/kvcache.image_keyed)."""
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content)


def prompt_hashes(r: RequestSpec, block_size: int) -> tuple:
    """Prefix-cache keys of a request's prompt: exact block hashes from its segments when the workload
    knows its structure, else the text windows."""
    if r.segments:
        return segment_block_hashes(r.segments, block_size)
    return text_block_hashes(r.prompt, r.prompt_tokens, block_size)


def chunks(t: tuple, multi: bool) -> dict:
    """A request's chunk times and tokens per chunk from its token times (equal times: one chunk, as a
    server streams a step's tokens for one request)."""
    if not multi:
        return {"chunk_times": t, "chunk_tokens": (1,) * len(t)}
    times, toks = [], []
    for x in t:
        if times and x == times[-1]:
            toks[-1] += 1
        else:
            times.append(x)
            toks.append(1)
    return {"chunk_times": tuple(times), "chunk_tokens": tuple(toks)}


def with_request(s, r: RequestSpec):
    """An engine sequence with what its request asks beyond its text: its LoRA adapter and its images,
    and its workload class (how well a drafter guesses its text)."""
    s.lora = r.adapter
    s.klass = r.cls
    s.images = r.media["sizes"] if r.media else ()
    s.image_ids = r.media.get("ids", ()) if r.media else ()
    return s


class Tally:
    """Per request: when it was sent (NaN: never), its token times, its engine sequence, or why the
    engine refused it."""

    def __init__(self, n: int, cache_said: bool = False):
        self.sent = [math.nan] * n
        self.times: list[array] = [array("d") for _ in range(n)]
        self.seqs: list = [None] * n
        self.bad: dict[int, str] = {}
        self.routed: dict[int, tuple[str, object]] = {}  # a cluster's: (instance, the sequence it admitted)
        self.cache_said = cache_said  # records say cached tokens (prefix caching on), as the server's usage
        self.multi = False  # some step emitted several tokens to one request (speculative decoding)

    def emit(self, res, now: float) -> None:
        """A step's tokens, at its end: one time per token (a chunk of m tokens is m equal times)."""
        times = self.times
        if res.counts is None:
            for s in res.emitted:
                times[s.id].append(now)
            return
        self.multi = True
        for s, m in res.outputs():
            times[s.id].extend([now] * m)

    def _fleet(self, k: int, seq) -> dict:
        """The record's replica and cached tokens: the instance the router chose, and what the prefix
        cache held when that instance first admitted it (the prefill instance's, disaggregated)."""
        replica, first = self.routed.get(k, (None, seq))
        n = getattr(first, "num_cached", -1)
        return {"replica": replica, "cached_tokens": n if self.cache_said and n >= 0 else None}

    def records(self, requests: list[RequestSpec]) -> list[RequestRecord]:
        """One record per request that was sent: refused ones as HTTP 400, unfinished ones as cancelled."""
        out = []
        for k, r in enumerate(requests):
            off = self.sent[k]
            if math.isnan(off):
                continue  # never sent (closed loop ran out of time)
            common = {
                "prompt_tokens": r.prompt_tokens,
                "warmup": r.warmup,
                "session": r.session,
                "turn": r.turn,
                "session_turns": r.session_turns,
                "adapter": r.adapter,
                **media_fields(r),
                **job_fields(r),
            }
            if k in self.bad:
                out.append(
                    RequestRecord(
                        r.id,
                        r.cls,
                        off,
                        off,
                        None,
                        off,
                        status="http_error",
                        http_status=400,
                        error=self.bad[k],
                        **common,
                    )
                )
                continue
            t = tuple(self.times[k])
            seq = self.seqs[k]
            done = seq is not None and seq.status == "finished"
            think = min(r.reasoning_tokens, max(len(t) - 1, 0))  # as the engine server: the last token answers
            out.append(
                RequestRecord(
                    id=r.id,
                    cls=r.cls,
                    scheduled_at=off,
                    sent_at=off,
                    first_token_at=t[0] if t else None,
                    finished_at=t[-1] if t else off,
                    **chunks(t, self.multi),
                    output_tokens=len(t),
                    output_tokens_source="usage",
                    prompt_tokens_server=r.prompt_tokens if seq is None else seq.prompt_len,  # images' tokens too
                    status="ok" if done else "cancelled",
                    error=None if done else "simulation stopped before completion",
                    first_answer_at=t[think] if len(t) > think else None,
                    reasoning_tokens=think,
                    priority=r.priority,
                    **common,
                    **self._fleet(k, seq),
                )
            )
        return out
