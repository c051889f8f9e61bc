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
merged results directory. Each record keeps its sender's clock (`origin`): times from two processes
are never subtracted.
"""

from __future__ import annotations

import logging
import os
import socket
import time

import gevent
import httpx
from locust import User, events, task
from locust.exception import StopUser
from locust.runners import MasterRunner, WorkerRunner

from ..client.config import ClientConfig, request_body, resolve_endpoint
from ..client.unary import new_state
from ..records import RequestRecord, RequestSpec, RunMeta, parse_slo
from ..rundir import RunDir
from ..store import new_run_id
from ..workloads import WorkloadSpec, build_plan, load_workload

MSG_RECORDS, MSG_DONE = "goodbench_records", "goodbench_done"
FLUSH_S = 0.5
logging.getLogger("httpx").setLevel(logging.WARNING)  # one INFO line per request otherwise


@events.init_command_line_parser.add_listener
def _arguments(parser) -> None:
    g = parser.add_argument_group("goodbench")
    g.add_argument(
        "--goodbench-workload",
        env_var="GOODBENCH_WORKLOAD",
        default="",
        help="a goodbench workload TOML file or a built-in workload's name, e.g. hol-stress "
        "(default: 1024-token prompts, 128 out)",
    )
    g.add_argument(
        "--goodbench-spec-json", env_var="GOODBENCH_SPEC_JSON", default="", help="(internal) workload as JSON"
    )
    g.add_argument(
        "--goodbench-model",
        env_var="GOODBENCH_MODEL",
        default="",
        help="model name sent in requests (default: the server's first /v1/models entry)",
    )
    g.add_argument(
        "--goodbench-endpoint",
        env_var="GOODBENCH_ENDPOINT",
        default="",
        help="API path (default: the workload's, /v1/completions)",
    )
    g.add_argument("--goodbench-slo", env_var="GOODBENCH_SLO", default="", help='SLO, e.g. "ttft:500 tpot:50"')
    g.add_argument(
        "--goodbench-min-attainment",
        env_var="GOODBENCH_MIN_ATTAINMENT",
        type=float,
        default=0.95,
        help="exit 1 when SLO attainment is below this (default 0.95)",
    )
    g.add_argument(
        "--goodbench-result-dir",
        env_var="GOODBENCH_RESULT_DIR",
        default="results",
        help="parent folder of the results directory (default results)",
    )
    g.add_argument("--goodbench-run-id", env_var="GOODBENCH_RUN_ID", default="", help="results directory name")
    g.add_argument(
        "--goodbench-open-loop",
        env_var="GOODBENCH_OPEN_LOOP",
        action="store_true",
        default=False,
        help="take send times from the workload's arrival schedule (default: closed loop, "
        "locust's model, which hides queueing)",
    )
    g.add_argument(
        "--goodbench-api-key-env",
        env_var="GOODBENCH_API_KEY_ENV",
        default="OPENAI_API_KEY",
        help="environment variable holding the API key",
    )


class _Run:
    """This process's share of the run (per locust process; gevent is cooperative, so no locks)."""

    def __init__(self):
        self.ready = False
        self.records: list[RequestRecord] = []
        self.outbox: list[dict] = []
        self.done_workers: set[int] = set()
        self.finished = False

    def setup(self, env) -> None:
        if self.ready:
            return
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
            # one client (and connection pool) per process: each httpx.Client builds its own TLS context,
            # which costs tens of ms per user at spawn time
            self.http = httpx.Client(
                base_url=env.host or "",
                headers={"Authorization": f"Bearer {key}"} if key else {},
                timeout=httpx.Timeout(600.0, connect=10.0, read=60.0),
                limits=httpx.Limits(max_connections=None, max_keepalive_connections=None),
            )
            header = {"session_header": self.spec.session.header} if self.spec.session else {}
            self.cfg = ClientConfig(
                **header,
                base_url=env.host or "",
                endpoint=self.endpoint,
                model=_model(env),
                ignore_eos=self.spec.ignore_eos,
            )
        self.t0 = time.monotonic()  # after set-up (tokenizer, workload, client): the schedule starts now
        self.deadline = self.t0 + self.duration if getattr(self, "duration", None) else None
        self.ready = True

    def _plan(self, index: int, n_workers: int) -> None:
        """This process's share of the plan `goodbench run` would build: every n_workers-th request or
        session, with its send time from the schedule in open-loop mode."""
        from .. import tokenizer

        self.plan = plan = build_plan(self.spec, tokenizer.load())
        self.expected_reuse = plan.expected_reuse()
        if plan.sessions:
            items = [("session", s, s.arrival_s) for s in plan.sessions]
        else:
            offs = plan.offsets
            items = [("request", r, float(offs[k]) if offs is not None else None) for k, r in enumerate(plan.requests)]
        self.queue = [(kind, x, off if self.open_loop else None) for kind, x, off in items[index::n_workers]]
        self.queue.reverse()  # pop() from the end
        self.total = len(self.queue)
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
        """A finished request's record: to the master (worker) or kept (master or single process)."""
        if isinstance(env.runner, WorkerRunner):
            self.outbox.append(rec.to_dict())
        else:
            self.records.append(rec)

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
            env.runner.send_message(MSG_DONE, env.runner.worker_index)
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


