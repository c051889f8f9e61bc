"""locust integration: goodput users for locust's headless, UI and distributed (master/worker) runs.

The only module that imports locust (which monkey-patches the interpreter with gevent on import):
nothing in goodbench imports it, and tests run it in a subprocess. Requests stream over httpx (its
sync client is cooperative under gevent); every chunk is timestamped as it is read and each request
becomes a full RequestRecord, so a locust run gives the same results directory, summary and verdict
as `goodbench run`.

Configuration is locust's own custom arguments (listed by `locust -f ... --help`, each with an
environment variable); a master forwards them to its workers. Every process builds the same plan as
`goodbench run` (workloads.build_plan: mixtures, HOL, traces, multi-turn sessions) and, with N workers
(--expect-workers), worker i takes every N-th request (or session) of it; in open-loop mode it also
takes their send times from the plan's schedule, so the workers together follow one schedule. A user
that takes a session sends its turns one after another, each with the server's earlier replies as
history. Workers send their records to the master over locust's messaging; the master writes one
merged results directory, record by record as they arrive (an interrupted run keeps them). Each record
keeps its sender's clock (`origin`): times from two processes are never subtracted.

A run that ends before its plan does (Ctrl-C, SIGTERM, the time limit, or the master stopping the test
because its workers went missing) is summarised as interrupted, so `goodbench gate` calls it
incomplete; a headless master whose test stopped early quits at once with a message and exit code 2
instead of waiting out its time limit. A worker builds its plan in a native thread, so its heartbeats
keep flowing while it works.
"""

from __future__ import annotations

import logging
import os
import socket
import time

import gevent
import gevent.lock
import httpx
from locust import User, events, task
from locust.exception import StopUser
from locust.runners import MasterRunner, WorkerRunner

from ..client.config import (
    ClientConfig,
    describe_reply,
    model_from_listing,
    request_body,
    resolve_endpoint,
    secret_free,
    wanted_body,
    workload_fields,
)
from ..client.unary import new_state
from ..errors import RunDirError
from ..records import RequestRecord, RequestSpec, RunMeta, parse_slo
from ..redact import scrub_url
from ..rundir import RunDir
from ..store import new_run_id
from ..workloads import WorkloadSpec, build_plan, load_workload
from . import locust_options  # registers goodbench's options with locust's parser
from .locust_gate import gate_spec, locust_exit
from .locust_report import keep_report

MSG_RECORDS, MSG_DONE = "goodbench_records", "goodbench_done"
FLUSH_S = 0.5
logging.getLogger("httpx").setLevel(logging.WARNING)  # one INFO line per request otherwise


def client_config(spec: WorkloadSpec, host: str, endpoint: str, model: str, key: str | None) -> ClientConfig:
    """The client config of a locust process, as `goodbench run` builds it (api/runs._connect): the API
    the path names, else the workload's (a custom path), so bodies and headers (Messages: x-api-key,
    anthropic-version) are that API's."""
    return ClientConfig(
        **workload_fields(spec, endpoint),
        base_url=host,
        model=model,
        api_key=key,
        ignore_eos=spec.ignore_eos,
    )


