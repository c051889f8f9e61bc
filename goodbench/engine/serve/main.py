"""`goodbench serve` as a process: build one engine server (server.py) or several instances behind a
router (cluster.py), listen, print one ready line, serve until SIGINT/SIGTERM."""

from __future__ import annotations

import asyncio

from aiohttp import web

from ... import tokenizer as tokmod
from ...errors import UsageError
from ...eventloop import install_uvloop
from ...gcquiet import quiet_gc, watchdog as gc_watchdog
from ..config import EngineConfig
from .cluster import ClusterServer
from .server import RUNNER_OPTIONS, EngineServer, ServeOptions, parse_eos_dist


async def serve_forever(server: EngineServer, ready_cb=None) -> None:
    """Run until SIGINT/SIGTERM; then stop accepting, end open streams and exit."""
    import signal

    runner = web.AppRunner(server.app(), handle_signals=False, **RUNNER_OPTIONS)
    await runner.setup()
    site = web.TCPSite(runner, server.opts.host, server.opts.port, backlog=4096, reuse_address=True)
    await site.start()
    if ready_cb:
        ready_cb(site)
    stop = asyncio.Event()
    server.on_failure = stop.set
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):
            pass
    dog = asyncio.ensure_future(gc_watchdog())
    every = server.opts.log_interval_s
    stats = asyncio.ensure_future(log_stats(server, every)) if every > 0 else None
    try:
        with quiet_gc():  # collector pauses would make steps late
            await stop.wait()
    finally:
        dog.cancel()
        if stats is not None:
            stats.cancel()
        await runner.cleanup()


def stats_line(loops, prev: tuple, dt: float) -> tuple[str | None, tuple]:
    """One interval of `goodbench serve`'s log, summed over instances: finished requests, prompt and
    generation tokens/s, running, waiting, KV-cache use. None when the engine was idle throughout."""
    now = (
        sum(lp.finished_total for lp in loops),
        sum(lp.engine.stats.prompt_tokens for lp in loops),
        sum(lp.engine.stats.generation_tokens for lp in loops),
    )
    running = sum(lp.engine.num_running for lp in loops)
    waiting = sum(lp.engine.sched.num_waiting() for lp in loops)
    if now == prev and not running and not waiting:
        return None, now
    kv = max(lp.engine.kv.usage for lp in loops)
    line = (
        f"goodbench serve: {now[0] - prev[0]} requests finished in {dt:g} s · prompt {(now[1] - prev[1]) / dt:.1f} "
        f"tok/s · generation {(now[2] - prev[2]) / dt:.1f} tok/s · running {running} · waiting {waiting} · "
        f"KV cache {kv:.1%}"
    )
    return line, now


async def log_stats(server: EngineServer, every: float) -> None:
    """A stats line every `every` seconds while the engine has work (vLLM logs its throughput alike)."""
    prev = (0, 0, 0)
    while True:
        await asyncio.sleep(every)
        line, prev = stats_line([lp for _, lp in server._metric_rows()], prev, every)
        if line:
            print(line, flush=True)


def run_server(cfg: EngineConfig, opts: ServeOptions, tokenizer: str | None = None, cluster=None) -> int:
    """`goodbench serve`: build the engine (or, with a cluster spec of several instances, the engines
    behind a router), listen, print one ready line, serve until SIGINT/SIGTERM. Returns the exit code:
    0, or 1 when an engine loop died (the log says why)."""
    cfg = cfg.resolved()
    parse_eos_dist(opts.eos_dist)
    many = cluster is not None and (cluster.disaggregated or cluster.replicas > 1)
    if many:
        cluster.check()
        cluster.configs(cfg)  # an impossible prefill/decode tier fails here, before anything listens
    tok = tokmod.load(tokenizer)
    install_uvloop()

    async def main_():
        if many:
            server = ClusterServer(cfg, opts, tok, cluster)
            what = server.describe()
        else:
            server = EngineServer(cfg, opts, tok)
            what = f"{cfg.gpu} x{cfg.tensor_parallel_size}"
        _ = tok.words  # build the output vocabulary before accepting requests

        def ready(site):
            print(
                f"goodbench serve: {cfg.model} on {what} "
                f"(budget {cfg.max_num_batched_tokens} tokens, {cfg.max_num_seqs} seqs, "
                f"{cfg.num_gpu_blocks} KV blocks, chunked prefill {'on' if cfg.enable_chunked_prefill else 'off'}) "
                f"listening on http://{opts.host}:{opts.port}",
                flush=True,
            )

        await serve_forever(server, ready)
        return 1 if server.failed else 0

    try:
        return asyncio.run(main_())
    except OSError as e:
        raise UsageError(f"cannot listen on {opts.host}:{opts.port}: {e.strerror or e}") from None
