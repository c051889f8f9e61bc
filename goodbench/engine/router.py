"""Which instance gets a request: round-robin, least outstanding requests, prefix affinity (the
instance already holding the longest cached prefix of the prompt's block hashes) or session affinity
(a session's requests stick to the instance its first one went to; RequestSpec has no session id yet,
so requests without one fall back to least outstanding). Pure: it sees counts and cache probes."""

from __future__ import annotations

from ..errors import UsageError

ROUTERS = ("round-robin", "least-outstanding", "prefix", "session")


class Router:
    def __init__(self, policy: str, n: int, block_size: int = 16):
        if policy not in ROUTERS:
            raise UsageError(f"router {policy!r} is not one of {', '.join(ROUTERS)}")
        self.policy, self.n, self.block_size = policy, n, block_size
        self.next = 0
        self.sessions: dict = {}

    def pick(self, outstanding: list[int], hashes: tuple = (), cached=None, session=None) -> int:
        """outstanding[i]: requests routed to instance i and not finished; cached(i): how many leading
        blocks of `hashes` instance i holds."""
        if self.n == 1:
            return 0
        if self.policy == "round-robin":
            i, self.next = self.next, (self.next + 1) % self.n
            return i
        if self.policy == "session" and session is not None:
            if session not in self.sessions:
                self.sessions[session] = least(outstanding)
            return self.sessions[session]
        if self.policy == "prefix" and hashes and cached is not None:
            hits = [cached(i) for i in range(self.n)]
            best = max(hits)
            if best > 0:  # the longest cached prefix; ties to the least loaded of those
                return min((i for i in range(self.n) if hits[i] == best), key=lambda i: (outstanding[i], i))
        return least(outstanding)


def least(outstanding: list[int]) -> int:
    """The instance with the fewest outstanding requests (the lowest index among ties)."""
    return min(range(len(outstanding)), key=lambda i: (outstanding[i], i))
