"""Production trace replay (workloads.traces): the three formats, windows and speed-up, errors naming the
file and line, and Mooncake hash ids becoming identical prompt blocks."""

import json
import os

import pytest
from conftest import run_cli

from goodbench import api
from goodbench.engine.config import EngineConfig
from goodbench.errors import InputError, UsageError
from goodbench.workloads.traces import parse_window, read_trace, segments, select, trace_requests

MOONCAKE = [
    {"timestamp": 0, "input_length": 1100, "output_length": 20, "hash_ids": [7, 8, 9]},
    {"timestamp": 500, "input_length": 700, "output_length": 10, "hash_ids": [7, 11]},
    {"timestamp": 1500, "input_length": 1024, "output_length": 5, "hash_ids": [7, 8]},
]
AZURE = (
    "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n"
    "2023-11-16 18:15:50.9951690,396,109\n2023-11-16 18:15:47.0000000,879,3\n"
)
BURST = (
    "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
    "5.0,ChatGPT,472,18,490,Conversation log\n2.0,GPT-4,1087,292,1379,Conversation log\n"
    "6.0,GPT-4,300,0,300,Conversation log\n"
)  # a failed request: no response tokens, skipped


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def mooncake(tmp_path, rows=MOONCAKE):
    return write(tmp_path, "m.jsonl", "".join(json.dumps(r) + "\n" for r in rows))


def test_the_three_formats_read_as_rows_from_their_first_timestamp(tmp_path):
    m = read_trace(mooncake(tmp_path))
    assert [(r.t, r.input_tokens, r.output_tokens, r.hash_ids) for r in m][1] == (0.5, 700, 10, (7, 11))
    a = read_trace(write(tmp_path, "a.csv", AZURE))
    assert [round(r.t, 3) for r in a] == [0.0, 0.319, 4.315] and a[1].input_tokens == 879  # sorted by time
    b = read_trace(write(tmp_path, "b.csv", BURST))
    assert [(r.t, r.input_tokens, r.output_tokens) for r in b] == [(0.0, 1087, 292), (3.0, 472, 18)]


@pytest.mark.parametrize(
    "name,text,needle",
    [
        (
            "bad.jsonl",
            '{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": []}\n{oops\n',
            "bad.jsonl:2: not JSON",
        ),
        ("neg.jsonl", '{"timestamp": 0, "input_length": -5, "output_length": 1}\n', "neg.jsonl:1: input_length -5"),
        ("a.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,5,5\n", "a.csv:2: TIMESTAMP 'yesterday'"),
        ("b.csv", "Timestamp,Model,Request tokens,Response tokens\n1.0,x,lots,5\n", "b.csv:2: Request tokens 'lots'"),
        ("c.csv", "Timestamp,Tokens\n1,2\n", "cannot tell the trace format"),
        ("d.csv", "TIMESTAMP,ContextTokens\n1,2\n", "needs the columns"),
    ],
)
def test_malformed_rows_name_the_file_and_line(tmp_path, name, text, needle):
    fmt = "azure" if name == "d.csv" else None
    with pytest.raises(InputError, match=needle.replace("(", r"\(")):
        read_trace(write(tmp_path, name, text), fmt)


def test_window_and_speedup():
    rows = read_trace.__globals__["TraceRow"]
    trace = [rows(float(t), 10, 1) for t in range(10)]
    kept = select(trace, speedup=2.0, window=parse_window("3:7"))
    assert [r.t for r in kept] == [0.0, 0.5, 1.0, 1.5]
    with pytest.raises(UsageError):
        parse_window("7:3")


def test_equal_hash_ids_give_identical_prompt_blocks(tmp_path, tok):
    reqs = trace_requests(read_trace(mooncake(tmp_path)), tok, chat=False)
    assert [r.prompt_tokens for r in reqs] == [1100, 700, 1024] and reqs[1].arrival_s == 0.5
    assert reqs[0].prompt[:3000] == reqs[2].prompt[:3000] and tok.count(reqs[0].prompt) == 1100
    assert segments(read_trace(mooncake(tmp_path))[0], 0)[-1] == (("trace-block", 9), 76)


def test_replaying_a_trace_shows_its_reuse_in_the_simulated_cache(tmp_path):
    rows = [
        {"timestamp": 100 * i, "input_length": 2048, "output_length": 8, "hash_ids": [1, 2, 3, 100 + i]}
        for i in range(30)
    ]
    run = api.simulate(api.load_workload(trace=mooncake(tmp_path, rows)), EngineConfig(), result_dir=str(tmp_path))
    pc = run.summary["prefix_cache"]
    assert pc["expected_hit_rate"] == pytest.approx(29 * 1536 / (30 * 2048), abs=0.01)
    assert pc["hit_rate"] == pytest.approx(pc["expected_hit_rate"], abs=0.02)


def test_the_trace_flags(tmp_path):
    path = mooncake(tmp_path)
    r = run_cli(
        "simulate",
        "--trace",
        path,
        "--trace-speedup",
        "10",
        "--trace-window",
        "0:1",
        "--result-dir",
        str(tmp_path / "r"),
    )
    assert r.returncode == 0, r.stderr
    (run,) = os.listdir(tmp_path / "r")
    assert json.loads((tmp_path / "r" / run / "summary.json").read_text())["requests"]["issued"] == 2
    bad = run_cli("simulate", "--trace", write(tmp_path, "x.jsonl", "{nope\n"), "--result-dir", str(tmp_path / "r"))
    assert bad.returncode == 2 and "x.jsonl:1: not JSON" in bad.stderr


def test_mooncake_rows_whose_hash_ids_disagree_with_input_length_are_warned(tmp_path):
    from goodbench.errors import GoodbenchWarning

    rows = [
        {"timestamp": 0, "input_length": 1024, "output_length": 1, "hash_ids": [1, 2]},  # 2 blocks: right
        {"timestamp": 5, "input_length": 100, "output_length": 1, "hash_ids": [1, 2, 3]},  # 1 block, 3 ids
    ]
    p = write(tmp_path, "m.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n")
    with pytest.warns(GoodbenchWarning, match=r"1 of 2 rows have hash_ids that do not match .*line 2"):
        read_trace(p)
