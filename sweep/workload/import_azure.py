"""Azure's public LLM inference traces (AzurePublicDataset: AzureLLMInferenceTrace_{code,conv}.csv of 2023 and the
week-long 2024 ones): a CSV of `TIMESTAMP,ContextTokens,GeneratedTokens`, one request per row.

A row becomes a DatasetItem of ContextTokens synthetic tokens (the trace records lengths, not text), asking for
GeneratedTokens, sent at its TIMESTAMP (seconds, made relative to the first row by the loader). The tokens are
BlockTokens of hash ids no other row has (row r's blocks are r * 2^22, r * 2^22 + 1, ...): the trace says nothing
of shared prefixes, so no two requests share one. Timestamps are the 2023 form (`2023-11-16 18:15:46.6805900`,
7 fractional digits, no zone: read as UTC) or the 2024 one (`2024-05-12 00:00:00.001163+00:00`).
"""

from __future__ import annotations

import csv

from sweep.core.errors import WorkloadError
from sweep.core.types import JSON
from sweep.profile.trace import parse_time
from sweep.workload.blocks import BlockTokens
from sweep.workload.importers import BadEntry, DatasetItem, ParseContext, positive_int

COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
_ROW_BLOCKS = 2**22  # hash ids per row: more blocks than MAX_TOKENS tokens make, at one token per block


def is_azure_header(line: str) -> bool:
    """Whether a CSV's first line is the Azure trace's header (its three columns, any order)."""
    return sorted(c.strip() for c in line.split(",")) == sorted(COLUMNS)


def csv_rows(raw: str, shown: str) -> list[tuple[int, JSON | BadEntry]]:
    """(line number, the row as {column: text} or why it is unusable) for each data row; WorkloadError when the
    first line is not the trace's header."""
    lines = raw.splitlines()
    start = next((n for n, text in enumerate(lines) if text.strip()), None)
    if start is None or not is_azure_header(lines[start]):
        raise WorkloadError(f"{shown}: expected a header line {','.join(COLUMNS)} (an Azure LLM inference trace)")
    header = [c.strip() for c in lines[start].split(",")]
    rows: list[tuple[int, JSON | BadEntry]] = []
    for n, fields in zip(range(start + 2, len(lines) + 1), csv.reader(lines[start + 1:]), strict=True):
        if not fields or not "".join(fields).strip():
            continue
        if len(fields) != len(header):
            rows.append((n, BadEntry(f"expected {len(header)} fields ({','.join(header)}), got {len(fields)}")))
            continue
        rows.append((n, {name: value.strip() for name, value in zip(header, fields, strict=True)}))
    return rows


def _timestamp(text: str) -> float:
    """Seconds since the epoch of a trace timestamp (sweep.profile.trace.parse_time: naive ones are UTC); BadEntry
    for anything else."""
    try:
        return parse_time(text)
    except ValueError:
        raise BadEntry(f'"TIMESTAMP" must be a date and time like 2023-11-16 18:15:46.6805900 (got '
                       f'{text[:40]!r})') from None


def _count(row: dict[str, JSON], name: str) -> int:
    """A token count column: digits, 1 to MAX_TOKENS."""
    text = row.get(name)
    if not isinstance(text, str) or not text.isdigit():
        raise BadEntry(f'"{name}" must be an integer >= 1 (got {str(text)[:40]!r})')
    return positive_int(int(text) if len(text) <= 12 else 10**12, name)  # past 12 digits: past any bound


def azure_item(obj: JSON, line: int, ctx: ParseContext) -> DatasetItem:
    """One trace row: ContextTokens synthetic tokens of the row's own blocks, GeneratedTokens out, sent at its
    TIMESTAMP."""
    if not isinstance(obj, dict):
        raise BadEntry("expected a CSV row")
    when = _timestamp(str(obj.get("TIMESTAMP", "")))
    n_in, n_out = _count(obj, "ContextTokens"), _count(obj, "GeneratedTokens")
    b = ctx.block_tokens
    first = line * _ROW_BLOCKS
    blocks = tuple(range(first, first + -(-n_in // b)))
    return DatasetItem(line=line, input_ids=BlockTokens(blocks, b, n_in), output_len=n_out, send_at=when)
