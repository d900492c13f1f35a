"""The formats people have (issue 31 §3): LMSYS-Chat-1M rows, OpenAI Batch API request files, function/tool-calling
logs and Azure's LLM inference trace CSVs, read from files in their public layouts (tests/data/datasets/), guessed
by `format: auto`, and their bad entries each one line with its line number, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from sweep.cli import main
from sweep.profile import Workload, load_profile
from sweep.workload.dataset_stats import dataset_stats
from sweep.workload.datasets import guess_format, read_entries
from sweep.workload.requests import workload_parts
from sweep.workload.sessions import SessionStream

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "datasets"


def _validate(name: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, list[str]]:
    rc = main(["dataset", "validate", str(DATA / name)])
    cap = capsys.readouterr()
    return rc, " ".join(cap.out.split()), [ln for ln in cap.err.splitlines() if ln.strip()]


@pytest.mark.parametrize(("name", "fmt"), [
    ("lmsys_good.jsonl", "lmsys"), ("lmsys_bad.jsonl", "lmsys"), ("openai_batch_good.jsonl", "openai-batch"),
    ("openai_batch_bad.jsonl", "openai-batch"), ("openai_tools_good.jsonl", "openai"),
    ("azure_conv_2023_good.csv", "azure"), ("azure_code_2024_good.csv", "azure"), ("azure_bad.csv", "azure"),
    ("sharegpt_good.json", "sharegpt"), ("openai_good.jsonl", "openai"), ("mooncake_good.jsonl", "mooncake"),
])
def test_auto_guesses_each_format(name: str, fmt: str) -> None:
    assert guess_format(DATA / name) == fmt


@pytest.mark.parametrize(("name", "summary"), [
    ("lmsys_good.jsonl", "lmsys: 3 good entries (5 turns), 0 bad"),
    ("openai_batch_good.jsonl", "openai-batch: 4 good entries (5 turns), 0 bad"),
    ("openai_tools_good.jsonl", "openai: 2 good entries (6 turns), 0 bad"),
    ("azure_conv_2023_good.csv", "azure: 5 good entries (5 turns), 0 bad"),
    ("azure_code_2024_good.csv", "azure: 4 good entries (4 turns), 0 bad"),
])
def test_good_files_validate(name: str, summary: str, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _validate(name, capsys)
    assert (rc, err) == (0, []) and summary in out


BAD = {
    "lmsys_bad.jsonl": [
        '1: expected an object with a non-empty "conversation" list',
        '2: "turn" is 2 but the conversation has 1 user turn (a cut row?)',
        "3: message 1: unknown role 'wizard'",
        "4: not valid JSON: Unterminated string starting at",
        "5: no user message",
        '6: "turn" must be an integer >= 1',
        "7: message 1: a user message with no text"],
    "openai_batch_bad.jsonl": [
        '1: a Batch API output line (it has "response"), not a request: use the request file',
        "2: \"url\" '/v1/embeddings' is not a generation endpoint (read: /v1/chat/completions, /v1/completions)",
        "3: \"method\" must be \"POST\" (got 'GET')",
        '4: "custom_id" must be a non-empty string',
        '5: "body" must be a JSON object (the request)',
        '6: body: expected an object with a non-empty "messages" list',
        '7: body: "max_tokens" must be an integer >= 1',
        '8: body: "prompt" must be a non-empty string'],
    "openai_tools_bad.jsonl": [
        "1: message 1: a tool result before any user message",
        '2: message 2: "tool_calls" must be a non-empty list of calls',
        '3: message 2: a tool call needs a "function" with a "name" and "arguments"',
        "4: message 3: a tool result with no text"],
    "azure_bad.csv": [
        "3: \"TIMESTAMP\" must be a date and time like 2023-11-16 18:15:46.6805900 (got 'yesterday')",
        "4: \"ContextTokens\" must be an integer >= 1 (got 'eight')",
        '5: "GeneratedTokens" must be an integer >= 1',
        "6: expected 3 fields (TIMESTAMP,ContextTokens,GeneratedTokens), got 2",
        "7: timestamp goes back in time (6.68059 s before the entry before it)",
        '8: "ContextTokens" must be at most 2,097,152 tokens (got 1000000000000)',
        "9: \"GeneratedTokens\" must be an integer >= 1 (got '-3')"],
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_entries_are_one_line_each_with_their_line_and_exit_2(name: str,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _validate(name, capsys)
    assert rc == 2
    assert err[:-1] == [f"{DATA / name}:{line}" for line in BAD[name]]
    assert err[-1] == f"error: {DATA / name}: {len(BAD[name])} bad entries"
    assert f"{len(BAD[name])} bad" in out and "Traceback" not in out


def test_lmsys_row_is_a_session_each_reply_its_turns_output() -> None:
    items, problems = read_entries(DATA / "lmsys_good.jsonl", "lmsys")
    assert problems == [] and [1 + len(it.turns) for it in items] == [1, 3, 1]
    haiku = items[1]
    assert haiku.text == "Write a haiku about the sea." and haiku.ref_output_len == 14
    assert [(t.text, t.ref_output_len, t.output_len) for t in haiku.turns] == [
        ("Now one about mountains.", 13, None), ("Which one do you like more?", 3, None)]


def test_batch_body_and_its_max_tokens_are_the_request() -> None:
    items, problems = read_entries(DATA / "openai_batch_good.jsonl", "openai-batch")
    assert problems == []
    chat, later, completion, bare = items
    assert chat.text == "You are a helpful assistant.\nHello world!" and chat.output_len == 1000
    assert later.text == "You are an unhelpful assistant.\nHello world!" and later.ref_output_len == 2
    assert [(t.text, t.output_len) for t in later.turns] == [("Please?", 200)]  # max_completion_tokens
    assert completion.text == "Say this is a test" and completion.output_len == 7
    assert bare.output_len is None and bare.ref_output_len is None  # no max_tokens: the profile's draw


def test_tool_results_are_context_and_the_reply_after_them_is_that_turns_output() -> None:
    items, problems = read_entries(DATA / "openai_tools_good.jsonl", "openai")
    assert problems == []
    parallel, legacy = items
    # user -> tool call (its name and arguments are the reply) -> tool result -> the answer after it
    assert parallel.ref_output_len == len('get_current_weather {"location": "Boston, MA", "unit": "celsius"}'.split())
    assert [(t.text or "").split("\n")[0][:20] for t in parallel.turns] == [
        '{"temperature": "22"', "And in Paris and Tok", '{"temperature": "15"']
    answer = "It is sunny in Boston today, 22 degrees Celsius, a fine day for a walk along the river."
    assert parallel.turns[0].ref_output_len == len(answer.split())  # the reply after the tool message, used
    assert (parallel.turns[2].text or "").count("temperature") == 2  # two results in a row: one turn
    assert parallel.turns[2].ref_output_len == len("Paris: rain, 15 degrees. Tokyo: clear, 27 degrees.".split())
    # legacy function_call / function role; max_tokens is the last turn's (the function result's) output
    assert legacy.ref_output_len == 6 and [(t.ref_output_len, t.output_len) for t in legacy.turns] == [(None, 40)]


def test_azure_rows_keep_their_lengths_and_times_and_share_nothing() -> None:
    old, problems = read_entries(DATA / "azure_conv_2023_good.csv", "azure")
    assert problems == []
    assert [len(it.input_ids) for it in old] == [374, 396, 879, 91, 91]
    assert [it.output_len for it in old] == [44, 109, 55, 16, 16]
    assert [round(it.send_at or 0, 6) for it in old] == [0.0, 4.314579, 4.541877, 5.266655, 6.360763]
    assert old[3].input_ids != old[4].input_ids  # equal lengths, distinct tokens: no invented prefix sharing
    assert dataset_stats(old).prefix_hit_tokens == 0
    new, problems = read_entries(DATA / "azure_code_2024_good.csv", "azure")
    assert problems == [] and [round(it.send_at or 0, 6) for it in new] == [0.0, 0.006063, 0.240289, 1.177683]


@pytest.mark.parametrize(("name", "fmt"), [
    ("lmsys_good.jsonl", "lmsys"), ("openai_batch_good.jsonl", "openai-batch"), ("openai_tools_good.jsonl", "openai"),
    ("azure_conv_2023_good.csv", "azure")])
def test_convert_keeps_what_stats_says(name: str, fmt: str, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "c.jsonl"
    assert main(["dataset", "convert", str(DATA / name), "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["dataset", "stats", str(DATA / name)]) == 0
    first = " ".join(capsys.readouterr().out.split())
    assert main(["dataset", "stats", str(out)]) == 0
    again = " ".join(capsys.readouterr().out.split())
    assert first.split(f"({fmt})")[1] == again.split("(jsonl)")[1]


def test_an_azure_file_without_its_header_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bare = tmp_path / "t.csv"
    bare.write_text("2023-11-16 18:15:46.6805900,374,44\n")
    rc = main(["dataset", "validate", "--format", "azure", str(bare)])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert (rc, err) == (2, [f"error: {bare}: expected a header line TIMESTAMP,ContextTokens,GeneratedTokens (an "
                             "Azure LLM inference trace)"])


def test_a_multi_turn_row_is_a_session_and_the_reply_after_a_tool_result_its_turns_output() -> None:
    """Through a profile (format: auto): an LMSYS row's later user turns, and a tool log's result turn, are turns of
    the session with the recorded replies' lengths as output lengths (the tool one was dropped before)."""
    sessions = {"turns": {"kind": "fixed", "value": 2}}
    lmsys = SessionStream(Workload.model_validate({"seed": 1, "dataset": {"path": "lmsys_good.jsonl"},
                                                   "sessions": sessions}), DATA)
    haiku = next(s for s in (lmsys.at(k) for k in range(3)) if len(s.turns) == 3)
    assert [(t.branches[0].text, t.branches[0].output_tokens) for t in haiku.turns] == [
        ("Write a haiku about the sea.", 14), ("Now one about mountains.", 13), ("Which one do you like more?", 3)]
    tools = SessionStream(Workload.model_validate({"seed": 1, "dataset": {"path": "openai_tools_good.jsonl"},
                                                   "sessions": sessions}), DATA)
    legacy = next(s for s in (tools.at(k) for k in range(2)) if len(s.turns) == 2)
    result = legacy.turns[1].branches[0]
    assert result.text is not None and result.text.startswith('{"temperature": "72"') and result.output_tokens == 40
    parallel = next(s for s in (tools.at(k) for k in range(2)) if len(s.turns) == 4)
    assert parallel.turns[1].branches[0].output_tokens == 18  # the answer after the tool result, not a draw


