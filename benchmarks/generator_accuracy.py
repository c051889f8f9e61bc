"""How accurate is goodbench's own load generator? The clients side by side (issues 2, 12 and 21).

A deterministic streaming server (benchmarks/stub_server.py) runs in another process pinned to CPU 0
and logs when each request reached the host (the kernel's receive stamp of its last bytes: the wire,
not the server's own read) and when it sent each chunk: that log is the truth. goodbench's runner,
pinned to CPU 1, drives it with each client in turn (`lean`, the default: kernel receive stamps on
plain TCP; `lean-loop`, the same client stamping reads with the event loop's clock; `aiohttp`, the
baseline; `main`, the lean client of another checkout, --main-tree, run in a child process), case by
case, so they are measured side by side on the same machine state. The `s512`/`s1000` cases are the
hard one: every stream's chunk is due at the same instant (--sync-tick, as a real engine's decode step
emits them) and the closed loop's users finish and start together, in waves (4 and 3 requests each);
`d512`/`d1000` the same waves on the stub's per-stream deadlines (no --sync-tick) with a 200 ms TTFT and no stalls.
Per case and client we print TTFT and ITL p50/p99 minus the server's, the arrival rate the server saw
against the rate asked for, schedule lag p99, whether the run is valid, and the client's CPU use; then
the client's CPU per request and per chunk (a least-squares fit of CPU seconds = a x requests + b x
chunks over the cases) and the ratio between the clients.

    python benchmarks/generator_accuracy.py --repeat 3          # every case, lean and aiohttp (~20 min)
    python benchmarks/generator_accuracy.py --cases s512 s1000 --clients lean main lean-loop --repeat 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.environ.get("GB_TREE") or ROOT)  # GB_TREE: measure another checkout's goodbench

from goodbench import runner  # noqa: E402
from goodbench.arrivals import ArrivalSpec, offsets  # noqa: E402
from goodbench.client.config import ClientConfig  # noqa: E402
from goodbench.eventloop import install_uvloop  # noqa: E402
from goodbench.metrics import summarize  # noqa: E402
from goodbench.records import RequestSpec  # noqa: E402
from goodbench.store import RunStore, load  # noqa: E402

CHILD_CPU = [0.0]


def _floor_client():
    """`--clients floor`: the lean client's connections and dispatch, but each socket read only stamps a
    time and looks for the end of the chunked body (no HTTP parser, SSE or JSON). Its CPU per request
    and per chunk is the floor under any client on this event loop and kernel: what goodbench's own
    parsing adds is a client's cost minus the floor's."""
    from goodbench.client import lean

    base = getattr(lean, "_Conn", None) or lean.Conn

    class FloorConn(base):
        def data_received(self, data: bytes) -> None:
            ex = self.ex
            if ex is None:
                return
            ex.last = now = self.clock()
            ex.got_bytes = True
            st = ex.st
            st.times.append(now - st.t0)
            st.toks.append(1)
            st.texts.append("")
            st.thinking.append(0)
            if data.endswith(b"0\r\n\r\n"):
                ex.status, st.done, self.ex = 200, True, None
                self.client.release(self)
                ex.finish()

    class FloorClient(lean.LeanClient):
        async def _connect(self):
            loop = asyncio.get_running_loop()
            _, conn = await loop.create_connection(lambda: FloorConn(self), self.host, self.port)
            return conn

    return FloorClient


CASES = {  # name: (kind, streams or rate, output tokens)
    "c16": ("closed", 16, 128),
    "c128": ("closed", 128, 128),
    "c512": ("closed", 512, 128),
    "c1000": ("closed", 1000, 128),
    "p50": ("poisson", 50, 32),
    "p187": ("poisson", 187, 128),
    "p365": ("poisson", 365, 128),
    "p500": ("poisson", 500, 32),
    "p500s": ("poisson", 500, 2),
    "s512": ("sync", 512, 128),  # synchronized ticks, closed loop in waves: 4 requests per user
    "s1000": ("sync", 1000, 128),  # 3 requests per user
    # issue 42: the same closed-loop waves on the stub's per-stream deadlines (chunk k at the request's
    # arrival + TTFT + k x ITL: streams tick at nearly, not exactly, the same instants), with a 200 ms TTFT
    "d512": ("waves", 512, 128),
    "d1000": ("waves", 1000, 128),
}
WAVES = {"s512": 4, "s1000": 3, "d512": 4, "d1000": 3}
CASE_TTFT_MS = {"d512": 200.0, "d1000": 200.0}  # the case's own TTFT, whatever --ttft-ms says


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_stub(port: int, log: str, itl_ms: float, ttft_ms: float, stall_every: int, stall_ms: float, sync=False):
    cmd = [
        sys.executable,
        os.path.join(ROOT, "benchmarks", "stub_server.py"),
        "--port",
        str(port),
        "--log",
        log,
        "--itl-ms",
        str(itl_ms),
        "--ttft-ms",
        str(ttft_ms),
        "--stall-every",
        str(stall_every),
        "--stall-ms",
        str(stall_ms),
    ] + (["--sync-tick"] if sync else [])
    if sys.platform.startswith("linux") and (os.cpu_count() or 1) > 1:
        cmd = ["taskset", "-c", "0"] + cmd
    p = subprocess.Popen(cmd)
    for _ in range(100):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=0.5)
            return p
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("stub server did not start")


def read_truth(path: str):
    data = open(path, "rb").read()
    recs = np.frombuffer(data, dtype=np.dtype([("rid", "<i4"), ("kind", "<i4"), ("t", "<f8")]))
    reads = {int(r["rid"]): float(r["t"]) for r in recs[recs["kind"] == 0]}
    read_truth.connections = int((recs["kind"] == 2).sum())
    chunks: dict[int, list[float]] = {}
    for r in recs[recs["kind"] == 1]:
        chunks.setdefault(int(r["rid"]), []).append(float(r["t"]))
    return reads, chunks


def pct(x, q):
    return float(np.percentile(np.asarray(x) * 1000, q)) if len(x) else float("nan")


def run_case(name: str, seconds: float, itl_ms: float, ttft_ms: float, client: str = "lean") -> dict:
    if client == "main":
        return _in_child(name, seconds, itl_ms, ttft_ms)
    kind, n, out_tokens = CASES[name]
    ttft_ms = CASE_TTFT_MS.get(name, ttft_ms)
    port = free_port()
    tmp = tempfile.mkdtemp(prefix="gb-acc-")
    log = os.path.join(tmp, "truth.bin")
    stalls = (0, 0.0) if kind == "waves" else (50, 100.0)  # issue 42's server: no stalls, chunks back to back
    stub = start_stub(port, log, itl_ms, ttft_ms, stall_every=stalls[0], stall_ms=stalls[1], sync=kind == "sync")
    try:
        if kind in ("sync", "waves"):
            arr, count, offs, kind = ArrivalSpec("closed", concurrency=n), n * WAVES[name], None, "closed"
            seconds = None
        elif kind == "closed":
            arr = ArrivalSpec("closed", concurrency=n)
            count = int(n * (seconds / ((ttft_ms + itl_ms * (out_tokens - 1)) / 1000) + 1))
            offs = None
        else:
            arr = ArrivalSpec("poisson", rate=float(n))
            offs = offsets(arr, duration_s=seconds, seed=0)
            count = len(offs)
        # the prompt carries the request number so the stub's log can be matched to our records
        reqs = [RequestSpec(f"r{i}", "bench", str(i), 1, out_tokens) for i in range(count)]
        plan = runner.Plan(reqs, offs, arr, seconds if kind == "closed" else None)
        store = RunStore(tmp, "run")
        from goodbench.records import RunMeta

        store.start(RunMeta(run_id="run", mode="closed" if kind == "closed" else "open"))
        cfg = ClientConfig(base_url=f"http://127.0.0.1:{port}", model="stub", client=client.split("-")[0])
        if client == "lean-loop":
            cfg.kernel_stamps = False
        if sys.platform.startswith("linux") and (os.cpu_count() or 1) > 1:
            os.sched_setaffinity(0, {1})
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        w0 = time.monotonic()
        prog = runner.Progress()
        runner.run_plan(
            plan, cfg, store, runner.RunOptions(scrape_metrics=False, prewarm=min(n, 512)), None, None, prog
        )
        wall = time.monotonic() - w0
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        store.close()
    finally:
        stub.terminate()
        stub.wait(10)
    s_cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    server_cpu = (s_cpu.ru_utime + s_cpu.ru_stime - CHILD_CPU[0]) / wall
    CHILD_CPU[0] = s_cpu.ru_utime + s_cpu.ru_stime
    cpu = (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) / wall
    result = load(os.path.join(tmp, "run"))
    valid = summarize(result, ci=False)["valid"]
    recs = [r for r in result.records if r.status == "ok"]
    reads, chunks = read_truth(log)
    ttft_c, ttft_t, itl_c, itl_t = [], [], [], []
    lag, up, down = [], [], []
    t0 = prog.t0
    for r in recs:
        rid = int(r.id[1:])
        if rid not in reads or rid not in chunks:
            continue
        ttft_c.append(r.first_token_at - r.sent_at)
        ttft_t.append(chunks[rid][0] - reads[rid])
        itl_c.extend(np.diff(r.chunk_times))
        itl_t.extend(np.diff(chunks[rid]))
        lag.append(r.sent_at - r.scheduled_at)
        up.append(reads[rid] - (t0 + r.sent_at))  # client send -> server read
        down.append((t0 + r.first_token_at) - chunks[rid][0])  # server first send -> client read
    read_times = np.sort(np.array(list(reads.values())))
    seen_rate = (len(read_times) - 1) / (read_times[-1] - read_times[0]) if len(read_times) > 1 else 0
    asked = (len(offs) - 1) / (offs[-1] - offs[0]) if kind != "closed" else None
    n_chunks = sum(len(v) for v in chunks.values())
    return {
        "case": name,
        "client": client,
        "valid": valid,
        "cpu_s": cpu * wall,
        "chunks": n_chunks,
        "requests": len(recs),
        "connections": read_truth.connections,
        "chunks_per_s": n_chunks / wall,
        "ttft_p50_err": pct(ttft_c, 50) - pct(ttft_t, 50),
        "ttft_p99_err": pct(ttft_c, 99) - pct(ttft_t, 99),
        "itl_p50_err": pct(itl_c, 50) - pct(itl_t, 50),
        "itl_p99_err": pct(itl_c, 99) - pct(itl_t, 99),
        "truth_ttft_p50": pct(ttft_t, 50),
        "truth_itl_p99": pct(itl_t, 99),
        "asked_rate": asked,
        "seen_rate": seen_rate,
        "lag_p99": pct(lag, 99),
        "client_cpu": cpu,
        "server_cpu": server_cpu,
        "up_p50": pct(up, 50),
        "up_p99": pct(up, 99),
        "down_p50": pct(down, 50),
        "down_p99": pct(down, 99),
        "read_lag_p99": _read_lag_p99(prog),
    }


def _read_lag_p99(prog) -> float:
    """The client's own read lag p99 (kernel stamp to loop read; nan where the client has no such check)."""
    try:
        from goodbench.client.lag import client_lag
    except ImportError:
        return float("nan")
    cl = client_lag(getattr(prog, "lag_states", []))
    return cl["read_p99_ms"] if cl and cl["read_p99_ms"] is not None else float("nan")


