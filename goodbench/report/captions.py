"""What each figure shows and how to read it, in words, by file name: the HTML report puts the title in
the image's alt text and the caption under it, so a figure reads without the code that drew it."""

from __future__ import annotations

import os

CAPTIONS = {
    "latency_cdfs.png": (
        "Latency CDFs: TTFT, TPOT and ITL",
        "Each curve is the share of requests (for ITL, of gaps between tokens) at or below a latency, on a "
        "log axis in ms. Red lines are the SLO thresholds: the height where a curve crosses one is that "
        "clause's attainment. Further left is faster; a long tail to the right is the slow minority p99 reports.",
    ),
    "itl_timeline.png": (
        "Inter-token gaps over the run",
        "Every gap between two tokens of a streamed response, as a point at the time it ended (log axis, ms), "
        "coloured by the class of the request it belongs to; grey vertical lines mark when a long prompt was "
        "sent. A column of tall points just after a grey line is head-of-line blocking: that prompt's "
        "prefill held up every stream decoding beside it.",
    ),
    "latency_vs_prompt.png": (
        "Latency against prompt length",
        "TTFT and TPOT of each request against its prompt length in tokens (log ms). TTFT rising with the "
        "prompt is prefill cost; TPOT rising with it means long prompts slow the decoding of others.",
    ),
    "throughput_goodput_inflight.png": (
        "Throughput, goodput and requests in flight over time",
        "Completions per second and completions meeting the SLO per second over a sliding window, and the "
        "requests in flight. Goodput below throughput is when the SLO was missed; an in-flight count that "
        "keeps growing means the server could not keep up with the arrivals. With --gpu-telemetry a fourth panel "
        "draws each GPU's power as sampled.",
    ),
    "attainment_by_class.png": (
        "SLO attainment by class",
        "The share of each class's requests that met the SLO, with its 95% Wilson interval. A class far "
        "below the others is the one the server serves worst; overlapping intervals do not differ.",
    ),
    "schedule_lag.png": (
        "How late the load generator sent each request",
        "How long after its scheduled time each request went out (log ms), at its scheduled time. Points "
        "above the dashed 10 ms line mean the generator, not the server, shaped the latencies (the run is "
        "then marked invalid). Left out when every request went out on time.",
    ),
    "engine_and_server.png": (
        "The engine's steps and the server's own gauges",
        "Per engine step (runs with a step trace): prefill and decode tokens, KV-cache use in %, and "
        "preemptions when there were any. Beneath, the gauges scraped from the server's /metrics every "
        "second: request counts on the left axis, fractions such as KV-cache use on the right in %.",
    ),
    "sweep_metrics.png": (
        "Sweep: each metric against the chunk size",
        "Goodput and latency percentiles per cell against max_num_batched_tokens (log 2 axis), one line per "
        "GPU tier; dashed levels are each tier's unchunked baseline. The best chunk size is where goodput "
        "peaks without ITL p99 rising.",
    ),
    "sweep_goodput_heatmap.png": (
        "Sweep: goodput per tier and chunk size",
        "Goodput (req/s meeting the SLO) of every cell, tiers by row and chunk sizes by column; brighter "
        "is more. Compare within a row for the best chunk size of a tier.",
    ),
    "sweep_frontier.png": (
        "Sweep: the TTFT vs ITL trade-off",
        "TTFT p99 against ITL p99 per cell, labelled by chunk size (labels that would overlap are left "
        "out), one line per tier. Larger chunks move right and down: faster first tokens, longer stalls.",
    ),
    "sweep_disaggregation.png": (
        "Sweep: goodput per GPU by instance layout",
        "Goodput per GPU for each layout (colocated replicas or prefill:decode splits) of each cell; higher "
        "delivers more requests within the SLO per GPU paid for.",
    ),
    "pareto.png": (
        "Frontier: throughput per GPU against interactivity",
        "Each configuration's curve over the loads swept (labels: c = users, r = req/s): further right is faster "
        "per user (median 1/TPOT), higher is more output per GPU. The solid black line joins the points no other "
        "beats on both axes; the dashed one does the same counting only good tokens (requests meeting the SLO). "
        "Left of the red dotted line every user is slower than the SLO's TPOT allows.",
    ),
    "max_rate_per_gpu.png": (
        "Max goodput rate per GPU by layout",
        "The highest arrival rate each layout sustains at the target attainment, divided by its GPUs.",
    ),
}


def caption(path: str) -> tuple[str, str]:
    """(title, caption) of a figure file; a figure without one is named by its file."""
    name = os.path.basename(path)
    return CAPTIONS.get(name, (name.rsplit(".", 1)[0].replace("_", " "), ""))
