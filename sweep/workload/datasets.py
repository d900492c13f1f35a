"""Dataset import: a file of any format sweep.workload.formats names (sweep JSONL, ShareGPT, OpenAI chat requests
or Batch files, LMSYS-Chat-1M rows, a Mooncake or Azure trace), validated entry by entry into DatasetItems (what
each format becomes: sweep.workload.importers); the send offsets of a timestamped file; and an item written back as sweep's JSONL (`sweep dataset convert`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from sweep.core.errors import WorkloadError
from sweep.core.types import JSON
from sweep.profile import Dataset
from sweep.workload.formats import LISTED, PARSERS, guess_format
from sweep.workload.import_azure import csv_rows
from sweep.workload.importers import BadEntry, DatasetItem, DatasetTurn, ParseContext
from sweep.workload.tokens import ID_HIGH, ID_LOW, encoder_for, text_to_ids, word_id

__all__ = ["ID_HIGH", "ID_LOW", "DatasetItem", "DatasetTurn", "dataset_offsets", "guess_format", "item_record",
           "load_dataset", "output_len", "read_entries", "text_to_ids", "word_id"]


@dataclass(frozen=True)
class _Entry:
    """One dataset entry before validation: where it is (for messages), its number, and its parsed JSON
    (or the BadEntry saying why that line is not JSON)."""

    where: str
    number: int
    obj: JSON | BadEntry


def load_dataset(ds: Dataset, base_dir: Path | None = None,
                 model: str | Path | None = None) -> tuple[list[DatasetItem], list[str]]:
    """Read ds.path (relative to base_dir); return usable items in file order and "path:LINE: problem" for skipped
    ones. Text is tokenized with model's tokenizer.json when that is a real model's (sweep.workload.tokens)."""
    path = _dataset_path(ds, base_dir)
    fmt = guess_format(path) if ds.format == "auto" else ds.format
    try:
        items, problems = read_entries(path, fmt, ds.path, model=model, block_tokens=ds.block_tokens,
                                       fail_fast=ds.on_bad_line == "fail")
        if not items:
            raise WorkloadError(f"{ds.path}: no usable entries ({len(problems)} skipped)")
    except WorkloadError as exc:
        guessed = guess_format(path) if ds.format != "auto" else fmt
        if guessed == fmt:
            raise
        raise WorkloadError(f"{exc} (workload.dataset.format is {fmt}, but the file looks like {guessed}: set "
                            f"format: {guessed}, or auto)") from None
    return items, problems


def output_len(entry: DatasetItem | DatasetTurn, ds: Dataset, drawn: int) -> int:
    """The output length a dataset turn asks for: with output_lengths "dataset" (the default) its explicit one,
    else its recorded reply's, else `drawn` (workload.output_len's draw); with "profile" always `drawn`."""
    if ds.output_lengths == "profile":
        return drawn
    if entry.output_len is not None:
        return entry.output_len
    return entry.ref_output_len if entry.ref_output_len is not None else drawn


def read_entries(path: Path, fmt: str, shown: str | None = None, *, model: str | Path | None = None,
                 block_tokens: int = 512, fail_fast: bool = False) -> tuple[list[DatasetItem], list[str]]:
    """Every usable item of a dataset file and one "shown:LINE: problem" per bad entry (the first one raises a
    WorkloadError when fail_fast); an unreadable file raises. Send times are made relative to the first entry."""
    shown = shown if shown is not None else str(path)
    ctx = ParseContext(path.parent, encoder_for(model), block_tokens)
    parse = PARSERS[fmt]
    items: list[DatasetItem] = []
    problems: list[str] = []
    last: float | None = None
    for entry in _entries(fmt, _read(shown, path), shown):
        try:
            if isinstance(entry.obj, BadEntry):
                raise entry.obj
            item = parse(entry.obj, entry.number, ctx)
            if item.send_at is not None and last is not None and item.send_at < last:
                raise BadEntry(f"timestamp goes back in time ({last - item.send_at:.6g} s before the entry before it)")
            last = item.send_at if item.send_at is not None else last
            items.append(item)
        except BadEntry as bad:
            msg = f"{entry.where}: {bad}"
            if fail_fast:
                raise WorkloadError(msg) from None
            problems.append(msg)
    return _rebased(items), problems


def _rebased(items: list[DatasetItem]) -> list[DatasetItem]:
    """Items with send_at counted from the first timestamped item (0.0 there)."""
    first = next((it.send_at for it in items if it.send_at is not None), None)
    if not first:
        return items
    return [it if it.send_at is None else replace(it, send_at=it.send_at - first) for it in items]


def dataset_offsets(items: list[DatasetItem]) -> np.ndarray:
    """The send offsets (seconds from the first entry) of a timestamped dataset, in file order, as
    sweep.profile.trace.load_trace gives them for a timestamp file; WorkloadError when an entry has none."""
    missing = [it.line for it in items if it.send_at is None]
    if missing or not items:
        raise WorkloadError(f"the dataset has entries without a send time (line {missing[0] if missing else '-'})")
    return np.asarray([it.send_at for it in items], dtype=float)


def _dataset_path(ds: Dataset, base_dir: Path | None) -> Path:
    """The dataset file (a relative path is under base_dir); WorkloadError when there is none."""
    path = ds.file
    if not path.is_absolute() and base_dir is not None:
        path = Path(base_dir) / path
    if not path.is_file():
        raise WorkloadError(f"{ds.path}: no such dataset file")
    return path


def _read(shown: str, path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")  # a byte-order mark (Windows editors write one) is no text
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkloadError(f"{shown}: cannot read ({exc})") from None


def _entries(fmt: str, raw: str, shown: str) -> list[_Entry]:
    """The file's entries: an Azure trace's CSV rows, a JSON list's elements (ShareGPT, OpenAI, LMSYS, Batch),
    else one per non-blank line (JSONL)."""
    if fmt == "azure":
        return [_Entry(f"{shown}:{n}", n, obj) for n, obj in csv_rows(raw, shown)]
    if fmt in LISTED and raw.lstrip().startswith("["):
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise WorkloadError(f"{shown}:{exc.lineno}: not valid JSON: {exc.msg}") from None
        except (RecursionError, ValueError) as exc:
            raise WorkloadError(f"{shown}: not valid JSON: {_json_limit(exc)}") from None
        if not isinstance(data, list):
            raise WorkloadError(f"{shown}: expected a JSON list of conversations")
        return [_Entry(f"{shown}:entry {i}", i, obj) for i, obj in enumerate(data, start=1)]
    entries = []
    for n, text in enumerate(raw.splitlines(), start=1):
        if not text.strip():
            continue
        try:
            entries.append(_Entry(f"{shown}:{n}", n, json.loads(text)))
        except json.JSONDecodeError as exc:
            entries.append(_Entry(f"{shown}:{n}", n, BadEntry(f"not valid JSON: {exc.msg}")))
        except (RecursionError, ValueError) as exc:
            entries.append(_Entry(f"{shown}:{n}", n, BadEntry(f"not valid JSON: {_json_limit(exc)}")))
    return entries


def _json_limit(exc: RecursionError | ValueError) -> str:
    """Why JSON that parses in principle was refused: nested past the parser's depth, or an integer too long."""
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return " ".join(str(exc).split())[:120]


def _record(turn: DatasetItem | DatasetTurn) -> dict[str, JSON]:
    rec: dict[str, JSON] = {"prompt": turn.text} if turn.text is not None else {"input_ids": list(turn.input_ids)}
    if turn.output_len is not None:
        rec["output_len"] = turn.output_len
    if turn.ref_output_len is not None:
        rec["ref_output_len"] = turn.ref_output_len
    if turn.images:
        rec["images"] = [m.data_urls[0] for m in turn.images]
    return rec


def item_record(item: DatasetItem) -> dict[str, JSON]:
    """An item as one line of sweep's JSONL: text when the entry had text, else its ids; images as data: URLs;
    its later turns; send_at."""
    rec = _record(item)
    if item.send_at is not None:
        rec["send_at"] = round(item.send_at, 6)
    if item.turns:
        rec["turns"] = [_record(t) for t in item.turns]
    return rec
