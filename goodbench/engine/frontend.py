"""The server's front end: what lies between a request's send and its arrival at the engine (HTTP,
chat template, tokenizing, the hand-off to the engine process).

A tier's cost model knows it only as a constant. A calibration profile (`goodbench calibrate`) can say
more: a real server whose front end shares a CPU with its engine (vLLM's API server beside its engine
core) slows as the load grows, by about 9.5 ms per request in flight and 0.11 ms per prompt token on
the CPU vLLM of docs/real-vllm.md, so a constant fitted at one load is wrong at another.

A vision-language model's images are preprocessed there too (decode, resize, normalise: the HF processor in
vLLM's API process, which runs it for one request at a time while the engine core steps in its own process):
a request with images waits for the requests ahead of it to be preprocessed, then for its own, and only then
reaches the engine. `media(sizes)` is that work's seconds; the arrivals (virtual/arrivals.py) and `goodbench
serve` queue it FIFO on one processor."""

from __future__ import annotations

from dataclasses import dataclass


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

    def media(self, sizes) -> float:
        """Seconds of preprocessing for images of these (width, height) sizes, on the one processor."""
        return sum(self.image_s + self.pixel_s * w * h for w, h in sizes)


class MediaQueue:
    """The front end's preprocessing processors (one per API server: a replica each), first come first served:
    when a request whose preprocessing takes p seconds, ready at t, is done (on the first processor free)."""

    def __init__(self, processors: int = 1):
        self.free = [0.0] * max(1, processors)

    def done(self, t: float, p: float) -> float:
        i = min(range(len(self.free)), key=self.free.__getitem__)
        self.free[i] = max(t, self.free[i]) + p
        return self.free[i]


def front_features(in_flight, prompt_tokens):
    """d(delay) by (base_s, flight_s, token_s): what calibrate's Jacobian takes (arrays or numbers)."""
    return 1.0, in_flight, prompt_tokens


def front_end(x) -> FrontEnd:
    """A FrontEnd from itself or a constant (seconds)."""
    return x if isinstance(x, FrontEnd) else FrontEnd(float(x))
