"""A first try with your own data: a file `sweep dataset validate` calls good loads from a profile the same way
(its format guessed alike), a byte-order mark is no error, and a dataset's own reply lengths are what is asked for
unless the profile says otherwise, with the report saying which."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from sweep.cli import main
from sweep.core.errors import WorkloadError
from sweep.profile import load_profile
from sweep.report.setup import workload_text
from sweep.workload.requests import make_block, workload_parts

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "datasets"
SMOKE = ROOT / "profiles" / "smoke.yaml"


def _profile(folder: Path, dataset: dict[str, object]) -> Path:
    """A profile beside the dataset, as a user writes one: smoke's fields with a dataset."""
    text = SMOKE.read_text().replace("workload:\n", "workload:\n  dataset: " + json.dumps(dataset) + "\n", 1)
    path = folder / "mine.yaml"
    path.write_text(text)
    return path


def _asked(profile: Path, n: int = 64) -> list[int]:
    """The output tokens the first n requests of the profile's workload ask for."""
    prof = load_profile(profile)
    parts = workload_parts(prof.workload, prof.folder)
    return [r.output_tokens for r in make_block(prof.workload, parts, 0)[:n]]


def test_a_sharegpt_file_named_in_a_profile_loads_as_validate_reads_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copy(DATA / "sharegpt_good.json", tmp_path / "x.json")
    shutil.copy(DATA / "pixel.png", tmp_path / "pixel.png")
    assert main(["dataset", "validate", str(tmp_path / "x.json")]) == 0
    assert "sharegpt: 3 good entries" in capsys.readouterr().out
    prof = load_profile(_profile(tmp_path, {"path": "x.json"}))
    parts = workload_parts(prof.workload, prof.folder)
    assert parts.items is not None and len(parts.items) == 3


def test_a_format_named_wrongly_is_refused_naming_the_format_the_file_has(tmp_path: Path) -> None:
    shutil.copy(DATA / "sharegpt_good.json", tmp_path / "x.json")
    shutil.copy(DATA / "pixel.png", tmp_path / "pixel.png")
    prof = load_profile(_profile(tmp_path, {"path": "x.json", "format": "jsonl"}))
    with pytest.raises(WorkloadError) as err:
        workload_parts(prof.workload, prof.folder)
    assert "x.json:1: not valid JSON" in str(err.value) and "the file looks like sharegpt" in str(err.value)


@pytest.mark.parametrize("name", ["sharegpt_good.json", "jsonl_good.jsonl", "openai_good.jsonl",
                                  "mooncake_good.jsonl"])
def test_a_byte_order_mark_is_accepted(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bom = tmp_path / name
    bom.write_bytes(b"\xef\xbb\xbf" + (DATA / name).read_bytes())
    shutil.copy(DATA / "pixel.png", tmp_path / "pixel.png")
    assert main(["dataset", "validate", str(bom)]) == 0
    plain = main(["dataset", "validate", str(DATA / name)])
    out = capsys.readouterr()
    assert plain == 0 and out.err == ""
    with_bom, without = out.out.splitlines()
    assert with_bom.split(": ", 1)[1] == without.split(": ", 1)[1]  # same format, entries and turns
    prof = load_profile(_profile(tmp_path, {"path": name}))
    assert workload_parts(prof.workload, prof.folder).items


def _replies(folder: Path, lengths: list[int]) -> Path:
    convs = [{"conversations": [{"from": "human", "value": f"question {i}"},
                                {"from": "gpt", "value": " ".join(["w"] * n)}]} for i, n in enumerate(lengths)]
    (folder / "chats.json").write_text(json.dumps(convs))
    return folder / "chats.json"


def test_the_dataset_reply_lengths_win_when_the_profile_sets_output_len(tmp_path: Path) -> None:
    """smoke sets output_len (uniform 16-48), as every shipped profile does: the file's replies still win."""
    _replies(tmp_path, [5, 700, 40])
    asked = _asked(_profile(tmp_path, {"path": "chats.json"}))
    assert set(asked) == {5, 700, 40}  # and 700 is not clamped to the profile's (or the default's) max


def test_the_dataset_reply_lengths_are_not_clamped_to_the_default_distribution(tmp_path: Path) -> None:
    _replies(tmp_path, [600, 900])
    path = _profile(tmp_path, {"path": "chats.json"})
    path.write_text("\n".join(ln for ln in path.read_text().splitlines() if "output_len:" not in ln) + "\n")
    assert set(_asked(path)) == {600, 900}


def test_output_lengths_profile_draws_every_turn_and_the_report_says_which(tmp_path: Path) -> None:
    _replies(tmp_path, [5, 700, 40])
    theirs = load_profile(_profile(tmp_path, {"path": "chats.json"}))
    ours_path = _profile(tmp_path, {"path": "chats.json", "output_lengths": "profile"})
    asked = _asked(ours_path)
    assert all(16 <= a <= 48 for a in asked) and len(set(asked)) > 3
    assert "output length the dataset's own" in workload_text(theirs.workload)
    assert "uniform 16–48 tokens, the profile's for every turn" in workload_text(load_profile(ours_path).workload)
