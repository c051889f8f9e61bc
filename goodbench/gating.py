"""Pass/fail verdicts on a run: Summary + gate spec -> GateResult. Pure.

Exit-code meaning (the CLI maps it): every clause holds -> 0; any clause fails -> 1; the run cannot
be judged (invalid because the load generator fell behind, nothing completed, nothing to check) -> 2."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from xml.sax.saxutils import escape, quoteattr

from .errors import UsageError
from .limits import GATE_MARGIN, TARGET_ATTAINMENT, practical_threshold, problem
from .records import JOB_SLO_KEYS, SLO_SUMMARY_KEYS, fmt_num

# a gate's percentile ceilings: every per-request SLO clause's distribution (ttfo included), with the
# pooled gaps as "itl" rather than "max_itl" and "e2e" as another name for e2el
METRIC_KEYS = {("itl" if k == "max_itl" else k): v for k, v in SLO_SUMMARY_KEYS.items()} | {"e2e": "e2el_ms"}


@dataclass(frozen=True)
class GateSpec:
    min_attainment: float = TARGET_ATTAINMENT
    percentiles: dict = field(default_factory=dict)  # {"p95": {"ttft": 500}, "p99": {"itl": 100}}
    max_failed: float | None = None  # fraction of issued requests
    min_goodput: float | None = None  # req/s
    max_regression: float | None = None  # fraction, against a baseline summary

    @classmethod
    def from_table(cls, t: dict) -> GateSpec:
        """From a workload file's [gate] table."""
        pct = {k: dict(v) for k, v in t.items() if k in ("p50", "p90", "p95", "p99") and isinstance(v, dict)}
        for k, v in pct.items():
            for m, ms in v.items():
                if m not in METRIC_KEYS:
                    raise UsageError(f"gate.{k}.{m}: unknown metric; use one of {', '.join(METRIC_KEYS)}")
                _number(f"gate.{k}.{m}", "ceiling_ms", ms)
        unknown = set(t) - {"min_attainment", "max_failed", "min_goodput", "max_regression", "p50", "p90", "p95", "p99"}
        if unknown:
            raise UsageError(f"gate: unknown keys {', '.join(sorted(unknown))}")
        reg = t.get("max_regression")
        return cls(
            min_attainment=_number("gate.min_attainment", "min_attainment", t.get("min_attainment", TARGET_ATTAINMENT)),
            percentiles=pct,
            max_failed=_number("gate.max_failed", "max_failed", t.get("max_failed")),
            min_goodput=_number("gate.min_goodput", "min_goodput", t.get("min_goodput")),
            max_regression=None if reg is None else parse_fraction(reg, "gate.max_regression"),
        )

    def to_table(self) -> dict:
        """As a [gate] table (run.json's `gate`): from_table(to_table()) gives the spec back."""
        t: dict = {"min_attainment": self.min_attainment}
        t.update({k: dict(v) for k, v in self.percentiles.items()})
        for k in ("max_failed", "min_goodput", "max_regression"):
            if getattr(self, k) is not None:
                t[k] = getattr(self, k)
        return t


def recorded_spec(meta: dict | None) -> GateSpec:
    """The spec a run recorded (run.json's `gate`, else its target_attainment), else the default: what a
    later judge of the run uses where its own command gave nothing."""
    meta = meta or {}
    if meta.get("gate"):
        return GateSpec.from_table(meta["gate"])
    own = meta.get("target_attainment")
    return GateSpec(min_attainment=own if own is not None else TARGET_ATTAINMENT)


def spec_of(meta: dict | None, given=None) -> GateSpec:
    """The spec to judge a run by: the one given (a GateSpec), else the run's recorded one with the pass
    mark given (a float), else the recorded one as it is."""
    if isinstance(given, GateSpec):
        return given
    spec = recorded_spec(meta)
    return spec if given is None else replace(spec, min_attainment=float(given))


def _number(label: str, limit: str, v) -> float | None:
    """v (a gate value from a file: a number, or a string holding one) as a float inside its limit."""
    why = problem(limit, v)
    if why:
        raise UsageError(f"{label} {why}")
    return None if v is None else float(v)


def parse_fraction(text, flag: str) -> float:
    """5% or 0.05 -> 0.05."""
    try:
        v = float(str(text)[:-1]) / 100 if str(text).endswith("%") else float(text)
    except (TypeError, ValueError):
        raise UsageError(f"{flag} {text!r}: expected e.g. 5% or 0.05") from None
    if not 0 <= v < 1e6:
        raise UsageError(f"{flag} {text!r}: expected a fraction >= 0, e.g. 5% or 0.05")
    return v


