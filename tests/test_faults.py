"""The fault probe, kept: process faults (killed runs, a full disk, early client disconnects) and bad input,
through the `goodbench` command as a user meets them (docs/reliability.md). Signals: test_signals.py."""

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest
from conftest import ROOT, run_cli

RUN = [
    "run",
    "--dataset-name",
    "random",
    "--random-input-len",
    "16",
    "--random-output-len",
    "40",
    "--request-rate",
    "20",
    "--fixed-step-ms",
    "10",
    "--quiet",
]


def read(path) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def start(tmp_path, *extra):
    env = dict(os.environ, GOODBENCH_CACHE_DIR=str(tmp_path / "c"))
    return subprocess.Popen(
        [sys.executable, "-m", "goodbench", *RUN, "--result-dir", str(tmp_path / "r"), *extra],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_records(tmp_path, n: int, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        d = tmp_path / "r"
        for run in os.listdir(d) if d.exists() else []:
            p = d / run / "records.jsonl"
            if p.exists() and p.read_text().count("\n") >= n:
                return str(d / run)
        time.sleep(0.1)
    raise AssertionError("the run never wrote records")


def test_a_killed_run_leaves_no_engine_log_in_the_temp_directory(tmp_path):
    import tempfile

    before = {f for f in os.listdir(tempfile.gettempdir()) if f.startswith("goodbench-engine-")}
    p = start(tmp_path, "--num-prompts", "300")
    wait_for_records(tmp_path, 3)
    p.kill()
    p.communicate(timeout=30)
    after = {f for f in os.listdir(tempfile.gettempdir()) if f.startswith("goodbench-engine-")}
    assert after <= before


def test_a_huge_count_with_a_duration_builds_only_what_the_duration_needs(tmp_path):
    t = time.monotonic()
    r = run_cli(
        "simulate",
        "--dataset-name",
        "random",
        "--random-input-len",
        "8",
        "--random-output-len",
        "2",
        "--num-prompts",
        "10000000000",
        "--duration",
        "2",
        "--request-rate",
        "5",
        "--fixed-step-ms",
        "1",
        "--result-dir",
        str(tmp_path),
    )
    assert r.returncode == 0, r.stderr
    assert time.monotonic() - t < 30
    (run,) = os.listdir(tmp_path)
    s = json.loads((tmp_path / run / "summary.json").read_text())
    assert 3 <= s["requests"]["issued"] <= 25  # Poisson at 5/s for 2 s


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--num-prompts", "0"], "--num-prompts must be >= 1, got 0"),
        (["--num-prompts", "-3"], "--num-prompts must be >= 1"),
        (["--duration", "-5"], "--duration must be > 0"),
        (["--max-concurrency", "0"], "--max-concurrency must be >= 1"),
        (["--max-concurrency", "-2"], "--max-concurrency must be >= 1"),
        (["--random-output-len", "0"], "--random-output-len must be >= 1"),
        (["--random-input-len", "-5"], "--random-input-len must be >= 1"),
        (["--timeout", "0"], "--timeout must be > 0"),
        (["--request-rate", "-1"], "--request-rate must be > 0"),
        (["--request-rate", "fast"], "--request-rate 'fast' is not a number"),
        (["--num-prompts", "100000000"], "give --duration too"),
        (["--warmup", "5", "--num-prompts", "5"], "leaves none of the 5 requests"),
    ],
)
def test_bad_numbers_are_one_line_exit_2_and_leave_nothing_behind(tmp_path, args, needle):
    r = run_cli("run", "--dataset-name", "random", "--result-dir", str(tmp_path / "r"), *args)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert needle in r.stderr and r.stderr.strip().count("\n") == 0
    assert not (tmp_path / "r").exists()


def test_a_result_dir_that_is_a_file_is_one_line_exit_2(tmp_path):
    (tmp_path / "f").write_text("x")
    r = run_cli("simulate", "--num-prompts", "2", "--result-dir", str(tmp_path / "f"))
    assert r.returncode == 2 and "Traceback" not in r.stderr and "cannot create the run directory" in r.stderr


