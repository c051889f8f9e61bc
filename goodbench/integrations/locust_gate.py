"""How the locust master judges its run: the gate `goodbench run --via locust` hands over, and the exit code
from the one judge (gating.py). No locust import: tests and the CLI read it without gevent."""

from __future__ import annotations


def gate_spec(o):
    """The gate the master judges by: `goodbench run --via locust` hands its own over (GOODBENCH_GATE_JSON,
    the same spec a native run's headline and --gate use); a bare locust run: --goodbench-min-attainment."""
    import json
    import os

    from ..gating import GateSpec

    table = os.environ.get("GOODBENCH_GATE_JSON")
    if table:
        return GateSpec.from_table(json.loads(table))
    return GateSpec(min_attainment=o.goodbench_min_attainment)


def locust_exit(summary: dict, spec) -> int:
    """The master's exit code from the one judge (gating.evaluate): 0 pass (or nothing to check), 1 a
    clause failed, 2 the run cannot be judged."""
    from ..gating import NOTHING_TO_CHECK, evaluate

    result = evaluate(summary, spec)
    return 0 if result.reason == NOTHING_TO_CHECK else result.exit_code