def parse_ceilings(pname: str, items) -> dict[str, float]:
    """--p99 ttft:500 itl:100 (words or one comma/space separated string) -> {"ttft": 500, "itl": 100}."""
    out: dict[str, float] = {}
    for item in items or []:
        for part in item.replace(",", " ").split():
            m, _, ms = part.partition(":")
            if m not in METRIC_KEYS:
                raise UsageError(f"--{pname} {part!r}: metric must be one of {', '.join(METRIC_KEYS)}")
            try:
                out[m] = float(ms)
            except ValueError:
                raise UsageError(f"--{pname} {part!r}: expected METRIC:MS") from None
            if problem("ceiling_ms", out[m]):
                raise UsageError(f"--{pname} {part!r}: {problem('ceiling_ms', out[m])}")
    return out


def spec_from_options(
    table: dict | None = None,
    *,
    min_attainment: float | None = None,
    percentiles: dict | None = None,
    max_failed: float | None = None,
    min_goodput: float | None = None,
    max_regression: str | float | None = None,
    baseline: bool = False,
) -> GateSpec:
    """A workload file's [gate] table overridden by command-line options. percentiles: {"p99":
    ["itl:100"], ...} as typed. With a baseline and no max_regression, the table's or 5%."""
    spec = GateSpec.from_table(table) if table else GateSpec()
    pct = {k: dict(v) for k, v in spec.percentiles.items()}
    for q, items in (percentiles or {}).items():
        if items:
            pct.setdefault(q, {}).update(parse_ceilings(q, items))
    reg = parse_fraction(max_regression, "--max-regression") if max_regression is not None else None
    if reg is None and baseline:
        reg = spec.max_regression if spec.max_regression is not None else GATE_MARGIN
    return GateSpec(
        min_attainment=min_attainment if min_attainment is not None else spec.min_attainment,
        percentiles=pct,
        max_failed=max_failed if max_failed is not None else spec.max_failed,
        min_goodput=min_goodput if min_goodput is not None else spec.min_goodput,
        max_regression=reg,
    )


@dataclass
class Clause:
    name: str
    threshold: str
    observed: str
    passed: bool
    kind: str = ""  # attainment | jobs | percentile | failed | goodput | regression ("" : history's)


@dataclass
class GateResult:
    clauses: list[Clause]
    judgeable: bool = True
    reason: str = ""
    note: str = ""  # how it was judged, when that needs saying (an invalid run judged within its error)

    @property
    def passed(self) -> bool:
        return self.judgeable and all(c.passed for c in self.clauses)

    @property
    def exit_code(self) -> int:
        return 2 if not self.judgeable else (0 if self.passed else 1)

    @property
    def verdict(self) -> str:
        if not self.judgeable:
            return f"CANNOT JUDGE: {self.reason}"
        failed = sum(not c.passed for c in self.clauses)
        return "PASS: every clause holds" if not failed else f"FAIL: {failed} of {len(self.clauses)} clauses failed"


def _fmt_slo(slo: dict) -> str:
    return " ".join(f"{k}≤{v:g}ms" for k, v in slo.items())


def evaluate(
    summary: dict, spec: GateSpec, baseline: dict | None = None, significant: dict | None = None
) -> GateResult:
    """The one judge of a run: every surface (console, HTML report, --gate, `goodbench gate`, locust's
    exit code, rate probes, sweep cells) renders or calls this. significant: {metric: bool} from a
    comparison of the two runs' records (analysis.compare; goodput, ttft_p99, ...): a move beyond the
    margin fails only where the records call it significant. None (a summary without records): the
    point comparison alone. An invalid run is judged when its measured error bound (verdict_bounds)
    cannot move any clause across its threshold; otherwise it cannot be judged."""
    req = summary.get("requests", {})
    if not req.get("issued"):
        return GateResult([], False, "the run has no requests")
    if not req.get("completed"):
        return GateResult([], False, "no request completed")
    clauses = _clauses(summary, spec)
    if baseline is not None and spec.max_regression is not None:
        clauses += _regressions(summary, baseline, spec.max_regression, significant)
    if summary.get("valid") is False:
        why = "; ".join(summary.get("warnings", [])[:1])
        bounds = summary.get("verdict_bounds")
        if not bounds:
            return GateResult([], False, f"the run is marked invalid: {why}")
        flips = [c.name for c in clauses if c.passed != _holds_at_both_ends(c, summary, spec, bounds)]
        if flips:
            return GateResult(
                [],
                False,
                f"the run is marked invalid and its error (±{bounds['error_ms']:.1f} ms) could flip "
                f"{', '.join(dict.fromkeys(flips))}: {why}",
            )
        note = f"judged although marked invalid: its error (±{bounds['error_ms']:.1f} ms) moves no clause across its threshold"
        if not clauses:
            return GateResult([], False, NOTHING_TO_CHECK)
        return GateResult(clauses, note=note)
    if not clauses:
        return GateResult([], False, NOTHING_TO_CHECK)
    return GateResult(clauses)