class _Run:
    """This process's share of the run (per locust process; gevent is cooperative, so no locks)."""

    def __init__(self):
        self.ready = False
        self.records: list[RequestRecord] = []
        self.outbox: list[dict] = []
        self.done_workers: dict[int, int] = {}  # worker index -> its planned requests (None: unknown)
        self.finished = False
        self.rd: RunDir | None = None  # the master's (or single process's) results directory
        self.stopped_early: str | None = None  # why the test stopped before the plan ended
        self.closed = False  # the results are complete (quitting): later records stay in memory only
        self._lock = gevent.lock.BoundedSemaphore()

    def setup(self, env) -> None:
        """Once per process (the first user or test_start; others wait): the plan, the HTTP client."""
        if self.ready:
            return
        with self._lock:
            if not self.ready:
                self._setup(env)

    def _setup(self, env) -> None:
        o = env.parsed_options
        runner = env.runner
        self.spec = _spec(o)
        self.slo = parse_slo(o.goodbench_slo) if o.goodbench_slo else self.spec.slo
        self.endpoint = resolve_endpoint(o.goodbench_endpoint or None, self.spec.endpoint)
        self.min_attainment = o.goodbench_min_attainment
        self.open_loop = bool(o.goodbench_open_loop)
        self.origin = f"{socket.gethostname()}:{os.getpid()}"
        n_workers = max(1, int(getattr(o, "expect_workers", 1) or 1)) if isinstance(runner, WorkerRunner) else 1
        index = runner.worker_index if isinstance(runner, WorkerRunner) else 0
        if not isinstance(runner, MasterRunner):
            self._plan(index, n_workers)
            key = os.environ.get(o.goodbench_api_key_env or "OPENAI_API_KEY")
            self.cfg = client_config(self.spec, env.host or "", self.endpoint, _model(env), key)
            # one client (and connection pool) per process: each httpx.Client builds its own TLS context,
            # which costs tens of ms per user at spawn time. The API's own headers (Messages: x-api-key and
            # anthropic-version) from the one place that knows them
            self.http = httpx.Client(
                base_url=env.host or "",
                headers={"Accept-Encoding": "identity", **self.cfg.headers()},
                timeout=httpx.Timeout(600.0, connect=10.0, read=60.0),
                limits=httpx.Limits(max_connections=None, max_keepalive_connections=None),
            )
        self.t0 = time.monotonic()  # after set-up (tokenizer, workload, client): the schedule starts now
        self.deadline = self.t0 + self.duration if getattr(self, "duration", None) else None
        self.ready = True

    def _plan(self, index: int, n_workers: int) -> None:
        """This process's share of the plan `goodbench run` would build: every n_workers-th request or
        session, with its send time from the schedule in open-loop mode."""
        from .. import tokenizer

        # in a native thread: the CPU-bound build must not starve this process's heartbeats to the master
        self.plan = plan = gevent.get_hub().threadpool.apply(lambda: build_plan(self.spec, tokenizer.load()))
        self.expected_reuse = plan.expected_reuse()
        if plan.sessions:
            items = [("session", s, s.arrival_s) for s in plan.sessions]
        else:
            offs = plan.offsets
            items = [("request", r, float(offs[k]) if offs is not None else None) for k, r in enumerate(plan.requests)]
        self.queue = [(kind, x, off if self.open_loop else None) for kind, x, off in items[index::n_workers]]
        self.queue.reverse()  # pop() from the end
        self.total = len(self.queue)
        self.planned = self.total if plan.planned is not None else None  # this process's requests
        self.in_flight = 0
        self.think = plan.arrival.think_time_s if plan.closed else 0.0
        self.duration = plan.duration_s if plan.duration_s and not self.open_loop else None

    def take(self):
        """The next request or session. Open loop: a free user waits until the next send time before
        taking it, so users sleeping on future send times never hold items that fall due meanwhile."""
        while True:
            if self.deadline is not None and time.monotonic() >= self.deadline:
                return None
            if not self.queue:
                return None
            off = self.queue[-1][2]
            if off is not None:
                d = self.t0 + off - time.monotonic()
                if d > 0:
                    gevent.sleep(d)
                    continue  # another user may have taken it meanwhile
            self.in_flight += 1
            return self.queue.pop()

    def add(self, env, rec: RequestRecord) -> None:
        """A finished request's record: to the master (worker) or kept and written (single process)."""
        if isinstance(env.runner, WorkerRunner):
            self.outbox.append(rec.to_dict())
        else:
            self.keep(env, [rec])

    def keep(self, env, recs: list[RequestRecord]) -> None:
        """Records reach the results directory as they arrive; a disk that cannot take them ends the run."""
        self.records.extend(recs)
        if self.rd is None or self.rd.write_error is not None or self.closed:
            return
        try:
            self.rd.append_many(recs)
        except RunDirError as e:
            logging.getLogger("goodbench").error("goodbench: %s", e)
            env.process_exit_code = 2
            gevent.spawn(env.runner.quit)

    def complete(self, env) -> bool:
        """The plan ended (every worker said so), rather than a signal, a time limit or a stop."""
        if isinstance(env.runner, MasterRunner):
            return len(self.done_workers) >= _expected_workers(env)
        return self.finished

    def release(self, env) -> None:
        """A user is done with what it took; the last one ends this process's share."""
        self.in_flight -= 1
        if self.in_flight == 0 and (not self.queue or (self.deadline and time.monotonic() >= self.deadline)):
            self.finish(env)

    def finish(self, env) -> None:
        """This process has sent all it will send: tell the master, or end a local run."""
        if self.finished:
            return
        self.finished = True
        if isinstance(env.runner, WorkerRunner):
            self.flush(env)
            env.runner.send_message(MSG_DONE, [env.runner.worker_index, getattr(self, "planned", None)])
        else:
            gevent.spawn_later(0.1, env.runner.quit)

    def flush(self, env) -> None:
        if self.outbox:
            batch, self.outbox = self.outbox, []
            for i in range(0, len(batch), 500):
                env.runner.send_message(MSG_RECORDS, batch[i : i + 500])


