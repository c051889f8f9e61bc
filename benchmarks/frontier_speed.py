"""Speed of a simulated frontier sweep (issue 43's target: <= 10 s on the 2-vCPU machine): 4 configurations (two
tiers x two chunk sizes) x 5 loads (concurrency 1, 4, 16, 64, 256), mixed-long-short, 200 requests per cell, the
whole `goodbench sweep` command timed from start to exit (interpreter start, workload builds, cells, figures).

    python benchmarks/frontier_speed.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time

CMD = [
    "sweep", "--workload", "mixed-long-short", "--num-prompts", "200", "--goodput", "ttft:1000", "tpot:50",
    "--gpu", "h100-sxm,l40s", "--param", "max_num_batched_tokens=512,4096", "--concurrency", "1,4,16,64,256",
    "--quiet", "--no-history",
]  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    walls = []
    for _ in range(a.repeat):
        with tempfile.TemporaryDirectory() as d:
            t = time.perf_counter()
            r = subprocess.run(
                [sys.executable, "-m", "goodbench", *CMD, "--result-dir", d], capture_output=True, text=True
            )
            walls.append(time.perf_counter() - t)
            if r.returncode:
                sys.exit(f"sweep failed ({r.returncode}): {r.stderr[-500:]}")
    print(f"frontier sweep, 4 configs x 5 loads x 200 requests: wall {statistics.median(walls):.1f} s median of "
          f"{a.repeat} ({', '.join(f'{w:.1f}' for w in walls)})")  # fmt: skip


if __name__ == "__main__":
    main()
