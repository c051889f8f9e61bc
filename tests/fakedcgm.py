"""A fake NVIDIA DCGM exporter on loopback for the energy tests: GPUs drawing a known constant power, their
energy counters (mJ) advancing at exactly that rate on CLOCK_MONOTONIC (the clock goodbench samples on), so the
energy over any window is known. Options (counted in scrapes answered, so that they fall inside a run whatever
its start-up took): a counter reset, a GPU that disappears, an exporter that stops answering.

    python tests/fakedcgm.py PORT [--watts 300] [--gpus 2] [--reset-at N] [--drop-gpu-at N] [--die-at N]
"""

import argparse
import http.server
import time

START = time.monotonic()
STATE = {"served": 0, "reset": None}


def page(a) -> bytes:
    now = time.monotonic()
    n = STATE["served"]
    if a.reset_at is not None and n == a.reset_at:
        STATE["reset"] = now
    lines = ["# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).", "# TYPE DCGM_FI_DEV_POWER_USAGE gauge"]
    for g in range(a.gpus):
        if a.drop_gpu_at is not None and g == a.gpus - 1 and n >= a.drop_gpu_at:
            continue
        since = now - STATE["reset"] if STATE["reset"] is not None else now - START + 1000.0
        lab = f'gpu="{g}",UUID="GPU-fake-{g}",Hostname="fake"'
        lines.append(f"DCGM_FI_DEV_POWER_USAGE{{{lab}}} {a.watts:.3f}")
        lines.append(f"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{lab}}} {a.watts * since * 1000:.6f}")
        lines.append(f"DCGM_FI_DEV_GPU_UTIL{{{lab}}} 97")
    return ("\n".join(lines) + "\n").encode()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("--watts", type=float, default=300.0)
    ap.add_argument("--gpus", type=int, default=2)
    ap.add_argument("--reset-at", type=int, help="the Nth scrape answered finds the counters reset")
    ap.add_argument("--drop-gpu-at", type=int, help="from the Nth scrape the last GPU is gone")
    ap.add_argument("--die-at", type=int, help="from the Nth scrape no answer at all")
    a = ap.parse_args()

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if a.die_at is not None and STATE["served"] >= a.die_at:
                self.close_connection = True
                return  # no answer at all: the exporter has stopped
            body = page(a)
            STATE["served"] += 1
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    http.server.ThreadingHTTPServer(("127.0.0.1", a.port), H).serve_forever()


if __name__ == "__main__":
    main()
