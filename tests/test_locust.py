"""locust integration, always in subprocesses (locust monkey-patches the interpreter with gevent),
headless, bounded in time, against the reference engine on loopback."""

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import ROOT, reference_engine
from recs import same_summary

# never import locust here: it monkey-patches this interpreter with gevent
# the test command installs them (the [dev] extra carries locust and httpx): missing is a broken install
if importlib.util.find_spec("locust") is None or importlib.util.find_spec("httpx") is None:
    pytest.fail("locust and httpx are missing: pip install -e '.[dev]' (or '.[locust]')", pytrace=False)

WORKLOAD = """
name = "tiny"
num_requests = 40
seed = 3
[[class]]
name = "short"
weight = 0.7
input = 32
output = 12
[[class]]
name = "long"
weight = 0.3
input = 600
output = 6
"""


@pytest.fixture(scope="module")
def engine():
    yield from reference_engine(5)


def results(d):
    (run,) = os.listdir(d)
    with open(os.path.join(d, run, "summary.json")) as f:
        summary = json.load(f)
    with open(os.path.join(d, run, "records.jsonl")) as f:
        recs = [json.loads(x) for x in f.read().splitlines()]
    return summary, recs


def locust(tmp_path, url, slo, *extra, workload=None, out="r", merged=False):
    """A headless single-process locust run of the goodput locustfile (default: the tiny WORKLOAD
    file; results under tmp_path/out)."""
    if workload is None:
        workload = tmp_path / "w.toml"
        workload.write_text(WORKLOAD)
    cmd = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        os.path.join(ROOT, "locustfiles", "goodput.py"),
        "--headless",
        "-u",
        "4",
        "-r",
        "4",
        "-t",
        "60s",
        "--host",
        url,
        "--goodbench-workload",
        str(workload),
        "--goodbench-result-dir",
        str(tmp_path / out),
        "--goodbench-slo",
        slo,
        *extra,
    ]
    if merged:  # stdout and stderr in the order a terminal shows them (p.stdout; p.stderr is None)
        return subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_single_process_run_writes_results_and_passes(engine, tmp_path):
    p = locust(tmp_path, engine, "ttft:2000 tpot:100", merged=True)
    assert p.returncode == 0, p.stdout[-4000:]
    summary, recs = results(tmp_path / "r")
    assert len(recs) == 40 and summary["requests"]["completed"] == 40 and summary["slo_attainment"] == 1.0
    assert {r["cls"] for r in recs} == {"short", "long"} and all(len(r["chunk_times"]) in (6, 12) for r in recs)
    assert "PASS" in p.stdout and "TTFT" in p.stdout  # goodbench's summary and locust's own table
    # goodbench's summary comes last, after locust's tables, and says why the run ended
    assert p.stdout.rindex("PASS") > p.stdout.rindex("Aggregated")
    assert "ended: the workload ran out: all 40 requests were sent and answered" in p.stdout
    import goodbench as gb

    (run,) = os.listdir(tmp_path / "r")
    same_summary(summary, gb.summarize(str(tmp_path / "r" / run)))  # the master composes as every path does


def test_a_run_locust_stops_says_so(engine, tmp_path):
    """locust's -t ends the run before the workload does: the summary says who ended it and when."""
    w = tmp_path / "slow.toml"
    w.write_text(WORKLOAD.replace("seed = 3", "seed = 3\n[arrival]\nrate = 2.0"))
    p = locust(tmp_path, engine, "ttft:2000", "--goodbench-open-loop", "-t", "5s", workload=w, merged=True)
    assert "ended: locust stopped the run (its -t 5 s run time" in p.stdout, p.stdout[-4000:]
    assert "of 40 requests" in p.stdout


def test_failing_slo_sets_exit_code_1(engine, tmp_path):
    p = locust(tmp_path, engine, "ttft:1")
    assert p.returncode == 1, p.stdout[-2000:] + p.stderr[-2000:]
    summary, _ = results(tmp_path / "r")
    assert summary["slo_attainment"] < 0.95


def test_custom_arguments_go_through_locusts_parser():
    # (locust 2.39 prints --help before it loads the locustfile, so they are not listed there;
    # a bad value shows they are real locust options)
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "locust",
            "-f",
            os.path.join(ROOT, "locustfiles", "goodput.py"),
            "--headless",
            "--goodbench-min-attainment",
            "lots",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode != 0 and "--goodbench-min-attainment" in p.stderr and "invalid float" in p.stderr


