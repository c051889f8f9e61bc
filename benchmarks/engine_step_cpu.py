"""CPU time of `goodbench serve`'s step loop per step, without sockets or sleeping: 512 in-memory streams
x 256 tokens with zero-duration steps, so each step is only the loop's own work (schedule, price,
deliver 512 tokens, record lateness). For comparing two checkouts on one machine, interleaved:

    python benchmarks/engine_step_cpu.py [--root OTHER_CHECKOUT] [--repeat 16]

Prints each run and the min / median per step. The machine is shared: compare mins and medians over
many interleaved runs, not single runs."""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import asyncio, sys, time
sys.path.insert(0, sys.argv[1])
from goodbench import tokenizer
from goodbench.engine.config import EngineConfig
from goodbench.engine.costmodel import CostModel
from goodbench.engine.kvcache import Seq
from goodbench.engine.serve.openai_api import Formatter
from goodbench.engine.serve.server import EngineServer, ServeOptions, Stream

async def main():
    tok = tokenizer.load()
    cfg = EngineConfig(max_model_len=4096, enable_prefix_caching=False).resolved()
    srv = EngineServer(cfg, ServeOptions(), tok, CostModel.for_config(cfg, fixed_step_ms=0.0))
    loop = asyncio.get_running_loop()
    for i in range(512):
        st = Stream(0.0, loop.create_future())
        st.fmt = Formatter(f"c{i}", 0, "m", False, 64, False, False, srv.words, i)
        srv.engine.add(Seq(i, 64, 256, payload=st))
    run = srv._run_loop(srv.loops[0]) if hasattr(srv, "loops") else srv._run_loop()
    task = asyncio.ensure_future(run)
    t = time.perf_counter()
    while srv.engine.has_work:
        await asyncio.sleep(0.001)
    dt = time.perf_counter() - t
    task.cancel()
    print(dt / srv.engine.stats.steps * 1e6)

asyncio.run(main())
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", action="append", default=[], help="another checkout to compare (repeatable)")
    ap.add_argument("--repeat", type=int, default=8)
    a = ap.parse_args()
    roots = [ROOT] + a.root
    times: dict[str, list[float]] = {r: [] for r in roots}
    for k in range(a.repeat):
        for r in roots if k % 2 == 0 else roots[::-1]:  # alternate the order: no position advantage
            out = subprocess.run([sys.executable, "-c", CHILD, r], capture_output=True, text=True, check=True)
            times[r].append(float(out.stdout.strip().splitlines()[-1]))
    for r, v in times.items():
        print(
            f"{r}: {len(v)} runs, per step min {min(v):.0f} us, median {statistics.median(v):.0f} us, "
            f"max {max(v):.0f} us"
        )


if __name__ == "__main__":
    main()