def _in_child(name: str, seconds: float, itl_ms: float, ttft_ms: float) -> dict:
    """One case with the lean client of the checkout at MAIN_TREE[0], in a child process (its own imports)."""
    env = dict(os.environ, GB_TREE=MAIN_TREE[0])
    args = [sys.executable, os.path.abspath(__file__), "--child-case", name, "--seconds", str(seconds)]
    out = subprocess.run(
        args + ["--itl-ms", str(itl_ms), "--ttft-ms", str(ttft_ms)], env=env, capture_output=True, text=True, check=True
    )
    r = json.loads(out.stdout.strip().splitlines()[-1])
    r["client"] = "main"
    c = resource.getrusage(resource.RUSAGE_CHILDREN)  # the child (and its stub) is not the next case's server
    CHILD_CPU[0] = c.ru_utime + c.ru_stime
    return r


MAIN_TREE = ["/work/main"]
RX_ANCHOR: list = []


def hold_rx_stamps() -> None:
    """Keep the kernel's receive stamping on for the whole benchmark. Linux turns it on and off
    host-wide from a worker thread as the first socket asks and the last one closes; between cases every
    socket closes, and under SCHED_FIFO load the worker ran only after the next case's first wave had
    gone unstamped (the stub then logged its own late read as the truth: a 1001-request wave with
    TTFT p99 errors of +9 to +26 ms, later runs in one process only). One stamped socket held open
    for the process's life keeps it on."""
    from goodbench.client.conn import rx_stamps_ready

    ok, socks = asyncio.run(rx_stamps_ready(2.0))
    RX_ANCHOR.extend(socks)
    if not ok:
        print("note: the kernel did not stamp a loopback segment within 2 s: truth times may be late")