def test_a_run_where_every_request_fails_exits_2_and_is_invalid(tmp_path):
    r = run_cli(
        "simulate",
        "--dataset-name",
        "random",
        "--random-input-len",
        "200000",
        "--num-prompts",
        "3",
        "--result-dir",
        str(tmp_path),
    )
    assert r.returncode == 2 and "no request succeeded" in r.stdout
    (run,) = os.listdir(tmp_path)
    s = json.loads((tmp_path / run / "summary.json").read_text())
    assert s["valid"] is False and s["requests"]["completed"] == 0


def test_a_dataset_file_that_is_not_json_says_so(tmp_path):
    f = tmp_path / "data.json"
    f.write_text("id,text\n1,[hello]\n")
    r = run_cli(
        "simulate",
        "--dataset-name",
        "sharegpt",
        "--dataset-path",
        str(f),
        "--num-prompts",
        "2",
        "--result-dir",
        str(tmp_path / "r"),
    )
    assert r.returncode == 2 and "not a JSON array of conversations" in r.stderr and str(f) in r.stderr


@pytest.mark.slow
def test_early_client_disconnects_even_before_the_headers_leave_no_tracebacks_in_the_engine_log(tmp_path):
    from goodbench.serverproc import free_port

    port = free_port()
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        p = subprocess.Popen(
            [sys.executable, "-m", "goodbench", "serve", "--port", str(port), "--fixed-step-ms", "5"],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1):
                    break
            except OSError:
                time.sleep(0.1)
        import socket

        for k, stream in enumerate((True, False) * 15):
            body = json.dumps({"prompt": "x " * (20 * k), "max_tokens": 500, "stream": stream}).encode()
            with socket.create_connection(("127.0.0.1", port)) as s:
                s.sendall(
                    b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
                )
                if k < 6:
                    time.sleep(0.05)  # then hang up mid-response
                else:  # or at once, with a reset, before the headers go out
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        time.sleep(0.5)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            metrics = resp.read().decode()
        running = [ln for ln in metrics.splitlines() if ln.startswith("vllm:num_requests_running{")]
        assert running and running[0].endswith(" 0"), running  # every abandoned request was aborted
    finally:
        p.send_signal(signal.SIGINT)
        p.wait(30)
    assert p.returncode == 0
    assert "Traceback" not in log.read_text()


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_full_disk_ends_the_run_at_once_with_a_summary_and_no_temporary_files(tmp_path, workers):
    """A file-size limit (RLIMIT_FSIZE: records.jsonl may not pass 48 KB) stands in for a full disk: the
    run stops at the first record it cannot write, says so in one line, exits 2, keeps every record
    written before, summarises them, and leaves no temporary file."""
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (48_000, 48_000))

    env = dict(os.environ, GOODBENCH_CACHE_DIR=str(tmp_path / "c"))
    args = ["--num-prompts", "600", "--request-rate", "300", "--random-output-len", "8", "--fixed-step-ms", "2"]
    args += ["--workers", workers]
    p = subprocess.run(
        [sys.executable, "-m", "goodbench", *RUN, *args, "--result-dir", str(tmp_path / "r"), "--run-id", "full"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=limit,
    )
    err_lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr[-3000:]
    assert len(err_lines) == 1 and "records.jsonl: File too large; the run stopped there" in err_lines[0]
    run_dir = tmp_path / "r" / "full"
    lines = read(run_dir / "records.jsonl").splitlines()
    assert 20 < len(lines) < 600 and all(json.loads(x)["id"] for x in lines)  # whole lines only
    summary = json.loads(read(run_dir / "summary.json"))  # the summary of what was written
    assert summary["requests"]["issued"] == len(lines) and "requests" in p.stdout
    assert json.loads(read(run_dir / "run.json"))["interrupted"] is True
    assert not [f for f in os.listdir(run_dir) if "tmp" in f]
