"""The one run lifecycle: a results directory opened (run.json written at start), records appended as
requests end, then summarized and finished (run.json completed, summary.json written). Every place that
makes a run directory goes through RunDir: `goodbench run` and `simulate`, sweep cells and rate
probes, the locust master, and the importers."""

from __future__ import annotations

import os

from .columnar import ColumnarRun
from .errors import RunDirError
from .metrics import summarize
from .metrics.saturation import waiting_series
from .records import RequestRecord, RunMeta, RunResult
from .store import RunStore, error_samples, load_columns, load_server_metrics, new_run_id


class RunDir:
    """results/<run-id>/ for one run. `open` refuses a directory that already holds a run."""

    def __init__(self, store: RunStore, meta: RunMeta):
        self.store, self.meta = store, meta
        self._server_rows: list[dict] | None = None

    @classmethod
    def open(cls, result_dir: str, meta: RunMeta, prefix: str = "run") -> "RunDir":
        """meta.run_id names the directory; when empty, a fresh `PREFIX-DATE-TIME-PID` (with -2, -3, ...
        appended if this process already made one this second)."""
        if not meta.run_id:
            base = meta.run_id = new_run_id(prefix)
            k = 1
            while os.path.exists(os.path.join(result_dir, meta.run_id)):
                k += 1
                meta.run_id = f"{base}-{k}"
        store = RunStore(result_dir, meta.run_id)
        if os.path.exists(store.dir) and not os.path.isdir(store.dir):
            raise RunDirError(f"{store.dir} exists and is not a directory")
        store.start(meta)
        return cls(store, meta)

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

    def close(self) -> None:
        self.store.close()

    def finish(self, *, records: list[RequestRecord] | None = None, slo: dict | None = None,
               label: str | None = None, ci: bool = True, extra=None, summarized: bool = True) -> dict | None:
        """Close the records, summarize and complete run.json (finished_wall). records: summarize these
        in memory (sweep cells); else the run is read back from disk as columns (the sidecar is written
        for reports). extra: keys added to the summary, or a function of the summary giving them.
        summarized=False writes no summary.json (imports: their summaries are computed when read)."""
        self.store.close()
        summary = None
        if summarized:
            result = RunResult(self.meta, records) if records is not None else self.columns()
            queue = waiting_series(self.server_rows())
            failed = records is None and bool((result.cols.status != 0).any())
            summary = summarize(result, slo=slo, label=label, ci=ci, queue=queue,
                                errors=error_samples(self.dir) if failed else None)
            summary.update((extra(summary) if callable(extra) else extra) or {})
        self.store.finish(self.meta, summary)
        return summary

    def server_rows(self) -> list[dict]:
        """server_metrics.jsonl, read once after the run (the summary's queue evidence, server_timing
        and the prefix cache's counters all come from it)."""
        if self._server_rows is None:
            self._server_rows = load_server_metrics(self.dir)
        return self._server_rows

    def columns(self) -> ColumnarRun:
        return load_columns(self.dir)
