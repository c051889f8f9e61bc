"""`goodbench serve`: the engine behind an OpenAI-compatible streaming HTTP server on the real clock.

One engine loop task (steploop.EngineLoop) runs steps back to back: it builds a step, sleeps until the
step's absolute planned end (start + cost-model duration), then hands each produced token to its
stream. Handlers only wait for their stream's tokens and write them; nothing per step grows with the
number of connected clients beyond writing their tokens. Step lateness (actual end - planned end) is
measured and exported in /metrics. Several instances behind a router: cluster.py; the process around them: main.py."""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import math
import random
import time
from dataclasses import dataclass

from aiohttp import web

from ...client.apis import API_PATHS, UNARY_APIS
from ...errors import UsageError
from ...limits import MAX_TOKENS
from ...pacing import TurnPacer
from ...version import __version__
from ..config import EngineConfig
from ..core import Engine, RequestTooLong
from ..costmodel import CostModel
from ..frontend import MediaQueue
from ..kvcache import Seq, block_hashes
from .apishapes import models_list, parse_api, pool_body, pool_prepare
from .apistreams import ChatToolFormatter, MessagesFormatter, ResponsesFormatter
from .media import extras, image_tokens, preprocess, refusal
from .openai_api import BadRequest, Formatter, Parsed, error_event, json_body, parse_request
from .render import RENDER_PATHS, render, replica_header
from .steploop import EngineLoop, render_metrics

TOKENIZE_INLINE_CHARS = 4000  # longer prompts are tokenized in a thread
POOL_YIELD = 256  # sequences of one embeddings / rerank request submitted between two turns of the loop


def _err(status: int, message: str, typ: str = "BadRequestError", param: str | None = None) -> web.Response:
    return web.json_response(
        {"object": "error", "message": message, "type": typ, "param": param, "code": status}, status=status
    )


class Stream:
    """One request's output. Once its handler has sent the response headers, the engine loop writes
    each token straight into the connection (no task wake-up per token); until then, and for
    non-streaming requests, tokens wait in `buf`. The handler is woken once, at the end."""

    __slots__ = (
        "buf",
        "writer",
        "finished",
        "done",
        "dead",
        "n",
        "arrived",
        "queued",
        "scheduled",
        "last",
        "fmt",
        "replica",
    )

    def __init__(self, arrived: float, finished: asyncio.Future):
        self.buf: list[bytes] = []
        self.writer = None  # aiohttp's payload writer, set by the handler after the headers are out
        self.finished = finished
        self.done = False
        self.dead = False  # the client went away
        self.n = 0
        self.arrived = arrived
        self.queued: float | None = None  # when the engine loop took it in (queue-time start, as vLLM's)
        self.scheduled: float | None = None  # start of the first step that included it (queue-time end)
        self.last = 0.0
        self.fmt: Formatter | None = None
        self.replica: str | None = None  # sent as REPLICA_HEADER: the instance that served it

    def push(self, data: bytes, done: bool = False) -> None:
        if self.writer is not None and not self.dead:
            if not _write_now(self.writer, data):
                self.dead = True
        else:
            self.buf.append(data)
        if done:
            self.done = True
        if (done or self.dead) and not self.finished.done():
            self.finished.set_result(None)


def _flush_headers(resp: web.StreamResponse) -> None:
    """The headers go out now, with no body byte, as vLLM's server sends them (an SSE comment to push them
    out broke vLLM's own client, issue 42); aiohttp >= 3.12 sends them at prepare() already."""
    send = getattr(resp._payload_writer, "send_headers", None)
    if send is not None:
        send()


def _write_now(writer, data: bytes) -> bool:
    """aiohttp's writer.write() without a task hop: with drain=False and no compression it never
    suspends, so driving the coroutine one step runs it to completion. False if the peer is gone."""
    coro = writer.write(data, drain=False)
    try:
        coro.send(None)
    except StopIteration:
        return True
    except (ConnectionResetError, RuntimeError, OSError):
        return False
    coro.close()  # it suspended after handing the bytes over (not expected without compression)
    return True


EXTRAS = web.RequestKey("extras", tuple)  # (LoRA adapter or None, image sizes, image keys): serve/media.extras


