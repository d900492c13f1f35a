"""Dataset import: JSONL prompt files and ShareGPT conversations, validated line by line."""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from sweep.core.errors import WorkloadError
from sweep.core.types import JSON, MediaItem
from sweep.profile import Dataset
from sweep.workload.media import image_from_file

ID_LOW = 3  # ids 3..999 are ordinary tokens in the shipped 1024-vocab model folders
ID_HIGH = 999
_HUMAN = ("human", "user")
_GPT = ("gpt", "assistant", "chatgpt", "bard", "model")


@dataclass(frozen=True)
class DatasetItem:
    """One usable dataset entry: prompt ids (and text), optional output length and images."""

    line: int  # 1-based line (jsonl) or entry number (ShareGPT JSON list)
    input_ids: tuple[int, ...]
    text: str | None = None  # the original prompt text, if the entry had one
    output_len: int | None = None  # explicit per-entry output length (jsonl "output_len")
    ref_output_len: int | None = None  # ShareGPT: words in the reply, used when the profile sets no output_len
    images: tuple[MediaItem, ...] = ()


class _Bad(Exception):
    """One entry is unusable; the message says why."""


@lru_cache(maxsize=65536)
def word_id(word: str) -> int:
    """Deterministic word -> token id in 3..999 (crc32, independent of PYTHONHASHSEED)."""
    return ID_LOW + zlib.crc32(word.encode("utf-8")) % (ID_HIGH - ID_LOW + 1)


def text_to_ids(text: str) -> tuple[int, ...]:
    """One token per whitespace-separated word."""
    return tuple(word_id(w) for w in text.split())


@lru_cache(maxsize=1024)
def _image(path: str) -> MediaItem:
    """Load one image file once per process."""
    return image_from_file(path)


def _images(value: JSON, root: Path) -> tuple[MediaItem, ...]:
    """Resolve and load an "images" list (paths relative to the dataset file's folder)."""
    paths = [p for p in value if isinstance(p, str) and p] if isinstance(value, list) else []
    if not isinstance(value, list) or len(paths) != len(value):
        raise _Bad('"images" must be a list of file paths')
    out = []
    for rel in paths:
        p = Path(rel) if Path(rel).is_absolute() else root / rel
        if not p.is_file():
            raise _Bad(f"image {rel}: no such file")
        try:
            out.append(_image(str(p.resolve())))
        except (OSError, ValueError) as exc:
            raise _Bad(f"image {rel}: cannot decode ({exc})") from None
    return tuple(out)


def _positive_int(value: JSON, name: str) -> int:
    """An int >= 1 (bools rejected)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _Bad(f'"{name}" must be an integer >= 1')
    return value


def _jsonl_item(obj: JSON, line: int, root: Path) -> DatasetItem:
    """Validate one JSONL object: {"prompt"| "input_ids", "output_len"?, "images"?}."""
    if not isinstance(obj, dict):
        raise _Bad("expected a JSON object")
    text: str | None = None
    if "input_ids" in obj:
        ids = obj["input_ids"]
        input_ids = tuple(i for i in ids if isinstance(i, int) and not isinstance(i, bool) and i >= 0) \
            if isinstance(ids, list) else ()
        if not isinstance(ids, list) or not ids or len(input_ids) != len(ids):
            raise _Bad('"input_ids" must be a non-empty list of integers >= 0')
    elif "prompt" in obj:
        prompt = obj["prompt"]
        if not isinstance(prompt, str) or not prompt.split():
            raise _Bad('"prompt" must be a non-empty string')
        text, input_ids = prompt, text_to_ids(prompt)
    else:
        raise _Bad('needs "prompt" or "input_ids"')
    out = _positive_int(obj["output_len"], "output_len") if "output_len" in obj else None
    images = _images(obj["images"], root) if "images" in obj else ()
    return DatasetItem(line=line, input_ids=input_ids, text=text, output_len=out, images=images)


def _sharegpt_item(obj: JSON, line: int, root: Path) -> DatasetItem:
    """Validate one ShareGPT conversation: first human turn = prompt, the reply's words = output length."""
    turns = obj.get("conversations") if isinstance(obj, dict) else None
    if not isinstance(obj, dict) or not isinstance(turns, list):
        raise _Bad('expected an object with a "conversations" list')
    for k, turn in enumerate(turns):
        if isinstance(turn, dict) and turn.get("from") in _HUMAN:
            text = turn.get("value")
            if not isinstance(text, str) or not text.split():
                raise _Bad("first human turn has no text")
            ref = None
            for reply in turns[k + 1:]:
                said = reply.get("value") if isinstance(reply, dict) and reply.get("from") in _GPT else None
                if isinstance(said, str):
                    ref = len(said.split()) or None
                    break
            images = _images(obj["images"], root) if "images" in obj else ()
            return DatasetItem(line=line, input_ids=text_to_ids(text), text=text, ref_output_len=ref,
                               images=images)
    raise _Bad("no human turn")