@pytest.mark.parametrize("slo,code", [("ttft:2000 tpot:100", 0), ("ttft:1", 1)])
def test_master_and_two_workers_merge_records(engine, tmp_path, slo, code):
    w = tmp_path / "w.toml"
    w.write_text(WORKLOAD)
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "goodbench",
            "run",
            "--via",
            "locust",
            "--locust-workers",
            "2",
            "--users",
            "4",
            "--base-url",
            engine,
            "--workload",
            str(w),
            "--goodput",
            *slo.split(),
            "--result-dir",
            str(tmp_path / "r"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert p.returncode == code, p.stdout[-2000:] + p.stderr[-2000:]
    summary, recs = results(tmp_path / "r")
    assert len(recs) == 40 and len({r["id"] for r in recs}) == 40  # each worker took its share
    assert len({r["origin"] for r in recs}) == 2  # two clocks, kept apart
    assert summary["requests"]["issued"] == 40
    (run,) = os.listdir(tmp_path / "r")
    with open(tmp_path / "r" / run / "run.json") as f:
        server = json.load(f)["server"]  # asked before the load, as a native run asks (history: server info)
    assert server and server.get("owned_by"), server


def test_open_loop_follows_the_arrival_schedule(engine, tmp_path):
    w = tmp_path / "w.toml"
    w.write_text(WORKLOAD + '\n[arrival]\nprocess = "poisson"\nrate = 20.0\n')
    cmd = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        os.path.join(ROOT, "locustfiles", "goodput.py"),
        "--headless",
        "-u",
        "16",
        "-r",
        "100",
        "-t",
        "60s",
        "--host",
        engine,
        "--goodbench-workload",
        str(w),
        "--goodbench-open-loop",
        "--goodbench-result-dir",
        str(tmp_path / "r"),
        "--goodbench-slo",
        "ttft:2000",
    ]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    summary, recs = results(tmp_path / "r")
    sched = sorted(r["scheduled_at"] for r in recs)
    assert len(recs) == 40 and summary["label"] == "locust-open"
    assert 1.0 < sched[-1] < 6.0  # 40 Poisson arrivals at 20/s span about 2 s
    assert summary["scheduled_rate"] == pytest.approx(20, rel=0.5)
    assert summary["schedule_lag_ms"]["n"] == 40  # sends that slip behind the schedule show up as lag
    lags = sorted(r["sent_at"] - r["scheduled_at"] for r in recs)
    assert lags[0] >= -0.01 and lags[20] < 0.2


TRACE = (
    "\n".join(
        json.dumps(
            {
                "timestamp": 100 * k,
                "input_length": 64 + 64 * (k % 3),
                "output_length": 3 + k % 4,
                "hash_ids": [k % 2, 10 + k],
            }
        )
        for k in range(12)
    )
    + "\n"
)
SESSIONS = """
name = "tiny-sessions"
generator = "sessions"
endpoint = "chat"
seed = 1
[arrival]
process = "poisson"
rate = 20.0
[session]
sessions = 4
turns = 3
user = 16
output = 4
think_s = 0.01
system_tokens = 32
"""


def test_trace_and_session_workloads_replay_their_own_plan_under_locust(engine, tmp_path):
    """--via locust builds the same plan as `goodbench run` (it used to replay traces and sessions as
    the plain mixture): trace rows keep their lengths and times, sessions their turns."""
    (tmp_path / "t.jsonl").write_text(TRACE)
    (tmp_path / "trace.toml").write_text(
        'name = "t"\ngenerator = "trace"\n[trace]\npath = "t.jsonl"\nformat = "mooncake"\n'
    )
    (tmp_path / "s.toml").write_text(SESSIONS)
    p = locust(tmp_path, engine, "ttft:5000", "--goodbench-open-loop", workload=tmp_path / "trace.toml", out="t")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    _, recs = results(tmp_path / "t")
    assert len(recs) == 12
    assert sorted(r["prompt_tokens"] for r in recs) == sorted(64 + 64 * (k % 3) for k in range(12))
    assert sorted(r["scheduled_at"] for r in recs) == pytest.approx([0.1 * k for k in range(12)], abs=1e-6)
    p = locust(tmp_path, engine, "ttft:5000", workload=tmp_path / "s.toml", out="s")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    summary, recs = results(tmp_path / "s")
    assert len(recs) == 12 and summary["sessions"]["completed"] == 4
    assert sorted((r["session"], r["turn"]) for r in recs) == sorted(
        (s, t) for s in {r["session"] for r in recs} for t in (1, 2, 3)
    )


def _via_locust(engine, tmp_path, *extra, **kw):
    cmd = [sys.executable, "-m", "goodbench", "run", "--via", "locust", "--base-url", engine]
    cmd += ["--dataset-name", "random", "--random-input-len", "16", "--random-output-len", "40"]
    return subprocess.Popen(
        [*cmd, "--result-dir", str(tmp_path / "r"), *extra],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        **kw,
    )