RUN = _Run()


def _spec(o) -> WorkloadSpec:
    if o.goodbench_spec_json:
        return WorkloadSpec.from_json(o.goodbench_spec_json)
    if o.goodbench_workload:
        return load_workload(o.goodbench_workload)
    from ..workloads.datasets import random_workload

    return random_workload()


def _upto(chunks, limit: int):
    """The first chunks of a body, up to about limit bytes (an error body is kept in part)."""
    n = 0
    for c in chunks:
        yield c
        n += len(c)
        if n >= limit:
            return


def _expected_workers(env) -> int:
    return max(1, int(getattr(env.parsed_options, "expect_workers", 1) or 1))


def _open_results(env) -> None:
    """The master's (or single process's) results directory, opened before any load: a taken run id
    fails here, not after the run; records are appended as they arrive."""
    o = env.parsed_options
    spec = _spec(o)
    open_loop = bool(o.goodbench_open_loop)
    mode = "open" if open_loop else "closed"
    gate = gate_spec(o)  # read once: run.json records the gate the master will judge by
    meta = RunMeta(
        run_id=o.goodbench_run_id or new_run_id("locust"),
        label=f"locust-{mode}",
        target={
            "base_url": scrub_url(env.host),
            "endpoint": resolve_endpoint(o.goodbench_endpoint or None, spec.endpoint),
            "model": _model(env),
        },
        workload=spec.to_dict(),
        workload_hash=spec.hash(),
        slo=parse_slo(o.goodbench_slo) if o.goodbench_slo else spec.slo,
        seed=spec.seed,
        mode=mode,
        requested_rate=spec.arrival.mean_rate if open_loop else None,
        server=locust_options.server_block(o),
        target_attainment=gate.min_attainment,
        gate=gate.to_table(),
    )
    try:
        RUN.rd = RunDir.open(o.goodbench_result_dir, meta)
    except RunDirError as e:
        logging.getLogger("goodbench").error("goodbench: %s", e)
        env.process_exit_code = 2
        gevent.spawn(env.runner.quit)


@events.init.add_listener
def _init(environment, **kw) -> None:
    runner = environment.runner
    if isinstance(runner, MasterRunner):

        def on_records(msg, **_):
            RUN.keep(environment, [RequestRecord.from_dict(d) for d in msg.data])

        def on_done(msg, **_):
            index, planned = msg.data if isinstance(msg.data, list) else (msg.data, None)
            RUN.done_workers[index] = planned
            if RUN.complete(environment):
                gevent.spawn_later(0.2, runner.quit)

        runner.register_message(MSG_RECORDS, on_records)
        runner.register_message(MSG_DONE, on_done)
    elif isinstance(runner, WorkerRunner):

        def flusher():
            while True:
                gevent.sleep(FLUSH_S)
                if RUN.ready:
                    RUN.flush(environment)

        gevent.spawn(flusher)
    if runner is not None and not isinstance(runner, WorkerRunner):
        _open_results(environment)