@dataclass(frozen=True)
class _Entry:
    """One dataset entry before validation: where it is (for messages), its number, and its parsed JSON
    (or the _Bad saying why that line is not JSON)."""

    where: str
    number: int
    obj: JSON | _Bad


def load_dataset(ds: Dataset, base_dir: Path | None = None) -> tuple[list[DatasetItem], list[str]]:
    """Read ds.path (relative to base_dir); return usable items and "path:LINE: problem" for skipped ones."""
    path = _dataset_path(ds, base_dir)
    items, problems = _validated(_entries(ds, _read(ds, path)), ds, path.parent)
    if not items:
        raise WorkloadError(f"{ds.path}: no usable entries ({len(problems)} skipped)")
    return items, problems


def _dataset_path(ds: Dataset, base_dir: Path | None) -> Path:
    """The dataset file (a relative path is under base_dir); WorkloadError when there is none."""
    path = ds.file
    if not path.is_absolute() and base_dir is not None:
        path = Path(base_dir) / path
    if not path.is_file():
        raise WorkloadError(f"{ds.path}: no such dataset file")
    return path


def _read(ds: Dataset, path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkloadError(f"{ds.path}: cannot read ({exc})") from None


def _entries(ds: Dataset, raw: str) -> list[_Entry]:
    """The file's entries: a ShareGPT JSON list's elements, else one per non-blank line (JSONL)."""
    if ds.format == "sharegpt" and raw.lstrip().startswith("["):
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise WorkloadError(f"{ds.path}:{exc.lineno}: not valid JSON: {exc.msg}") from None
        if not isinstance(data, list):
            raise WorkloadError(f"{ds.path}: expected a JSON list of conversations")
        return [_Entry(f"{ds.path}:entry {i}", i, obj) for i, obj in enumerate(data, start=1)]
    entries = []
    for n, text in enumerate(raw.splitlines(), start=1):
        if not text.strip():
            continue
        try:
            entries.append(_Entry(f"{ds.path}:{n}", n, json.loads(text)))
        except json.JSONDecodeError as exc:
            entries.append(_Entry(f"{ds.path}:{n}", n, _Bad(f"not valid JSON: {exc.msg}")))
    return entries


def _validated(entries: list[_Entry], ds: Dataset, root: Path) -> tuple[list[DatasetItem], list[str]]:
    """Usable items and one "where: problem" per skipped entry; the first problem raises with on_bad_line fail."""
    parse = _jsonl_item if ds.format == "jsonl" else _sharegpt_item
    items: list[DatasetItem] = []
    problems: list[str] = []
    for entry in entries:
        try:
            if isinstance(entry.obj, _Bad):
                raise entry.obj
            items.append(parse(entry.obj, entry.number, root))
        except _Bad as bad:
            msg = f"{entry.where}: {bad}"
            if ds.on_bad_line == "fail":
                raise WorkloadError(msg) from None
            problems.append(msg)
    return items, problems