HEADER = (
    f"{'case':6} {'client':8} {'conns':>6} {'reqs':>6} {'chunks/s':>9} {'TTFT p50 err':>13} {'TTFT p99 err':>13} "
    f"{'ITL p50 err':>12} {'ITL p99 err':>12} {'asked/s':>8} {'seen/s':>8} {'lag p99':>9} {'valid':>5} "
    f"{'client CPU':>10} {'server CPU':>10} {'send->read p50/p99':>19} {'write->recv p50/p99':>20} {'read lag p99':>12}"
)


def median_row(runs: list[dict]) -> dict:
    r = {
        k: (
            float(np.median([x[k] for x in runs]))
            if isinstance(runs[0][k], (int, float)) and not isinstance(runs[0][k], bool) and runs[0][k] is not None
            else runs[0][k]
        )
        for k in runs[0]
    }
    r["valid"] = all(x["valid"] for x in runs)
    r["requests"], r["connections"] = int(r["requests"]), int(r["connections"])
    return r


def row_text(r: dict) -> str:
    asked = "-" if r["asked_rate"] is None else f"{r['asked_rate']:.1f}"
    return (
        f"{r['case']:6} {r['client']:8} {r['connections']:6d} {r['requests']:6d} {r['chunks_per_s']:9.0f} "
        f"{r['ttft_p50_err']:+10.2f} ms {r['ttft_p99_err']:+10.2f} ms {r['itl_p50_err']:+9.2f} ms "
        f"{r['itl_p99_err']:+9.2f} ms {asked:>8} {r['seen_rate']:8.1f} {r['lag_p99']:6.2f} ms "
        f"{'yes' if r['valid'] else 'NO':>5} {r['client_cpu']:9.0%} {r['server_cpu']:9.0%} "
        f"{r['up_p50']:7.2f}/{r['up_p99']:7.2f} ms {r['down_p50']:7.2f}/{r['down_p99']:7.2f} ms "
        f"{r['read_lag_p99']:9.2f} ms"
    )


