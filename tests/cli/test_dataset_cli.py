"""`sweep dataset stats|validate|convert` on the corpus of tests/data/datasets, through the CLI's one boundary."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from sweep.cli import main
from sweep.workload.dataset_stats import burstiness, dataset_stats
from sweep.workload.datasets import read_entries

DATA = Path(__file__).resolve().parents[1] / "data" / "datasets"


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, list[str]]:
    rc = main(argv)
    cap = capsys.readouterr()
    return rc, " ".join(cap.out.split()), [ln for ln in cap.err.splitlines() if ln.strip()]


def _row(out: str, name: str) -> list[str]:
    """The cells after a table row's name: n, mean, p50, p90, p99, max."""
    m = re.search(re.escape(name) + r" │ ([^│]+)│ ([^│]+)│ ([^│]+)│ ([^│]+)│ ([^│]+)│ ([^│]+)│", out)
    assert m, out
    return [c.strip() for c in m.groups()]


# (file, format guessed, entries, turns row, prompt row, output row, prefix line, burstiness line)
STATS = [
    ("jsonl_good.jsonl", "jsonl", 3, ["3", "1.67", "1", "2.60", "2.96", "3"], ["5", "3.40", "3", "4.80", "5.88", "6"],
     ["4", "7.75", "6.50", "13.90", "15.79", "16"], "34.6% of 26 prompt tokens", "- (no send times in the file)"),
    ("sharegpt_good.json", "sharegpt", 3, ["3", "1.67", "1", "2.60", "2.96", "3"],
     ["5", "4", "4", "5.80", "6.88", "7"], ["4", "3.50", "3", "6.40", "6.94", "7"], "47.2% of 36 prompt tokens",
     "- (no send times in the file)"),
    ("openai_good.jsonl", "openai", 4, ["4", "2", "2", "3", "3", "3"],
     ["8", "5.12", "4", "10", "10", "10"], ["6", "20.33", "10.50", "48", "62.40", "64"], "50.0% of 72 prompt tokens",
     "- (no send times in the file)"),
    ("mooncake_good.jsonl", "mooncake", 4, ["4", "1", "1", "1", "1", "1"],
     ["4", "881", "1,012", "1,147", "1,195", "1,200"], ["4", "10.50", "8.50", "17", "19.70", "20"],
     "42.9% of 3,524 prompt tokens", "inter-arrival CV 0.58 over 1.7 s"),
]


@pytest.mark.parametrize("case", STATS, ids=[c[0] for c in STATS])
def test_stats_on_each_format(case: tuple, capsys: pytest.CaptureFixture[str]) -> None:
    name, fmt, entries, turns, prompt, output, prefix, bursts = case
    rc, out, err = _run(["dataset", "stats", str(DATA / name)], capsys)
    assert rc == 0 and err == []
    assert f"({fmt}): {entries} entries" in out
    assert _row(out, "turns per conversation") == turns
    assert _row(out, "prompt tokens per turn") == prompt
    assert _row(out, "output tokens per turn") == output
    assert f"prefix-sharing potential: {prefix}" in out
    assert f"arrival burstiness: {bursts}" in out


def test_stats_figures_by_hand() -> None:
    items, _ = read_entries(DATA / "mooncake_good.jsonl", "mooncake")
    s = dataset_stats(items)
    # line 2 shares line 1's 1,000 tokens (its blocks 0 and 1, the second cut at 488), line 4 block 0's 512
    assert (s.prefix_hit_tokens, s.prompt_tokens_total) == (1000 + 512, 1000 + 1200 + 300 + 1024)
    gaps = [0.5, 1.0, 0.2]
    mean = sum(gaps) / 3
    cv = (sum((g - mean) ** 2 for g in gaps) / 3) ** 0.5 / mean
    assert s.interarrival_cv == pytest.approx(cv) and s.duration_s == pytest.approx(1.7)
    assert burstiness([0, 1, 2, 3]) == 0.0 and burstiness([0, 1]) is None and burstiness([5, 5, 5]) is None
    # jsonl: conversation 2 sends [5,6,7], then + "and after eviction", then + [8,9]: its later turns hit 3 and 6
    s = dataset_stats(read_entries(DATA / "jsonl_good.jsonl", "jsonl")[0])
    assert (s.prefix_hit_tokens, s.prompt_tokens_total) == (9, 6 + 3 + 6 + 8 + 3)


def test_stats_on_a_converted_file_match_the_original(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "conv.jsonl"
    rc, out, err = _run(["dataset", "convert", str(DATA / "openai_good.jsonl"), "--out", str(out_file)], capsys)
    assert rc == 0 and err == [] and f"{out_file}: 4 entries from" in out
    assert json.loads(out_file.read_text().splitlines()[1])["turns"][1] == {
        "prompt": "Thanks, what should I eat there?", "output_len": 32}
    first = _run(["dataset", "stats", str(DATA / "openai_good.jsonl")], capsys)[1]
    again = _run(["dataset", "stats", str(out_file)], capsys)[1]
    assert first.split("(openai)")[1] == again.split("(jsonl)")[1]


def test_validate_lists_bad_lines_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _run(["dataset", "validate", str(DATA / "mooncake_bad.jsonl")], capsys)
    assert rc == 2  # bad input (docs/automation.md), never 1 (an OS failure)
    assert err[0] == f'{DATA / "mooncake_bad.jsonl"}:1: "timestamp" must be a number of milliseconds >= 0'
    assert len(err) == 7 and err[-1] == f"error: {DATA / 'mooncake_bad.jsonl'}: 6 bad entries"
    assert "mooncake: 2 good entries (2 turns), 6 bad" in out
    rc, out, err = _run(["dataset", "validate", str(DATA / "sharegpt_good.json")], capsys)
    assert rc == 0 and err == [] and "sharegpt: 3 good entries (5 turns), 0 bad" in out
    rc, out, err = _run(["dataset", "validate", "--format", "jsonl", str(DATA / "openai_good.jsonl")], capsys)
    assert rc == 2 and len(err) == 5 and err[0].endswith(':1: needs "prompt" or "input_ids"')


def test_convert_leaves_bad_lines_out_and_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_file = tmp_path / "c.jsonl"
    rc, out, err = _run(["dataset", "convert", str(DATA / "openai_bad.jsonl"), "-o", str(out_file)], capsys)
    assert rc == 2 and len(err) == 10 and "1 entry from" in out and "9 bad entries left out" in out
    assert json.loads(out_file.read_text()) == {"prompt": "the one good request"}


@pytest.mark.parametrize(("argv", "line"), [
    (["dataset", "stats", str(DATA / "missing.jsonl")], f"error: {DATA / 'missing.jsonl'}: no such file"),
    (["dataset", "validate", str(DATA / "sharegpt_broken.json")],
     f"error: {DATA / 'sharegpt_broken.json'}:3: not valid JSON: Expecting value"),
    (["dataset", "validate", "--format", "csv", str(DATA / "jsonl_good.jsonl")],
     "error: --format 'csv': expected one of auto, jsonl, sharegpt, openai, openai-batch, lmsys, mooncake, azure"),
])
def test_unreadable_files_exit_2_with_one_line(argv: list[str], line: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = _run(argv, capsys)
    assert rc == 2 and err == [line]
