"""The event loop the load generator and the engine server run on: uvloop when it is installed (the
default on Linux and macOS), else asyncio's own."""

from __future__ import annotations

import asyncio


def install_uvloop() -> bool:
    try:
        import uvloop
    except ImportError:
        return False
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return True
