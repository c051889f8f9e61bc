"""goodbench against a real vLLM (CPU build, tiny random-weight Llama), marked `real_vllm`: deselected
by the plain `python -m pytest -q`, run by `.ci/run` after `ci/real_vllm/setup.sh` (docs/real-vllm.md).

One vLLM server at a time (each holds ~5 GB and takes ~50 s to start): the HOL test starts the unchunked
one, then the pool swaps it for the chunked-at-512 one that every other test reuses."""

import json
import os
import signal
import statistics
import subprocess
import sys
import time
import urllib.request

import pytest
from conftest import ROOT, run_cli
from realvllm import VllmServer

import goodbench as gb
from goodbench.prometheus import parse as parse_prometheus
from goodbench.store import load_server_metrics

pytestmark = pytest.mark.real_vllm

# HOL scaled to this CPU: a 4,096-token prompt at t = 0 (the 4 shorts queue behind it), then a second
# one at 5.5 s while the shorts decode (128 tokens at ~35 ms each). Without chunked prefill that prefill
# is one step, and every decoding short stream stalls for all of it; at 512 tokens a step it is cut up.
HOL_TOML = """
name = "hol-cpu"
generator = "hol"
num_requests = 6        # long, 4 shorts, long: the second group's shorts are not needed
seed = 0
[hol]
long_input = 4096
long_output = 2
short_input = 32
short_output = 128
shorts = 4
stagger_ms = 50
repeats = 2
period_s = {period:.2f}   # the second long lands while the shorts decode: set from this machine's prefill time
"""


class ServerPool:
    """Holds at most one vLLM server; asking for another configuration stops the current one."""

    def __init__(self, log_dir: str):
        self.log_dir, self.current = log_dir, None

    def get(self, chunked_budget: int | None) -> VllmServer:
        if self.current is not None and self.current.chunked_budget != chunked_budget:
            self.stop()
        if self.current is None:
            self.current = VllmServer(self.log_dir, chunked_budget).start()
        return self.current

    def stop(self) -> None:
        if self.current is not None:
            self.current.stop()
            self.current = None


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    p = ServerPool(str(tmp_path_factory.mktemp("vllm-logs")))
    yield p
    p.stop()


