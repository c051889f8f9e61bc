"""What every API function shares: the Run it returns, workloads by name or file, stage messages."""

from __future__ import annotations

from dataclasses import dataclass

from ..columnar import RunArrays
from ..errors import UsageError
from ..records import RequestRecord, RunMeta
from ..store import load_arrays
from ..workloads import WorkloadOptions, WorkloadSpec, resolve_workload


@dataclass
class Run:
    """A finished (or interrupted) run: its directory, metadata and summary."""

    dir: str
    meta: RunMeta
    summary: dict | None
    interrupted: bool = False

    def arrays(self) -> RunArrays:
        """The run as flat arrays (reads the columns/ sidecar, or records.jsonl once)."""
        return load_arrays(self.dir)

    def records(self) -> list[RequestRecord]:
        from ..store import load

        return load(self.dir).records


def load_workload(source: str | WorkloadSpec | None = None, **options) -> WorkloadSpec:
    """A workload file or a built-in workload's name ("hol-stress"; `goodbench workloads` lists them), or,
    with source None, the built-in `dataset_name` (default random), with the
    command line's overrides as keyword arguments: num_prompts, request_rate, duration, concurrency,
    goodput ("ttft:500 tpot:50"), seed, ... (the fields of workloads.WorkloadOptions)."""
    if isinstance(source, WorkloadSpec):
        if options:
            raise UsageError("overrides apply to workload files; use dataclasses.replace on a WorkloadSpec")
        return source
    try:
        opts = WorkloadOptions(workload=source, **options)
    except TypeError as e:
        raise UsageError(f"load_workload: {e}") from None
    return resolve_workload(opts)


def as_workload(w) -> WorkloadSpec:
    """A WorkloadSpec, a built-in workload's name or a workload file."""
    return w if isinstance(w, WorkloadSpec) else load_workload(w)


def stage(on_stage, text: str) -> None:
    """Tell the caller's progress display what is happening (nothing when it has none)."""
    if on_stage is not None:
        on_stage(text)
