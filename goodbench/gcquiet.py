"""Keep the cyclic garbage collector out of latency-critical event loops.

A collection pauses the loop for as long as it scans: measured in the load-generator benchmark,
young-generation collections paused it up to 9-20 ms, and chunks arriving meanwhile were timestamped
late. The runner and the engine server create almost no cyclic garbage (33 objects after 3,913
streamed requests), so while they run the collector is switched off after one full collection and a
freeze of everything set-up allocated; a watchdog collects the young generation only if tracked
objects pile up anyway."""

from __future__ import annotations

import asyncio
import contextlib
import gc

PILE_UP = 500_000  # net tracked allocations since the last collection that trigger a young collection


@contextlib.contextmanager
def quiet_gc():
    was_enabled = gc.isenabled()
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.unfreeze()
        if was_enabled:
            gc.enable()


async def watchdog(period_s: float = 5.0) -> None:
    """Run beside a quiet_gc() block: collect the young generation if allocations pile up."""
    while True:
        await asyncio.sleep(period_s)
        if gc.get_count()[0] > PILE_UP:
            gc.collect(0)
