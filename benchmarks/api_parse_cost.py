"""Client CPU per chunk of each API's stream (issue 24): how much more a Responses or Messages stream
costs goodbench's parser than an OpenAI chat stream, for the same tokens.

The bytes are what the reference engine sends (engine/serve/apistreams.py and openai_api.py render
them; the same event shapes vLLM 0.32 emits), one event per socket read, fed to the client's
StreamState (SSE framing, the API's classifier, per-chunk bookkeeping) and turned into a record, the
whole per-request path of the lean client after the socket. Best of `--repeat` timings per API, the
APIs interleaved within each repeat.

    python benchmarks/api_parse_cost.py --repeat 5
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from goodbench.client.config import ClientConfig  # noqa: E402
from goodbench.client.unary import new_state  # noqa: E402
from goodbench.engine.serve.apistreams import MessagesFormatter, ResponsesFormatter  # noqa: E402
from goodbench.engine.serve.openai_api import Formatter  # noqa: E402
from goodbench.records import RequestSpec  # noqa: E402

WORDS = [json.dumps(" " + w).encode() for w in ("alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa")]
PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}


def stream(api: str, tokens: int, seed: int) -> list[bytes]:
    """One response's socket reads: the opening (empty but for Responses), then one read per token (events as
    the engine sends them: chat's role chunk and message_start with the first)."""
    if api == "chat":
        f = Formatter("chatcmpl-1", 0, "m", True, 100, include_usage=True, continuous=False, words=WORDS, seed=seed)
    else:
        cls = ResponsesFormatter if api == "responses" else MessagesFormatter
        f = cls(seed, 0, "m", 100, WORDS, seed)
    return [f.opening()] + [f.token(n, n == tokens) for n in range(1, tokens + 1)]


def run(api: str, reads: list[list[bytes]]) -> float:
    cfg = ClientConfig("http://x", endpoint=PATHS[api])
    spec = RequestSpec("r", "c", "p", 1, len(reads[0]) - 1)
    t0 = time.perf_counter()
    for resp in reads:
        st = new_state(cfg, time.monotonic, 0.0)
        t = 0.0
        for data in resp:
            t += 0.001
            st.feed(data, t)
        st.on_eof()
        rec = st.record(spec, 0.0, 0.0, t, st.status, 200, st.error)
        assert rec.status == "ok" and rec.output_tokens == len(resp) - 1, rec.error
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--tokens", type=int, default=128, help="tokens (content events) per response")
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    data = {api: [stream(api, a.tokens, i) for i in range(a.requests)] for api in PATHS}
    best: dict[str, list[float]] = {api: [] for api in PATHS}
    for _ in range(a.repeat):
        for api in PATHS:
            best[api].append(run(api, data[api]))
    chunks = a.requests * a.tokens
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; {a.requests} responses x {a.tokens} tokens, "
        f"one event per read; {a.repeat} repeats (best, median, worst us per chunk)"
    )
    chat = min(best["chat"]) / chunks * 1e6
    for api, ts in best.items():
        us = sorted(t / chunks * 1e6 for t in ts)
        nbytes = sum(len(b) for b in data[api][0]) / a.tokens
        print(
            f"  {api:10} {us[0]:6.2f} {us[len(us) // 2]:6.2f} {us[-1]:6.2f} us/chunk  "
            f"({us[0] / chat - 1:+.1%} vs chat, best to best; {nbytes:.0f} bytes per token on the wire)"
        )


if __name__ == "__main__":
    main()
