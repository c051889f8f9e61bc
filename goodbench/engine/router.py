"""Which instance gets a request. Pure: a policy sees counts, the prompt's block hashes, cache probes and
the session id, never a clock.

  round-robin        in turn
  least-outstanding  the fewest requests routed and not finished
  prefix             the instance already holding the longest cached prefix (a probe of its real KV
                     cache, as a KV-event-fed router sees it: vllm-router's kv_aware), else least loaded
  session            a session sticks to the instance its first request went to (sticky_least_loaded)
  random             uniform (seeded)
  power-of-two       two instances drawn at random, the less loaded of them
  consistent-hash    a hash of the session id (else of the prompt's first block) picks the instance:
                     the same key always lands on the same instance (vllm-router hashes X-Session-ID)
  cache-aware        vllm-router's (after SGLang's): when the load is unbalanced (max - min outstanding
                     > 64 and max > 1.5 min) the least loaded; else a session seen before goes where
                     it went, and a prompt sharing more than 30 % of its prefix with what an instance
                     was sent goes there; anything else to the least loaded (ties: the first). Its view
                     is what it sent (its own tree of prompts), not what each cache still holds.

vllm-router's spellings (round_robin, cache_aware, kv_aware, ...) are accepted everywhere a policy is
named, so one `--param router=...` list fills both a live router's command and the simulated fleet."""

from __future__ import annotations

import random
import zlib

from ..errors import UsageError

ROUTERS = (
    "round-robin",
    "least-outstanding",
    "prefix",
    "session",
    "random",
    "power-of-two",
    "consistent-hash",
    "cache-aware",
)
# vllm-router's names for the same policies (its --policy choices)
ALIASES = {
    "round_robin": "round-robin",
    "cache_aware": "cache-aware",
    "consistent_hash": "consistent-hash",
    "power_of_two": "power-of-two",
    "kv_aware": "prefix",
    "sticky_least_loaded": "session",
}
ROUTER_NAMES = ROUTERS + tuple(ALIASES)
# policies whose router has a worker render (tokenize) the prompt before it routes (vllm-router 0.1.17's
# cache_aware asks the render endpoints for the token ids it matches): a second pass through a front end
RENDERS = ("cache-aware",)
CACHE_THRESHOLD = 0.3  # vllm-router's defaults (--cache-threshold, --balance-abs/rel-threshold)
BALANCE_ABS = 64
BALANCE_REL = 1.5


def front_end_for(policy: str, many: bool, front):
    """The front end a request pays before the engine behind this router (frontend.FrontEnd): twice where the
    router has a worker render the prompt first (RENDERS); the one rule for simulate and serve."""
    return front.twice() if many and canonical(policy) in RENDERS else front


def canonical(policy: str) -> str:
    """The policy's goodbench name (a vllm-router spelling mapped); UsageError for an unknown one."""
    name = ALIASES.get(policy, policy)
    if name not in ROUTERS:
        raise UsageError(
            f"router {policy!r} is not one of {', '.join(ROUTERS)} (or vllm-router's {', '.join(ALIASES)})"
        )
    return name


class Router:
    def __init__(self, policy: str, n: int, block_size: int = 16, seed: int = 0):
        self.policy, self.n, self.block_size = canonical(policy), n, block_size
        self.next = 0
        self.sessions: dict = {}
        self.rng = random.Random(seed)
        self.sent: list[set] = [set() for _ in range(n)]  # cache-aware: the blocks routed to each instance

    @property
    def wants_hashes(self) -> bool:
        """The policy reads the prompt's block hashes even where no prefix cache is on."""
        return self.policy in ("cache-aware", "consistent-hash")

    def pick(self, outstanding: list[int], hashes: tuple = (), cached=None, session=None) -> int:
        """outstanding[i]: requests routed to instance i and not finished; cached(i): how many leading
        blocks of `hashes` instance i holds."""
        if self.n == 1:
            return 0
        p = self.policy
        if p == "round-robin":
            i, self.next = self.next, (self.next + 1) % self.n
            return i
        if p == "random":
            return self.rng.randrange(self.n)
        if p == "power-of-two":
            a, b = self.rng.sample(range(self.n), 2)
            return a if (outstanding[a], a) <= (outstanding[b], b) else b
        if p == "consistent-hash":
            key = session if session is not None else (hashes[0] if hashes else None)
            return least(outstanding) if key is None else zlib.crc32(str(key).encode()) % self.n
        if p == "cache-aware":
            return self._cache_aware(outstanding, hashes, session)
        if p == "session" and session is not None:
            if session not in self.sessions:
                self.sessions[session] = least(outstanding)
            return self.sessions[session]
        if p == "prefix" and hashes and cached is not None:
            hits = [cached(i) for i in range(self.n)]
            best = max(hits)
            if best > 0:  # the longest cached prefix; ties to the least loaded of those
                return min((i for i in range(self.n) if hits[i] == best), key=lambda i: (outstanding[i], i))
        return least(outstanding)

    def _cache_aware(self, outstanding: list[int], hashes: tuple, session) -> int:
        lo, hi = min(outstanding), max(outstanding)
        if hi - lo > BALANCE_ABS and hi > lo * BALANCE_REL:
            i = least(outstanding)
        elif session is not None and session in self.sessions:
            i = self.sessions[session]
        else:
            shared = [_leading(hashes, s) for s in self.sent]
            best = min(range(self.n), key=lambda j: (-shared[j], outstanding[j], j))
            i = best if hashes and shared[best] / len(hashes) > CACHE_THRESHOLD else least(outstanding)
        self.sent[i].update(hashes)
        if session is not None:
            self.sessions[session] = i
        return i


def _leading(hashes: tuple, held: set) -> int:
    k = 0
    for h in hashes:
        if h not in held:
            break
        k += 1
    return k


def least(outstanding: list[int]) -> int:
    """The instance with the fewest outstanding requests (the lowest index among ties)."""
    return min(range(len(outstanding)), key=lambda i: (outstanding[i], i))
