"""`--format json` of the read verbs: one JSON object per command, `{"schema_version": 1, "command": ..., ...}`,
whose shape docs/json-schema/<command>.json describes. A change that removes or retypes a key bumps the version;
adding a key does not."""

from __future__ import annotations

import json
from datetime import datetime

import typer

SCHEMA_VERSION = 1


def _plain(value: object) -> object:
    """A value json cannot write itself: datetimes as ISO text, anything else as its str."""
    return value.isoformat() if isinstance(value, datetime) else str(value)


def dumps(command: str, payload: dict[str, object]) -> str:
    """The command's output document, schema_version and command first."""
    return json.dumps({"schema_version": SCHEMA_VERSION, "command": command, **payload}, default=_plain, indent=2)


def emit(command: str, payload: dict[str, object]) -> None:
    """Print the command's output document on stdout."""
    typer.echo(dumps(command, payload))
