"""The drafter's host terms, fitted to one public source (the others stay held out: benchmarks/spec_decode.py).

A speculative step costs more than its GPU work: each draft pass is its own launch with its own input
preparation, and every step adds the rejection sampler and the drafter's bookkeeping. vLLM issue #20780
(Llama-3.1-8B-Instruct, MT-Bench, batch 1, EAGLE-3) measured TPOT and mean acceptance length at k = 2..7;
TPOT x acceptance length is the step time at each k, and vanilla TPOT the step without speculation. With
the engine's own step time for each (h100-sxm, llama-3.1-8b, one request at a 400-token context), the two
terms are the least-squares fit of
    measured(k) / measured(0) x engine(0) - engine(k) = k x draft_pass_s + spec_step_s.
Fitted once (`python -m goodbench.engine.specfit`); tests/test_speculative.py refits and checks the shipped
values. The batch sweeps the engine is checked against (the EAGLE-3 paper's Table 3, arXiv 2601.11580's
Fig. 1) were fixed as held out before this fit."""

from __future__ import annotations

import numpy as np

from .speculative import DRAFT_PASS_S, SPEC_STEP_S

# vLLM issue #20780: k -> (TPOT ms, mean acceptance length), EAGLE-3; k = 0 is vanilla (TPOT 7.07 ms)
ISSUE_20780 = {
    0: (7.07, 1.0),
    2: (4.32, 2.36),
    3: (4.09, 2.79),
    4: (4.05, 3.08),
    5: (4.13, 3.32),
    6: (4.2, 3.46),
    7: (4.29, 3.54),
}
CONTEXT = 400  # the request's context during the measured decode (MT-Bench prompt + half an answer)


def engine_step(k: int) -> float:
    """The engine's step for one decoding request with k EAGLE-3 drafts (the verification and the drafter's
    passes as the engine prices them), without the host terms fitted here."""
    from .config import EngineConfig
    from .core import Engine
    from .scheduler import Batch

    kw = {"speculative_method": "eagle3", "num_speculative_tokens": k, "speculative_acceptance": "0.5"} if k else {}
    eng = Engine(EngineConfig(**kw))
    b = Batch(decode_tokens=1, decode_ctx=CONTEXT + 1, spec_tokens=k, seqs=[None], tokens=[1 + k])
    if k:
        b.drafted = [(None, k)]
    t = eng.cost.batch_time(b)
    return t + (eng._speculate(b) - k * DRAFT_PASS_S - SPEC_STEP_S if k else 0.0)


def fit() -> tuple[float, float]:
    """(draft_pass_s, spec_step_s) fitted to ISSUE_20780."""
    m0 = ISSUE_20780[0][0] * ISSUE_20780[0][1]
    e0 = engine_step(0)
    ks = [k for k in ISSUE_20780 if k]
    y = np.array([ISSUE_20780[k][0] * ISSUE_20780[k][1] / m0 * e0 - engine_step(k) for k in ks])
    a = np.array([[k, 1.0] for k in ks])
    (x, c), *_ = np.linalg.lstsq(a, y, rcond=None)
    return float(x), float(c)


if __name__ == "__main__":
    x, c = fit()
    print(f"draft_pass_s = {x * 1e6:.1f} us, spec_step_s = {c * 1e6:.1f} us")
