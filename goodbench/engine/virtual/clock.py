"""Following a simulation's clock: how every token time would move if the cost model's terms moved.

A step's time is affine in the cost model's fitted terms (CostModel.features), so during one replay
the derivative of each step's end by the terms can be accumulated (ClockFollower, run_instance's
on_step hook), and from it the derivative of every send and token time (derivatives). One replay then
gives a metric and its exact local Jacobian: the public calibration (calibration.py) and `goodbench
calibrate` (analysis/calibrate.py) both fit with it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Times:
    """Each finished request's send time, and all its chunk times flat (request i's are
    flat[start[i]:start[i + 1]]), and its output tokens (None: one per chunk)."""

    sent: np.ndarray
    flat: np.ndarray
    start: np.ndarray
    out: np.ndarray | None = None

    def shifted(self, dsent: np.ndarray, dflat: np.ndarray) -> Times:
        return Times(self.sent + dsent, self.flat + dflat, self.start, self.out)

    def per_token(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(which requests have a TPOT: two chunks or more; x's last chunk less its first over their output
        tokens after the first): a speculating engine's chunk carries several tokens, so TPOT counts tokens."""
        n = np.diff(self.start)
        out = n if self.out is None else self.out
        many = (n > 1) & (out > 1)
        last, first = self.start[1:] - 1, self.start[:-1]
        d = (x[last] - x[first])[many]
        return many, d / (out[many] - 1).reshape((-1,) + (1,) * (d.ndim - 1))

    @property
    def ttft(self) -> np.ndarray:
        return self.flat[self.start[:-1]] - self.sent


def times_of(recs: list) -> Times:
    """The times of the requests that produced a token."""
    ok = [r for r in recs if r.first_token_at is not None]
    start = np.zeros(len(ok) + 1, dtype=np.int64)
    start[1:] = np.cumsum([len(r.chunk_times) for r in ok])
    flat = np.fromiter((x for r in ok for x in r.chunk_times), float, int(start[-1]))
    out = np.array([r.output_tokens for r in ok], dtype=float)
    return Times(np.array([r.sent_at for r in ok]), flat, start, out)


class ClockFollower:
    """on_step hook: each step's features and the derivative of its end time by the constants,
    accumulated over a busy period (a step that starts after idle time starts from an arrival)."""

    def __init__(self, cost):
        self.cost = cost
        # steps scattered by a profile's spread (engine/jitter.py); tests' stub cost models have none
        self.scattered = bool(getattr(cost, "step_jitter", ()))
        self.starts: list[float] = []
        self.ends: list[float] = []
        self.after: list[np.ndarray] = []  # accumulated derivative at each step's end
        self.phi: list[np.ndarray] = []

    def __call__(self, batch, start: float, end: float) -> None:
        phi = self.cost.features(batch)
        if self.scattered:  # a scattered step: its model time times its draw, which the terms leave be
            phi = phi * ((end - start) / self.cost.batch_time(batch))
        base = self.after[-1] if self.ends and self.ends[-1] == start else 0.0
        self.starts.append(start)
        self.ends.append(end)
        self.phi.append(phi)
        self.after.append(base + phi)

    def arrays(self) -> tuple:
        return np.array(self.starts), np.array(self.ends), np.array(self.after), np.array(self.phi)


def _step_at(starts: np.ndarray, ends: np.ndarray, arrive: np.ndarray) -> tuple:
    """Per arrival: the step it lands in or before, whether it lands inside that step, and the fraction
    of the step still to run then (0 outside)."""
    i = np.minimum(np.searchsorted(ends, arrive, side="right"), len(ends) - 1)
    inside = (starts[i] <= arrive) & (arrive < ends[i])
    return i, inside, np.where(inside, (ends[i] - arrive) / (ends[i] - starts[i]), 0.0)


def step_wait(follow: ClockFollower, arrive: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per arrival: how long it waits for the step in progress to end (0 when the engine is idle), and
    that wait's derivative by the cost model's terms (one row each). vLLM's engine core takes new
    requests in between steps, so its queue time starts after this wait: a server's queue + prefill
    histograms leave it to the front end."""
    starts, ends, _, phi = follow.arrays()
    i, inside, frac = _step_at(starts, ends, arrive)
    inside &= starts[i] < arrive  # a step that starts at the arrival (an idle engine's) takes it in
    return np.where(inside, ends[i] - arrive, 0.0), np.where(inside[:, None], phi[i] * frac[:, None], 0.0)


def derivatives(follow: ClockFollower, t: Times, closed: bool, front: tuple) -> tuple[np.ndarray, np.ndarray]:
    """d(send time) and d(token times) by the cost model's terms, the front end's last. A request lives
    through the steps from its arrival at the engine on: its latency moves by what those steps add (a
    shift of earlier steps moves where it lands in the step sequence, not its latency), and by its front
    end. front: (each request's arrival at the engine, d(arrival - send) by the front end's terms, one
    row per request; a constant front end is one column of ones, of zeros where it is not paid). Open
    loops send at fixed times; in a closed loop a user sends when its previous request finished."""
    starts, ends, after, phi = follow.arrays()
    arrive, dfront = front
    i, inside, frac = _step_at(starts, ends, arrive)
    at_arrival = np.where(inside[:, None], after[i] - phi[i] * frac[:, None], 0.0)
    at_arrival[~inside & (starts[i] == arrive)] = (after[i] - phi[i])[~inside & (starts[i] == arrive)]
    owner = np.repeat(np.arange(len(t.sent)), np.diff(t.start))
    tok = after[np.searchsorted(ends, t.flat)]
    rel = np.hstack([tok - at_arrival[owner], dfront[owner]])
    dsent = np.zeros((len(t.sent), rel.shape[1]))
    if closed:
        last = t.start[1:] - 1
        finish = {x: j for j, x in enumerate(t.flat[last])}
        for k in np.argsort(t.sent, kind="stable"):
            j = finish.get(t.sent[k])
            if j is not None:
                dsent[k] = dsent[j] + rel[last[j]]
    return dsent, dsent[owner] + rel