NOTHING_TO_CHECK = "nothing to check: give an SLO (--goodput) or a clause such as --p99 itl:100"


def _clauses(summary: dict, spec: GateSpec) -> list[Clause]:
    """Every clause the summary and spec hold: the per-request SLO's attainment, an agent run's per-job
    attainment (jct and every call's clauses), percentile ceilings, failures, goodput."""
    clauses: list[Clause] = []
    slo = summary.get("slo") or {}
    per_request = {k: v for k, v in slo.items() if k not in JOB_SLO_KEYS}
    jobs = summary.get("jobs") or {}
    if per_request and not (jobs and jobs.get("attainment") is not None):
        att = summary.get("slo_attainment") or 0.0
        clauses.append(_attainment(f"slo_attainment ({_fmt_slo(per_request)})", att, spec, "attainment"))
    if jobs and jobs.get("attainment") is not None:
        att = jobs["attainment"]
        clauses.append(_attainment(f"job attainment ({_fmt_slo(slo)}, {jobs['started']} jobs)", att, spec, "jobs"))
    elif slo and not per_request:  # jct alone on a run without agent jobs: say so, never drop it
        clauses.append(
            Clause(f"job attainment ({_fmt_slo(slo)})", f">= {spec.min_attainment:.1%}", "no agent jobs", False, "jobs")
        )
    for pname, metrics in spec.percentiles.items():
        for m, limit in metrics.items():
            d = summary.get(METRIC_KEYS[m]) or {}
            v = d.get(pname)
            clauses.append(
                Clause(
                    f"{pname} {m}",
                    f"<= {float(limit):g} ms",
                    "no samples" if v is None else f"{v:.1f} ms (n={d.get('n', 0)})",
                    v is not None and v <= float(limit),
                    "percentile",
                )
            )
    if spec.max_failed is not None:
        frac = req_failed_share(summary)
        failed = summary["requests"]["failed"]
        clauses.append(
            Clause(
                "failed requests",
                f"<= {spec.max_failed:.1%}",
                f"{frac:.1%} ({failed})",
                frac <= spec.max_failed,
                "failed",
            )
        )
    if spec.min_goodput is not None:
        g = headline_goodput(summary)
        clauses.append(
            Clause(
                "goodput",
                f">= {spec.min_goodput:g} req/s",
                "no SLO" if g is None else f"{g:.2f} req/s",
                g is not None and g >= spec.min_goodput,
                "goodput",
            )
        )
    return clauses


def _attainment(name: str, att: float, spec: GateSpec, kind: str) -> Clause:
    return Clause(name, f">= {spec.min_attainment:.1%}", f"{att:.1%}", attains(att, spec.min_attainment), kind)


def attains(att: float | None, min_attainment: float) -> bool:
    """The pass mark's rule, for a whole run's attainment and for each SLO clause's tick."""
    return att is not None and att >= min_attainment


def req_failed_share(summary: dict) -> float:
    req = summary["requests"]
    return req["failed"] / req["issued"] if req["issued"] else 0.0


def headline_goodput(summary: dict) -> float | None:
    """The goodput a run is judged by: jobs per second for an agent run with a job SLO, else requests."""
    jobs = summary.get("jobs") or {}
    return jobs["goodput"] if jobs.get("attainment") is not None else summary.get("goodput")


def _holds_at_both_ends(c: Clause, summary: dict, spec: GateSpec, bounds: dict) -> bool:
    """The clause's outcome when every latency is the error bound worse and better: its own outcome
    when both ends agree, else the opposite (so the caller sees a flip)."""
    e = bounds["error_ms"]
    if c.kind == "attainment" and "slo_attainment" in bounds:
        ends = tuple(attains(a, spec.min_attainment) for a in bounds["slo_attainment"])
    elif c.kind == "goodput" and "goodput" in bounds:
        ends = tuple(g >= spec.min_goodput for g in bounds["goodput"])
    elif c.kind == "percentile":
        pname, m = c.name.split(" ", 1)
        v = (summary.get(METRIC_KEYS[m]) or {}).get(pname)
        limit = float(spec.percentiles[pname][m])
        ends = (v is not None and v + e <= limit, v is not None and v - e <= limit)
    elif c.kind == "failed":
        return c.passed  # failures are counted, not timed
    else:
        return not c.passed  # no bounds computed (per-job clauses, regressions): an invalid run is not judged
    return c.passed if ends[0] == ends[1] == c.passed else not c.passed


