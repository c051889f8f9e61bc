"""Whether two runs ran the same workload: the same requests (generator, classes and their lengths, the
HOL shape, the endpoint), whatever their count, seed, rate or SLO. Comparing runs of different workloads
(a HOL run against a mixed run) gives deltas that mean nothing, so compare and gate --baseline refuse
it unless asked. Pure: reads the workload dicts stored in run.json."""

from __future__ import annotations

IDENTITY = ("generator", "classes", "hol", "endpoint", "agent")  # the requests; not their number, seed, arrivals or SLO


def identity(workload: dict | None) -> dict | None:
    """The fields that define a workload's requests, or None when the run does not record them (an import)."""
    if not workload or "generator" not in workload:
        return None
    out = {k: workload.get(k) for k in IDENTITY}
    if isinstance(out["agent"], dict):  # an agent workload's graphs, not how many jobs it sent
        out["agent"] = {k: v for k, v in out["agent"].items() if k != "jobs"}
    return out


def difference(base: dict | None, new: dict | None) -> str | None:
    """A one-line reason when two runs' workloads differ, None when they match or either is unknown."""
    a, b = identity(base), identity(new)
    if a is None or b is None or a == b:
        return None
    which = ", ".join(k for k in IDENTITY if a[k] != b[k])
    return (
        f"the runs ran different workloads ({base.get('name', '?')!r} vs {new.get('name', '?')!r}: "
        f"different {which}), so their deltas compare different traffic; pass --allow-different-workloads "
        "to compare them anyway"
    )