def spread_text(runs: list[dict]) -> str:
    """Every run's TTFT and ITL p50/p99 errors (min...max), under the median row."""

    def span(k):
        v = [r[k] for r in runs]
        return f"{min(v):+.2f}...{max(v):+.2f}"

    keys = ("ttft_p50_err", "ttft_p99_err", "itl_p50_err", "itl_p99_err")
    return "  spread over %d runs: TTFT p50 %s, p99 %s; ITL p50 %s, p99 %s ms" % (len(runs), *map(span, keys))


def cpu_costs(runs: list[dict]) -> tuple[float, float] | None:
    """Least-squares CPU seconds = a x requests + b x chunks over every run of one client: (a, b) in us."""
    if len({(r["requests"], r["chunks"]) for r in runs}) < 2:
        return None
    a = np.array([[r["requests"], r["chunks"]] for r in runs], float)
    coef, *_ = np.linalg.lstsq(a, np.array([r["cpu_s"] for r in runs]), rcond=None)
    return coef[0] * 1e6, coef[1] * 1e6


def print_ratio_spread(by_rep: dict[str, list[list[dict]]]) -> None:
    """The CPU fit of each repeat on its own (every case once), as the first client / each other client:
    the spread of the ratio over repeats (the clients alternate within a case, so each repeat compares
    them under one machine state)."""
    names = list(by_rep)
    if len(names) < 2 or len(by_rep[names[0]]) < 2:
        return
    base = names[0]
    for other in names[1:]:
        ratios = []
        for mine, theirs in zip(by_rep[base], by_rep[other]):
            a, b = cpu_costs(mine), cpu_costs(theirs)
            if a and b:
                ratios.append((a[0] / b[0], a[1] / b[1]))
        if ratios:
            req, chunk = zip(*ratios)
            print(
                f"  {base} / {other}, each repeat fitted alone: per request "
                + ", ".join(f"{x:.3f}" for x in req)
                + "; per chunk "
                + ", ".join(f"{x:.3f}" for x in chunk)
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    ap.add_argument(
        "--clients",
        nargs="+",
        default=["lean", "aiohttp"],
        choices=["lean", "lean-loop", "aiohttp", "floor", "main"],
        help="floor: a client that only stamps socket reads (the event loop's and kernel's share); lean-loop: "
        "the lean client without kernel stamps; main: the lean client of --main-tree",
    )
    ap.add_argument("--main-tree", default="/work/main", help="the checkout `--clients main` measures")
    ap.add_argument(
        "--rt",
        action="store_true",
        help="run the stub and the client at SCHED_FIFO priority (root): on a shared machine, keeps other "
        "processes off their pinned cores, as on a quiet host",
    )
    ap.add_argument("--child-case", help=argparse.SUPPRESS)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--itl-ms", type=float, default=20.0)
    ap.add_argument("--ttft-ms", type=float, default=50.0)
    ap.add_argument("--repeat", type=int, default=1, help="run each case N times; print the median of each column")
    a = ap.parse_args()
    install_uvloop()
    MAIN_TREE[0] = a.main_tree
    if not a.child_case:
        hold_rx_stamps()
    if a.rt:  # inherited by the stub and the `main` child processes
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
    if a.child_case:
        print(json.dumps(run_case(a.child_case, a.seconds, a.itl_ms, a.ttft_ms, "lean")))
        return
    runner.CLIENTS["floor"] = _floor_client()
    print(
        f"machine: {os.cpu_count()} CPUs, python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.1f}; "
        f"server pinned to CPU 0, client to CPU 1{' (both SCHED_FIFO)' if a.rt else ''}; "
        f"median of {a.repeat} run(s) per case and client; clients alternate within each case"
    )
    print(HEADER)
    every: dict[str, list[dict]] = {c: [] for c in a.clients}
    by_rep: dict[str, list[list[dict]]] = {c: [[] for _ in range(a.repeat)] for c in a.clients}
    for name in a.cases:
        runs: dict[str, list[dict]] = {c: [] for c in a.clients}
        for k in range(a.repeat):
            for c in a.clients:
                runs[c].append(run_case(name, a.seconds, a.itl_ms, a.ttft_ms, c))
                by_rep[c][k].append(runs[c][-1])
        for c in a.clients:
            every[c] += runs[c]
            print(row_text(median_row(runs[c])), flush=True)
            if len(runs[c]) > 1:
                print(spread_text(runs[c]), flush=True)
    costs = {c: cpu_costs(every[c]) for c in a.clients}
    print("\nclient CPU (least squares over every run above: CPU s = a x requests + b x chunks)")
    for c, ab in costs.items():
        if ab:
            print(f"  {c:8} {ab[0]:8.1f} us per request {ab[1]:8.2f} us per chunk")
    print_ratio_spread(by_rep)
    if all(costs.get(c) for c in ("lean", "aiohttp")):
        (la, lb), (aa, ab) = costs["lean"], costs["aiohttp"]
        print(f"  aiohttp / lean: {aa / la:.2f}x per request, {ab / lb:.2f}x per chunk")
        if costs.get("floor"):
            fa, fb = costs["floor"]
            print(
                f"  above the floor (the client's own work): lean {la - fa:.1f} / {lb - fb:.2f} us, aiohttp "
                f"{aa - fa:.1f} / {ab - fb:.2f} us per request / chunk: aiohttp / lean {(aa - fa) / (la - fa):.2f}x "
                f"per request, {(ab - fb) / (lb - fb):.2f}x per chunk"
            )


if __name__ == "__main__":
    main()
