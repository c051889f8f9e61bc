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
        except RecursionError:  # a value nested thousands deep: no row of an input file is
            raise InputError(f"{where}:{i}: JSON nested too deep to be a row of this file") from None


def read_text(path: str, what: str, hint: str) -> str:
    """A user's input file as text: InputError naming it when it cannot be read (what: "the trace") or is
    not UTF-8 (hint: what such a file is)."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise InputError(f"{path}: cannot read {what}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not UTF-8 text (byte {e.start}): {hint}") from None
