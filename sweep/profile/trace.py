"""A trace file of send timestamps (trace-replay arrivals) read into offsets from 0, and a trace's burstiness.

A timestamps file is one number per line (seconds; or the first CSV column; '#' comments), or one date and time per
line (parse_time: ISO, as the first column of Azure's LLM inference trace CSVs, `2023-11-16 18:15:46.6805900` or
`2024-05-10 00:00:00.009930+00:00`; a time without a zone is UTC). A JSONL trace (a line
that opens with '{') gives each entry's time by its own field: the FAST'25 Mooncake trace's "timestamp"
(milliseconds), sweep's JSONL "send_at" (seconds), an OpenAI request log's "created" (Unix seconds). `start_s` cuts the trace: the replay starts at its first entry
at or after that many seconds into it (trace.start: a window of a long trace at a chosen offset).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

PEAK_SPAN_S = 10.0  # the span of a trace's peak rate (Burstiness.peak_ratio)
# a JSONL entry's time field and its divisor: Mooncake's ms, sweep's JSONL seconds, an OpenAI log's Unix seconds
_JSON_TIMES = (("timestamp", 1000.0, "ms"), ("send_at", 1.0, "s"), ("created", 1.0, "s"))


_FRACTION = 6  # digits of a second datetime keeps (Azure's 2023 traces write 7: .NET ticks)


def parse_time(text: str) -> float:
    """Seconds of a timestamp: a number, or an ISO date and time (more than 6 fractional digits cut, no zone =
    UTC) as Unix seconds; ValueError for anything else."""
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        pass
    head, dot, frac = text.replace("Z", "+00:00").partition(".")
    zone = ""
    for sign in "+-":
        if sign in frac:
            frac, _, rest = frac.partition(sign)
            zone = sign + rest
    if dot and not frac.isdigit():
        raise ValueError(text)
    when = datetime.fromisoformat(head + (f".{frac[:_FRACTION]}" if dot else "") + zone)
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


def _json_time(text: str, where: str) -> float:
    """The send time (seconds) of one JSONL trace entry: "timestamp" (ms, Mooncake), "send_at" or "created" (s)."""
    try:
        obj = json.loads(text)
    except ValueError:
        raise ValueError(f"{where}: not valid JSON") from None
    if isinstance(obj, dict):
        for key, divisor, _ in _JSON_TIMES:
            v = obj.get(key)
            if isinstance(v, int | float) and not isinstance(v, bool):
                return float(v) / divisor
    raise ValueError(f'{where}: no send time ("timestamp" in ms, "send_at" or "created" in s)')


def load_trace(path: str | Path, time_scale: float = 1.0, start_s: float = 0.0) -> np.ndarray:
    """Send offsets from a file of timestamps (one per line or first CSV column; '#' comments) or a JSONL trace
    ("timestamp" ms / "send_at" s per entry), from its first entry at or after start_s, rebased to 0."""
    vals: list[float] = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8-sig").splitlines(), 1):
        if line.lstrip().startswith("{"):
            vals.append(_json_time(line, f"{path}:{n}"))
            continue
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        first = text.replace("\t", ",").split(",")[0].strip()
        try:
            vals.append(parse_time(first))
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
    arr = arr - arr[0]
    if start_s > 0:
        arr = arr[arr >= start_s]
        if not len(arr):
            raise ValueError(f"{path}: no entry at or after {start_s:g} s (the trace lasts {vals[-1] - vals[0]:g} s)")
        arr = arr - arr[0]
    offsets: np.ndarray = arr * time_scale
    return offsets


def recorded_rate(offsets: np.ndarray) -> float | None:
    """A trace's mean send rate (requests/s): its gaps' count over its span; None for fewer than two sends or
    a trace whose sends all fall at one instant."""
    span = float(offsets[-1] - offsets[0]) if len(offsets) > 1 else 0.0
    return (len(offsets) - 1) / span if span > 0 else None


@dataclass(frozen=True)
class Burstiness:
    """How bursty a run of sends is: the CV of its gaps (1 for Poisson, 0 evenly spaced) and its peak
    PEAK_SPAN_S-second rate over its mean rate (1: never busier than on average)."""

    sends: int
    span_s: float
    gap_cv: float | None
    peak_ratio: float | None

    def text(self) -> str:
        cv = "-" if self.gap_cv is None else f"{self.gap_cv:.2f}"
        peak = "-" if self.peak_ratio is None else f"{self.peak_ratio:.2f}"
        return f"{self.sends} sends over {self.span_s:,.0f} s, gap CV {cv}, peak {PEAK_SPAN_S:g} s rate / mean {peak}"


def burstiness(times: np.ndarray | list[float]) -> Burstiness:
    """The Burstiness of sends at `times` (seconds, any origin; sorted here)."""
    t = np.sort(np.asarray(times, dtype=float))
    span = float(t[-1] - t[0]) if len(t) > 1 else 0.0
    gaps = np.diff(t)
    cv = float(gaps.std() / gaps.mean()) if len(gaps) > 1 and gaps.mean() > 0 else None
    peak = None
    if span > 0:
        mean = (len(t) - 1) / span
        width = min(PEAK_SPAN_S, span)
        ends = np.searchsorted(t, t + width, side="left")  # sends in [t_i, t_i + width)
        peak = float((ends - np.arange(len(t))).max()) / width / mean
    return Burstiness(len(t), span, cv, peak)
