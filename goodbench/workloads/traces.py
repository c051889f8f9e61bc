"""Production traces replayed: each row's arrival time, prompt and output lengths, and — for Mooncake's
format — the hash ids of its 512-token prompt blocks, so that rows sharing hash ids get identical
prompt blocks (a real server's prefix cache sees the trace's reuse; the simulator hashes the blocks
exactly).

Formats (the file's first line decides when --trace-format is not given):
- mooncake: JSON lines {"timestamp": ms, "input_length": n, "output_length": m, "hash_ids": [...]}
- azure: the Azure LLM inference trace CSV: TIMESTAMP (a date-time), ContextTokens, GeneratedTokens
- burstgpt: BurstGPT's CSV: Timestamp (s), ..., Request tokens, Response tokens, ...
Malformed rows are errors naming the file and line."""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from datetime import datetime

from ..errors import InputError, UsageError, warn
from ..jsonlines import json_lines, read_text
from ..limits import MAX_SECONDS, MAX_TOKENS
from ..records import RequestSpec
from .spec import TRACE_FORMATS

FORMATS = TRACE_FORMATS
MOONCAKE_BLOCK = 512


@dataclass(frozen=True)
class TraceRow:
    t: float  # seconds from the trace's first row
    input_tokens: int
    output_tokens: int
    hash_ids: tuple = ()  # mooncake: one id per 512-token prompt block


def sniff(path: str, first_line: str) -> str:
    s = first_line.strip()
    if s.startswith("{"):
        return "mooncake"
    if "ContextTokens" in s:
        return "azure"
    if "Request tokens" in s:
        return "burstgpt"
    raise InputError(
        f"{path}:1: cannot tell the trace format from the first line; pass --trace-format ({', '.join(FORMATS)})"
    )


def _int(v, path: str, line: int, what: str) -> int:
    """A token count: a whole number from 0 to limits.MAX_TOKENS."""
    try:
        x = int(float(v))
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"{path}:{line}: {what} {v!r} is not a number") from None
    if not 0 <= x <= MAX_TOKENS:
        raise InputError(f"{path}:{line}: {what} {x} is out of range (0 to {MAX_TOKENS:,} tokens)")
    return x


