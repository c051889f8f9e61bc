"""The fault probe's hostile inputs, kept as a corpus (tests/data/hostile/): workload files, traces,
records and flags that once hung goodbench, ran it out of memory or ended in a traceback. Each must be
one line on stderr naming what is wrong, exit 2, within seconds, before the clock starts (limits.py)."""

import json
import os
import signal

import pytest
from conftest import ROOT

from goodbench.cli import main

HOSTILE = os.path.join(ROOT, "tests", "data", "hostile")

WORKLOADS = {
    "hol-stagger-nan.toml": "hol.stagger_ms: must be a finite number, got nan",
    "hol-shorts-huge.toml": "hol.shorts: must be <= 1e+07",
    "hol-period-inf.toml": "hol.period_s: must be a finite number, got inf",
    "hol-not-a-table.toml": "hol: expected a table",
    "class-ints.toml": "class[0]: expected a [[class]] table",
    "duration-inf.toml": "duration_s: must be a finite number",
    "duration-nan.toml": "duration_s: must be a finite number",
    "weight-nan.toml": "class[0].weight: must be a finite number",
    "weight-inf.toml": "class[0].weight: must be a finite number",
    "reasoning-nan.toml": "class[0].reasoning: must be a finite number",
    "seed-negative.toml": "seed: must be >= 0, got -1",
    "gate-lots.toml": "gate.min_attainment 'lots' is not a number",
    "gate-ceiling-nan.toml": "gate.p99.ttft must be a number, got nan",
    "num-requests-huge.toml": "num_requests: more than 10,000,000 requests",
    "rate-zero.toml": "arrival.rate: must be > 0, got 0",
    "burstiness-negative.toml": "arrival.burstiness: must be > 0, got -1",
    "input-huge.toml": "class[0].input: token count must be <= 1e+07",
    "sigma-huge.toml": "class[0].input.sigma: must be <= 20",
    "slo-not-a-table.toml": "slo: expected a table",
    "arrival-not-a-table.toml": "arrival: expected a table",
    "concurrency-huge.toml": "arrival.concurrency: must be <= 100000",
    "arrival-trace-nan.toml": "timestamp nan (entry 2) is not a time",
    "trace-huge-input.toml": "input_length 1000000000 is out of range",
    "invalid-utf8.toml": "not UTF-8 text (byte 11)",
}

TRACES = {
    "mooncake-huge-input.jsonl": "input_length 1000000000 is out of range",
    "mooncake-1e400.jsonl": ":2: timestamp inf is not a time",
    "mooncake-hash-dict.jsonl": "hash_ids must be a list of block ids",
    "mooncake-list-row.jsonl": ":2: expected timestamp, input_length",
    "mooncake-invalid-utf8.jsonl": "not UTF-8 text",
    "burstgpt-inf.csv": ":3: Timestamp 'inf' is not a time",
    "burstgpt-negative-tokens.csv": "Request tokens -10 is out of range",
    "azure-bad-date.csv": "TIMESTAMP 'yesterday' is not a date-time",
}


@pytest.fixture(autouse=True)
def _bounded():
    """Every case ends within 20 s (a hang is the failure this corpus was made of)."""

    def late(*_):
        raise AssertionError("hostile input still running after 20 s")

    old = signal.signal(signal.SIGALRM, late)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def one_line_exit_2(capsys, argv, needle):
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    assert err.strip().count("\n") == 0 and needle in err, err
    return err


@pytest.mark.parametrize("name", WORKLOADS)
def test_hostile_workload_files(capsys, tmp_path, name):
    path = os.path.join(HOSTILE, "workloads", name)
    err = one_line_exit_2(capsys, ["simulate", "--workload", path, "--result-dir", str(tmp_path)], WORKLOADS[name])
    assert name in err or "/traces/" in err  # the message names the file that is wrong
    assert not any(tmp_path.iterdir())  # refused before a run directory was made


@pytest.mark.parametrize("name", TRACES)
def test_hostile_traces(capsys, tmp_path, name):
    path = os.path.join(HOSTILE, "traces", name)
    one_line_exit_2(capsys, ["simulate", "--trace", path, "--result-dir", str(tmp_path)], TRACES[name])
    assert not any(tmp_path.iterdir())


