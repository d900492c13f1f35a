"""`--format json` of the read verbs: one JSON object per command, `{"schema_version": 1, "command": ..., ...}`,
whose shape docs/json-schema/<command>.json describes; times are ISO 8601 with their UTC offset. A change that removes or retypes a key bumps the version;
adding a key does not."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime

import typer

from sweep.core.types import JSONOut

SCHEMA_VERSION = 1


def iso_utc(when: datetime) -> str:
    """A time as ISO 8601 with its offset: the store's times are UTC (naive ones too), so `...T10:15:00+00:00`."""
    return (when if when.tzinfo is not None else when.replace(tzinfo=UTC)).isoformat()


def _plain(value: object) -> object:
    """A value json cannot write itself: datetimes as ISO text with their UTC offset, anything else as its str."""
    return iso_utc(value) if isinstance(value, datetime) else str(value)


def dumps(command: str, payload: Mapping[str, JSONOut]) -> str:
    """The command's output document, schema_version and command first."""
    return json.dumps({"schema_version": SCHEMA_VERSION, "command": command, **payload}, default=_plain, indent=2)


def emit(command: str, payload: Mapping[str, JSONOut]) -> None:
    """Print the command's output document on stdout."""
    typer.echo(dumps(command, payload))
