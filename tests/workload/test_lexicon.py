"""Prompt words from the model's own tokenizer: text prompts keep the token counts the profile asked for."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

from sweep.profile import Workload
from sweep.workload.lexicon import SIM, for_model, from_tokenizer
from sweep.workload.requests import build_workload, chat_body, render_ids

MODELS = Path(__file__).resolve().parents[2] / "models"


@pytest.mark.parametrize("model", ["llama3-8b-shape", "qwen2.5-vl-7b-shape", "tiny-llama"])
def test_rendered_prompts_have_one_token_per_id_in_the_models_tokenizer(model: str) -> None:
    lex = for_model(MODELS / model)
    assert lex is not SIM and str(MODELS / model) in lex.source
    tok = Tokenizer.from_file(str(MODELS / model / "tokenizer.json"))
    specs = build_workload(Workload(seed=5, num_requests=40), lexicon=lex)
    for s in specs:
        assert len(tok.encode(s.text or "", add_special_tokens=False).ids) == s.prompt_tokens
    # what the chat API sends is that text: the user message is as long as the profile asked
    content = chat_body(specs[0], "m")["messages"][-1]["content"]
    assert isinstance(content, list)  # text parts, not a bare string
    msg = content[-1]["text"]
    assert len(tok.encode(msg, add_special_tokens=False).ids) == specs[0].prompt_tokens
    # the simulator's words would not be: the shipped tokenizers split "t123" into several tokens
    sim_text = render_ids(specs[0].input_ids)
    assert len(tok.encode(sim_text, add_special_tokens=False).ids) > 1.5 * specs[0].prompt_tokens


def test_same_ids_same_text_and_the_ids_stay_the_workload() -> None:
    lex = for_model(MODELS / "llama3-8b-shape")
    w = Workload(seed=9, num_requests=30)
    a, b = build_workload(w, lexicon=lex), build_workload(w)
    assert [s.input_ids for s in a] == [s.input_ids for s in b]  # the lexicon changes the text only
    assert [s.text for s in a] == [s.text for s in build_workload(w, lexicon=lex)]
    assert a[0].text != b[0].text


def test_folders_without_a_usable_tokenizer_fall_back_to_the_sim_words(tmp_path: Path,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        assert for_model(tmp_path) is SIM
    assert "no tokenizer.json" in caplog.text
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "tokenizer.json").write_text("{not json")
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert from_tokenizer(str(bad)) is None
    assert "cannot load the tokenizer" in caplog.text
    assert SIM.render(np.array([3, 999])) == "t003 t999"
