"""Every dataset format sweep reads, by name: the parser of one entry (sweep.workload.importers, import_chat,
import_azure) and the guess `format: auto` makes from a file's first entry."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from sweep.core.errors import WorkloadError
from sweep.core.types import JSON
from sweep.workload.import_azure import azure_item, is_azure_header
from sweep.workload.import_chat import batch_item, lmsys_item, openai_item
from sweep.workload.importers import DatasetItem, ParseContext, jsonl_item, mooncake_item, sharegpt_item

PARSERS: dict[str, Callable[[JSON, int, ParseContext], DatasetItem]] = {
    "jsonl": jsonl_item, "sharegpt": sharegpt_item, "openai": openai_item, "mooncake": mooncake_item,
    "lmsys": lmsys_item, "openai-batch": batch_item, "azure": azure_item,
}
LISTED = ("sharegpt", "openai", "lmsys", "openai-batch")  # formats whose file may be one JSON list of entries
# the key that names a format in a file's first entry, checked in this order ("custom_id" before "messages": a
# batch line's body holds messages; '"conversation"' with its quote is not ShareGPT's "conversations")
_KEYS = (('"custom_id"', "openai-batch"), ('"conversations"', "sharegpt"), ('"conversation"', "lmsys"),
         ('"messages"', "openai"), ('"hash_ids"', "mooncake"))


def guess_format(path: Path) -> str:
    """The format a file looks like from its first entry: the Azure trace's CSV header is `azure`; a
    "custom_id" an OpenAI Batch file, "conversations" ShareGPT, "conversation" LMSYS-Chat-1M, "messages" OpenAI,
    "hash_ids" Mooncake (in a JSON list, the first of those keys the file holds); anything else sweep's JSONL."""
    try:
        with path.open(encoding="utf-8-sig") as fh:
            head = fh.read(65536)
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkloadError(f"{path}: cannot read ({exc})") from None
    first = next((ln for ln in head.splitlines() if ln.strip()), "")
    if is_azure_header(first):
        return "azure"
    within = head if first.lstrip().startswith("[") else first
    fmt = next((fmt for key, fmt in _KEYS if key in within), None)
    if first.lstrip().startswith("["):
        return fmt if fmt in LISTED else "sharegpt"
    return fmt or "jsonl"
