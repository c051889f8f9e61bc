"""Agent jobs: a job is a directed acyclic graph of LLM calls (workloads.spec.AgentSpec), drawn once per
seed. A plan call reads the shared system prompt and the job's task; `fanout` sub-agents then run in
parallel, each a chain of steps over its own context (the job's context, the plan, its sub-task, and
its own earlier replies with their tool results); every step but a chain's last offers tools and its
reply is a tool call, whose latency passes before the next step; a final call reads every sub-agent's
last reply and is sent only when all of them have finished.

A call's prompt holds its parents' replies: live runs splice in the server's actual text (the runner
keeps each job's outputs), the simulator uses the planned lengths and exact block hashes from the
prompt's segments. Pure (numpy for the draws)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from ..limits import agent_calls_problem
from ..records import RequestSpec
from .lengths import sample_lengths
from .segments import segment_text, text_of, tokens_of
from .spec import MESSAGE_APIS, AgentSpec, WorkloadSpec

SYSTEM_KEY = ("agent-system",)


@dataclass(frozen=True)
class Node:
    index: int
    parents: tuple[int, ...]
    depth: int  # 0 = the plan, depth - 1 = the final call
    kind: str  # plan | step | final
    chain: int  # the sub-agent a step belongs to (-1: plan, final)
    step: int  # the step's place in its chain (from 0)
    output_tokens: int
    tool_result_tokens: int  # 0: the call makes no tool call
    tool_s: float  # the tool's latency after this call (0: none)
    delay_s: float  # planned wait between the last parent's end and this call: a tool's latency + think
    segments: tuple | None = None  # a replayed call's recorded prompt blocks (agenttrace.py)
    tools: bool | None = None  # the call offers tools (None: when it makes a tool call)


@dataclass(frozen=True)
class Job:
    id: str
    arrival_s: float
    task_tokens: int
    sub_tokens: tuple[int, ...]  # each sub-agent's sub-task
    nodes: tuple[Node, ...]

    @property
    def children(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {n.index: [] for n in self.nodes}
        for n in self.nodes:
            for p in n.parents:
                out[p].append(n.index)
        return out


def _think(a: AgentSpec, rng: np.random.Generator) -> float:
    if a.think_s <= 0:
        return 0.0
    return float(rng.exponential(a.think_s)) if a.think == "exponential" else a.think_s


def _chains(a: AgentSpec, k: int, outs, rng: np.random.Generator) -> tuple[list[Node], list[int]]:
    """k sub-agents' chains of depth - 2 steps after the plan (node 0); their nodes and last steps."""
    nodes: list[Node] = []
    steps, lasts = a.depth - 2, []
    for c in range(k):
        prev, prev_tool = 0, 0.0
        for s in range(steps):
            idx = 1 + len(nodes)
            tool = a.tools and s < steps - 1
            tr = int(sample_lengths(a.tool_result, 1, rng)[0]) if tool else 0
            tool_s = float(sample_lengths(a.tool_ms, 1, rng)[0]) / 1000 if tool else 0.0
            delay = prev_tool + _think(a, rng)
            nodes.append(Node(idx, (prev,), 1 + s, "step", c, s, int(outs[idx]), tr, tool_s, delay))
            prev, prev_tool = idx, tool_s
        lasts.append(prev)
    return nodes, lasts


def _bounded(spec: WorkloadSpec, calls: int) -> None:
    why = agent_calls_problem(calls)
    if why is not None:
        raise InputError(f"workload {spec.name!r}: {why}")


def build_jobs(spec: WorkloadSpec, offsets: np.ndarray) -> list[Job]:
    a = spec.agent
    rng = np.random.default_rng(spec.seed)
    least = max(a.fanout.value if a.fanout.dist == "constant" else a.fanout.min, 1) if a.depth > 2 else 0
    total = len(offsets) * (2 + least * (a.depth - 2))  # the fewest calls these jobs can come to: refused at once
    _bounded(spec, total)
    out = []
    for i, arrival in enumerate(offsets):
        k = int(sample_lengths(a.fanout, 1, rng)[0]) if a.depth > 2 else 0
        n_calls = 2 + k * (a.depth - 2)
        total += (k - least) * (a.depth - 2)
        _bounded(spec, total)  # before this job's arrays are drawn
        outs = sample_lengths(a.output, n_calls, rng)
        task = int(sample_lengths(a.task, 1, rng)[0])
        subs = tuple(int(x) for x in sample_lengths(a.task, k, rng)) if k else ()
        plan = Node(0, (), 0, "plan", -1, 0, int(outs[0]), 0, 0.0, 0.0)
        steps, lasts = _chains(a, k, outs, rng)
        final = Node(
            n_calls - 1, tuple(lasts) or (0,), a.depth - 1, "final", -1, 0, int(outs[-1]), 0, 0.0, _think(a, rng)
        )
        out.append(Job(f"j{i}", float(arrival), task, subs, (plan, *steps, final)))
    return out