@events.test_start.add_listener
def _test_start(environment, **kw) -> None:
    RUN.setup(environment)


@events.test_stop.add_listener
def _test_stop(environment, **kw) -> None:
    runner = environment.runner
    if isinstance(runner, WorkerRunner):
        if RUN.ready:
            RUN.flush(environment)
        return
    if RUN.closed or RUN.complete(environment) or RUN.stopped_early:
        return  # quitting (a signal, the end of the plan) or already said
    if not getattr(environment.parsed_options, "headless", False):
        return
    # the master stopped before the plan ended (its workers went missing, the time limit): say so and
    # quit now with what arrived, rather than wait out the time limit
    done, expected = len(RUN.done_workers), _expected_workers(environment)
    RUN.stopped_early = (
        f"locust stopped the test before the plan ended ({done} of {expected} workers finished their share; "
        f"{len(RUN.records)} records kept): the run is incomplete"
    )
    logging.getLogger("goodbench").error("goodbench: %s", RUN.stopped_early)
    environment.process_exit_code = 2
    gevent.spawn_later(0.5, runner.quit)


@events.quitting.add_listener
def _quitting(environment, **kw) -> None:
    """The master (or a single process) completes the results and sets the exit code."""
    if isinstance(environment.runner, WorkerRunner):
        if RUN.ready:
            RUN.flush(environment)
        return
    rd = RUN.rd
    if rd is None or RUN.closed:
        return
    RUN.closed = True
    rd.meta.interrupted = not RUN.complete(environment)
    rd.meta.expected_prefix_reuse = getattr(RUN, "expected_reuse", None)
    if isinstance(environment.runner, MasterRunner):
        shares = list(RUN.done_workers.values())
        rd.meta.planned_requests = sum(shares) if shares and None not in shares else None
    else:
        rd.meta.planned_requests = getattr(RUN, "planned", None)
    try:
        summary = rd.finish(records=RUN.records)
    except RunDirError as e:  # a full disk: the summary of what was written, then the one line
        environment.process_exit_code = 2
        if e.summary:
            _report(environment, rd, e.summary)
        logging.getLogger("goodbench").error("goodbench: %s", e)
        return
    _report(environment, rd, summary)


def _report(environment, rd: RunDir, summary: dict) -> None:
    """goodbench's summary and why the run ended, printed after locust's tables (locust_report.py)."""
    o, master = environment.parsed_options, isinstance(environment.runner, MasterRunner)
    workers = _expected_workers(environment) if master else None
    keep_report(summary, rd, o, RUN.complete(environment), workers, getattr(RUN, "total", None))
    if environment.process_exit_code is not None:
        return  # stopped early (2), or a failure that set it
    environment.process_exit_code = locust_exit(summary, gate_spec(o))


_MODEL: dict = {}


def _model(env) -> str:
    if "name" in _MODEL:
        return _MODEL["name"]
    name = env.parsed_options.goodbench_model
    if not name:
        try:
            r = httpx.get((env.host or "").rstrip("/") + "/v1/models", timeout=5)
            name = model_from_listing(r.json()) or "default"
        except (httpx.HTTPError, ValueError):
            name = "default"
    _MODEL["name"] = name
    return name


