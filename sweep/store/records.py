"""Typed rows the store's reads return (frozen dataclasses, one per table), instead of dict[str, Any].

Converted so far: sweep_workers (WorkerRecord). The other reads still return the row mappings; see the
module docstring of sweep/store/__init__.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class WorkerRecord:
    """One sweep_workers row: a `sweep worker` process that joined a study (id None: the stand-in "this study"
    row of a study stored before workers existed)."""

    id: int | None
    label: str
    status: str  # running | done | lost
    host: str | None = None
    gpus: str | None = None  # CUDA_VISIBLE_DEVICES of its servers
    study_id: int | None = None
    pid: int | None = None
    process_started: float | None = None  # the pid's create time: a reused pid is another process
    sweep_version: str | None = None
    fingerprint: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> WorkerRecord:
        """The record of a sweep_workers row (columns this version does not know are ignored)."""
        return cls(**{f.name: row[f.name] for f in fields(cls) if f.name in row})