FLAGS = [
    (["simulate", "--fixed-step-ms", "-1"], "--fixed-step-ms must be >= 0.001, got -1"),
    (["simulate", "--fixed-step-ms", "1e-300"], "--fixed-step-ms must be >= 0.001"),
    (["simulate", "--fixed-step-ms", "0"], "--fixed-step-ms must be >= 0.001, got 0"),
    (["simulate", "--step-overhead-ms", "-1000"], "--step-overhead-ms must be >= 0, got -1000"),
    (["simulate", "--step-overhead-ms", "nan"], "--step-overhead-ms must be a number, got nan"),
    (["simulate", "--seed", "-1"], "--seed must be >= 0, got -1"),
    (["run", "--concurrency", "100000000", "--duration", "3"], "--concurrency must be <= 100000"),
]


@pytest.mark.parametrize("argv,needle", FLAGS, ids=[" ".join(f[0]) for f in FLAGS])
def test_hostile_flags(capsys, tmp_path, argv, needle):
    one_line_exit_2(capsys, [*argv, "--num-prompts", "3", "--result-dir", str(tmp_path)], needle)
    assert not any(tmp_path.iterdir())


def test_a_gate_ceiling_that_is_not_a_number(capsys, tmp_path):
    run = _run_dir(tmp_path, [_record(0)])
    one_line_exit_2(capsys, ["gate", run, "--p99", "ttft:nan"], "--p99 'ttft:nan': must be a number, got nan")


def _record(i, **kw):
    return {
        "id": f"r{i}",
        "cls": "c",
        "scheduled_at": 0.0,
        "sent_at": 0.0,
        "first_token_at": 0.1,
        "finished_at": 0.2,
        "chunk_times": [0.1, 0.2],
        "chunk_tokens": [1, 1],
        "output_tokens": 2,
        **kw,
    }


def _run_dir(tmp_path, lines) -> str:
    from goodbench.records import RunMeta
    from goodbench.store import RunStore

    store = RunStore(str(tmp_path), "hostile")
    store.start(RunMeta(run_id="hostile", mode="open"))
    store.close()
    with open(store.records_path, "wb") as f:
        for x in lines:
            f.write((x if isinstance(x, bytes) else json.dumps(x).encode()) + b"\n")
    return store.dir


RECORDS = {
    "a-list-line": ([_record(0), [1, 2, 3], _record(1)], ":2: corrupt record: a JSON list, not an object"),
    "invalid-utf8": ([_record(0), b'{"id": "r1", "cls": "\xff"}', _record(1)], ":2: corrupt record"),
    "a-string-sent-at": ([_record(0), _record(1, sent_at="soon")], ':2: corrupt record: sent_at is "soon"'),
    "usage-1e23": ([_record(0), _record(1, output_tokens=10**23)], "a record with a value of the wrong type"),
}


@pytest.mark.parametrize("case", RECORDS)
@pytest.mark.parametrize("command", ["report", "gate"])
def test_hostile_records(capsys, tmp_path, case, command):
    lines, needle = RECORDS[case]
    run = _run_dir(tmp_path, lines)
    if command == "report":
        one_line_exit_2(capsys, [command, run, "--no-figures"], needle)
        return
    code = main([command, run, "--allow-incomplete"])  # gate: "cannot judge", its verdict on stdout
    out = capsys.readouterr()
    assert code == 2 and "Traceback" not in out.err and needle in " ".join(out.out.split()), out


@pytest.mark.parametrize("flag", ["--limit", "--last"])
def test_history_counts_beyond_any_catalogue_are_one_line(capsys, tmp_path, flag):
    """SQLite holds 64-bit integers: a larger --limit was an IntegrityError traceback (limits.py bounds it)."""
    from goodbench.records import RunMeta
    from goodbench.rundir import RunDir

    RunDir.open(str(tmp_path), RunMeta("r")).finish()  # a catalogue with one run in it
    sub = ["list"] if flag == "--limit" else ["trend"]
    one_line_exit_2(capsys, ["history", *sub, flag, "99999999999999999999"], f"{flag} must be <= 1e+07")


def _nested_weka(levels: int) -> str:
    inner = '{"in": 10, "out": 5}'
    for _ in range(levels):
        inner = '{"type": "subagent", "requests": [{"in": 10, "out": 5}, ' + inner + "]}"
    return '{"requests": [{"in": 10, "out": 5}, ' + inner + "]}"


