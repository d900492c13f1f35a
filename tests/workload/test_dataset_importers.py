"""The four dataset importers on the corpus in tests/data/datasets: each good file parses to the right turns and
lengths, each bad entry gives its one line; mooncake hash ids reproduce the trace's prefix sharing; text is
tokenized with a real model's tokenizer and keeps the one-word-one-token lexicon with a shape folder."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from sweep.core.errors import WorkloadError
from sweep.profile import Dataset
from sweep.workload.datasets import dataset_offsets, item_record, load_dataset, read_entries
from sweep.workload.importers import hash_block
from sweep.workload.tokens import LEXICON, _encoder, encoder_for, text_to_ids

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "datasets"


def _load(name: str, fmt: str, **kw: object) -> tuple[list, list[str]]:
    return read_entries(DATA / name, fmt, name, **kw)  # type: ignore[arg-type]


def test_jsonl_good_turns_lengths_and_images() -> None:
    items, problems = _load("jsonl_good.jsonl", "jsonl")
    assert problems == [] and [it.line for it in items] == [1, 2, 4]  # the blank line 3 is no entry
    a, b, c = items
    assert a.input_ids == text_to_ids("what does the radix cache keep") and a.output_len == 16 and a.turns == ()
    assert b.input_ids == (5, 6, 7) and b.ref_output_len == 9 and b.text is None
    assert [(t.text, t.input_ids, t.output_len, t.ref_output_len) for t in b.turns] == [
        ("and after eviction", text_to_ids("and after eviction"), 4, None), (None, (8, 9), None, 2)]
    assert c.images[0].width == 4 and c.images[0].height == 4 and c.send_at is None


def test_sharegpt_good_every_human_turn() -> None:
    items, problems = _load("sharegpt_good.json", "sharegpt")
    assert problems == [] and [it.line for it in items] == [1, 2, 3]
    one, three, image = items
    assert one.text == "What is goodput?" and one.ref_output_len == 7 and one.turns == ()
    assert three.text == "You are terse.\nName a scheduling policy." and three.ref_output_len == 1
    assert [(t.text, t.ref_output_len) for t in three.turns] == [
        ("Another one?", 5), ("Which favours prefix reuse?", None)]  # the last turn has no recorded reply
    assert image.images[0].width == 4 and image.ref_output_len == 1


def test_openai_good_user_messages_are_turns() -> None:
    items, problems = _load("openai_good.jsonl", "openai")
    assert problems == []
    first, trip, picture, tool = items
    assert first.text == "You are a helpful assistant.\nWhat is a radix cache?" and first.output_len == 64
    assert trip.text == "You are a helpful assistant.\nPlan a trip to Lyon." and trip.ref_output_len == 9
    assert [(t.text, t.ref_output_len, t.output_len) for t in trip.turns] == [
        ("And back?", 3, None), ("Thanks, what should I eat there?", None, 32)]  # max_tokens: the last turn's
    assert picture.text == "What is in\nthis image?" and (picture.images[0].width, picture.images[0].height) == (6, 2)
    assert picture.images[0].data_urls[0].startswith("data:image/png;base64,")
    # the tool call ("run_tool {}") is turn 1's reply, the tool's result a turn of its own (no reply recorded);
    # max_completion_tokens bounds the last turn
    assert tool.ref_output_len == 2 and len(tool.turns) == 2
    assert (tool.turns[0].text, tool.turns[0].ref_output_len) == ("tool output here", None)
    assert tool.turns[1].text == "Now summarise." and tool.turns[1].output_len == 12
    assert tool.turns[1].images[0].width == 4


def test_mooncake_good_lengths_times_and_shared_blocks() -> None:
    items, problems = _load("mooncake_good.jsonl", "mooncake")
    assert problems == []
    assert [len(it.input_ids) for it in items] == [1000, 1200, 300, 1024]
    assert [it.output_len for it in items] == [10, 20, 5, 7]
    assert [it.send_at for it in items] == [0.0, 0.5, 1.5, 1.7]
    offsets = dataset_offsets(items)
    assert offsets.dtype.kind == "f" and offsets.tolist() == [0.0, 0.5, 1.5, 1.7]
    a, b, c, d = (it.input_ids for it in items)
    assert a == hash_block(0, 512) + hash_block(1, 512)[:488]  # input_length cuts the last block
    assert b[:1000] == a and b[1024:] == hash_block(2, 512)[:176]
    assert d[:512] == a[:512] and d[512:] == hash_block(4, 512) and d[512:] != a[512:1024]
    assert c == hash_block(3, 512)[:300]
    assert all(3 <= t <= 999 for t in a + b + c + d)


def test_mooncake_hash_blocks_are_a_function_of_the_id(tmp_path: Path) -> None:
    lines = [{"timestamp": 5000, "input_length": 20, "output_length": 1, "hash_ids": [41, 42, 43]},
             {"timestamp": 5250, "input_length": 16, "output_length": 1, "hash_ids": [41, 42, 99]},
             {"timestamp": 9000, "input_length": 24, "output_length": 1, "hash_ids": [7, 42, 43]}]
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    ds = Dataset(path="t.jsonl", format="mooncake", block_tokens=8)
    x, y, z = load_dataset(ds, tmp_path)[0]
    assert x.input_ids[:16] == y.input_ids[:16] and x.input_ids[16:20] != y.input_ids[16:20]
    assert z.input_ids[8:] == x.input_ids[8:] + hash_block(43, 8)[4:]  # same ids, same blocks, wherever they sit
    assert z.input_ids[:8] != x.input_ids[:8]
    assert [x.send_at, y.send_at, z.send_at] == [0.0, 0.25, 4.0]  # milliseconds, from the first line
    assert load_dataset(ds, tmp_path)[0][0].input_ids == x.input_ids  # the same in every process and run


BAD = {
    ("jsonl_bad.jsonl", "jsonl"): [
        "jsonl_bad.jsonl:1: not valid JSON: Expecting ',' delimiter",
        'jsonl_bad.jsonl:2: needs "prompt" or "input_ids"',
        'jsonl_bad.jsonl:3: "input_ids" must be a non-empty list of integers >= 0',
        'jsonl_bad.jsonl:4: "output_len" must be an integer >= 1',
        'jsonl_bad.jsonl:5: turn 2: "prompt" must be a non-empty string',
        'jsonl_bad.jsonl:6: "turns" must be a list of turns',
        "jsonl_bad.jsonl:7: image missing.png: no such file",
        'jsonl_bad.jsonl:8: "send_at" must be a number of seconds >= 0',
        "jsonl_bad.jsonl:9: expected a JSON object"],
    ("sharegpt_bad.json", "sharegpt"): [
        'sharegpt_bad.json:entry 1: expected an object with a "conversations" list',
        "sharegpt_bad.json:entry 2: no human turn",
        "sharegpt_bad.json:entry 3: first human turn has no text",
        "sharegpt_bad.json:entry 4: human turn 2 has no text",
        "sharegpt_bad.json:entry 5: image nope.png: no such file"],
    ("openai_bad.jsonl", "openai"): [
        'openai_bad.jsonl:1: expected an object with a non-empty "messages" list',
        'openai_bad.jsonl:2: message 1: expected an object with a "role"',
        "openai_bad.jsonl:3: message 1: unknown role 'wizard'",
        "openai_bad.jsonl:4: no user message",
        "openai_bad.jsonl:5: message 1: a user message with no text",
        "openai_bad.jsonl:6: message 1: unknown content part 'input_audio' (text and image_url are read)",
        "openai_bad.jsonl:7: message 1: image_url https://example.com/a.png: remote images are not fetched (use a "
        "file path or a data: URL)",
        'openai_bad.jsonl:8: "max_tokens" must be an integer >= 1',
        "openai_bad.jsonl:9: message 1: image_url: a data: URL that is not a base64 image"],
    ("mooncake_bad.jsonl", "mooncake"): [
        'mooncake_bad.jsonl:1: "timestamp" must be a number of milliseconds >= 0',
        'mooncake_bad.jsonl:2: "input_length" must be an integer >= 1',
        'mooncake_bad.jsonl:3: "hash_ids" must be a non-empty list of integers >= 0',
        'mooncake_bad.jsonl:4: "input_length" 2000 is more than its 2 hash blocks of 512 tokens hold',
        "mooncake_bad.jsonl:6: timestamp goes back in time (0.1 s before the entry before it)",
        'mooncake_bad.jsonl:7: "output_length" must be an integer >= 1'],
}


@pytest.mark.parametrize(("name", "fmt"), list(BAD))
def test_bad_entries_one_line_each(name: str, fmt: str) -> None:
    items, problems = _load(name, fmt)
    assert problems == BAD[(name, fmt)]
    assert len(items) >= 1 and all("\n" not in p for p in problems)
    with pytest.raises(WorkloadError) as err:  # on_bad_line fail: the first bad entry stops the load
        load_dataset(Dataset(path=name, format=fmt), DATA)  # type: ignore[arg-type]
    assert str(err.value) == BAD[(name, fmt)][0]


def test_bad_files_are_one_line() -> None:
    with pytest.raises(WorkloadError, match=r"^sharegpt_broken\.json:3: not valid JSON: Expecting value$"):
        _load("sharegpt_broken.json", "sharegpt")
    with pytest.raises(WorkloadError, match=r"^not_utf8\.jsonl: cannot read \('utf-8' codec"):
        _load("not_utf8.jsonl", "jsonl")


def test_mooncake_skipped_lines_keep_times_from_the_first_good_line() -> None:
    items, _ = _load("mooncake_bad.jsonl", "mooncake")
    assert [(it.line, it.send_at) for it in items] == [(5, 0.0), (8, 1.0)]
    assert dataset_offsets(items).tolist() == [0.0, 1.0]
    with pytest.raises(WorkloadError, match="without a send time"):
        dataset_offsets(_load("jsonl_good.jsonl", "jsonl")[0])


@pytest.mark.parametrize(("name", "fmt"), [("jsonl_good.jsonl", "jsonl"), ("sharegpt_good.json", "sharegpt"),
                                           ("openai_good.jsonl", "openai"), ("mooncake_good.jsonl", "mooncake")])
def test_converted_jsonl_reads_back_the_same(tmp_path: Path, name: str, fmt: str) -> None:
    items, _ = _load(name, fmt)
    out = tmp_path / "out.jsonl"
    out.write_text("".join(json.dumps(item_record(it)) + "\n" for it in items))
    again, problems = read_entries(out, "jsonl")
    assert problems == []
    for a, b in zip(items, again, strict=True):
        assert (a.input_ids, a.text, a.output_len, a.ref_output_len, a.send_at, a.turns) == \
            (b.input_ids, b.text, b.output_len, b.ref_output_len, b.send_at, b.turns)
        assert [m.data_urls for m in a.images] == [m.data_urls for m in b.images]


def _word_tokenizer(folder: Path, n_words: int) -> Path:
    """A real (if small) tokenizer.json: a word-level vocabulary of n_words words w0..w{n-1} and [UNK]."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[UNK]": 0, **{f"w{i}": i + 1 for i in range(n_words)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    return folder


def test_a_real_models_tokenizer_counts_the_text(tmp_path: Path) -> None:
    model = _word_tokenizer(tmp_path / "real", 5000)
    rows = [{"messages": [{"role": "user", "content": "w10 w4000, w7"}, {"role": "assistant", "content": "w1 w2!"},
                          {"role": "user", "content": "w3"}]}]
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    items, _ = load_dataset(Dataset(path="d.jsonl", format="openai"), tmp_path, model=model)
    # the tokenizer's ids, punctuation a token of its own ([UNK] here), not one id per whitespace word
    assert items[0].input_ids == (11, 4001, 0, 8) and items[0].ref_output_len == 3
    assert items[0].turns[0].input_ids == (4,)
    assert encoder_for(model).source.endswith("real/tokenizer.json")
    # a shape folder (a vocabulary of at most 1,024) keeps one token per word
    assert encoder_for(ROOT / "models" / "llama3-8b-shape") is LEXICON
    assert encoder_for(_word_tokenizer(tmp_path / "shape", 1000)) is LEXICON
    assert encoder_for(None) is LEXICON and encoder_for(tmp_path / "nothing") is LEXICON


def test_the_model_folder_reaches_the_loader_through_the_lexicon() -> None:
    from sweep.workload.lexicon import for_model

    assert for_model(ROOT / "models" / "llama3-8b-shape").tokenizer.endswith("llama3-8b-shape/tokenizer.json")


def test_missing_tokenizers_package_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = _word_tokenizer(tmp_path / "real", 2000)
    _encoder.cache_clear()
    monkeypatch.setitem(sys.modules, "tokenizers", None)  # what an environment without the package sees
    try:
        with pytest.raises(WorkloadError, match=r"needs the `tokenizers` package \(pip install tokenizers\)$"):
            encoder_for(model)
    finally:
        _encoder.cache_clear()



@pytest.mark.parametrize(("name", "fmt"), [("openai_good.jsonl", "openai"), ("mooncake_good.jsonl", "mooncake"),
                                           ("sharegpt_good.json", "sharegpt")])
def test_single_turn_stream_sends_turn_one(name: str, fmt: str) -> None:
    from sweep.profile import Workload
    from sweep.workload.requests import build_workload

    ds = Dataset(path=name, format=fmt)  # type: ignore[arg-type]
    items = {it.input_ids: it for it in load_dataset(ds, DATA)[0]}
    specs = build_workload(Workload(num_requests=8, dataset=ds), DATA)
    for spec in specs:  # each request is an entry's turn 1, with its output length (explicit, else the reply's)
        item = items[spec.input_ids]
        want = item.output_len or item.ref_output_len
        assert want is None or spec.output_tokens == want
