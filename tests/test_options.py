"""Workload + command-line options -> the WorkloadSpec a run uses (workloads.options, workloads.builtin)."""

import math
import os

import pytest
from conftest import ROOT

from goodbench.errors import InputError, UsageError
from goodbench.workloads import WorkloadOptions, resolve_workload
from goodbench.workloads.datasets import DATASETS, dataset_workload

MIXED = os.path.join(ROOT, "workloads", "mixed-long-short.toml")
HOL = os.path.join(ROOT, "workloads", "hol-stress.toml")


def resolve(**kw):
    return resolve_workload(WorkloadOptions(**kw))


@pytest.mark.parametrize(
    "opts,check",
    [
        (
            {},
            lambda s: (
                (s.name, s.num_requests, s.classes[0].input.value, s.classes[0].output.value)
                == ("random", 200, 1024, 128)
            ),
        ),
        (
            {"random_input_len": 64, "random_output_len": 8},
            lambda s: (s.classes[0].input.value, s.classes[0].output.value) == (64, 8),
        ),
        (
            {"dataset_name": "mixed"},
            lambda s: ([c.name for c in s.classes], s.num_requests, s.arrival.rate) == (["short", "long"], 300, 4.0),
        ),
        (
            {"dataset_name": "hol"},
            lambda s: s.generator == "hol" and s.num_requests is None and s.arrival.kind == "workload",
        ),
        ({"workload": "hol-stress"}, lambda s: s.name == "hol-stress" and s.hol.long_input == 20000),
        (
            {"workload": "mixed-long-short.toml", "num_prompts": 5},
            lambda s: (s.name, s.num_requests) == ("mixed-long-short", 5),
        ),
        ({"dataset_name": "sharegpt", "random_output_len": 32}, lambda s: s.classes[0].output.value == 32),
        ({"dataset_name": "sharegpt", "dataset_path": "x.json"}, lambda s: s.classes[0].dataset == "x.json"),
        ({"request_rate": "8"}, lambda s: (s.arrival.kind, s.arrival.rate) == ("poisson", 8.0)),
        ({"request_rate": "inf"}, lambda s: math.isinf(s.arrival.rate)),
        ({"request_rate": "4", "burstiness": 0.5}, lambda s: (s.arrival.kind, s.arrival.burstiness) == ("gamma", 0.5)),
        ({"request_rate": "4", "arrival": "constant"}, lambda s: s.arrival.kind == "constant"),
        (
            {"concurrency": 8, "think_time": 0.5},
            lambda s: (s.arrival.kind, s.arrival.concurrency, s.arrival.think_time_s) == ("closed", 8, 0.5),
        ),
        ({"ramp_up": 3.0}, lambda s: s.arrival.ramp_up_s == 3.0),
        ({"duration": 5.0}, lambda s: (s.num_requests, s.duration_s) == (None, 5.0)),
        ({"num_prompts": 7, "duration": 5.0}, lambda s: (s.num_requests, s.duration_s) == (7, 5.0)),
        ({"warmup": 3, "seed": 9}, lambda s: (s.warmup_requests, s.seed) == (3, 9)),
        ({"goodput": ["ttft:500", "tpot:50"]}, lambda s: s.slo == {"ttft": 500.0, "tpot": 50.0}),
        ({"goodput": "ttft:500 tpot:50"}, lambda s: s.slo == {"ttft": 500.0, "tpot": 50.0}),
        ({"endpoint_type": "chat"}, lambda s: s.endpoint == "chat"),
    ],
)
def test_builtin_workloads_with_options(opts, check):
    assert check(resolve(**opts))


@pytest.mark.parametrize(
    "opts,check",
    [
        (
            {},
            lambda s: (
                (s.name, s.num_requests, s.arrival.rate, s.slo)
                == ("mixed-long-short", 300, 4.0, {"ttft": 1000.0, "tpot": 50.0})
            ),
        ),
        ({"num_prompts": 10, "request_rate": "2"}, lambda s: (s.num_requests, s.arrival.rate) == (10, 2.0)),
        ({"random_input_len": 99}, lambda s: [c.input.value for c in s.classes] == [99, 99]),
        ({"random_output_len": 7}, lambda s: [c.output.value for c in s.classes] == [7, 7]),
        ({"goodput": ["ttft:200"]}, lambda s: s.slo == {"ttft": 200.0}),
    ],
)
def test_a_workload_file_with_overrides(opts, check):
    assert check(resolve(workload=MIXED, **opts))


def test_hol_file_keeps_its_own_timing():
    s = resolve(workload=HOL)
    assert s.arrival.kind == "workload" and s.num_requests is None and s.hol.shorts == 40


@pytest.mark.parametrize(
    "opts,error,needle",
    [
        ({"request_rate": "fast"}, UsageError, "--request-rate"),
        ({"request_rate": "0"}, UsageError, "rate must be > 0"),
        ({"burstiness": -1.0, "request_rate": "2"}, UsageError, "burstiness"),
        ({"concurrency": 0}, UsageError, "concurrency"),
        ({"goodput": ["ttft=fast"]}, UsageError, "bad SLO clause"),
        ({"workload": "/nonexistent.toml"}, InputError, "no such workload file"),
        (
            {"workload": "elsewhere/hol-stress.toml"},
            InputError,
            "built-in workload of that name is `--workload hol-stress`",
        ),
        ({"workload": "hol-stres"}, InputError, "did you mean the built-in workload `hol-stress`"),
    ],
)
def test_bad_options_are_one_line_errors(opts, error, needle):
    with pytest.raises(error, match=needle):
        resolve(**opts)


def test_every_dataset_name_is_defined_once():
    """random and sharegpt are built here; mixed and hol are the packaged workload files themselves."""
    from goodbench.cli.common import DATASETS as CLI_CHOICES
    from goodbench.workloads.catalog import load_workload
    from goodbench.workloads.datasets import PACKAGED

    assert CLI_CHOICES == DATASETS
    for name in DATASETS:
        spec = dataset_workload(name)
        if name in PACKAGED:
            assert spec == load_workload(PACKAGED[name]) and spec.name == PACKAGED[name]
        else:
            assert spec.name == name
    with pytest.raises(UsageError):
        dataset_workload("nope")


def test_options_mirror_the_command_line_flags():
    from goodbench.cli import make_parser

    args = make_parser().parse_args(["simulate", "--num-prompts", "3", "--request-rate", "5"])
    o = WorkloadOptions.from_namespace(args)
    assert (o.num_prompts, o.request_rate, o.workload) == (3, "5", None)
