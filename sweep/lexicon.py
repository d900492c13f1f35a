"""Prompt text that the server's tokenizer reads as exactly one token per word.

A workload is token ids (ids 3..999); APIs that take text (the chat API, multimodal /generate) need words, and a
real tokenizer does not read any word as one token (nor does the simulator, which counts with the model folder's
tokenizer too, one token per word only when the folder has none): the shipped llama3-8b-shape tokenizer reads a
word like "t123" as about 5 tokens, and on the H200 a chat ladder sent ~4,800-token prompts for a profile that
asked for ~950. So when the model folder has a tokenizer.json, words are taken from its
own vocabulary: letter words that are one token both after a space and at the start of a text, checked joined.
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

N_IDS = 1000  # the workload's ids are below this (sweep.datasets.ID_HIGH = 999)
_WORD_TOKEN = re.compile(r"[\u0120\u2581]([A-Za-z]{1,24})")  # byte-level BPE "Ġword" or SentencePiece "▁word"


@dataclass(frozen=True)
class Lexicon:
    """words[i] renders token id i (ids >= N_IDS wrap around)."""

    words: tuple[str, ...]
    source: str
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
        log.warning("%s: cannot load the tokenizer (%s); prompt text uses %s", tj, exc, SIM.source)
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
            return Lexicon(tuple(words), f"{len(words)} one-token words of {tj}")
        log.warning("%s: joined words do not keep one token each (%d tokens for %d words); prompt text uses %s",
                    tj, n, 4 * len(words), SIM.source)
        return None
    log.warning("%s: fewer than 8 one-token words in the vocabulary; prompt text uses %s", tj, SIM.source)
    return None


def for_model(model_path: str | Path) -> Lexicon:
    """The lexicon for a model folder: its tokenizer's words when it has a usable tokenizer.json, else SIM."""
    lex = from_tokenizer(str(model_path))
    if lex is None and not (Path(model_path) / "tokenizer.json").is_file():
        log.warning("%s has no tokenizer.json here: text prompts (chat API, media) use %s, so their token counts "
                    "on a real server differ from the profile's prompt lengths", model_path, SIM.source)
    return lex or SIM
