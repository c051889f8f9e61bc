"""Where a run came from, read from the CI's environment; labels from flags and $GOODBENCH_LABELS."""

import os

import pytest

from goodbench.errors import UsageError
from goodbench.history.provenance import LABELS_ENV, labels_in_env, parse_labels, provenance, run_labels


def test_github_actions():
    env = {
        "GITHUB_ACTIONS": "true",
        "GITHUB_SHA": "abc123",
        "GITHUB_REF_NAME": "main",
        "GITHUB_RUN_ID": "42",
        "GITHUB_RUN_ATTEMPT": "2",
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_REPOSITORY": "o/r",
        "GITHUB_TOKEN": "secret",
    }
    p = provenance(env)
    assert p == {
        "ci": "github",
        "commit": "abc123",
        "branch": "main",
        "build": "42.2",
        "build_url": "https://github.com/o/r/actions/runs/42",
    }
    assert "secret" not in repr(p)


@pytest.mark.parametrize(
    "env,expect",
    [
        (
            {"GITLAB_CI": "true", "CI_COMMIT_SHA": "g1", "CI_PIPELINE_ID": "7"},
            {"ci": "gitlab", "commit": "g1", "build": "7"},
        ),
        (
            {"BUILDKITE": "true", "BUILDKITE_COMMIT": "b1", "BUILDKITE_BRANCH": "x"},
            {"ci": "buildkite", "commit": "b1", "branch": "x"},
        ),
        (
            {"JENKINS_URL": "http://j", "GIT_COMMIT": "j1", "BUILD_NUMBER": "3"},
            {"ci": "jenkins", "commit": "j1", "build": "3"},
        ),
        ({"GOODBENCH_COMMIT": "srv9"}, {"commit": "srv9"}),
        ({}, None),
    ],
)
def test_other_ci_systems_and_overrides(env, expect):
    assert provenance(env) == expect


def test_the_override_wins_over_the_ci():
    p = provenance({"GITHUB_ACTIONS": "true", "GITHUB_SHA": "job", "GOODBENCH_COMMIT": "vllm-sha"})
    assert p["commit"] == "vllm-sha" and p["ci"] == "github"


def test_labels_parse_and_merge():
    assert parse_labels(["gpu=h100", "branch=main,runner=a"]) == {"gpu": "h100", "branch": "main", "runner": "a"}
    assert run_labels({"branch": "pr"}, env={LABELS_ENV: "branch=main,nightly=1"}) == {"branch": "pr", "nightly": "1"}
    for bad in ("novalue", "=x", "sp ace=1", "k" * 65 + "=v"):
        with pytest.raises(UsageError, match="KEY=VALUE"):
            parse_labels([bad])


def test_labels_in_env_restores_what_was_there(monkeypatch):
    monkeypatch.setenv(LABELS_ENV, "a=1")
    with labels_in_env({"b": "2"}):
        assert os.environ[LABELS_ENV] == "a=1,b=2"
    assert os.environ[LABELS_ENV] == "a=1"
    monkeypatch.delenv(LABELS_ENV)
    with labels_in_env({"b": "2"}):
        assert os.environ[LABELS_ENV] == "b=2"
    assert LABELS_ENV not in os.environ
