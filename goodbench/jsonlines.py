"""Strict JSON lines, as the input files goodbench reads them (traces, agent traces, ShareGPT .jsonl,
AIPerf exports): one value per non-blank line, and a line that is not JSON an InputError naming
file:line. (Side files goodbench wrote itself are read leniently: store.read_jsonl.)"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

from .errors import InputError


def json_lines(lines: Iterable[str], where: str) -> Iterator[tuple[int, object]]:
    """(line number from 1, parsed value) for every non-blank line."""
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            yield i, json.loads(line)
        except ValueError as e:
            raise InputError(f"{where}:{i}: not JSON: {e}") from None
        except RecursionError:  # a value nested thousands deep: no trace row is
            raise InputError(f"{where}:{i}: JSON nested too deep to be a trace row") from None
