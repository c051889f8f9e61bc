"""Which replica served each request when no response header says (`goodbench run --worker-metrics`): each
worker's /metrics, sampled a few times a second during the run (worker_metrics.jsonl), counts the requests it
finished (vllm:request_success_total) and the prompt and output tokens of those requests (the sums of its
vllm:request_prompt_tokens and vllm:request_generation_tokens histograms, observed when a request finishes).
A request finishes on the server moments before its last byte reaches the client, so each worker's interval
between two samples is filled with as many of the requests the client saw end then as the worker counted,
whose server-reported prompt and output tokens add up to the worker's sums. Pure numpy.

Each request's attribution says how sure it is: `exact` (the only choice that fits the counters found),
`ambiguous` (another choice fits them as well: same-sized requests finishing together), `timing` (the
counts fit but no token sums could be checked, or none fitted exactly), or none."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..prometheus import total

DONE = "vllm:request_success_total"
PROMPT = "vllm:request_prompt_tokens_sum"
OUTPUT = "vllm:request_generation_tokens_sum"
KEEP = (DONE, PROMPT, OUTPUT)  # what worker_metrics.jsonl keeps of each sample
HOW = ("exact", "ambiguous", "timing")  # codes 0, 1, 2; -1: unattributed
TIGHT_S = 0.03  # tried first: a request's end seen by the client within 30 ms of its worker's interval
WIDE_S = 0.5  # last: a client loaded past its own lag (a saturated fleet on the same host) sees ends late
SLACK_S = 0.1  # how far a request's client-side end may lie outside its worker's interval (scrape timing, delivery)
NODES = 20_000  # search budget per interval: beyond it the interval is filled by timing alone


@dataclass(frozen=True)
class Counters:
    """One worker's cumulative counters at its samples (run-clock seconds: the middle of each read); prompt/output
    None when its /metrics has no such histogram. half: each read's half-width (None: instant): the counters are
    the worker's state at some moment of the read, and a busy server answers /metrics late."""

    t: np.ndarray
    done: np.ndarray
    prompt: np.ndarray | None
    output: np.ndarray | None
    half: np.ndarray | None = None


def worker_counters(rows: list[dict], n: int) -> list[Counters]:
    """worker_metrics.jsonl's rows ({"t", "dt": the read's half-width, "source", "metrics"}) -> each worker's
    counters, in time order."""
    out = []
    for w in range(n):
        mine = sorted((r for r in rows if r.get("source") == w), key=lambda r: r["t"])
        mine = [r for r in mine if total(r["metrics"], DONE) is not None]
        t = np.array([r["t"] for r in mine], float)
        cols = {}
        for key, name in (("done", DONE), ("prompt", PROMPT), ("output", OUTPUT)):
            vals = [total(r["metrics"], name) for r in mine]
            cols[key] = None if any(v is None for v in vals) else np.rint(np.array(vals, float)).astype(np.int64)
        half = np.array([r.get("dt", 0.0) for r in mine], float)
        out.append(Counters(t, cols["done"], cols["prompt"], cols["output"], half))
    return out


@dataclass
class Attribution:
    replica: np.ndarray  # per request: the worker's index, -1 unattributed
    how: np.ndarray  # per request: an index into HOW, -1 unattributed
    unmatched: int  # requests the workers counted that no request of this run filled

    def stats(self, eligible: np.ndarray) -> dict:
        got = {h: int((self.how == k).sum()) for k, h in enumerate(HOW)}
        return got | {"unattributed": int((eligible & (self.replica < 0)).sum()), "server_only": self.unmatched}


def _intervals(workers: list[Counters]) -> list[tuple]:
    """Every (end, worker, start, requests, prompt sum, output sum) interval in which a worker finished requests,
    in time order: from the start of the read before to the end of the read that saw them."""
    out = []
    for w, c in enumerate(workers):
        half = np.zeros(c.t.size) if c.half is None else c.half
        for k in range(1, c.t.size):
            dn = int(c.done[k] - c.done[k - 1])
            if dn > 0:
                dp = None if c.prompt is None else int(c.prompt[k] - c.prompt[k - 1])
                dg = None if c.output is None else int(c.output[k] - c.output[k - 1])
                out.append((float(c.t[k] + half[k]), w, float(c.t[k - 1] - half[k - 1]), dn, dp, dg))
    out.sort(key=lambda x: (x[0], x[1]))
    return out


def _fits(cands: np.ndarray, p: np.ndarray, g: np.ndarray, need: int, dp, dg, avoid=None) -> list[int] | None:
    """need of cands (earliest first) whose prompt and output tokens sum to dp and dg (None: unchecked); with
    avoid, a choice other than that one. None when none is found within NODES steps."""
    pv = [int(x) for x in p[cands]] if dp is not None else [0] * cands.size
    gv = [int(x) for x in g[cands]] if dg is not None else [0] * cands.size
    left = [dp or 0, dg or 0]
    chosen: list[int] = []
    steps = [0]

    def go(i: int, need: int, rp: int, rg: int) -> bool:
        steps[0] += 1
        if need == 0:
            return rp == 0 and rg == 0 and (avoid is None or set(chosen) != avoid)
        if cands.size - i < need or rp < 0 or rg < 0 or steps[0] > NODES:
            return False
        for j in range(i, cands.size - need + 1):
            chosen.append(int(cands[j]))
            if go(j + 1, need - 1, rp - pv[j], rg - gv[j]):
                return True
            chosen.pop()
            if steps[0] > NODES:
                return False
        return False

    return list(chosen) if go(0, need, left[0], left[1]) else None


def attribute(
    fin: np.ndarray,
    prompt: np.ndarray,
    output: np.ndarray,
    eligible: np.ndarray,
    workers: list[Counters],
    slack_s: float = SLACK_S,
) -> Attribution:
    """Each eligible request (completed, its end on the run clock in fin) given to the worker whose counters
    moved for it. prompt/output: the server's own counts per request (< 0 unknown: that interval's sums go
    unchecked)."""
    n = fin.size
    replica = np.full(n, -1, np.int64)
    how = np.full(n, -1, np.int64)
    free = eligible.copy()
    doubt = np.zeros(n, bool)  # requests an unsure choice could have taken: later choices near them are unsure
    unmatched = 0
    for hi, w, lo, dn, dp0, dg0 in _intervals(workers):
        for slack in (TIGHT_S, slack_s, WIDE_S):  # the nearest requests first: fewer of them, fewer equal-sum choices
            window = eligible & (fin >= lo - slack) & (fin <= hi + slack)
            cands = np.flatnonzero(free & window)
            cands = cands[np.argsort(fin[cands], kind="stable")]
            dp = None if dp0 is None or (prompt[cands] < 0).any() else dp0
            dg = None if dg0 is None or (output[cands] < 0).any() else dg0
            checked = (dp, dg) != (None, None) and cands.size >= dn
            pick = _fits(cands, prompt, output, dn, dp, dg) if checked else None
            if pick is not None:
                break
        if pick is None:
            pick, kind = [int(x) for x in cands[:dn]], 2
            doubt[cands] = True  # a guess by timing may have taken another worker's requests
            unmatched += dn - len(pick)
        else:
            other = _fits(cands, prompt, output, dn, dp, dg, avoid=set(pick)) if cands.size > dn else None
            if other is not None:
                doubt[cands] = True
            kind = 1 if doubt[window].any() else 0
        replica[pick], how[pick], free[pick] = w, kind, False
    return Attribution(replica, how, unmatched)
