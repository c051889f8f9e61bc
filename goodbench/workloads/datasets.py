"""The built-in workloads that `--dataset-name` selects (as `vllm bench serve` names them), each defined
once: `random` and `sharegpt` here (parametrised by --random-*-len and --dataset-path, as in vLLM),
`mixed` and `hol` as the packaged workload files mixed-long-short and hol-stress (catalog.py)."""

from __future__ import annotations

from ..errors import UsageError
from .spec import ClassSpec, LengthDist, SessionSpec, WorkloadSpec

DATASETS = ("sharegpt", "random", "mixed", "hol")
RANDOM_INPUT, RANDOM_OUTPUT = 1024, 128


def random_workload(input_len: int | None = None, output_len: int | None = None) -> WorkloadSpec:
    """Every request the same length: input_len prompt tokens (default 1024), output_len out (128)."""
    c = ClassSpec(
        "random", 1.0, LengthDist(value=input_len or RANDOM_INPUT), LengthDist(value=output_len or RANDOM_OUTPUT)
    )
    return WorkloadSpec(name="random", generator="synthetic", classes=(c,))


def sharegpt_workload(output_len: int | None = None, dataset: str | None = None) -> WorkloadSpec:
    """ShareGPT conversations; output lengths from the reference answers unless output_len is given."""
    out = LengthDist(value=output_len) if output_len else LengthDist("dataset")
    c = ClassSpec("sharegpt", input=LengthDist("dataset"), output=out, source="sharegpt", dataset=dataset)
    return WorkloadSpec(name="sharegpt", generator="sharegpt", classes=(c,))


def sharegpt_sessions_workload(dataset: str | None = None) -> WorkloadSpec:
    """ShareGPT's real conversations replayed as multi-turn chat sessions (each human message a turn,
    the reply after it its output length), one session per second, 5 s of thinking between turns."""
    return WorkloadSpec(
        name="sharegpt-sessions",
        generator="sessions",
        endpoint="chat",
        num_requests=None,
        session=SessionSpec(sessions=100, source="sharegpt", dataset=dataset, think_s=5.0),
    )


PACKAGED = {"mixed": "mixed-long-short", "hol": "hol-stress"}  # dataset name -> packaged workload file


def dataset_workload(
    name: str,
    input_len: int | None = None,
    output_len: int | None = None,
    dataset: str | None = None,
    multi_turn: bool = False,
) -> WorkloadSpec:
    if multi_turn:
        if name != "sharegpt":
            raise UsageError("--multi-turn replays ShareGPT's conversations: use it with --dataset-name sharegpt")
        return sharegpt_sessions_workload(dataset)
    if name == "random":
        return random_workload(input_len, output_len)
    if name == "sharegpt":
        return sharegpt_workload(output_len, dataset)
    if name in PACKAGED:
        from .catalog import load_workload

        return load_workload(PACKAGED[name])
    raise UsageError(f"unknown dataset {name!r}; choose one of {', '.join(DATASETS)}")
