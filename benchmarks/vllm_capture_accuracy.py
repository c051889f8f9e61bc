"""goodbench's TTFT and ITL against a real vLLM server, checked with a packet capture (issue 12).

The stub-server benchmark (generator_accuracy.py) measures the client against a server written for it.
This one uses a server nobody wrote for goodbench: a real `vllm serve` (CPU build, the tiny
random-weight model of ci/real_vllm/setup.sh). The truth is the kernel: a separate process captures
the loopback traffic to vLLM's port (AF_PACKET, kernel receive timestamps) and reconstructs, per
request, when its POST reached the host and when each streamed content event did. goodbench's
summary percentiles minus the capture's are its errors; neither vLLM's nor goodbench's clock is used
for the truth.

Needs root (raw packet socket), Linux, and `bash ci/real_vllm/setup.sh`:

    python benchmarks/vllm_capture_accuracy.py                       # 3 loads, ~4 min with vLLM start
    python benchmarks/vllm_capture_accuracy.py --cases c16 --repeat 2
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import re
import socket
import struct
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))

import goodbench as gb  # noqa: E402

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
ETH_P_ALL = 0x0003
PACKET_HOST = 0
CASES = {  # name: (arrival, rate or users, requests, prompt tokens, output tokens)
    "p4": ("poisson", 4.0, 80, 64, 32),
    "p8": ("poisson", 8.0, 120, 64, 32),
    "c16": ("closed", 16, 160, 64, 32),
}
EVENT = re.compile(rb"data: (\{.*?\}|\[DONE\])\n\n", re.S)


def capture(port: int, out: str, ready, stop) -> None:
    """Child process: every loopback TCP segment to or from `port`, with its kernel receive time
    (converted to CLOCK_MONOTONIC), as (t, src port, dst port, payload) records in `out`."""
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.bind(("lo", 0))
    s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 20)
    s.settimeout(0.2)
    offset = time.time() - time.monotonic()
    rows = []
    ready.set()
    while not stop.is_set():
        try:
            data, anc, _, addr = s.recvmsg(65536, socket.CMSG_SPACE(16))
        except TimeoutError:
            continue
        if addr[2] != PACKET_HOST or len(data) < 14 + 20 or data[12:14] != b"\x08\x00":
            continue
        ip = data[14:]
        ihl = (ip[0] & 0x0F) * 4
        if ip[9] != 6:
            continue
        tcp = ip[ihl:]
        sport, dport = struct.unpack("!HH", tcp[:4])
        if port not in (sport, dport):
            continue
        payload = tcp[(tcp[12] >> 4) * 4 :]
        if not payload:
            continue
        t = None
        for level, typ, raw in anc:
            if level == socket.SOL_SOCKET and typ == SO_TIMESTAMPNS:
                sec, nsec = struct.unpack("qq", raw[:16])
                t = sec + nsec * 1e-9 - offset
        rows.append((t if t is not None else time.monotonic(), sport, dport, bytes(payload)))
    with open(out, "wb") as f:
        import pickle

        pickle.dump(rows, f)


def truth(rows: list, port: int) -> tuple[list[float], list[float], int]:
    """Per request on each connection: TTFT (POST reached the host -> first content event did) and the
    gaps between content events. GETs (the metrics scraper) are skipped."""
    conns: dict[int, dict] = {}
    ttft, itl, n = [], [], 0
    for t, sport, dport, payload in sorted(rows, key=lambda r: r[0]):
        if dport == port:  # client -> server
            c = conns.setdefault(sport, {"buf": b"", "req": None})
            if payload.startswith(b"POST "):
                c.update(req={"sent": t, "times": []}, buf=b"")
                n += 1
            elif payload[:4] in (b"GET ", b"HEAD"):
                c.update(req=None, buf=b"")
            continue
        c = conns.get(dport)
        if c is None or c["req"] is None:
            continue
        c["buf"] += payload
        last = 0
        for m in EVENT.finditer(c["buf"]):
            last = m.end()
            body = m.group(1)
            if body == b"[DONE]":
                times = c["req"]["times"]
                if times:
                    ttft.append(times[0] - c["req"]["sent"])
                    itl.extend(np.diff(times))
                c["req"] = None
                break
            try:
                ch = (json.loads(body).get("choices") or [{}])[0]
            except ValueError:
                continue
            text = ch.get("text") or (ch.get("delta") or {}).get("content") or ""
            if text:
                c["req"]["times"].append(t)
        c["buf"] = c["buf"][last:]
    return ttft, itl, n


def pct(x, q) -> float:
    return float(np.percentile(np.asarray(x) * 1000, q)) if len(x) else float("nan")


def run_case(name: str, base_url: str, port: int, tmp: str) -> dict:
    kind, load, count, pin, pout = CASES[name]
    out = os.path.join(tmp, f"cap-{name}-{time.monotonic_ns()}.pkl")
    ready, stop = mp.Event(), mp.Event()
    proc = mp.Process(target=capture, args=(port, out, ready, stop), daemon=True)
    proc.start()
    ready.wait(10)
    wl = gb.load_workload(
        dataset_name="random",
        random_input_len=pin,
        random_output_len=pout,
        num_prompts=count,
        **({"request_rate": load} if kind == "poisson" else {"concurrency": load}),
    )
    run = gb.run(wl, gb.Target(base_url=base_url, model="tiny-llama"), result_dir=tmp, pin=False)
    time.sleep(0.5)
    stop.set()
    proc.join(30)
    import pickle

    with open(out, "rb") as f:
        rows = pickle.load(f)
    t_ttft, t_itl, n_post = truth(rows, port)
    s = run.summary
    return {
        "case": name,
        "requests": s["requests"]["completed"],
        "failed": s["requests"]["failed"],
        "captured": len(t_ttft),
        "posts": n_post,
        "valid": s["valid"],
        "ttft50": s["ttft_ms"]["p50"] - pct(t_ttft, 50),
        "ttft99": s["ttft_ms"]["p99"] - pct(t_ttft, 99),
        "itl50": s["itl_ms"]["p50"] - pct(t_itl, 50),
        "itl99": s["itl_ms"]["p99"] - pct(t_itl, 99),
        "true_ttft50": pct(t_ttft, 50),
        "true_itl50": pct(t_itl, 50),
        "true_itl99": pct(t_itl, 99),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--chunk", type=int, default=512, help="vLLM's --max-num-batched-tokens (default 512)")
    a = ap.parse_args()
    from realvllm import VllmServer

    tmp = tempfile.mkdtemp(prefix="gb-vllm-cap-")
    server = VllmServer(tmp, a.chunk).start()
    print(f"vLLM at {server.base_url} (chunked prefill, budget {a.chunk}); truth: loopback capture, kernel times")
    print(
        f"{'case':5} {'ok':>4} {'failed':>6} {'captured':>8} {'TTFT p50 err':>12} {'TTFT p99 err':>12} "
        f"{'ITL p50 err':>11} {'ITL p99 err':>11} {'true TTFT p50':>13} {'true ITL p50/p99':>17} valid"
    )
    try:
        for name in a.cases:
            for _ in range(a.repeat):
                r = run_case(name, server.base_url, server.port, tmp)
                print(
                    f"{r['case']:5} {r['requests']:4d} {r['failed']:6d} {r['captured']:8d} {r['ttft50']:+9.2f} ms "
                    f"{r['ttft99']:+9.2f} ms {r['itl50']:+8.2f} ms {r['itl99']:+8.2f} ms {r['true_ttft50']:10.1f} ms "
                    f"{r['true_itl50']:7.1f}/{r['true_itl99']:6.1f} ms {'yes' if r['valid'] else 'NO'}",
                    flush=True,
                )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
