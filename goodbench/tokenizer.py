"""Token counting. The default is Qwen3's tokenizer.json, shipped inside goodbench (gzip-compressed package
data, Apache-2.0, see goodbench/data/NOTICE), so everything works offline and installing goodbench pins
nothing; a local tokenizer.json, a local HF folder, or a hub name (from the hub's local cache, else
downloaded) also work. A hub name that is not cached fails at once when the hub is off (HF_HUB_OFFLINE)
or out of reach, instead of the tokenizers library's ~24 s of retries. Loaded once per process and name."""

from __future__ import annotations

import functools
import glob
import gzip
import importlib.resources
import os
import random
import socket
import threading
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field

from .errors import InputError

DEFAULT_NAME = "qwen3 (bundled)"
DEFAULT_FILE = "tokenizer.json.gz"  # Qwen/Qwen3-8B tokenizer.json, sha256 below before compression
DEFAULT_SHA256 = "aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4"


@dataclass
class Tok:
    name: str
    loaded: object = None  # tokenizers.Tokenizer, or None until first use (then `loader` makes it)
    loader: Callable[[], object] | None = field(default=None, repr=False)

    def ready(self) -> Tok:
        """Load it now (before a timed part of a run)."""
        _ = self._tok
        return self

    @property
    def _tok(self):
        """Loaded on first use: a run whose token counts all come from a cache never pays the ~0.5 s."""
        if self.loaded is None:
            self.loaded = self.loader()
        return self.loaded

    def count(self, text: str) -> int:
        return self.count_batch([text])[0]

    def count_batch(self, texts: list[str]) -> list[int]:
        return [len(e) for e in self._batch(texts)]

    def _batch(self, texts: list[str]) -> list:
        """Encodings through the batch encoder: it releases the GIL (tokenizers' single `encode` holds
        it, so a long text counted in a worker thread stalled the event loop for the whole count), runs
        in parallel over the cores, and skips offsets where supported (tokenizers >= 0.21)."""
        enc = getattr(self._tok, "encode_batch_fast", self._tok.encode_batch)
        try:
            return enc(texts, add_special_tokens=False)
        except TypeError:  # a lone surrogate (JSON's "\ud800") is not text the tokenizer takes
            return enc([valid_text(t) for t in texts], add_special_tokens=False)

    def encode(self, text: str) -> list[int]:
        return self._batch([text])[0].ids

    @functools.cached_property
    def words(self) -> list[str]:
        """Lower-case ASCII words that are one token each after a space, so a prompt made of
        " w1 w2 ... wn" has exactly n tokens for this tokenizer (checked, not assumed)."""
        vocab = self._tok.get_vocab()
        cands = []
        for piece in vocab:
            if piece[:1] in ("Ġ", "▁"):
                w = piece[1:]
                if 3 <= len(w) <= 8 and w.isascii() and w.isalpha() and w.islower():
                    cands.append(w)
        cands.sort()
        encs = self._tok.encode_batch([" " + w for w in cands], add_special_tokens=False)
        words = [w for w, e in zip(cands, encs) if len(e.ids) == 1]
        if len(words) < 100:
            raise InputError(f"tokenizer {self.name} has too few single-token words for synthetic prompts")
        return words

    def synthetic_text(self, n_tokens: int, rng: random.Random) -> str:
        """Text of exactly n_tokens tokens (a leading space keeps the first word one token)."""
        words = self.words
        return " " + " ".join(rng.choice(words) for _ in range(max(0, n_tokens)))


def valid_text(text) -> str:
    """text as the tokenizer takes it: lone surrogates (valid in a JSON string, not in UTF-8) replaced by
    "?", anything that is not a string as its str()."""
    if not isinstance(text, str):
        text = str(text)
    return text.encode("utf-8", "replace").decode("utf-8")


def default_tokenizer_json() -> str:
    """The bundled tokenizer.json's text (11 MB; 2 MB compressed in the package)."""
    data = importlib.resources.files("goodbench").joinpath("data", DEFAULT_FILE)
    try:
        return gzip.decompress(data.read_bytes()).decode("utf-8")
    except (OSError, EOFError) as e:  # a broken install: the package data is missing or truncated
        raise InputError(
            f"the bundled tokenizer ({DEFAULT_FILE}) cannot be read: {e}; reinstall goodbench or pass --tokenizer PATH"
        ) from None