@dataclass
class ServeOptions:
    host: str = "127.0.0.1"
    port: int = 8000
    served_model_name: str | None = None
    api_key: str | None = None
    step_trace: str | None = None
    eos_dist: str | None = None  # without ignore_eos: "uniform:MIN:MAX" or "lognormal:MEDIAN:SIGMA"
    seed: int = 0
    log_interval_s: float = 10.0  # one stats line this often while there is work (0: none)
    log_requests: bool = False  # one line per finished request
    enable_prompt_tokens_details: bool = False  # usage says the cached prompt tokens (as vLLM's flag)
    replica_name: str | None = None  # sent in REPLICA_HEADER on every reply (a cluster adds "/instance")
    lora_modules: tuple = ()  # ((name, path), ...): LoRA adapters a request may name as its model


def parse_eos_dist(spec: str | None):
    """The output-length cap without ignore_eos, checked at start (a bad one would fail every request)."""
    if not spec:
        return None
    parts = spec.split(":")
    try:
        if parts[0] == "uniform" and len(parts) == 3:
            lo, hi = int(parts[1]), int(parts[2])
            if 1 <= lo <= hi <= MAX_TOKENS:
                return lambda rng: rng.randint(lo, hi)
        if parts[0] == "lognormal" and len(parts) == 3:
            med, sig = float(parts[1]), float(parts[2])
            if 1 <= med <= MAX_TOKENS and 0 <= sig <= 20:
                return lambda rng: min(MAX_TOKENS, max(1, int(round(rng.lognormvariate(math.log(med), sig)))))
    except (ValueError, OverflowError):
        pass
    raise UsageError(
        f"--eos-length-dist {spec!r}: use uniform:MIN:MAX (1 <= MIN <= MAX) or lognormal:MEDIAN:SIGMA "
        "(MEDIAN >= 1, 0 <= SIGMA <= 20)"
    )


