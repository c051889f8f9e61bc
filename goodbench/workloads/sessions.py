"""Multi-turn chat sessions: each session's turns (new user message, reply length, think time before
it), drawn once per seed, and the request each turn becomes. A turn's prompt is the whole conversation
so far: the shared system prompt, every earlier user message and reply, and the new message. Live runs
put the server's own replies in the history (what its prefix cache holds); the simulator, which has no
text, uses the planned reply lengths and exact block hashes from the prompt's segments."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..records import RequestSpec
from .lengths import sample_lengths
from .segments import segment_text, tokens_of
from .spec import MESSAGE_APIS, SessionSpec, WorkloadSpec

SYSTEM_KEY = ("system",)


@dataclass(frozen=True)
class Turn:
    user_tokens: int
    output_tokens: int
    think_s: float  # after the previous reply, before this turn (0 for the first)
    user_text: str = ""  # ShareGPT: the real message; synthetic: drawn from its segment key


@dataclass(frozen=True)
class Session:
    id: str
    arrival_s: float
    turns: tuple[Turn, ...]


def _think(s: SessionSpec, rng: np.random.Generator) -> float:
    return float(rng.exponential(s.think_s)) if s.think == "exponential" else s.think_s


def synthetic_sessions(spec: WorkloadSpec, offsets: np.ndarray) -> list[Session]:
    s = spec.session
    rng = np.random.default_rng(spec.seed)
    n_turns = np.maximum(sample_lengths(s.turns, len(offsets), rng), 1)
    out = []
    for i, (arrival, k) in enumerate(zip(offsets, n_turns)):
        users = sample_lengths(s.user, int(k), rng)
        outs = sample_lengths(s.output, int(k), rng)
        turns = tuple(
            Turn(int(u), int(o), 0.0 if j == 0 else _think(s, rng)) for j, (u, o) in enumerate(zip(users, outs))
        )
        out.append(Session(f"s{i}", float(arrival), turns))
    return out


def sharegpt_sessions(spec: WorkloadSpec, offsets: np.ndarray, tok) -> list[Session]:
    """Real conversations as sessions: each human message a turn, the reply after it its output length."""
    from .sharegpt import load_raw

    s = spec.session
    recs, _ = load_raw(s.dataset)
    rng = np.random.default_rng(spec.seed)
    order = rng.permutation(len(recs))
    out: list[Session] = []
    for idx in order:
        conv = recs[idx].get("conversations") or []
        pairs = [
            (a.get("value"), b.get("value"))
            for a, b in zip(conv[::2], conv[1::2])
            if isinstance(a, dict) and isinstance(b, dict) and a.get("from") == "human"
        ]
        pairs = [(u, r) for u, r in pairs if isinstance(u, str) and isinstance(r, str) and u and r]
        if len(pairs) < 2:
            continue
        counts = tok.count_batch([x for p in pairs for x in p])
        turns = tuple(
            Turn(counts[2 * j], max(1, counts[2 * j + 1]), 0.0 if j == 0 else _think(s, rng), u)
            for j, (u, _) in enumerate(pairs)
        )
        out.append(Session(f"s{len(out)}", float(offsets[len(out)]), turns))
        if len(out) == len(offsets):
            break
    return out


def build_sessions(spec: WorkloadSpec, tok, offsets: np.ndarray) -> list[Session]:
    if spec.session.source == "sharegpt":
        return sharegpt_sessions(spec, offsets, tok)
    return synthetic_sessions(spec, offsets)


def turn_segments(spec: WorkloadSpec, session: Session, k: int, replies: list[int] | None = None) -> tuple:
    """The segments of turn k's prompt (1-based): system prompt, earlier messages and replies (their
    planned lengths, or the given ones), the new message."""
    segs = [(SYSTEM_KEY, spec.session.system_tokens)] if spec.session.system_tokens else []
    for j in range(k - 1):
        segs.append(((session.id, "user", j), session.turns[j].user_tokens))
        segs.append(((session.id, "reply", j), replies[j] if replies else session.turns[j].output_tokens))
    segs.append(((session.id, "user", k - 1), session.turns[k - 1].user_tokens))
    return tuple(segs)


def user_text(session: Session, j: int, words: list[str]) -> str:
    t = session.turns[j]
    return t.user_text or segment_text((session.id, "user", j), t.user_tokens, words)


def turn_request(
    spec: WorkloadSpec,
    session: Session,
    k: int,
    tok,
    replies: list[str] | None = None,
    reply_tokens: list[int] | None = None,
    with_text: bool = True,
) -> RequestSpec:
    """Turn k's request. replies: the server's earlier replies (live runs); else the planned history
    (synthetic reply text of the planned lengths). with_text=False leaves the prompt out (the simulator
    needs only its segments)."""
    segs = turn_segments(spec, session, k, reply_tokens)
    common = dict(
        id=f"{session.id}.{k}",
        cls="session",
        prompt_tokens=tokens_of(segs),
        max_tokens=session.turns[k - 1].output_tokens,
        segments=segs,
        session=session.id,
        turn=k,
        session_turns=len(session.turns),
    )
    if not with_text:
        return RequestSpec(prompt="", **common)
    s, words, chat = spec.session, tok.words, spec.endpoint in MESSAGE_APIS
    system = segment_text(SYSTEM_KEY, s.system_tokens, words) if s.system_tokens else ""
    history = []
    for j in range(k - 1):
        reply = replies[j] if replies else segment_text((session.id, "reply", j), session.turns[j].output_tokens, words)
        history += [user_text(session, j, words), reply]
    history.append(user_text(session, k - 1, words))
    if chat:
        prompt = ([{"role": "system", "content": system}] if system else []) + [
            {"role": "user" if i % 2 == 0 else "assistant", "content": m} for i, m in enumerate(history)
        ]
    else:
        prompt = system + "".join(history)
    return RequestSpec(prompt=prompt, **common)


def planned_requests(spec: WorkloadSpec, sessions: list[Session], tok) -> list[RequestSpec]:
    """Every turn of every session with its planned history, in session order, without prompt text
    (the simulator's input and the plan's accounting: counts, expected prefix reuse)."""
    return [turn_request(spec, s, k, tok, with_text=False) for s in sessions for k in range(1, len(s.turns) + 1)]