def _check_blocks(rows: list[TraceRow], lines: list[int], path: str) -> None:
    """Warn (once) about rows whose hash_ids do not cover input_length in 512-token blocks: the prompt
    follows input_length, so such a row shares fewer (or more) blocks than its ids say."""
    bad = [ln for r, ln in zip(rows, lines) if r.hash_ids and len(r.hash_ids) != -(-r.input_tokens // MOONCAKE_BLOCK)]
    if bad:
        warn(
            f"{path}: {len(bad)} of {len(rows)} rows have hash_ids that do not match input_length (one id per "
            f"{MOONCAKE_BLOCK} tokens; first at line {bad[0]}): their prompts follow input_length"
        )


def _time(v, path: str, line: int, what: str, per_second: float = 1.0) -> float:
    """A timestamp in seconds (v counts 1/per_second seconds): finite, within limits.MAX_SECONDS."""
    try:
        t = float(v) / per_second
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"{path}:{line}: {what} {v!r} is not a number") from None
    if not math.isfinite(t) or abs(t) > MAX_SECONDS:
        raise InputError(f"{path}:{line}: {what} {v!r} is not a time (finite, at most {MAX_SECONDS:g} s)")
    return t


def _mooncake(text: str, path: str) -> list[TraceRow]:
    rows, lines = [], []
    for i, d in json_lines(text.splitlines(), path):
        if not isinstance(d, dict) or "timestamp" not in d or "input_length" not in d:
            raise InputError(f"{path}:{i}: expected timestamp, input_length, output_length and hash_ids")
        ids = d.get("hash_ids") or []
        if not isinstance(ids, list) or not all(isinstance(h, (int, str)) and not isinstance(h, bool) for h in ids):
            raise InputError(f"{path}:{i}: hash_ids must be a list of block ids (numbers or strings)")
        rows.append(
            TraceRow(
                _time(d["timestamp"], path, i, "timestamp", 1000.0),
                _int(d["input_length"], path, i, "input_length"),
                _int(d.get("output_length", 1), path, i, "output_length"),
                tuple(ids),
            )
        )
        lines.append(i)
    _check_blocks(rows, lines, path)
    return rows


def _azure_time(v: str, path: str, line: int) -> float:
    s = v.strip()
    if "." in s:  # the trace has 7 fractional digits; datetime takes 6
        head, frac = s.split(".", 1)
        s = f"{head}.{frac[:6]}"
    try:
        return datetime.fromisoformat(s).timestamp()
    except ValueError:
        raise InputError(f"{path}:{line}: TIMESTAMP {v!r} is not a date-time") from None


def _csv(text: str, path: str, fmt: str) -> list[TraceRow]:
    reader = csv.DictReader(io.StringIO(text))
    cols = {
        "azure": ("TIMESTAMP", "ContextTokens", "GeneratedTokens"),
        "burstgpt": ("Timestamp", "Request tokens", "Response tokens"),
    }[fmt]
    missing = [c for c in cols if c not in (reader.fieldnames or [])]
    if missing:
        raise InputError(f"{path}:1: a {fmt} trace needs the columns {', '.join(cols)} (missing {', '.join(missing)})")
    rows = []
    for i, r in enumerate(reader, 2):
        if fmt == "azure":
            t = _azure_time(r[cols[0]], path, i)
        else:
            t = _time(r[cols[0]], path, i, "Timestamp")
        out_tokens = _int(r[cols[2]], path, i, cols[2])
        if fmt == "burstgpt" and out_tokens == 0:
            continue  # BurstGPT logs failed requests with no response tokens: they never streamed
        rows.append(TraceRow(t, _int(r[cols[1]], path, i, cols[1]), out_tokens))
    return rows


def read_trace(path: str, fmt: str | None = None) -> list[TraceRow]:
    """The trace's rows with times in seconds from its first row, sorted by time."""
    text = read_text(path, "the trace", "a trace is JSON lines or CSV")
    if not text.strip():
        raise InputError(f"{path}: the trace is empty")
    fmt = fmt or sniff(path, text.lstrip().splitlines()[0])
    if fmt not in FORMATS:
        raise UsageError(f"--trace-format {fmt!r} is not one of {', '.join(FORMATS)}")
    rows = _mooncake(text, path) if fmt == "mooncake" else _csv(text, path, fmt)
    if not rows:
        raise InputError(f"{path}: no rows")
    rows.sort(key=lambda r: r.t)
    t0 = rows[0].t
    return [TraceRow(r.t - t0, r.input_tokens, r.output_tokens, r.hash_ids) for r in rows]


def parse_window(text: str | None) -> tuple[float, float | None]:
    """--trace-window START:END (seconds of the trace; either side may be empty)."""
    if not text:
        return 0.0, None
    a, sep, b = text.partition(":")
    try:
        start, end = float(a) if a else 0.0, float(b) if b else None
    except ValueError:
        raise UsageError(f"--trace-window {text!r}: expected START:END in seconds, e.g. 600:1200") from None
    if not sep or start < 0 or (end is not None and end <= start):
        raise UsageError(f"--trace-window {text!r}: expected START:END with 0 <= START < END")
    return start, end


def select(rows: list[TraceRow], speedup: float = 1.0, window: tuple = (0.0, None)) -> list[TraceRow]:
    """The rows inside the window, times rebased to its start and divided by speedup."""
    start, end = window
    kept = [r for r in rows if r.t >= start and (end is None or r.t < end)]
    return [TraceRow((r.t - start) / speedup, r.input_tokens, r.output_tokens, r.hash_ids) for r in kept]


def segments(row: TraceRow, index: int) -> tuple:
    """A row's prompt: one segment per hash id (512 tokens; the last block holds the rest), or a prompt
    of its own when the format has no hash ids."""
    n = max(row.input_tokens, 1)
    if not row.hash_ids:
        return ((("trace-row", index), n),)
    out, left = [], n
    for h in row.hash_ids:
        take = min(MOONCAKE_BLOCK, left)
        if take <= 0:
            break
        out.append((("trace-block", h), take))
        left -= take
    if left > 0:
        out.append((("trace-row", index), left))  # more tokens than the hash ids cover
    return tuple(out)


def trace_requests(rows: list[TraceRow], tok, chat: bool, max_output: int | None = None) -> list[RequestSpec]:
    """One request per row at the row's time; prompts built from segments (identical blocks, identical
    text)."""
    from .mixture import as_prompt
    from .segments import text_of

    out = []
    for i, r in enumerate(rows):
        segs = segments(r, i)
        mt = max(1, min(r.output_tokens, max_output) if max_output else r.output_tokens)
        out.append(
            RequestSpec(
                f"r{i}",
                "trace",
                as_prompt(text_of(segs, tok), chat),
                sum(n for _, n in segs),
                mt,
                arrival_s=r.t,
                segments=segs,
            )
        )
    return out
