"""What building one finished stream's record costs the client's event loop (issue 42, item 2): a
128-chunk completion stream with usage only at the end, as most servers send it. Side by side in one
run: the server's count equal to the chunks (each chunk one token: no tokenizer), and one token more
(per-chunk counts from the tokenizer, the path every record took before).

    python benchmarks/record_build.py [--records 500] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from goodbench import tokenizer
from goodbench.client.stream import StreamState
from goodbench.records import RequestSpec


def stream(chunks: int, usage: int) -> bytes:
    one = b"data: " + json.dumps({"choices": [{"index": 0, "text": " word"}]}).encode() + b"\n\n"
    end = {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": usage}}
    return one * chunks + b"data: " + json.dumps(end).encode() + b"\n\ndata: [DONE]\n\n"


def per_record_us(tok, data: bytes, n: int) -> float:
    states = []
    for _ in range(n):
        st = StreamState(time.monotonic, 0.0)
        st.on_data(data)
        states.append(st)
    spec = RequestSpec("r", "c", "p", 5, 128)
    t = time.perf_counter()
    for st in states:
        st.record(spec, 0.0, 0.0, 1.0, st.status, 200, st.error, tok)
    return (time.perf_counter() - t) / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=500, help="records built per round (default 500)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds, alternating the two cases (default 3)")
    a = ap.parse_args()
    tok = tokenizer.load(None).ready()
    cases = {
        "usage = chunks (no tokenizer)": stream(128, 128),
        "usage = chunks + 1 (tokenizer per chunk)": stream(128, 129),
    }
    got: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(a.rounds):
        for k, data in cases.items():
            got[k].append(per_record_us(tok, data, a.records))
    for k, v in got.items():
        print(f"{k}: median {statistics.median(v):.0f} us per record, rounds {', '.join(f'{x:.0f}' for x in v)}")


if __name__ == "__main__":
    main()