class GoodputUser(User):
    """Sends the workload's requests, one at a time per user, streaming each and recording every chunk.
    Subclass it in a locustfile (see locustfiles/goodput.py)."""

    abstract = True

    def wait_time(self) -> float:
        return RUN.think if RUN.ready else 0.0

    def on_start(self) -> None:
        RUN.setup(self.environment)

    @task
    def send_next(self) -> None:
        item = RUN.take()
        if item is None:
            if RUN.in_flight == 0:
                RUN.finish(self.environment)
            raise StopUser()
        kind, x, off = item
        try:
            if kind == "session":
                self._session(x, off)
            else:
                self._send(x, off if off is not None else time.monotonic() - RUN.t0)
        finally:
            RUN.release(self.environment)

    def _send(self, spec: RequestSpec, scheduled: float) -> tuple[RequestRecord, str]:
        rec, text = self._stream(spec, scheduled)
        self._fire(rec)
        RUN.add(self.environment, rec)
        return rec, text

    def _session(self, s, arrival: float | None) -> None:
        """A multi-turn session: its turns in order, each its think time after the previous reply, the
        server's replies resent as history (as `goodbench run` does); a failed turn ends it."""
        from ..workloads.sessions import turn_request

        replies, reply_tokens = [], []
        scheduled = arrival if arrival is not None else time.monotonic() - RUN.t0
        for k, turn in enumerate(s.turns, 1):
            if k > 1:
                scheduled = time.monotonic() - RUN.t0 + turn.think_s
                gevent.sleep(turn.think_s)
            spec = turn_request(RUN.plan.spec, s, k, RUN.plan.tok, replies, reply_tokens)
            rec, text = self._send(spec, scheduled)
            if rec.status != "ok":
                return
            replies.append(text)
            reply_tokens.append(rec.output_tokens)

    def _stream(self, spec: RequestSpec, scheduled: float) -> tuple[RequestRecord, str]:
        t0 = RUN.t0
        st = new_state(RUN.cfg, time.monotonic, t0)
        http_status = None
        body = request_body(RUN.cfg, spec)
        headers = {RUN.cfg.session_header: spec.session} if spec.session else None
        sent = time.monotonic() - t0
        try:
            with RUN.http.stream("POST", RUN.endpoint, json=body, headers=headers) as resp:
                http_status = resp.status_code
                h, ok = resp.headers, resp.status_code < 300
                if RUN.cfg.replica_header:
                    st.set_replica(h.get(RUN.cfg.replica_header))
                if not ok or not wanted_body(resp.headers.get("content-type"), st.unary) or h.get("content-encoding"):
                    raw = b"".join(_upto(resp.iter_raw(), 2000))
                    said = (h.get("content-type"), raw, h.get("location"), h.get("content-encoding"), st.unary)
                    st.fail(*describe_reply(resp.status_code, *said))
                else:
                    for data in resp.iter_raw():
                        st.on_data(data)
                    st.on_eof()
                    if not st.done:
                        st.fail("bad_stream", "stream ended without [DONE]")
        except httpx.TimeoutException as e:
            st.fail("timeout", f"{type(e).__name__}: {e}")
        except httpx.ConnectError as e:
            st.fail("disconnected", f"cannot connect to {self.host}: {e}")
        except httpx.HTTPError as e:
            st.fail("disconnected", f"{type(e).__name__}: {str(e)[:200]}")
        error = secret_free(st.error, RUN.cfg) if st.error else None
        now = time.monotonic() - t0
        rec = st.record(spec, scheduled, sent, now, st.status, http_status, error, origin=RUN.origin)
        return rec, st.answer_text()

    def _fire(self, rec: RequestRecord) -> None:
        """locust's own statistics: E2E as the response time, TTFT under its own name."""
        ev = self.environment.events.request
        ok = rec.status == "ok"
        e2e = ((rec.chunk_times[-1] if rec.chunk_times else rec.finished_at) - rec.sent_at) * 1000
        ev.fire(
            request_type="POST",
            name=RUN.endpoint,
            response_time=e2e,
            response_length=rec.output_tokens,
            exception=None if ok else RuntimeError(f"{rec.status}: {rec.error}"),
            context={},
        )
        if rec.first_token_at is not None:
            ev.fire(
                request_type="TTFT",
                name=RUN.endpoint,
                response_time=(rec.first_token_at - rec.sent_at) * 1000,
                response_length=0,
                exception=None,
                context={},
            )
