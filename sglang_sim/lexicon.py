"""Words that a tokenizer reads as exactly one token each: letter words from its own vocabulary.

The simulator renders each generated token as one such word (so its output text is as long in tokens as it says),
and sweep builds text prompts from the same words (sweep.workload.lexicon). Without a usable tokenizer.json, SIM: tNNN words.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

N_IDS = 1000  # the workload's ids are below this (sweep.workload.datasets.ID_HIGH = 999)
_WORD_TOKEN = re.compile(r"[\u0120\u2581]([A-Za-z]{1,24})")  # byte-level BPE "Ġword" or SentencePiece "▁word"


@dataclass(frozen=True)
class Lexicon:
    """words[i] renders token id i (ids >= N_IDS wrap around)."""

    words: tuple[str, ...]
    source: str
    tokenizer: str = ""  # the tokenizer.json the words come from ("" for SIM): datasets tokenize their text with it
    _arr: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_arr", np.array(self.words, dtype=object))

    def render(self, ids: Sequence[int] | np.ndarray) -> str:
        arr = np.asarray(ids, dtype=np.int64)
        if arr.size == 0:
            return ""
        return " ".join(self._arr[arr % len(self.words)].tolist())


SIM = Lexicon(tuple(f"t{i:03d}" for i in range(N_IDS)), "tNNN words (one token each only for a server without a tokenizer)")


@lru_cache(maxsize=8)
def from_tokenizer(path: str) -> Lexicon | None:
    """A lexicon from a tokenizer.json (or a folder holding one); None, with a warning, when none fits."""
    p = Path(path)
    tj = p / "tokenizer.json" if p.is_dir() else p
    if not tj.is_file():
        return None
    try:
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(tj))
    except Exception as exc:  # a tokenizer.json the library cannot read: say so, keep the default words
        log.warning("%s: cannot load the tokenizer (%s); text uses %s", tj, exc, SIM.source)
        return None
    cands = sorted((i, m.group(1)) for s, i in tok.get_vocab().items() if (m := _WORD_TOKEN.fullmatch(s)))
    # one token after a space and also at the start of a text (a message, or the part after a shared prefix)
    spaced = tok.encode_batch([" " + w for _, w in cands], add_special_tokens=False) if cands else []
    bare = tok.encode_batch([w for _, w in cands], add_special_tokens=False) if cands else []
    words = [w for (i, w), e, b in zip(cands, spaced, bare, strict=True) if e.ids == [i] and len(b.ids) == 1][:N_IDS]
    if len(words) >= 8:
        sample = Lexicon(tuple(words), "").render(np.arange(4 * len(words)) * 7919)
        n = len(tok.encode(sample, add_special_tokens=False).ids)
        if n == 4 * len(words):
            return Lexicon(tuple(words), f"{len(words)} one-token words of {tj}", str(tj))
        log.warning("%s: joined words do not keep one token each (%d tokens for %d words); text uses %s",
                    tj, n, 4 * len(words), SIM.source)
        return None
    log.warning("%s: fewer than 8 one-token words in the vocabulary; text uses %s", tj, SIM.source)
    return None