def _context(spec: WorkloadSpec, job: Job, node: Node) -> list[tuple[str, tuple, int, int | None]]:
    """The call's prompt as (role, segment key, planned tokens, the node whose reply it is): the
    shared system prompt, the job's task, then what this call reads."""
    a, j = spec.agent, job.id
    ctx: list = [("system", SYSTEM_KEY, a.system_tokens, None)] if a.system_tokens else []
    ctx.append(("user", (j, "task"), job.task_tokens, None))
    if node.kind == "plan":
        return ctx
    ctx.append(("assistant", (j, "out", 0), job.nodes[0].output_tokens, 0))
    if node.kind == "final":
        return ctx + [("user", (j, "out", p), job.nodes[p].output_tokens, p) for p in node.parents]
    ctx.append(("user", (j, "sub", node.chain), job.sub_tokens[node.chain], None))
    prev = node.parents[0]
    chain: list[Node] = []
    while prev != 0:
        chain.append(job.nodes[prev])
        prev = job.nodes[prev].parents[0]
    for n in reversed(chain):
        ctx.append(("assistant", (j, "out", n.index), n.output_tokens, n.index))
        ctx.append(("user", (j, "tool", n.index), n.tool_result_tokens, None))
    return ctx


def node_request(
    spec: WorkloadSpec,
    job: Job,
    k: int,
    tok=None,
    replies: dict[int, str] | None = None,
    reply_tokens: dict[int, int] | None = None,
) -> RequestSpec:
    """Call k's request. replies / reply_tokens: the server's earlier replies in this job (live runs);
    else the planned ones. tok=None leaves the prompt text out (the simulator needs only segments)."""
    node = job.nodes[k]
    if node.segments is not None:
        return _replayed(spec, job, node, tok)
    ctx = _context(spec, job, node)
    counts = reply_tokens or {}
    segs = tuple((key, counts.get(src, n) if src is not None else n) for _, key, n, src in ctx)
    common = _common(job, node, segs)
    if tok is None:
        return RequestSpec(prompt="", **common)
    words, got = tok.words, replies or {}
    texts = [
        (role, got[src] if src is not None and src in got else segment_text(key, n, words))
        for (role, key, _, src), (_, n) in zip(ctx, segs)
    ]
    if spec.endpoint in MESSAGE_APIS:
        prompt = [{"role": role, "content": text} for role, text in texts]
    else:
        prompt = "".join(text for _, text in texts)
    return RequestSpec(prompt=prompt, **common)


def _common(job: Job, node: Node, segs: tuple) -> dict:
    return dict(
        id=f"{job.id}.{node.index}",
        cls=f"agent-{node.kind}",
        prompt_tokens=tokens_of(segs),
        max_tokens=node.output_tokens,
        segments=segs,
        job=job.id,
        node=node.index,
        parents=node.parents,
        depth=node.depth,
        delay_s=node.delay_s,
        tools=node.tool_result_tokens > 0 if node.tools is None else node.tools,
    )


def _replayed(spec: WorkloadSpec, job: Job, node: Node, tok) -> RequestSpec:
    """A recorded call: its recorded prompt blocks, as one user message (or one text)."""
    segs = node.segments
    if tok is None:
        return RequestSpec(prompt="", **_common(job, node, segs))
    text = text_of(segs, tok)
    prompt = [{"role": "user", "content": text}] if spec.endpoint in MESSAGE_APIS else text
    return RequestSpec(prompt=prompt, **_common(job, node, segs))


def planned_requests(spec: WorkloadSpec, jobs: list[Job]) -> list[RequestSpec]:
    """Every call of every job with its planned context, jobs in order and each job's calls in node
    order (parents first), without text: the simulator's input and the plan's accounting."""
    return [node_request(spec, j, k) for j in jobs for k in range(len(j.nodes))]


def critical_path_s(job: Job) -> float:
    """The job's planned tool and think time on its longest chain (what no server can speed up)."""
    best: dict[int, float] = {}
    for n in job.nodes:
        best[n.index] = n.delay_s + max((best[p] for p in n.parents), default=0.0)
    return best[job.nodes[-1].index]