def _regressions(cur: dict, base: dict, margin: float, significant: dict | None) -> list[Clause]:
    """Against a baseline run: higher-is-better goodput, lower-is-better p99s. A metric fails when it
    moved the wrong way by more than max(margin, 1 ms for latencies) and, given the records'
    comparison, the move is significant (limits.practical_threshold)."""
    out = []
    g0, g1 = base.get("goodput"), cur.get("goodput")
    if g0 and g1 is not None:
        out.append(_regression("goodput vs baseline", "goodput", g0, g1, margin, significant, "req/s"))
    for m in ("ttft", "tpot", "itl"):
        b, c = (base.get(METRIC_KEYS[m]) or {}).get("p99"), (cur.get(METRIC_KEYS[m]) or {}).get("p99")
        if b and c is not None:
            out.append(_regression(f"p99 {m} vs baseline", f"{m}_p99", b, c, margin, significant, "ms"))
    return out


def _regression(name: str, metric: str, b: float, c: float, margin: float, significant, unit: str) -> Clause:
    sign = -1 if unit == "req/s" else 1  # goodput: lower is worse
    limit = practical_threshold(unit, b, margin)
    beyond = sign * (c - b) > limit
    noise = beyond and significant is not None and not significant.get(metric, False)
    fmt = ".2f" if unit == "req/s" else ".1f"
    bound = "-" if sign < 0 else "+"
    threshold = f"{bound}{limit:{fmt}} {unit} of {b:{fmt}} {unit} (max({margin:.0%}"
    threshold += ", 1 ms))" if unit == "ms" else "))"
    observed = f"{c:{fmt}} {unit} ({fmt_num(c / b - 1, '+.1%')})" + (", not significant" if noise else "")
    return Clause(name, threshold, observed, not beyond or noise, "regression")


def to_junit(result: GateResult, suite: str = "goodbench gate") -> str:
    cases = []
    for c in result.clauses:
        body = "" if c.passed else f"<failure message={quoteattr(f'{c.observed} (needs {c.threshold})')}/>"
        cases.append(f'  <testcase classname="goodbench.gate" name={quoteattr(c.name)}>{body}</testcase>')
    if not result.judgeable:
        cases.append(
            f'  <testcase classname="goodbench.gate" name="run can be judged">'
            f"<error message={quoteattr(result.reason)}/></testcase>"
        )
    failures = sum(not c.passed for c in result.clauses)
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<testsuite name={quoteattr(suite)} tests="{len(cases)}" '
        f'failures="{failures}" errors="{0 if result.judgeable else 1}">\n' + "\n".join(cases) + "\n</testsuite>\n"
    )


def to_markdown(result: GateResult, title: str = "goodbench gate") -> str:
    lines = [f"### {title}: {escape(result.verdict)}", "", "| | clause | threshold | observed |", "|---|---|---|---|"]
    for c in result.clauses:
        lines.append(f"| {'✅' if c.passed else '❌'} | {c.name} | {c.threshold} | {c.observed} |")
    if result.note:
        lines += ["", f"_{escape(result.note)}_"]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Headline:
    """A run's verdict as every surface shows it: the judge's result and what the run is counted in."""

    word: str  # PASS | FAIL | CANNOT JUDGE | DONE (no clause to judge) | INTERRUPTED (not judged)
    result: GateResult
    unit: str  # "requests", or "jobs" for an agent run with a job SLO
    attainment: float | None
    goodput: float | None
    target: float


def headline(summary: dict, spec: GateSpec, interrupted: bool = False) -> Headline:
    """The run's verdict from the one judge (evaluate), with the attainment it headlines: jobs for an
    agent run whose SLO is judged per job, requests otherwise."""
    jobs = summary.get("jobs") or {}
    by_job = jobs.get("attainment") is not None
    att = jobs["attainment"] if by_job else summary.get("slo_attainment")
    result = evaluate(summary, spec)
    if interrupted:
        word = "INTERRUPTED"
    elif not result.judgeable:
        word = "DONE" if result.reason == NOTHING_TO_CHECK else "CANNOT JUDGE"
    else:
        word = "PASS" if result.passed else "FAIL"
    unit = "jobs" if by_job else "requests"
    return Headline(word, result, unit, att, headline_goodput(summary), spec.min_attainment)