ROW = '{"job": "j0", "node": 0, "parents": [], "in": 10, "out": 5'
AGENT_TRACES = {
    "arrival-1e300": (ROW + ', "arrival_s": 1e300}', "'arrival_s' must be <= 1e+09, got 1e+300"),
    "arrival-nan": (ROW + ', "arrival_s": NaN}', "'arrival_s' must be a number, got nan"),
    "arrival-1e400": (ROW + ', "arrival_s": 1e400}', "'arrival_s' must be finite, got inf"),
    "delay-nan": (ROW + '}\n{"job": "j0", "node": 1, "parents": [0], "in": 9, "out": 5, "delay_ms": NaN}', "'delay_ms' must be a number, got nan"),
    "delay-string": (ROW + ', "delay_ms": "12"}', "'delay_ms' expected a number, got '12'"),
    "parent-negative": (ROW + '}\n{"job": "j0", "node": 1, "parents": [-1], "in": 9, "out": 5}', "'parents' must be a list of node numbers"),
    "block-size-zero": (ROW + ', "block_size": 0}', "'block_size' must be an integer from 1"),
    "hash-ids-dicts": (ROW + ', "hash_ids": [{}]}', "'hash_ids' must be a list of integers or strings"),
    "deep-line": ("[" * 100_000 + "]" * 100_000, "nested too deep"),
    "weka-think-nan": ('{"requests": [{"in": 10, "out": 5, "think_time": NaN}]}', "'think_time' must be a number, got nan"),
    "weka-think-1e400": ('{"requests": [{"in": 10, "out": 5, "think_time": 1e400}]}', "'think_time' must be finite"),
    "weka-nested-150": (_nested_weka(150), "sub-agents nested more than 100 deep"),
    "weka-nested-3000": (_nested_weka(3000), "nested too deep"),
    "weka-requests-string": ('{"requests": [{"type": "subagent", "requests": "x"}]}', "'requests' must be a list"),
}  # fmt: skip


@pytest.mark.parametrize("name", AGENT_TRACES)
def test_hostile_agent_traces(capsys, tmp_path, name):
    """Probe of issue 42: NaN or 1e400 delays spun simulate, 1e300 times gave TTFT/JCT 0 or inf with exit 0,
    negative parents, strings, 1e5-deep lines and 3,000 nested sub-agents ended in tracebacks."""
    text, needle = AGENT_TRACES[name]
    (tmp_path / "t.jsonl").write_text(text)
    (tmp_path / "a.toml").write_text('generator = "agent"\n[arrival]\nrate = 4\n[agent]\ntrace = "t.jsonl"\n')
    out = tmp_path / "out"
    one_line_exit_2(capsys, ["simulate", "--workload", str(tmp_path / "a.toml"), "--result-dir", str(out)], needle)
    assert not out.exists()


def test_an_agent_trace_that_is_not_utf8(capsys, tmp_path):
    (tmp_path / "t.jsonl").write_bytes(b'{"job": "j\xff0", "node": 0, "in": 5, "out": 5}\n')
    (tmp_path / "a.toml").write_text('generator = "agent"\n[arrival]\nrate = 4\n[agent]\ntrace = "t.jsonl"\n')
    one_line_exit_2(capsys, ["simulate", "--workload", str(tmp_path / "a.toml")], "not UTF-8 text (byte 10)")


@pytest.mark.parametrize(
    "agent,needle",
    [
        ("jobs = 10000000", "80,000,000 calls or more"),
        ("depth = 1000\nfanout = 1000", "calls or more, over the 1,000,000"),
        ("fanout = 10000000", "calls or more, over the 1,000,000"),
    ],
)
def test_agent_jobs_whose_product_no_run_can_build(capsys, tmp_path, agent, needle):
    """Each of jobs, depth and fan-out passes its own limit; their product (0.8-2.2 GB, > 90 s in the
    probe) is refused at once, or before the job that tips it is drawn."""
    (tmp_path / "a.toml").write_text(f'generator = "agent"\n[arrival]\nrate = 4\n[agent]\n{agent}\n')
    out = tmp_path / "out"
    one_line_exit_2(capsys, ["simulate", "--workload", str(tmp_path / "a.toml"), "--result-dir", str(out)], needle)
    assert not out.exists()