def records(run_dir):
    with open(os.path.join(run_dir, "records.jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def worst_gaps(recs, ids, start=float("-inf"), end=float("inf")):
    """Each stream's worst gap between tokens among those that overlap [start, end] (default: all)."""
    return [
        max((b - a for a, b in zip(r["chunk_times"], r["chunk_times"][1:]) if b > start and a < end), default=0.0)
        for r in recs
        if r["id"] in ids
    ]


SHORTS = {"r1", "r2", "r3", "r4"}


def hol_run(srv, wl_path, tmp_path, run_id):
    """One HOL run: (records, each short stream's worst gap while the second long prefilled, that long's
    TTFT, the client's lag). The gaps are taken over the second long's prefill, where head-of-line blocking
    shows: a stall of the whole server elsewhere in the run (one CI run had a 1.29 s one on the chunked
    server, where the others measured 0.15-0.20 s) is not that prompt's."""
    run = gb.run(gb.load_workload(str(wl_path)), srv.base_url, result_dir=str(tmp_path), run_id=run_id)
    assert run.summary["requests"]["failed"] == 0, run.summary["requests"]
    recs = records(run.dir)
    long2 = next(r for r in recs if r["id"] == "r5")
    start, end = long2["sent_at"], long2["first_token_at"]
    return recs, worst_gaps(recs, SHORTS, start, end), end - start, run.summary["client_lag"]


def gauge(base_url, name) -> float:
    with urllib.request.urlopen(base_url + "/metrics", timeout=5) as r:
        m = parse_prometheus(r.read().decode())
    return sum(v for k, v in m.items() if k.split("{", 1)[0] == name)


def assert_usage_matches_records(recs, n, output_len):
    assert len(recs) == n and all(r["status"] == "ok" for r in recs), [r["error"] for r in recs]
    for r in recs:
        # one token per chunk on vLLM: the server's usage count, the chunks and the ask all agree
        assert r["output_tokens_source"] == "usage" and r["output_tokens"] == len(r["chunk_times"]) == output_len
        assert r["prompt_tokens_server"] >= r["prompt_tokens"]  # + BOS (and the chat template's headers)


def test_hol_signature_unchunked_vs_chunked_512(pool, tmp_path):
    wl_path = tmp_path / "hol-cpu.toml"
    srv = pool.get(None)
    first = srv.warm(4096)  # a fresh server's first long prefill pays one-time costs
    # the schedule follows this machine: a warm 4,096-token prefill took 4 s on one 2-core machine and 0.9 s
    # on another, and the second long must land while the shorts (128 tokens each) still decode, about 0.4
    # of a prefill after they start (at 5.5 s fixed, the faster machine's shorts were done). The quickest of
    # three: one warm prefill on a noisy host took 10.9 s where the run's own took 7 s, and the second long
    # then came after the shorts were done (2026-12-07)
    prefill_warm = min(first, srv.warm(4096), srv.warm(4096))
    period = 1.4 * prefill_warm
    wl_path.write_text(HOL_TOML.format(period=period))
    recs, gaps_off, prefill_off, lag_off = hol_run(srv, wl_path, tmp_path, "hol-off")
    shorts = [r for r in recs if r["cls"] == "short"]
    # the premise: the shorts were decoding when the second long arrived, else nothing can stall them
    span = [(round(r["first_token_at"], 2), round(r["chunk_times"][-1], 2)) for r in shorts]  # on the schedule's clock
    assert all(a < period < b for a, b in span), (
        f"the schedule missed the shorts' decoding (second long at {period:.2f} s; shorts' first and last "
        f"tokens {span}; a warm 4,096-token prefill took {prefill_warm:.2f} s)"
    )
    # without chunked prefill each decoding short stream waits out the whole 4,096-token prefill step
    assert min(gaps_off) >= 0.7 * prefill_off and min(gaps_off) >= 0.5 * prefill_warm, lag_off

    srv = pool.get(512)
    srv.warm(4096)
    tries = []
    for attempt in range(2):
        # with a 512-token budget the same prefill is cut into >= 8 steps: no stall near its full length. A
        # shared 2-core machine can stall the whole server once (every stream at once, for longer than the
        # prefill); one rerun on the warm server tells that apart from a scheduler that does not chunk,
        # which fails both tries. Both are printed.
        # The rerun covers both gates. The medians must be 2x apart: the last 512-token chunk attends to the
        # whole 4,096-token prompt, and on the CI machine of 2026-12-07 every short's worst gap was 1.43 s
        # against an unchunked 3.76 s (2.6x; the long's chunked TTFT 4.99 s), where this machine measures
        # 0.67 s against 3.91 s (5.8x). A scheduler that does not chunk gives about 1x.
        recs, gaps_512, ttft_512, lag_512 = hol_run(srv, wl_path, tmp_path, f"hol-512-{attempt}")
        tries.append((gaps_512, ttft_512, max(worst_gaps(recs, SHORTS))))
        if max(gaps_512) <= ttft_512 / 3 and statistics.median(gaps_off) >= 2 * statistics.median(gaps_512):
            break
    print(
        f"\nHOL worst gap per short stream during the second long's prefill: unchunked "
        f"{[round(g, 3) for g in gaps_off]} s (its TTFT {prefill_off:.2f} s); chunked 512 "
        + "; then ".join(
            f"{[round(g, 3) for g in g5]} s (its TTFT {t5:.2f} s, worst gap in the run {w5:.3f} s)"
            for g5, t5, w5 in tries
        )
        + f"; warm 4,096-token prefill {prefill_warm:.2f} s, second long at {period:.2f} s"
    )
    assert max(gaps_512) <= ttft_512 / 3, (tries, lag_512)
    assert statistics.median(gaps_off) >= 2 * statistics.median(gaps_512), tries


def test_completions_through_the_cli_records_usage_metrics_and_server_timing(pool, tmp_path):
    srv = pool.get(512)
    r = run_cli(
        "run",
        "--base-url",
        srv.base_url,
        "--dataset-name",
        "random",
        "--random-input-len",
        "64",
        "--random-output-len",
        "16",
        "--num-prompts",
        "12",
        "--request-rate",
        "4",
        "--result-dir",
        str(tmp_path),
        "--run-id",
        "cmpl",
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    run_dir = str(tmp_path / "cmpl")
    s = gb.load_run(run_dir).summary
    assert s["requests"]["failed"] == 0 and s["requests"]["completed"] == 12
    assert_usage_matches_records(records(run_dir), 12, 16)
    rows = load_server_metrics(run_dir)
    names = set().union(*(row["metrics"] for row in rows))
    for want in (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:time_to_first_token_seconds_sum",
        "vllm:request_queue_time_seconds_count",
    ):
        assert any(k.startswith(want + "{") for k in names), want
    assert not any("_bucket" in k for k in names)
    # the server's own split of TTFT covers exactly this run's requests and adds up
    st = s["server_timing"]
    assert st["ttft_ms"]["n"] == st["queue_ms"]["n"] == st["prefill_ms"]["n"] == 12
    assert st["queue_ms"]["mean"] + st["prefill_ms"]["mean"] <= st["ttft_ms"]["mean"]
    assert st["client_ttft_ms"]["n"] == 12 and st["client_minus_server_ms"] is not None
    # the client's TTFT interval (request written .. first byte read) contains the server's (request
    # processed .. first token out), so the difference is never negative; what it adds is vLLM's front
    # end (HTTP, template, tokenizer, detokenizer), which on these shared 2-core CPU machines grows with
    # load: 63 ms seen in one CI run, 84 ms measured in a calibration run. 250 ms bounds a mismatch.
    assert -2 < st["client_minus_server_ms"] < 250
    assert "server's view" in r.stdout
    # chunk times from the kernel's receive stamps (plain http on Linux), and the client's self-check:
    # every token event either had its own read or is counted as merged into a later one (the kernel
    # coalesces segments that arrive while the socket is unread, so reads alone can be fewer than events)
    cl = s["client_lag"]
    assert cl["stamps"] == "kernel" and cl["processes"] == 1 and cl["reads"] >= 12
    assert cl["reads"] + cl["merged_chunks"] >= 12 * 16
    assert cl["stamp_error_p99_ms"] is not None and "engine_lateness" not in s  # vLLM has no step lateness
    assert "client: kernel receive stamps" in r.stdout


def run_toml(srv, tmp_path, name: str, text: str):
    """A workload written as TOML, run against the server (run id: its name)."""
    wl = tmp_path / f"{name}.toml"
    wl.write_text(f'name = "{name}"\n' + text)
    return gb.run(gb.load_workload(str(wl)), srv.base_url, result_dir=str(tmp_path), run_id=name)


def test_chat_sharegpt_streams_with_usage_equal_to_chunks(pool, tmp_path):
    srv = pool.get(512)
    run = run_toml(
        srv,
        tmp_path,
        "chat",
        'endpoint = "chat"\nnum_requests = 8\nseed = 1\n[arrival]\nrate = 4\n'
        '[[class]]\nname = "sharegpt"\nsource = "sharegpt"\ninput = "dataset"\noutput = 24\n',
    )
    assert run.summary["requests"]["failed"] == 0
    assert run.meta.target["endpoint"] == "/v1/chat/completions"
    assert run.meta.server["name"] == "vllm" and run.meta.server["version"]  # /v1/models owned_by, /version
    assert_usage_matches_records(records(run.dir), 8, 24)
    assert run.summary["server_timing"]["ttft_ms"]["n"] == 8


def test_ctrl_c_keeps_records_and_the_server_frees_the_cancelled(pool, tmp_path):
    srv = pool.get(512)
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "goodbench",
            "run",
            "--base-url",
            srv.base_url,
            "--dataset-name",
            "random",
            "--random-input-len",
            "32",
            "--random-output-len",
            "400",
            "--num-prompts",
            "20",
            "--request-rate",
            "4",
            "--grace-period",
            "0.5",
            "--result-dir",
            str(tmp_path),
            "--run-id",
            "cc",
            "--quiet",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (tmp_path / "cc" / "records.jsonl").exists():
            time.sleep(0.2)
        time.sleep(3.0)  # several streams in flight (each needs ~15 s)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 130, out + err
    run = gb.load_run(str(tmp_path / "cc"))
    s = run.summary
    recs = records(run.dir)
    assert run.interrupted and len(recs) == s["requests"]["issued"] >= 5
    by_status = s["requests"]["by_status"]
    assert set(by_status) <= {"ok", "cancelled"} and by_status.get("cancelled", 0) >= 1, by_status
    assert any(r["status"] == "cancelled" and r["chunk_times"] for r in recs)  # cut mid-stream, tokens kept
    # the cancelled streams were closed, and vLLM aborted them
    deadline = time.monotonic() + 20
    while gauge(srv.base_url, "vllm:num_requests_running") > 0:
        assert time.monotonic() < deadline, "vLLM still runs requests goodbench cancelled"
        time.sleep(0.5)


# calibrate -> predict (issue 20): a profile fitted to one workload at one load (prompts of 16 to 1,024
# tokens spread on a log scale, as the built-in `calibrate` workload spreads them; Poisson 2.0/s) predicts
# another workload (75% 64-token chats, 25% 1,024-token documents, other
# output lengths; chunked prefill on at 512) at another rate, as measured live against the same vLLM and
# as `goodbench simulate --calibration` gives it
CALIBRATE_WORKLOAD = os.path.join(ROOT, "tests", "data", "workloads", "cal-log-spread.toml")
PREDICT_TOML = """
name = "mixed-cpu"
generator = "mixed"
num_requests = 120
seed = 3
[arrival]
process = "poisson"
rate = 1.0
[[class]]
name = "short"
weight = 0.75
input = 64
output = 32
[[class]]
name = "long"
weight = 0.25
input = 1024
output = 16
"""


def test_calibrate_on_one_workload_predicts_another(pool, tmp_path):
    srv = pool.get(512)
    cal_wl = gb.load_workload(CALIBRATE_WORKLOAD)
    cal_run = gb.run(cal_wl, srv.base_url, result_dir=str(tmp_path), run_id="cal")
    assert cal_run.summary["requests"]["failed"] == 0
    profile = str(tmp_path / "cpu-vllm.toml")
    knobs = gb.EngineConfig(max_num_batched_tokens=512, max_num_seqs=16, max_model_len=8192)
    cal = gb.calibrate([cal_run.dir], knobs, out=profile)
    wl_path = tmp_path / "mixed-cpu.toml"
    wl_path.write_text(PREDICT_TOML)
    wl = gb.load_workload(str(wl_path))
    live = gb.run(wl, srv.base_url, result_dir=str(tmp_path), run_id="live").summary
    sim = gb.simulate(wl, gb.EngineConfig(calibration=profile, max_model_len=8192), result_dir=str(tmp_path)).summary
    assert live["requests"]["failed"] == 0 and sim["requests"]["failed"] == 0
    got = {k: (sim[k]["p50"], live[k]["p50"]) for k in ("ttft_ms", "itl_ms")}
    pr = cal.profile
    print(f"\ncalibrated: {pr.terms}; in-sample error TTFT {pr.ttft_pct}%, ITL {pr.itl_pct}%, TPOT {pr.tpot_pct}%")
    print(f"front end (ms), calibration run: {cal.rows[0].get('front_end_ms')}; notes: {cal.notes}")
    q = cal.profile.step_jitter
    print(f"step scatter, 10th-90th percentile: x{q[9]:.3f}-x{q[89]:.3f}" if q else "no step scatter kept")
    print(cal.scheduling)
    print(f"live server timing: {live.get('server_timing')}")
    print(
        "predicted vs live p50 (ms): "
        + ", ".join(f"{k} {p:.1f} vs {m:.1f} ({p / m - 1:+.1%})" for k, (p, m) in got.items())
    )
    # issue 20 asks for ±15%. Measured (docs/real-vllm.md, 2026-11-27/28): 31 of 34 runs within it on a
    # 2-core machine before the profile kept the steps' scatter (TTFT leaning 4-17% fast; two at -16.7% and
    # -16.0%, one on a slowed host at -27.9%); with the scatter, five runs gave TTFT -6.1%, +2.5%, -3.7%, +5.7%, -5.2%,
    # and 13 of 14 kept runs calibrated again were within it (benchmarks/calibrate_jitter.py; the miss, -17.1%,
    # a calibration run that shared the 2 cores with other work and failed the gate below); one beside a CPU hog at TTFT
    # -20.4%, ITL +7.1%. Calibrated on uniform 32-1,024-token prompts instead (3 in 50 under 128 tokens, where 75% of
    # the predicted ones are 64), TTFT came out -8.7% to -28.7% on the same machine, and earlier up to
    # +53% in a fresh-clone CI run. The gates leave room for a slower or busier CI machine, ±40% on TTFT
    # and ±30% on ITL: a guard against a broken calibrate (uncalibrated, the engine predicts TTFT -67%
    # and ITL -81% here), with the target itself measured in the docs.
    # the fit reproduces its own run: TPOT (a request's decode time over its tokens) within 20%. ITL's p50 is
    # held looser, at 35%: a client that shares the cores with the CPU server reads some tokens in pairs, which
    # zeroes gaps and pulls the measured p50 below the steps' time (a fresh-clone CI run, 2026-12-07: in-sample
    # ITL 29.0% with TPOT 9.9% and TTFT 14.2%, the held-out gates below passing; docs/real-vllm.md)
    assert cal.profile.tpot_pct <= 20 and cal.profile.itl_pct <= 35, (cal.profile.tpot_pct, cal.profile.itl_pct)
    # vLLM's CPU backend schedules each step after the one before, at any version (0.32 here reports a
    # version whose GPU default is async): told from the run, objective 1.01 without against 2.09 with
    # (on a noisy host the two fits came within a few percent, 5.49 against 5.63, and the verdict was "cannot
    # tell; assumed off": the assumption is the same, and tests/test_calibrate*.py hold the telling itself)
    assert cal.scheduling.startswith("async scheduling off ("), cal.scheduling
    # ITL's gate was ±30% until that CI run predicted ITL +25.7% (and TTFT +26.1%): ±40% on both now
    for k, gate in (("ttft_ms", 0.40), ("itl_ms", 0.40)):
        pred, meas = got[k]
        assert abs(pred / meas - 1) <= gate, (k, pred, meas)
    assert sim["engine_uncertainty"]["step_time_pct"] == cal.profile.step_time_pct


def test_a_controlled_hit_rate_is_primed_and_verified_on_vllm(pool, tmp_path):
    """--prefix-hit-rate's priming phase against the real vLLM: each shared prefix sent once before the clock,
    then the hit rate vLLM's own prefix-cache counters show over the measured requests meets the stated one."""
    srv = pool.get(512)
    run = run_toml(
        srv,
        tmp_path,
        "hit",
        'num_requests = 16\nseed = 2\n[arrival]\nrate = 4\n[[class]]\nname = "half"\n'
        'input = { dist = "uniform", min = 600, max = 1200 }\noutput = 4\nhit_rate = 0.5\nprimed_prefixes = 2\n',
    )
    assert run.summary["requests"]["failed"] == 0 and run.meta.priming["requests"] == 2
    pc = run.summary["prefix_cache"]
    print(f"target {pc['target_hit_rate']:.3f}, vLLM's counters {pc['measured_hit_rate']:.3f}")
    assert pc["measured_by"] == "counters" and pc["verified"] is True, pc
