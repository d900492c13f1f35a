"""Prompt text that the server's tokenizer reads as exactly one token per word.

A workload is token ids (ids 3..999); APIs that take text (the chat API, multimodal /generate) need words, and a
real tokenizer does not read any word as one token (nor does the simulator, which counts with the model folder's
tokenizer too, one token per word only when the folder has none): the shipped llama3-8b-shape tokenizer reads a
word like "t123" as about 5 tokens, and on the H200 a chat ladder sent ~4,800-token prompts for a profile that
asked for ~950. So when the model folder has a tokenizer.json, words are taken from its
own vocabulary: letter words that are one token both after a space and at the start of a text, checked joined
(sglang_sim.lexicon finds them; the simulated server renders its output with the same words).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

from sglang_sim.lexicon import N_IDS, SIM, Lexicon, from_tokenizer

__all__ = ["N_IDS", "SIM", "Lexicon", "for_model", "from_tokenizer"]
log = logging.getLogger(__name__)


def for_model(model_path: str | Path) -> Lexicon:
    """The lexicon for a model folder: its tokenizer's words when it has a usable tokenizer.json, else SIM (which
    still names the folder's tokenizer.json, when there is one, as `tokenizer`: a dataset's text is tokenized with
    it, sweep.workload.tokens)."""
    lex = from_tokenizer(str(model_path))
    tj = Path(model_path) / "tokenizer.json"
    if lex is None and not tj.is_file():
        log.warning("%s has no tokenizer.json here: text prompts (chat API, media) use %s, so their token counts "
                    "on a real server differ from the profile's prompt lengths", model_path, SIM.source)
    if tj.is_file():
        return replace(lex or SIM, tokenizer=str(tj))
    return lex or SIM