def test_a_taken_run_id_is_refused_before_any_load(engine, tmp_path):
    (tmp_path / "r" / "taken").mkdir(parents=True)
    (tmp_path / "r" / "taken" / "run.json").write_text("{}")
    p = _via_locust(engine, tmp_path, "--num-prompts", "5", "--run-id", "taken")
    out = p.communicate(timeout=60)[0].decode()
    assert p.returncode == 2 and "already holds a run" in out and "Traceback" not in out, out[-2000:]
    assert "Starting Locust" not in out  # refused up front, not after the run


def test_workers_that_miss_their_heartbeats_end_the_run_with_a_message(engine, tmp_path):
    """Both workers paused (SIGSTOP) past locust's heartbeat timeout right after they start sending: the
    master stops the test; goodbench ends within seconds with what it has, marked incomplete, instead of
    waiting on a stopped master until its 24 h time limit."""
    tag = f"stop-{os.getpid()}-{time.monotonic_ns()}"
    env = dict(os.environ, GB_SIGNAL_TAG=tag)
    p = _sending(engine, tmp_path, "400", env)
    workers = _tagged_workers(tag)
    assert len(workers) == 2
    for w in workers:
        os.kill(w, signal.SIGSTOP)
    time.sleep(5.5)  # locust marks a worker missing after 3 missed 1 s heartbeats (4 s)
    for w in workers:
        os.kill(w, signal.SIGCONT)
    out = p.communicate(timeout=40)[0].decode()
    assert p.returncode == 2 and "locust stopped the test before the plan ended" in out, out[-3000:]
    (run,) = os.listdir(tmp_path / "r")
    from goodbench.store import incomplete

    assert incomplete(str(tmp_path / "r" / run))  # the gate will not judge it as a whole run


def _sending(engine, tmp_path, prompts: str, env) -> subprocess.Popen:
    """`run --via locust` with two workers, once its first records are written."""
    p = _via_locust(engine, tmp_path, "--num-prompts", prompts, "--locust-workers", "2", "--users", "4", env=env)
    deadline = time.monotonic() + 60
    while not ((tmp_path / "r").exists() and _records(tmp_path)):
        assert time.monotonic() < deadline and p.poll() is None, "the run never started sending"
        time.sleep(0.05)
    return p


def _tagged_workers(tag: str) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/environ", "rb") as f, open(f"/proc/{d}/cmdline", "rb") as c:
                    if f"GB_SIGNAL_TAG={tag}".encode() in f.read().split(b"\0") and b"--worker" in c.read():
                        out.append(int(d))
            except OSError:
                pass
    return out


def test_a_worker_that_dies_mid_run_ends_the_run_with_a_message(engine, tmp_path):
    """One of two workers killed while sending: its share of the plan can never finish and locust goes on
    with the other, so the master would wait for it until its 24 h time limit. goodbench stops the master,
    which writes what arrived, marked incomplete; exit 2 with one line saying why."""
    tag = f"kill-{os.getpid()}-{time.monotonic_ns()}"
    env = dict(os.environ, GB_SIGNAL_TAG=tag)
    p = _sending(engine, tmp_path, "200", env)
    os.kill(_tagged_workers(tag)[0], signal.SIGKILL)
    try:
        out = p.communicate(timeout=60)[0].decode()
    except subprocess.TimeoutExpired:
        p.kill()  # its children die with it (proctree)
        raise
    assert p.returncode == 2 and "a locust worker exited (code -9) before the run ended" in out, out[-3000:]
    (run,) = os.listdir(tmp_path / "r")
    from goodbench.store import incomplete, load

    assert incomplete(str(tmp_path / "r" / run)) and load(str(tmp_path / "r" / run)).records


def _records(tmp_path) -> int:
    d = tmp_path / "r"
    return sum(
        (d / r / "records.jsonl").read_text().count("\n") for r in os.listdir(d) if (d / r / "records.jsonl").exists()
    )


def test_a_locust_process_speaks_the_api_its_path_names():
    """Locust built its client config by hand: Messages got no x-api-key / anthropic-version (an
    Anthropic server refuses the request) and a custom path always got completions bodies. It now
    builds it as `goodbench run` does (in a child: importing locust monkey-patches the process)."""
    code = """
import dataclasses
from goodbench.integrations.locust import client_config
from goodbench.workloads import load_workload
spec = load_workload("mixed-long-short")
cfg = client_config(spec, "http://h", "/v1/messages", "m", "sk-x")
assert cfg.api == "messages", cfg.api
assert cfg.headers()["x-api-key"] == "sk-x" and "anthropic-version" in cfg.headers()
chat = dataclasses.replace(spec, endpoint="chat")
assert client_config(chat, "http://h", "/proxy/generate", "m", None).api == "chat"
assert client_config(spec, "http://h", "/v1/completions", "m", None).headers() == {}
print("ok")
"""
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.strip().endswith("ok"), p.stdout[-2000:] + p.stderr[-2000:]