@events.init.add_listener
def _init(environment, **kw) -> None:
    runner = environment.runner
    if isinstance(runner, MasterRunner):

        def on_records(msg, **_):
            RUN.records.extend(RequestRecord.from_dict(d) for d in msg.data)

        def on_done(msg, **_):
            RUN.done_workers.add(msg.data)
            expected = max(1, int(getattr(environment.parsed_options, "expect_workers", 1) or 1))
            if len(RUN.done_workers) >= expected:
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


@events.test_start.add_listener
def _test_start(environment, **kw) -> None:
    RUN.setup(environment)


@events.test_stop.add_listener
def _test_stop(environment, **kw) -> None:
    if isinstance(environment.runner, WorkerRunner) and RUN.ready:
        RUN.flush(environment)


@events.quitting.add_listener
def _quitting(environment, **kw) -> None:
    """The master (or a single process) writes the merged results and sets the exit code."""
    if isinstance(environment.runner, WorkerRunner) or not RUN.ready:
        return
    o = environment.parsed_options
    mode = "open" if RUN.open_loop else "closed"
    meta = RunMeta(
        run_id=o.goodbench_run_id or new_run_id("locust"),
        label=f"locust-{mode}",
        target={"base_url": environment.host, "endpoint": RUN.endpoint, "model": _model(environment)},
        workload=RUN.spec.to_dict(),
        workload_hash=RUN.spec.hash(),
        slo=RUN.slo,
        seed=RUN.spec.seed,
        mode=mode,
        requested_rate=RUN.spec.arrival.mean_rate if RUN.open_loop else None,
        expected_prefix_reuse=getattr(RUN, "expected_reuse", None),
    )
    rd = RunDir.open(o.goodbench_result_dir, meta)
    rd.append_many(RUN.records)
    summary = rd.finish(records=RUN.records)
    from rich.console import Console

    from ..report.console import print_summary

    print_summary(
        Console(width=120, highlight=False),
        summary,
        meta.to_dict(),
        RUN.min_attainment,
        rd.dir,
        slo_hint='--goodbench-slo "ttft:MS tpot:MS"',
    )
    att = summary.get("slo_attainment")
    environment.process_exit_code = (
        1 if (att is not None and att < RUN.min_attainment) or not summary["requests"]["completed"] else 0
    )


_MODEL: dict = {}


def _model(env) -> str:
    if "name" in _MODEL:
        return _MODEL["name"]
    name = env.parsed_options.goodbench_model
    if not name:
        try:
            r = httpx.get((env.host or "").rstrip("/") + "/v1/models", timeout=5)
            items = r.json().get("data") or []
            name = items[0].get("id") if items else "default"
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
        status, http_status, error = "ok", None, None
        body = request_body(RUN.cfg, spec)
        headers = {RUN.cfg.session_header: spec.session} if spec.session else None
        sent = time.monotonic() - t0
        try:
            with RUN.http.stream("POST", RUN.endpoint, json=body, headers=headers) as resp:
                http_status = resp.status_code
                if resp.status_code >= 400:
                    raw = resp.read()[:2000]
                    status, error = "http_error", f"HTTP {resp.status_code}: {raw.decode('utf-8', 'replace')[:500]}"
                else:
                    for data in resp.iter_raw():
                        st.on_data(data)
                    st.on_eof()
                    status, error = st.status, st.error
                    if status == "ok" and not st.done:
                        status, error = "bad_stream", "stream ended without [DONE]"
        except httpx.TimeoutException as e:
            status, error = "timeout", f"{type(e).__name__}: {e}"
        except httpx.ConnectError as e:
            status, error = "disconnected", f"cannot connect to {self.host}: {e}"
        except httpx.HTTPError as e:
            status, error = "disconnected", f"{type(e).__name__}: {str(e)[:200]}"
        rec = st.record(spec, scheduled, sent, time.monotonic() - t0, status, http_status, error, origin=RUN.origin)
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
