"""Rich renderings of `goodbench advise`: the first-principles advice, its simulated check (the sizes'
table) and the advised budget with whether it meets the TTFT SLO it was derived from. None computes a
number (analysis.advise does)."""

from __future__ import annotations

from rich.table import Table

from ..records import format_slo
from .tables import ms, usd


def advice_lines(a) -> list[str]:
    i = a.inputs
    out = [
        f"[bold]{a.model} on {a.gpu}[/]: chunk-size advice for a {i['prompt_tokens']}-token p95 prompt "
        f"and a {i['ttft_slo_ms']:g} ms TTFT SLO",
        f"  memory ceiling: ({i['usable_gib']:.1f} GiB usable - {i['weights_gib']:.1f} weights - "
        f"{i['runtime_gib']:.1f} runtime - {i['decode_kv_reserve_gib']:.1f} KV for {i['concurrency']} decodes "
        f"x {i['context']} tokens) / ({i['activation_bytes_per_token'] / 1024:.0f} KiB activations + "
        f"{i['kv_bytes_per_token'] / 1024:.0f} KiB KV per token) = [bold]{a.memory_ceiling}[/] tokens "
        f"(capped at 16384)",
    ]
    out += [f"  {r}" for r in a.reasons]
    out.append(
        f"  SLO bound: floor({i['ttft_slo_ms']:g} / {a.time_per_chunk_ms:.1f}) = {a.chunks_allowed} chunks "
        f"allowed -> ceil({i['prompt_tokens']} / {a.chunks_allowed}) clamped to [{i['min_chunk']}, "
        f"{a.memory_ceiling}] = [bold]{a.chunk} tokens[/]"
    )
    return out


def advice_check_title(a, spec, num_prompts: int, rate: float) -> str:
    """What the check simulated: the given workload (spec), else the synthetic mix."""
    if spec is not None:
        return f"simulated check: workload {spec.name} · SLO {format_slo(spec.slo)}"
    return (
        f"simulated check: {num_prompts} requests at {rate:g} req/s, 10% {a.inputs['prompt_tokens']}-token prompts "
        "among 128-token chats"
    )


def advice_check_table(a, chk, title: str) -> Table:
    """chk: analysis.advise.AdviceCheck; the advised budget (the sweep's rule) and the SLO bound are marked."""
    t = Table(title=title)
    t.add_column("chunk", justify="right", no_wrap=True)
    for col in ("long TTFT p50", "long TTFT p99", "stall p99", "ITL p99", "ITL max", "attain", "verdict"):
        t.add_column(col, justify="right")
    for col in ("goodput", "$/M tok"):
        t.add_column(col, justify="right")
    for r in chk.rows:
        if r.get("error"):
            continue
        size = r["max_num_batched_tokens"]
        marks = ["advised"] * (size == chk.budget) + ["SLO bound"] * (size == a.chunk)
        t.add_row(
            f"{size}" + (f" ({', '.join(marks)})" if marks else ""),
            ms(r["long_ttft_p50_ms"]),
            ms(r["long_ttft_p99_ms"]),
            ms(r.get("stall_p99_ms")),
            ms(r["itl_p99_ms"]),
            ms(r.get("itl_max_ms")),
            f"{r['slo_attainment']:.1%}" + (" ~" if r.get("verdict_could_flip") else ""),
            r.get("verdict") or "-",
            f"{r['goodput']:.2f}",
            usd(r.get("usd_per_million_output_tokens")),
        )
    return t


def advice_check_lines(chk) -> list[str]:
    """The advised budget, why (the sweep's rule), and whether it meets the TTFT SLO it was derived from."""
    if chk.budget is None:
        return ["  [red]no chunk size delivered a request within the SLO: no advice[/]"]
    why = "the sweep's rule over the simulated sizes: goodput first, then the shortest stall"
    if chk.budget != chk.derived:
        why += f"; the TTFT bound alone gave {chk.derived}"
    out = [f"  [bold]advised: max_num_batched_tokens={chk.budget}[/] ({why})"]
    cls = chk.long_class or "long"
    if chk.miss_ms is None:
        out.append(f"  check: the {cls} class's TTFT is unknown; SLO verdict {chk.verdict or '-'}")
    elif chk.miss_ms > 0:
        out.append(
            f"  [yellow]check: misses the {chk.ttft_slo_ms:g} ms TTFT SLO it was derived from by "
            f"{chk.miss_ms:.1f} ms[/] ({cls} TTFT p99 {chk.long_ttft_p99_ms:.1f} ms); SLO verdict {chk.verdict}"
        )
    else:
        out.append(
            f"  check: meets the {chk.ttft_slo_ms:g} ms TTFT SLO it was derived from ({cls} TTFT p99 "
            f"{chk.long_ttft_p99_ms:.1f} ms); SLO verdict {chk.verdict}"
        )
    if chk.verdict not in (None, "pass") and chk.slo_attainment is not None:
        out.append(f"  [yellow]the SLO verdict fails: attainment {chk.slo_attainment:.1%} is below the target[/]")
    return out
