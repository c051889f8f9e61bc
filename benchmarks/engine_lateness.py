"""Does `goodbench serve` keep its real-time promise under load? (issue 3)

Starts the reference engine (llama-3.1-8b on h100-sxm by default) pinned to CPU 0 with a step trace,
drives N concurrent streams at it with goodbench's own runner pinned to CPU 1 (closed loop), then
reads every step's lateness (actual end - planned end) from the trace.

    python benchmarks/engine_lateness.py [--streams 512] [--seconds 20]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from goodbench import runner  # noqa: E402
from goodbench.arrivals import ArrivalSpec  # noqa: E402
from goodbench.client.config import ClientConfig  # noqa: E402
from goodbench.metrics import summarize  # noqa: E402
from goodbench.records import RequestSpec, RunMeta  # noqa: E402
from goodbench.store import RunStore, load  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--streams", type=int, default=512)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--gpu", default="h100-sxm")
    ap.add_argument("--model", default="llama-3.1-8b")
    ap.add_argument("--prompt-tokens", type=int, default=64)
    ap.add_argument("--output-tokens", type=int, default=256)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="gb-late-")
    trace = os.path.join(tmp, "steps.jsonl")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    pin = sys.platform.startswith("linux") and (os.cpu_count() or 1) > 1
    cmd = (["taskset", "-c", "0"] if pin else []) + [
        sys.executable,
        "-m",
        "goodbench",
        "serve",
        "--port",
        str(port),
        "--gpu",
        a.gpu,
        "--engine-model",
        a.model,
        "--step-trace",
        trace,
    ]
    srv = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, cwd=ROOT)
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=0.5)
                break
            except OSError:
                time.sleep(0.1)
        if pin:
            os.sched_setaffinity(0, {1})
        runner.install_uvloop()
        from goodbench import tokenizer

        tok = tokenizer.load()
        import random

        rng = random.Random(0)
        n = a.streams * 8
        reqs = [
            RequestSpec(f"r{i}", "s", tok.synthetic_text(a.prompt_tokens, rng), a.prompt_tokens, a.output_tokens)
            for i in range(n)
        ]
        plan = runner.Plan(reqs, None, ArrivalSpec("closed", concurrency=a.streams), a.seconds)
        store = RunStore(tmp, "run")
        store.start(RunMeta(run_id="run", mode="closed"))
        runner.run_plan(
            plan,
            ClientConfig(base_url=f"http://127.0.0.1:{port}", model=a.model),
            store,
            runner.RunOptions(scrape_metrics=False),
            None,
            None,
            runner.Progress(),
        )
        store.close()
    finally:
        srv.terminate()
        srv.wait(20)
    steps = [json.loads(x) for x in open(trace)]
    late = np.array([s["lateness"] for s in steps]) * 1000
    busy = np.array([s["batch_size"] for s in steps])
    s = summarize(load(os.path.join(tmp, "run")))
    full = late[busy >= a.streams * 0.9]
    print(
        f"engine {a.model} on {a.gpu}, {a.streams} closed-loop streams ({a.prompt_tokens} in / {a.output_tokens} "
        f"out) for {a.seconds:.0f} s; server on CPU 0, client on CPU 1"
    )
    print(
        f"  steps {len(steps)}, median batch {np.median(busy):.0f}, step time p50 "
        f"{np.median([x['duration'] for x in steps]) * 1000:.1f} ms"
    )
    for label, x in (("all steps", late), (f"steps with >= {int(a.streams * 0.9)} running", full)):
        if len(x):
            print(
                f"  step lateness ({label}, n={len(x)}): p50 {np.percentile(x, 50):.3f} ms, "
                f"p99 {np.percentile(x, 99):.3f} ms, max {x.max():.3f} ms"
            )
    print(
        f"  client view: {s['requests']['completed']} requests, ITL p50 {s['itl_ms']['p50']:.2f} ms, "
        f"p99 {s['itl_ms']['p99']:.2f} ms, output {s['output_throughput']:,.0f} tok/s"
    )


if __name__ == "__main__":
    main()
