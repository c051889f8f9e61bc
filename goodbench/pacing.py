"""One waiter per event-loop iteration.

When hundreds of coroutines become ready together (a burst of sends, a closed loop whose users finish
at once, a burst of arrivals at the server), letting all of them run in one iteration keeps the loop
from polling its sockets or firing its timers for tens of milliseconds. Waiting for a turn here lets
exactly one through per iteration, so I/O and timers are serviced between any two."""

from __future__ import annotations

import asyncio
from collections import deque


class TurnPacer:
    def __init__(self, first_goes_now: bool = False):
        # first_goes_now: an isolated waiter passes without waiting (the engine server's intake);
        # otherwise every waiter takes at least one iteration (the client's sends, measured best there)
        self.first_goes_now = first_goes_now
        self._turns: deque[asyncio.Future] = deque()
        self._pacer: asyncio.Task | None = None

    async def turn(self) -> None:
        idle = self._pacer is None or self._pacer.done()
        if idle:
            self._pacer = asyncio.ensure_future(self._pace())
            if self.first_goes_now:
                return
        fut = asyncio.get_running_loop().create_future()
        self._turns.append(fut)
        await fut

    async def _pace(self) -> None:
        turns = self._turns
        if self.first_goes_now:
            await asyncio.sleep(0)
        while turns:
            fut = turns.popleft()
            if not fut.done():
                fut.set_result(None)
                await asyncio.sleep(0)
