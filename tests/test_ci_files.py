"""The ready CI files in ci/ must be valid YAML/TOML and call only goodbench commands and flags that exist."""

import os
import re
import shlex

import pytest
import yaml
from conftest import ROOT

from goodbench.cli import make_parser
from goodbench.workloads.catalog import load_workload

FILES = [
    os.path.join(ROOT, "ci", "github-actions", "goodput-gate.yml"),
    os.path.join(ROOT, "ci", "gitlab", ".gitlab-ci.yml"),
]
TESTS = os.path.join(ROOT, "ci", "github-actions", "tests.yml")


def scripts(doc):
    if isinstance(doc, dict):
        for k, v in doc.items():
            if k in ("run", "script") and isinstance(v, str):
                yield v
            elif k == "script" and isinstance(v, list):
                yield from (x for x in v if isinstance(x, str))
            else:
                yield from scripts(v)
    elif isinstance(doc, list):
        for x in doc:
            yield from scripts(x)


def goodbench_calls(text):
    text = text.replace("\\\n", " ")
    for line in text.splitlines():
        m = re.search(r"\bgoodbench (\w+)(.*)", line)
        if m and not line.strip().startswith("pip"):
            yield m.group(1), m.group(2)


@pytest.mark.parametrize("path", FILES)
def test_workflow_is_valid_yaml_and_calls_real_commands(path):
    with open(path) as f:
        doc = yaml.safe_load(f)
    calls = [c for s in scripts(doc) for c in goodbench_calls(s)]
    assert calls, "the workflow runs goodbench"
    parser = make_parser()
    subs = parser._subparsers._group_actions[0].choices
    for cmd, rest in calls:
        assert cmd in subs, f"goodbench {cmd} does not exist"
        known = {o for a in subs[cmd]._actions for o in a.option_strings}
        for tok in shlex.split(rest.replace("$", "X")):
            if tok.startswith("--"):
                assert tok.split("=")[0] in known, f"goodbench {cmd} has no option {tok}"


def test_gate_example_is_a_valid_gated_workload():
    spec = load_workload(os.path.join(ROOT, "ci", "gate.toml"))
    assert spec.gate["min_attainment"] == 0.95 and spec.slo == {"ttft": 1000.0, "tpot": 50.0}


def test_ci_run_gates_both_ways():
    with open(os.path.join(ROOT, ".ci", "run")) as f:
        text = f.read()
    assert "python -m pytest -q" in text and "--no-enable-chunked-prefill" in text and '"$rc" -ne 1' in text
    with open(os.path.join(ROOT, "README.md")) as f:
        assert "python -m pytest -q" in f.read()


def test_ci_run_installs_vllm_and_runs_the_real_vllm_tests():
    """The real_vllm tests are deselected by default; .ci/run must run them (after the README's command)."""
    with open(os.path.join(ROOT, ".ci", "run")) as f:
        text = f.read()
    main, setup, real = (
        text.index(s)
        for s in ("python -m pytest -q\n", "bash ci/real_vllm/setup.sh", "python -m pytest -q -m real_vllm")
    )
    assert main < setup < real
    with open(os.path.join(ROOT, "README.md")) as f:
        assert "bash ci/real_vllm/setup.sh && python -m pytest -q -m real_vllm" in f.read()
    with open(os.path.join(ROOT, "pyproject.toml")) as f:
        assert "-m 'not real_vllm'" in f.read()


def test_the_test_workflow_covers_every_supported_python():
    from goodbench.workloads.parse import tomllib

    with open(TESTS) as f:
        doc = yaml.safe_load(f)
    versions = doc["jobs"]["test"]["strategy"]["matrix"]["python-version"]
    assert versions == ["3.10", "3.11", "3.12", "3.13"]
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        assert tomllib.load(f)["project"]["requires-python"] == ">=3.10"
    steps = " ".join(s.get("run", "") for s in doc["jobs"]["test"]["steps"])
    assert steps.split() == ["bash", ".ci/run"]  # the workflow runs what the project's own CI runs
    with open(os.path.join(ROOT, ".ci", "run")) as f:
        ci = f.read()
    for step in (
        "ruff check",
        "ruff format --check",
        "python -m pytest -q",
        "ci/real_vllm/setup.sh",
        "-m real_vllm",
        "ci/check_install.sh",
        "--gate",
    ):
        assert step in ci, step
    assert os.access(os.path.join(ROOT, "ci", "check_install.sh"), os.X_OK)
