"""A trace file of send timestamps (trace-replay arrivals) read into offsets from 0."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def load_trace(path: str | Path, time_scale: float = 1.0) -> np.ndarray:
    """Send offsets from a file of timestamps (one per line or first CSV column; '#' comments), from 0."""
    vals: list[float] = []
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        first = text.replace("\t", ",").split(",")[0].strip()
        try:
            vals.append(float(first))
        except ValueError:
            if not vals and n == 1:
                continue  # a CSV header
            raise ValueError(f"{path}:{n}: not a timestamp: {first!r}") from None
    if not vals:
        raise ValueError(f"{path}: no timestamps")
    arr = np.asarray(vals, dtype=float)
    if np.any(np.diff(arr) < 0):
        raise ValueError(f"{path}: timestamps must be non-decreasing")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{path}: timestamps must be finite")
    offsets: np.ndarray = (arr - arr[0]) * time_scale
    return offsets
