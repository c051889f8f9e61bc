"""`goodbench simulate`: the reference engine in virtual time, same workloads and results as `run`."""

from __future__ import annotations

from .common import (
    Stages,
    add_engine_args,
    add_gate_args,
    add_label_args,
    add_workload_args,
    console,
    engine_config,
    gate_spec,
    maybe_gate,
    run_labels,
    workload,
)
from .scale import add_cluster_args, add_price_args, cluster_spec, electricity, prices


def add_parser(sub) -> None:
    p = sub.add_parser(
        "simulate",
        help="run a workload through the reference engine in virtual time",
        description="The reference engine in virtual time: same workloads, arrival flags and "
        "results directory as `goodbench run`, orders of magnitude faster than real time.",
    )
    add_workload_args(p)
    add_engine_args(p)
    add_cluster_args(p)
    add_price_args(p)
    p.add_argument("--result-dir", default="results", help="parent folder of run directories (default results/)")
    p.add_argument("--run-id", help="name of the run directory (default: sim-DATE-TIME-PID)")
    p.add_argument("--step-trace", action="store_true", help="write step_trace.jsonl (slower: no fast path)")
    p.add_argument("--quiet", action="store_true", help="no progress line while the workload is built and simulated")
    add_gate_args(p, True)
    add_label_args(p)
    p.set_defaults(fn=cmd_simulate)


def cmd_simulate(args) -> int:
    from .. import api
    from ..report.console import print_summary
    from ..report.tables import cost_line, instances_line

    con = console()
    spec = workload(args)
    gspec = gate_spec(args, spec.gate)  # checked before the clock starts; the headline and the gate use it
    with Stages(con, quiet=args.quiet) as stages:
        run = api.simulate(
            spec,
            engine_config(args),
            result_dir=args.result_dir,
            run_id=args.run_id,
            tokenizer=args.tokenizer,
            step_trace=args.step_trace,
            cluster=cluster_spec(args),
            prices=prices(args),
            electricity=electricity(args),
            labels=run_labels(args),
            on_stage=stages,
            gate=gspec,
        )
    s = run.summary
    print_summary(con, s, run.meta.to_dict(), gspec, run.dir)
    sim = s["simulation"]
    con.print(
        f"  simulated {s['duration_s']:.1f} s in {sim['wall_s']:.2f} s wall "
        f"({sim['speedup_vs_real_time'] or 0:,.0f}x real time), {sim['steps']} steps, "
        f"{sim['preemptions']} preemptions",
        style="dim",
    )
    for line in instances_line(sim) + [cost_line(s["cost"])]:
        con.print(line)
    for note in sim.get("notes", []):
        con.print(f"  note: {note}", style="yellow")
    return maybe_gate(args, run.dir, spec, con, run.summary)