class EngineServer:
    def __init__(self, cfg: EngineConfig, opts: ServeOptions, tok, cost: CostModel | None = None):
        self.cfg = cfg.resolved()
        self.opts = opts
        self.tok = tok
        self.model_name = opts.served_model_name or self.cfg.model
        self.labels = f'model_name="{self.model_name}"'
        self.adapters = tuple(name for name, _ in opts.lora_modules)
        self.words = [json.dumps(" " + w).encode() for w in tok.words[:4096]]
        self.eos = parse_eos_dist(opts.eos_dist)
        self.rng = random.Random(opts.seed)
        self.ids = itertools.count()
        self.clock = time.monotonic
        self.in_flight = 0  # generate requests received and not yet answered (a calibrated front end's load)
        self._tasks: list[asyncio.Task] = []
        self.failed: str | None = None  # why an engine loop died (then /health is 503 and serve exits 1)
        self.on_failure = None  # called once when a loop dies (serve_forever stops the server)
        self._intake = TurnPacer(first_goes_now=True)
        self._trace = open(opts.step_trace, "w", encoding="utf-8") if opts.step_trace else None
        self.t0 = self.clock()
        self.started = int(time.time())
        self.loops: list[EngineLoop] = self._build_loops(cost)
        self.front_end, self.media_queue = self.loops[0].engine.cost.front_end, MediaQueue()  # frontend.py's

    def _build_loops(self, cost: CostModel | None) -> list[EngineLoop]:
        """The engine instances this server steps (one here; servecluster.ClusterServer builds more)."""
        return [EngineLoop(Engine(self.cfg, cost), trace=self._trace, t0=self.t0)]

    @property
    def engine(self) -> Engine:
        """The first (here: the only) instance's engine."""
        return self.loops[0].engine

    # ------------------------------------------------------------------ HTTP
    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024, middlewares=[self._auth])
        for api, handler in (
            ("completions", self.completions),
            ("chat", self.chat),
            ("responses", self.responses),
            ("messages", self.messages),
        ):
            app.router.add_post(API_PATHS[api], handler)
            app.router.add_post(RENDER_PATHS[api], functools.partial(render, self, api=api))
        for api in UNARY_APIS:  # the client's list of one-body APIs: what it sends is what this serves
            app.router.add_post(API_PATHS[api], functools.partial(self._pool, api=api))
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/version", self.version)
        app.router.add_get("/health", self.health)
        app.router.add_get("/metrics", self.metrics)
        app.on_startup.append(self._start)
        app.on_shutdown.append(self._stop)
        return app

    @web.middleware
    async def _auth(self, request: web.Request, handler):
        key = self.opts.api_key
        if key and request.path.startswith("/v1/"):
            bearer = request.headers.get("Authorization", "") == f"Bearer {key}"
            if not bearer and request.headers.get("x-api-key") != key:  # Anthropic's header
                return _err(401, "missing or invalid API key", "AuthenticationError")
        return await handler(request)

    async def _start(self, app):
        self._tasks = [asyncio.ensure_future(self._run_loop(lp)) for lp in self.loops]

    def _open_streams(self) -> list[Stream]:
        """Every stream not yet finished, wherever its request is."""
        return [s.payload for lp in self.loops for s in lp.open_seqs() if s.payload is not None]

    async def _run_loop(self, lp: EngineLoop) -> None:
        """An engine loop; if one ever dies, every open stream ends with an error event, /health turns
        503 and the server stops (exit 1) instead of hanging with requests nobody will serve."""
        import logging
        import traceback

        try:
            await lp.run()
        except asyncio.CancelledError:
            raise
        except Exception as e:
            self.failed = f"{type(e).__name__}: {e}"
            logging.getLogger("goodbench.serve").error("engine loop died:\n%s", traceback.format_exc())
            for st in self._open_streams():
                st.push(error_event(f"engine failure: {self.failed}"), done=True)
            if self.on_failure is not None:
                self.on_failure()

    async def _stop(self, app):
        for task in self._tasks:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
        for st in self._open_streams():
            st.push(b"", done=True)
        if self._trace:
            self._trace.close()
            self._trace = None

    async def version(self, request):
        """vLLM's /version: a run against this engine records what served it (run.json's `server`)."""
        return web.json_response({"version": __version__})

    async def health(self, request):
        if self.failed is not None:
            return web.Response(status=503, text=f"engine loop stopped: {self.failed}")
        return web.Response(text="ok")

    async def models(self, request):
        """vLLM's /v1/models, every field of it: vLLM's client reads `root` (issue 42); adapters follow."""
        cfg = self.cfg
        cards = models_list(self.model_name, cfg.model, cfg.max_model_len, self.started, self.opts.lora_modules)
        return web.json_response({"object": "list", "data": cards})

    async def completions(self, request):
        return await self._generate(request, "completions")

    async def chat(self, request):
        return await self._generate(request, "chat")

    async def responses(self, request):
        return await self._generate(request, "responses")

    async def messages(self, request):
        return await self._generate(request, "messages")

    async def _prepare(self, request: web.Request, api: str) -> tuple[Parsed, tuple, int, int]:
        """The validated request, its token ids, prompt length and output cap: everything is checked
        here, before the request reaches the engine."""
        body = json_body(await request.read())
        names = (self.model_name, "default", *self.adapters)
        req = (
            parse_request(body, api == "chat", names) if api in ("chat", "completions") else parse_api(body, api, names)
        )
        request[EXTRAS] = extras(body, self.adapters)  # its LoRA adapter and images
        if req.token_ids is not None:
            ids = req.token_ids
        elif len(req.text) > TOKENIZE_INLINE_CHARS:
            ids = await asyncio.get_running_loop().run_in_executor(None, self.tok.encode, req.text)
        else:
            ids = self.tok.encode(req.text)
        n_prompt = len(ids) + req.overhead
        if n_prompt < 1:
            raise BadRequest("the prompt is empty", "prompt")
        room = self.cfg.max_model_len - n_prompt - image_tokens(self.cfg.shape(), request[EXTRAS][1])
        mt = req.max_tokens if req.max_tokens is not None else max(1, room)
        if not req.ignore_eos and self.eos is not None:
            mt = min(mt, self.eos(self.rng))
        return req, ids, n_prompt, mt

    def _formatter(self, api: str, rid: int, req: Parsed, n_prompt: int, max_tokens: int, model: str):
        """The reply's shape: OpenAI chunks (a tool call when one is required), Responses or Messages events."""
        thinking = min(req.reasoning_tokens, max_tokens - 1)
        if api in ("responses", "messages"):
            cls = ResponsesFormatter if api == "responses" else MessagesFormatter
            return cls(rid, int(time.time()), model, n_prompt, self.words, rid, thinking, req.tool)
        chat = api == "chat"
        args = (f"{'chatcmpl' if chat else 'cmpl'}-{rid}", int(time.time()), model, chat, n_prompt)
        kw = dict(
            include_usage=req.include_usage,
            continuous=req.continuous_usage,
            words=self.words,
            seed=rid,
            thinking=thinking,
        )
        return ChatToolFormatter(*args, tool=req.tool, **kw) if req.tool and chat else Formatter(*args, **kw)

    async def _generate(self, request: web.Request, api: str):
        arrived = self.clock()
        if self.failed is not None:
            return _err(503, f"the engine loop stopped: {self.failed}", "ServiceUnavailableError")
        # one intake (JSON, tokenizing, response set-up) per loop iteration: a burst of arrivals must
        # not hold the engine's step timer (see pacing)
        await self._intake.turn()
        try:
            req, ids, n_prompt, max_tokens = await self._prepare(request, api)
        except BadRequest as e:
            return _err(400, e.args[0], param=e.param)
        rid = next(self.ids)
        stream = Stream(arrived, asyncio.get_running_loop().create_future())
        # a LoRA request's reply names its adapter, as vLLM's
        stream.fmt = self._formatter(api, rid, req, n_prompt, max_tokens, request[EXTRAS][0] or self.model_name)
        stream.fmt.details = self.opts.enable_prompt_tokens_details
        hashes = block_hashes(ids, self.cfg.block_size) if self.cfg.enable_prefix_caching or self.wants_hashes else ()
        # the modelled server's front end (HTTP, tokenizing) before the engine sees the request; a
        # calibrated one also grows with the requests already in flight and the prompt (engine/frontend.py)
        fe = self.front_end
        front = fe.delay(self.in_flight, n_prompt)
        self.in_flight += 1
        try:
            if front > 0:
                await asyncio.sleep(front)
            images = request.get(EXTRAS, (None, (), ()))[1]
            if images and fe.preprocesses:  # decoding threads, then one processor (frontend.MediaQueue)
                front += await preprocess(self.media_queue, self.clock, fe.media(images))
            at = self.clock() if front > 0 else arrived
            seq = Seq(rid, n_prompt, max_tokens, arrival=at, priority=req.priority, hashes=hashes, payload=stream)
            seq.lora, seq.images, seq.image_ids = request.get(EXTRAS, (None, (), ()))
            try:
                self._submit(seq, req)
            except RequestTooLong as e:
                return _err(400, refusal(e, self.cfg.max_model_len, seq), param="max_tokens")
            stream.fmt.n_prompt = seq.prompt_len  # its images' tokens counted (usage says them, as vLLM's)
            return await self._answer(request, api, rid, req, seq, stream)
        finally:
            self.in_flight -= 1

    async def _answer(self, request: web.Request, api: str, rid: int, req: Parsed, seq: Seq, stream: Stream):
        """Stream or return the reply of a submitted request; free its sequence however it ends."""
        try:
            if req.stream:
                return await self._stream(request, seq, stream, stream.fmt)
            return await self._unary(stream, stream.fmt)
        finally:  # finished, failed or the client went away (the handler is cancelled): free the sequence
            self._release(seq)
            if self.opts.log_requests:
                rname = {"chat": "chatcmpl", "completions": "cmpl"}.get(api, api)
                print(request_line(f"{rname}-{rid}", seq, stream, self.clock()), flush=True)

    async def _pool(self, request: web.Request, *, api: str):
        """Embeddings, rerank, score: each input (a query joined to a document for rerank) is one
        prefill-only sequence (max_tokens 1: the prefill step's token) priced by the cost model; the
        reply is one JSON body when the last has finished."""
        arrived = self.clock()
        if self.failed is not None:
            return _err(503, f"the engine loop stopped: {self.failed}", "ServiceUnavailableError")
        await self._intake.turn()
        bs = self.cfg.block_size if self.cfg.enable_prefix_caching else None
        try:
            raw = await request.read()
            items, prepared = await asyncio.to_thread(
                pool_prepare, raw, api, (self.model_name, "default"), self.tok, bs
            )
        except BadRequest as e:
            return _err(400, e.args[0], param=e.param)
        req = Parsed(
            chat=False, text="", token_ids=None, overhead=0, max_tokens=1, stream=False,
            include_usage=False, continuous_usage=False, ignore_eos=True, priority=0,
        )  # fmt: skip
        loop, seqs = asyncio.get_running_loop(), []
        try:
            for k, (ids, hashes) in enumerate(prepared):
                if k and k % POOL_YIELD == 0:
                    await asyncio.sleep(0)  # other streams' tokens go out between batches of submissions
                st = Stream(arrived, loop.create_future())
                st.fmt = _POOLED
                seqs.append(Seq(next(self.ids), len(ids) + 1, 1, arrival=arrived, hashes=hashes, payload=st))
                self._submit(seqs[-1], req)
            for s in seqs:  # one at a time: gathering 100k futures holds the loop while it wraps them all
                await s.payload.finished
        except RequestTooLong as e:
            return _err(
                400, f"This model's maximum context length is {self.cfg.max_model_len} tokens: {e}", param="input"
            )
        finally:
            for s in seqs:
                self._release(s)
        n_prompt = sum(s.prompt_len for s in seqs)
        args = (api, seqs[0].id, int(time.time()), self.model_name, items, n_prompt)
        pieces = await asyncio.to_thread(pool_body, *args)
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        resp.content_length = sum(map(len, pieces))
        await resp.prepare(request)
        for piece in pieces:  # a piece at a time: a 72 MB body written at once held the loop ~0.5 s
            await resp.write(piece)
        await resp.write_eof()
        return resp

    wants_hashes = False  # a cluster's router may read prompts' block hashes without a prefix cache

    def _submit(self, seq: Seq, req: Parsed) -> None:
        """Hand a validated request to an engine instance (one here; a router's choice in a cluster)."""
        self.loops[0].submit(seq)
        seq.payload.replica = self.opts.replica_name

    def _release(self, seq: Seq) -> None:
        """The handler is done with its request: abort it if it is still queued or running."""
        if seq.status not in ("finished", "aborted"):
            self.loops[0].engine.abort(seq)

    async def _stream(self, request, seq: Seq, stream: Stream, fmt) -> web.StreamResponse:
        head = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        resp = web.StreamResponse(headers=head | replica_header(stream))
        resp.enable_chunked_encoding()
        try:
            await resp.prepare(request)  # a client gone before the headers: nothing worth a traceback
            _flush_headers(resp)
            opening = fmt.opening()  # vLLM's events sent before any token (Responses' created; else none)
            if stream.buf or opening:
                data = opening + b"".join(stream.buf)
                stream.buf.clear()
                await resp.write(data)
            # from here the engine loop writes tokens itself, through aiohttp's own writer (chunked
            # framing and its bookkeeping stay aiohttp's; StreamResponse has held it since 3.0)
            stream.writer = resp._payload_writer
            await stream.finished
            if stream.dead:
                self._release(seq)
                return resp
            await resp.write_eof()
        except ConnectionResetError:
            pass  # the client went away: _generate frees its sequence; nothing worth a traceback
        return resp

    async def _unary(self, stream: Stream, fmt) -> web.Response:
        await stream.finished
        stream.buf.clear()
        return web.json_response(fmt.full_response(stream.n), headers=replica_header(stream))

    # ------------------------------------------------------------------ metrics
    async def metrics(self, request):
        return web.Response(text=render_metrics(self._metric_rows()), content_type="text/plain")

    def _metric_rows(self) -> list[tuple[str, EngineLoop]]:
        """(Prometheus labels, instance) per engine instance."""
        return [(self.labels, self.loops[0])]


def request_line(rid: str, seq: Seq, stream: Stream, now: float) -> str:
    """`goodbench serve --log-requests`: one line per request as it ends."""
    queued = f", queued {(stream.scheduled - stream.arrived) * 1000:.1f} ms" if stream.scheduled is not None else ""
    status = "client gone" if stream.dead else seq.status
    return (
        f"request {rid}: {seq.prompt_len} prompt + {stream.n} output tokens, {status}{queued}, "
        f"{(now - stream.arrived) * 1000:.1f} ms in all"
    )


class _Pooled:
    """A prefill-only sequence streams nothing: its handler answers once all its inputs finished."""

    @staticmethod
    def token(n: int, done: bool) -> bytes:
        return b""


_POOLED = _Pooled()

# handler_cancellation: a client that goes away cancels its handler, which aborts its request (a
# non-streaming request would otherwise run to its end for nobody)
RUNNER_OPTIONS = {"access_log": None, "handler_cancellation": True}
