"""Dataset text to token ids: a real model's own tokenizer, or the one-word-one-token lexicon of the shape folders.

A model folder whose tokenizer.json has a vocabulary larger than the shape lexicon (VOCAB_LEXICON words: the
shipped `models/*-shape` folders have 378 and 1,000) is a real model: a dataset's text is tokenized with it, so a
prompt's length is what the server will count. Otherwise (no folder, a shape folder, no tokenizer.json) each
whitespace-separated word is one token, its id a crc32 of the word in ID_LOW..ID_HIGH.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from sweep.core.errors import WorkloadError

ID_LOW = 3  # ids 3..999 are ordinary tokens in the shipped 1024-vocab model folders
ID_HIGH = 999
VOCAB_LEXICON = 1024  # a tokenizer.json with at most this many entries is a shape folder's: keep the lexicon


@lru_cache(maxsize=65536)
def word_id(word: str) -> int:
    """Deterministic word -> token id in 3..999 (crc32, independent of PYTHONHASHSEED)."""
    return ID_LOW + zlib.crc32(word.encode("utf-8")) % (ID_HIGH - ID_LOW + 1)


def text_to_ids(text: str) -> tuple[int, ...]:
    """One token per whitespace-separated word."""
    return tuple(word_id(w) for w in text.split())


@dataclass(frozen=True)
class TextEncoder:
    """Text -> token ids for dataset prompts and reply lengths; `source` says which tokenizer (for messages)."""

    source: str
    encode: Callable[[str], tuple[int, ...]]

    def count(self, text: str) -> int:
        """Tokens in text."""
        return len(self.encode(text))


LEXICON = TextEncoder("one token per word (the shape lexicon)", text_to_ids)


def _vocab_size(tj: Path) -> int:
    """Entries of a tokenizer.json's vocabulary (its model's vocab plus added tokens), read as plain JSON."""
    try:
        data = json.loads(tj.read_text(encoding="utf-8"))
        vocab = data.get("model", {}).get("vocab") or {}
        return len(vocab) + len(data.get("added_tokens") or [])
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError) as exc:
        raise WorkloadError(f"{tj}: cannot read the tokenizer ({exc})") from None


@lru_cache(maxsize=8)
def _encoder(tj: str) -> TextEncoder:
    path = Path(tj)
    if _vocab_size(path) <= VOCAB_LEXICON:
        return LEXICON
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise WorkloadError(f"{tj}: tokenizing a dataset with a real model's tokenizer needs the `tokenizers` "
                            "package (pip install tokenizers)") from None
    try:
        tok = Tokenizer.from_file(tj)
    except Exception as exc:  # the library's own error types vary by version; any of them means unusable
        raise WorkloadError(f"{tj}: cannot load the tokenizer ({' '.join(str(exc).split())})") from None

    def encode(text: str) -> tuple[int, ...]:
        return tuple(tok.encode(text, add_special_tokens=False).ids)

    return TextEncoder(f"{tj}", encode)


def encoder_for(model: str | Path | None) -> TextEncoder:
    """The encoder for a model folder (or a tokenizer.json): its tokenizer when it is a real model's, else LEXICON."""
    if model is None or str(model) == "":
        return LEXICON
    p = Path(model)
    tj = p / "tokenizer.json" if p.is_dir() else p
    if not tj.is_file():
        return LEXICON
    return _encoder(str(tj.resolve()))