def test_a_sharegpt_function_calling_conversation_has_its_observation_as_a_turn(tmp_path: Path) -> None:
    """ShareGPT-style function calling (glaive / LLaMA-Factory: function_call and observation turns)."""
    data = tmp_path / "fc.json"
    data.write_text(json.dumps([{"conversations": [
        {"from": "human", "value": "Convert 100 USD to EUR."},
        {"from": "function_call", "value": '{"name": "convert", "arguments": {"amount": 100}}'},
        {"from": "observation", "value": '{"result": 92.5}'},
        {"from": "gpt", "value": "100 USD is 92.50 EUR today."}],
        "tools": '[{"name": "convert"}]'}]))
    (item,), problems = read_entries(data, "sharegpt")
    assert problems == [] and item.ref_output_len == 5  # the call's words
    assert [(t.text, t.ref_output_len) for t in item.turns] == [('{"result": 92.5}', 6)]


@pytest.mark.parametrize("name", ["azure_conv_2023_good.csv", "azure_code_2024_good.csv"])
def test_an_azure_trace_replays_at_its_own_timing(name: str, tmp_path: Path) -> None:
    """`arrival: {kind: trace}` on an Azure trace CSV: its TIMESTAMP column is the replay's send times (before, a
    date and time was "not a timestamp"), its rows in file order with their own lengths."""
    prof_text = (ROOT / "profiles" / "smoke.yaml").read_text()
    prof_text = prof_text.replace("workload:\n", "workload:\n  dataset: " + json.dumps({"path": str(DATA / name)})
                                  + "\n", 1).replace("arrival: {kind: closed}", "arrival: {kind: trace, scales: [1, 2]}")
    prof_text = prof_text.replace("shared_prefix: {groups: 2, length: 64, share: 0.5}", "shared_prefix: {groups: 0}")
    path = tmp_path / "azure.yaml"
    path.write_text(prof_text)
    prof = load_profile(path, {"ladder": [1, 2]})
    items, _ = read_entries(DATA / name, "azure")
    offsets = prof.arrival.offsets(60.0)  # type: ignore[union-attr]
    assert np.allclose(offsets, [it.send_at or 0.0 for it in items], atol=1e-6)
    parts = workload_parts(prof.workload, prof.folder)
    assert parts.items is not None and [len(it.input_ids) for it in parts.items] == [len(it.input_ids) for it in items]