def load(name: str | None = None, lazy: bool = False) -> Tok:
    """name: None (default), a tokenizer.json path, a folder holding tokenizer.json, or a hub name.
    lazy: the default tokenizer is read on first use (building a workload whose token counts are all
    cached never needs it); otherwise now, so that no timed code path pays for it."""
    tok = _load(name)
    if not lazy:
        tok.ready()
    return tok


@functools.lru_cache(maxsize=8)
def _load(name: str | None) -> Tok:
    from tokenizers import Tokenizer

    if name in (None, "", "default"):
        return Tok(DEFAULT_NAME, loader=lambda: Tokenizer.from_str(default_tokenizer_json()))
    if os.path.isdir(name):
        path = os.path.join(name, "tokenizer.json")
        if not os.path.exists(path):
            raise InputError(f"tokenizer folder {name} has no tokenizer.json")
        return Tok(name, Tokenizer.from_file(path))
    if os.path.isfile(name):
        try:
            return Tok(name, Tokenizer.from_file(name))
        except Exception as e:  # tokenizers raises plain Exception subclasses
            raise InputError(f"cannot read tokenizer file {name}: {e}") from None
    cached = hub_cached(name)
    if cached:  # the hub's local cache already has it: no network, no retries
        return Tok(name, Tokenizer.from_file(cached))
    if hub_offline() or not hub_reachable():
        raise InputError(
            f"cannot load tokenizer {name!r}: not a local file or folder, not in the hub's local cache "
            f"({hub_cache_dir()}), and the hub is {'off (HF_HUB_OFFLINE)' if hub_offline() else 'out of reach'}. "
            "Pass --tokenizer with a local tokenizer.json or model folder (the server's own), or a hub name "
            "that is cached; a served model's name is often not a hub name."
        )
    try:
        return Tok(name, Tokenizer.from_pretrained(name))
    except Exception as e:
        raise InputError(
            f"cannot load tokenizer {name!r} (not a local file/folder; hub download "
            f"failed: {str(e)[:200]}). Pass a local tokenizer.json or folder, or the server's hub name."
        ) from None


HUB_PROBE_S = 2.0  # how long the hub may take to accept a connection before it counts as out of reach


def hub_offline(env=None) -> bool:
    """Whether the user turned the hub off (HF_HUB_OFFLINE, or transformers' TRANSFORMERS_OFFLINE)."""
    env = os.environ if env is None else env
    return any(
        env.get(k, "").strip().lower() in ("1", "true", "yes", "on") for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def hub_cache_dir(env=None) -> str:
    """The hub's local cache, as huggingface_hub places it: $HF_HUB_CACHE, else $HF_HOME/hub, else
    ~/.cache/huggingface/hub."""
    env = os.environ if env is None else env
    home = env.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface")
    return env.get("HF_HUB_CACHE") or os.path.join(home, "hub")


def hub_cached(name: str, env=None) -> str | None:
    """The newest cached tokenizer.json of this hub name (None: not cached)."""
    snaps = os.path.join(hub_cache_dir(env), "models--" + name.replace("/", "--"), "snapshots")
    found = glob.glob(os.path.join(glob.escape(snaps), "*", "tokenizer.json"))
    return max(found, key=os.path.getmtime) if found else None


def hub_reachable(timeout_s: float = HUB_PROBE_S) -> bool:
    """Whether the hub ($HF_ENDPOINT) accepts a connection within timeout_s, name lookup included: the
    tokenizers library retries an unreachable hub for about 24 s before it gives up."""
    url = urllib.parse.urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    port = url.port or (443 if url.scheme == "https" else 80)
    ok: list[bool] = []

    def probe() -> None:
        try:
            socket.create_connection((url.hostname, port), timeout=timeout_s).close()
            ok.append(True)
        except OSError:
            pass

    t = threading.Thread(target=probe, daemon=True)  # a hung name lookup is left behind, not waited for
    t.start()
    t.join(timeout_s)
    return bool(ok)
