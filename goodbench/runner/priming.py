"""The priming phase of a controlled-hit-rate workload (workloads/priming.py): each primed prefix sent once,
before the clock starts and before the run directory exists, through the client the run uses (at most 8 at
once), so that the measured requests find their prefixes in the server's cache. A priming request that
fails ends the run before it starts: its hit rate would not be the one stated."""

from __future__ import annotations

import asyncio
import time

from ..errors import TargetError
from ..workloads.priming import sent
from .share import CLIENTS

AT_ONCE = 8


async def _send_all(cfg, primes: list, tok) -> list:
    async with CLIENTS[cfg.client](cfg, time.monotonic(), tok) as client:
        gate = asyncio.Semaphore(AT_ONCE)

        async def one(spec):
            async with gate:
                return await client.send(spec, 0.0)

        return await asyncio.gather(*(one(p) for p in primes))


def prime(cfg, primes: list, tok) -> dict:
    """Send the priming requests; run.json's `priming` block (TargetError when one fails)."""
    t = time.monotonic()
    recs = asyncio.run(_send_all(cfg, primes, tok))
    bad = [r for r in recs if r.status != "ok"]
    if bad:
        raise TargetError(
            f"priming: {len(bad)} of {len(recs)} priming requests failed ({bad[0].error or bad[0].status}): the "
            "measured requests would not find their prefixes cached"
        )
    return sent(primes) | {"wall_s": round(time.monotonic() - t, 3)}
