"""The server's front end: what lies between a request's send and its arrival at the engine (HTTP,
chat template, tokenizing, the hand-off to the engine process).

A tier's cost model knows it only as a constant. A calibration profile (`goodbench calibrate`) can say
more: a real server whose front end shares a CPU with its engine (vLLM's API server beside its engine
core) slows as the load grows, by about 9.5 ms per request in flight and 0.11 ms per prompt token on
the CPU vLLM of docs/real-vllm.md, so a constant fitted at one load is wrong at another.

A vision-language model's images are preprocessed there too, in two stages as vLLM's API process runs them
while the engine core steps in its own: decoding (base64, JPEG) in a pool of threads, several requests at once,
then the HF processor (resize, normalise, patchify) for one request at a time, first come first served. A
request with images reaches the engine only when both are done. `media(sizes)` is that work's seconds by stage;
the arrivals (virtual/arrivals.py) and `goodbench serve` queue it on MediaQueue."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

# The share of preprocessing's per-pixel cost that is decoding, run in vLLM's media thread pool (the rest, and
# the per-image term, in its one-at-a-time processor): 0.197 (0.193-0.199 over 5 repeats) measured on `vllm bench
# serve`'s synthetic 720p-1440p JPEGs with vLLM's torchvision Qwen2-VL processor (benchmarks/vlm_decode_share.py,
# the 2-vCPU development machine, 2026-12-08), carried over to the probe's host as a ratio.
DECODE_SHARE = 0.20
DECODE_THREADS = 8  # vLLM's VLLM_MEDIA_LOADING_THREAD_COUNT default


class MediaWork(NamedTuple):
    """A request's image preprocessing, seconds by stage: decode (a pool of threads) then process (one at a time)."""

    decode_s: float
    process_s: float

    @property
    def total(self) -> float:
        return self.decode_s + self.process_s


@dataclass(frozen=True)
class FrontEnd:
    """The server's front end between a request's send and its arrival at the engine: base_s, plus
    flight_s per request already in flight at the send and token_s per prompt token (0 but for
    calibration profiles: a real server's HTTP process slows as the load on its CPU grows)."""

    base_s: float = 0.0
    flight_s: float = 0.0
    token_s: float = 0.0
    image_s: float = 0.0  # a vision-language model's preprocessing per image and per pixel (engine/visionfit.py)
    pixel_s: float = 0.0

    @property
    def constant(self) -> bool:
        return not (self.flight_s or self.token_s)

    def delay(self, in_flight: int, prompt_tokens: int) -> float:
        return self.base_s + self.flight_s * in_flight + self.token_s * prompt_tokens

    def twice(self) -> FrontEnd:
        """The front end paid twice over (a router that has a worker render the prompt before routing it)."""
        return FrontEnd(2 * self.base_s, 2 * self.flight_s, 2 * self.token_s, self.image_s, self.pixel_s)

    @property
    def preprocesses(self) -> bool:
        return bool(self.image_s or self.pixel_s)

    def media(self, sizes) -> MediaWork:
        """Preprocessing of images of these (width, height) sizes, by stage (DECODE_SHARE of the per-pixel term is
        decoding; the per-image term is the processor's)."""
        pixels = sum(w * h for w, h in sizes)
        decode = DECODE_SHARE * self.pixel_s * pixels
        return MediaWork(decode, self.image_s * len(sizes) + self.pixel_s * pixels - decode)


class MediaQueue:
    """The front end's preprocessing (one API server per replica): each server's DECODE_THREADS decoding threads
    and its one processor, first come first served. `decoded(t, work)`: when a request arriving at t has its
    images decoded; `done(t, work)`: when, decoded at t, it leaves the processor. Call each in time order."""

    def __init__(self, processors: int = 1):
        self.free = [0.0] * max(1, processors)
        self.threads = [0.0] * (DECODE_THREADS * max(1, processors))

    @staticmethod
    def _take(slots: list, t: float, seconds: float) -> float:
        i = min(range(len(slots)), key=slots.__getitem__)
        slots[i] = max(t, slots[i]) + seconds
        return slots[i]

    def decoded(self, t: float, work: MediaWork) -> float:
        return self._take(self.threads, t, work.decode_s) if work.decode_s > 0 else t

    def done(self, t: float, work: MediaWork) -> float:
        return self._take(self.free, t, work.process_s)


def front_features(in_flight, prompt_tokens):
    """d(delay) by (base_s, flight_s, token_s): what calibrate's Jacobian takes (arrays or numbers)."""
    return 1.0, in_flight, prompt_tokens


def front_end(x) -> FrontEnd:
    """A FrontEnd from itself or a constant (seconds)."""
    return x if isinstance(x, FrontEnd) else FrontEnd(float(x))
