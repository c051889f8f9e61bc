"""Where a run came from, read from the environment at run start: the git commit, branch and CI build a
CI system exports (GitHub Actions, GitLab, Buildkite, CircleCI, Jenkins, Azure Pipelines, Travis), and
labels (`--label k=v`, or $GOODBENCH_LABELS for every run of a job). Only these named variables are
read, so nothing secret is copied into run.json."""

from __future__ import annotations

import contextlib
import os
import re

from ..errors import UsageError
from ..redact import visible

LABELS_ENV = "GOODBENCH_LABELS"  # "k=v,k2=v2": labels on every run started under it

# (provider, the variable that says it is this provider, commit, branch, build id, build URL or a recipe)
_CI = (
    ("github", "GITHUB_ACTIONS", "GITHUB_SHA", "GITHUB_REF_NAME", "GITHUB_RUN_ID", "github"),
    ("gitlab", "GITLAB_CI", "CI_COMMIT_SHA", "CI_COMMIT_REF_NAME", "CI_PIPELINE_ID", "CI_PIPELINE_URL"),
    ("buildkite", "BUILDKITE", "BUILDKITE_COMMIT", "BUILDKITE_BRANCH", "BUILDKITE_BUILD_NUMBER", "BUILDKITE_BUILD_URL"),
    ("circleci", "CIRCLECI", "CIRCLE_SHA1", "CIRCLE_BRANCH", "CIRCLE_BUILD_NUM", "CIRCLE_BUILD_URL"),
    ("azure", "TF_BUILD", "BUILD_SOURCEVERSION", "BUILD_SOURCEBRANCHNAME", "BUILD_BUILDID", ""),
    ("travis", "TRAVIS", "TRAVIS_COMMIT", "TRAVIS_BRANCH", "TRAVIS_BUILD_ID", "TRAVIS_BUILD_WEB_URL"),
    ("jenkins", "JENKINS_URL", "GIT_COMMIT", "GIT_BRANCH", "BUILD_NUMBER", "BUILD_URL"),
)
_LABEL_KEY = re.compile(r"[A-Za-z0-9_.:/-]{1,64}")
MAX_LABEL_VALUE = 256


def provenance(env=None) -> dict | None:
    """{commit, branch, build, build_url, ci} from the first CI whose marker variable is set, then
    $GOODBENCH_COMMIT / $GOODBENCH_BRANCH / $GOODBENCH_BUILD (which win: for CI systems not listed, or a
    commit of the server under test rather than of the job's repository). None when nothing is known."""
    env = os.environ if env is None else env
    out: dict = {}
    for name, marker, commit, branch, build, url in _CI:
        if env.get(marker) or env.get(commit):
            out = {"ci": name, "commit": env.get(commit), "branch": env.get(branch), "build": env.get(build)}
            out["build_url"] = _github_url(env) if url == "github" else (env.get(url) if url else None)
            if name == "github" and env.get("GITHUB_RUN_ATTEMPT"):
                out["build"] = f"{out['build']}.{env['GITHUB_RUN_ATTEMPT']}"
            break
    for key in ("commit", "branch", "build"):
        if env.get(f"GOODBENCH_{key.upper()}"):
            out[key] = env[f"GOODBENCH_{key.upper()}"]
    out = {k: v for k, v in out.items() if v}
    return out or None


def _github_url(env) -> str | None:
    parts = [env.get(k) for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID")]
    return f"{parts[0]}/{parts[1]}/actions/runs/{parts[2]}" if all(parts) else None


def parse_labels(items, where: str = "--label") -> dict[str, str]:
    """["gpu=h100", "branch=main,runner=a"] -> {"gpu": "h100", "branch": "main", "runner": "a"}. Keys are
    short identifiers (letters, digits, _ . : / -); values any text up to 256 characters without commas."""
    out: dict[str, str] = {}
    for item in items or ():
        for part in str(item).split(","):
            part = part.strip()
            if not part:
                continue
            key, sep, value = part.partition("=")
            key, value = key.strip(), value.strip()
            if not sep or not _LABEL_KEY.fullmatch(key):
                raise UsageError(
                    f"{where} {part!r}: expected KEY=VALUE with KEY of letters, digits and _ . : / - (at most 64)"
                )
            if len(value) > MAX_LABEL_VALUE:
                raise UsageError(f"{where} {key}: the value is longer than {MAX_LABEL_VALUE} characters")
            if visible(value) != value:  # printed by history list and the console as it is
                raise UsageError(f"{where} {key}: the value has control characters ({visible(value)!r})")
            out[key] = value
    return out


def run_labels(labels: dict | None, env=None) -> dict[str, str]:
    """A run's labels: $GOODBENCH_LABELS, then the ones given (which win)."""
    env = os.environ if env is None else env
    base = parse_labels([env[LABELS_ENV]], LABELS_ENV) if env.get(LABELS_ENV) else {}
    return base | {str(k): str(v) for k, v in (labels or {}).items()}


@contextlib.contextmanager
def labels_in_env(labels: dict | None):
    """$GOODBENCH_LABELS with these labels added while inside: for run directories opened where no
    argument reaches (a locust master in a child process, an importer), which read it (rundir.py)."""
    old = os.environ.get(LABELS_ENV)
    if labels:
        os.environ[LABELS_ENV] = ",".join(f"{k}={v}" for k, v in run_labels(labels).items())
    try:
        yield
    finally:
        if labels and old is None:
            os.environ.pop(LABELS_ENV, None)
        elif labels:
            os.environ[LABELS_ENV] = old
