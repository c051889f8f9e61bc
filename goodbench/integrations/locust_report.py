"""What a locust run prints at its end: goodbench's summary and why the run ended, rendered once the
results are complete and printed after locust's own tables (integrations/locust.py's quit event)."""

from __future__ import annotations

import io
import sys

from locust import events

from .locust_gate import gate_spec

TEXT: dict = {}  # the rendered summary, printed at locust's quit event


def end_reason(complete: bool, workers: int | None, total, issued: int, planned, run_time) -> str:
    """The workload ran out (every request, or every worker's share), or locust stopped the run first
    (its -t, Ctrl-C or its web UI), in which case the run is incomplete."""
    if complete:
        if workers:
            return f"the workload ran out: all {workers} workers sent and finished their share"
        return f"the workload ran out: all {total if total is not None else issued} requests were sent and answered"
    by = f"its -t {run_time} s run time, Ctrl-C or its web UI" if run_time else "Ctrl-C or its web UI"
    of = f" of {planned}" if planned else ""
    return f"locust stopped the run ({by}) after {issued}{of} requests: it is incomplete"


def render(summary: dict, meta: dict, run_dir: str, spec, ended: str) -> str:
    """The summary `goodbench run` prints, under a rule, with the ending last."""
    from rich.console import Console

    from ..report.console import print_summary

    buf = io.StringIO()
    con = Console(file=buf, width=120, highlight=False, force_terminal=sys.stdout.isatty())
    con.rule("goodbench")
    print_summary(con, summary, meta, spec, run_dir, slo_hint='--goodbench-slo "ttft:MS tpot:MS"')
    con.print(f"  ended: {ended}", style="bold")
    return buf.getvalue()


def keep_report(summary: dict, rd, o, complete: bool, workers: int | None, total) -> None:
    """Render the end of a run now (quitting), to print it after locust's tables."""
    issued = summary["requests"]["issued"]
    ended = end_reason(complete, workers, total, issued, rd.meta.planned_requests, getattr(o, "run_time", None))
    TEXT["summary"] = render(summary, rd.meta.to_dict(), rd.dir, gate_spec(o), ended)


@events.quit.add_listener
def _quit(exit_code, **kw) -> None:
    """goodbench's summary last: locust prints its tables between its quitting and quit events."""
    if TEXT.get("summary"):
        sys.stdout.write(TEXT["summary"])
        sys.stdout.flush()
