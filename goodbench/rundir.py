"""The one run lifecycle: a results directory opened (run.json written at start), records appended as
requests end, then summarized and finished (run.json completed, summary.json written). Every place that
makes a run directory goes through RunDir: `goodbench run` and `simulate`, sweep cells and rate
probes, the locust master, and the importers. summarize_dir recomputes a finished run's summary from
the same inputs (metrics/compose.py), so it equals the one the run wrote."""

from __future__ import annotations

import os
import sys

from .columnar import RunArrays
from .errors import RunDirError
from .history import catalogue
from .history.provenance import provenance, run_labels
from .history.scan import index_run
from .metrics.compose import compose
from .records import RequestRecord, RunMeta, RunResult
from .store import (
    RunStore,
    RunTaken,
    error_samples,
    load,
    load_arrays,
    load_gpu_telemetry,
    load_server_metrics,
    new_run_id,
)
from .workloads import Plan, WorkloadSpec


class RunDir:
    """results/<run-id>/ for one run. `open` refuses a directory that already holds a run."""

    def __init__(self, store: RunStore, meta: RunMeta):
        self.store, self.meta = store, meta

    @classmethod
    def open(cls, result_dir: str, meta: RunMeta, prefix: str = "run") -> RunDir:
        """meta.run_id names the directory; when empty, a fresh `PREFIX-DATE-TIME-PID` (with -2, -3, ...
        appended when that name is taken). The directory is claimed by creating its run.json exclusively:
        of two processes opening one name at once, exactly one succeeds."""
        given = bool(meta.run_id)
        base = meta.run_id or new_run_id(prefix)
        meta.labels = run_labels(meta.labels)
        meta.provenance = meta.provenance or provenance()
        for k in range(1, 1001):
            meta.run_id = base if given or k == 1 else f"{base}-{k}"
            store = RunStore(result_dir, meta.run_id)
            if os.path.exists(store.dir) and not os.path.isdir(store.dir):
                raise RunDirError(f"{store.dir} exists and is not a directory")
            try:
                store.start(meta)
                return cls(store, meta)
            except RunTaken:
                if given:
                    raise
        raise RunDirError(f"no free run directory named {base}-N in {result_dir}")

    @staticmethod
    def check_free(result_dir: str, run_id: str) -> None:
        """Fail before any work (starting a server, building a workload) when the name is taken."""
        d = RunStore(result_dir, run_id).dir
        if os.path.exists(os.path.join(d, "run.json")):
            raise RunDirError(f"{d} already holds a run; choose another --run-id")

    @property
    def dir(self) -> str:
        return self.store.dir

    def append(self, rec: RequestRecord) -> None:
        self.store.append(rec)

    def append_many(self, recs) -> None:
        self.store.append_many(recs)

    def write_lines(self, lines: list[str]) -> None:
        self.store.write_lines(lines)

    def close(self) -> None:
        self.store.close()

    @property
    def write_error(self) -> RunDirError | None:
        """Why records could not be written (the run ended there), or None."""
        return self.store.write_error

    def finish(
        self,
        *,
        records: list[RequestRecord] | None = None,
        ci: bool = True,
        summarized: bool = True,
        summary: dict | None = None,
    ) -> dict | None:
        """Close the records, summarize (metrics/compose.py, from self.meta, the records and the scraped
        server metrics), complete run.json (finished_wall) and summary.json, and index the run in its
        history catalogue (history/catalogue.py). records: summarize these in memory (simulations, sweep
        cells: the same records were appended); else the run is read back from disk as columns.
        summarized=False writes no summary.json (imports: their summaries are computed when read).
        summary: the summary made elsewhere (an aggregate-only import), written as it is. When records
        could not be written (the disk filled up) or the results cannot be, RunDirError carries the
        summary of what was written."""
        self.store.close()
        if self.store.write_error is not None:
            self.meta.interrupted = True  # it stopped where its records could not be written
        if summary is None and summarized:
            if records is not None:
                if self.store.write_error is not None:
                    records = load(self.dir).records  # what is on disk, not what was meant to be
                summary = compose(
                    RunResult(self.meta, records),
                    rows=load_server_metrics(self.dir),
                    ci=ci,
                    telemetry=load_gpu_telemetry(self.dir) if self.meta.gpu_telemetry else None,
                )
            else:
                summary = summarize_dir(self.dir, meta=self.meta, ci=ci)
        try:
            self.store.finish(self.meta, summary)
        except OSError as e:
            raise RunDirError(
                f"cannot write the results in {self.dir}: {e.strerror or e}"
                + (f" ({self.store.write_error})" if self.store.write_error else ""),
                summary,
            ) from None
        self._index(summary)
        if self.store.write_error is not None:
            raise RunDirError(str(self.store.write_error), summary)
        return summary

    def _index(self, summary: dict | None) -> None:
        """Add the run to its catalogue; a catalogue that cannot be written costs a warning, never the run."""
        if not catalogue.enabled():
            return
        path = catalogue.default_path()
        try:
            if summary is None and os.path.exists(self.store.records_path):
                summary = summarize_dir(self.dir, ci=False)  # an import: its metrics as `summarize` gives them
            with catalogue.Catalogue(path) as cat:
                index_run(cat, self.dir, self.meta.to_dict(), summary)
        except Exception as e:  # noqa: BLE001 - the run is on disk; `goodbench history index` can redo this
            if self.store.write_error is not None:
                return  # the disk is full: the one line about that says it all (issue 22)
            print(f"goodbench: warning: run not added to the history catalogue {path}: {e}", file=sys.stderr)


def summarize_dir(
    run_dir: str,
    *,
    slo: dict | None = None,
    ci: bool = True,
    meta: RunMeta | None = None,
    prepared=None,
    run: RunArrays | None = None,
) -> dict:
    """A run directory's summary, composed from what the directory holds (records as columns, run.json,
    server_metrics.jsonl). slo: judge against this SLO instead of the run's. meta: the run's metadata
    when the caller holds a newer copy than run.json (a run finishing); prepared/run: RequestMetrics and
    columns already loaded by the caller (the report reuses them for figures)."""
    run = run if run is not None else load_arrays(run_dir)
    if meta is not None:
        run = RunArrays(meta, run.cols)
    failed = bool((run.cols.status != 0).any())
    return compose(
        run,
        rows=load_server_metrics(run_dir),
        telemetry=load_gpu_telemetry(run_dir) if run.meta.gpu_telemetry else None,
        slo=slo,
        ci=ci,
        prepared=prepared,
        errors=error_samples(run_dir) if failed else None,
    )


def plan_meta(spec: WorkloadSpec, plan: Plan, mode: str, **kw) -> RunMeta:
    """A run's metadata from its workload and plan (the label, rate, planned count and prefix reuse
    every run directory states the same way); kw: the rest (run_id, target, engine, tokenizer, ...)."""
    closed = plan.closed
    if plan.primes and "priming" not in kw:  # simulated: the engine's cache held them at time 0
        from .workloads.priming import sent

        kw["priming"] = sent(plan.primes)
    return RunMeta(
        **{"label": ("sessions:" if plan.sessions else "") + plan.arrival.label} | kw,
        workload=spec.to_dict(),
        workload_hash=spec.hash(),
        slo=spec.slo,
        seed=spec.seed,
        mode=mode,
        requested_rate=None if closed else plan.arrival.mean_rate,
        planned_requests=plan.planned,
        expected_prefix_reuse=plan.expected_reuse(),
        expected_prefix_sources=plan.expected_sources(),
        target_hit_rate=plan.target_hit_rate,
    )
