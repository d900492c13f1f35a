"""What a study will hold and write, from its profile alone: the client memory of its largest window and the
database growth of the whole study, as upper bounds computed before anything starts.

A window's client keeps every request record until the window ends; a study's windows are streamed (issue 23 §2:
sweep.ladder.recorder folds each ended request's chunks to a few numbers, spills its ITL gaps to a scratch file and
stores requests in batches while the window runs), so its memory grows with the requests and, far less than an
unstreamed window's (every chunk's arrival time held), with the tokens it streams. How many those are depends on
the server's speed, which is not known before the study: the bound takes the fastest server that is plausible,
MIN_TOKEN_S per output token per stream and MIN_REQUEST_S per request beyond that, so a real server streams fewer.
An open loop sends its rate whatever the server does, its warm-up at least one request per user (its load,
sweep.profile.warmup) and warmup_requests (each completes after it is sent); a soak offers rate_fraction of the
knee's rate, at most the top step's load at that fastest speed. The bytes per record, per chunk, per cached request token and per stored
row were measured (docs/memory.md says how; tests/profile/test_footprint.py measures them again and checks the bound).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sweep.profile import Profile, TraceArrival
from sweep.profile.phases import ladder_loads, phase_window, refines
from sweep.profile.trace import load_trace
from sweep.profile.warmup import open_users
from sweep.profile.workload import LengthDist
from sweep.views.plan import again_launches, final_ladder, planned_configs, probes, screens
from sweep.workload.requests import BLOCK
from sweep.workload.stream import KEEP_BLOCKS

MIN_TOKEN_S = 0.004  # the fastest a stream receives output tokens (an 8B model on an H200 decodes one in ~5 ms)
MIN_REQUEST_S = 0.010  # the fastest a request completes beyond its tokens (prefill, the HTTP round trip)
RECORD_BYTES = 1_200  # one request's record (450 B measured) and its database row as built to insert (570 B)
CHUNK_BYTES = 128  # one token of an unstreamed window: 41 B in its record, 114 B of process growth (docs/memory.md)
STREAMED_CHUNK_BYTES = 24  # one token of a streamed window (a study's): its ITL gap, 8 B, mapped twice at the end
PREDICT_TOKEN_BYTES = 12  # one prompt token sent: the ladder's hit-rate prediction holds each distinct one (8 B)
SPEC_TOKEN_BYTES = 40  # one prompt token of a made request (37 B measured); the stream keeps KEEP_BLOCKS blocks
SAMPLE_BYTES_PER_S = 2_048  # probe readings held per window second (about 8 a second, ~200 B each)
BASE_BYTES = 256 * 2**20  # the client process itself (interpreter, numpy, SQLAlchemy, Optuna; 90 MiB measured)
ROW_DISK_BYTES = 128  # one requests row in SQLite with its index (90 B measured)
SAMPLE_DISK_PER_S = 1_024  # stored probe readings per window second (650 B measured)


def mean_length(d: LengthDist) -> float:
    """The expected length a distribution draws (its clamps applied to the centre)."""
    centre = {"fixed": d.value, "uniform": ((d.low or 1) + (d.high or 1)) / 2}.get(d.kind, d.mean) or 1
    return float(min(max(centre, d.min), d.max))


@dataclass(frozen=True)
class WindowLoad:
    """The most requests and streamed chunks one window sends and records, and its seconds on the driver's clock."""

    requests: int
    chunks: int
    seconds: float
    prompt_tokens: int = 0

    def memory_bytes(self, cached_tokens: float) -> int:
        """The client's memory while it holds this window: records, chunks, the prompts the hit-rate prediction
        holds, probe readings, cached requests."""
        return int(BASE_BYTES + self.requests * RECORD_BYTES + self.chunks * STREAMED_CHUNK_BYTES
                   + self.prompt_tokens * PREDICT_TOKEN_BYTES
                   + self.seconds * SAMPLE_BYTES_PER_S + cached_tokens * SPEC_TOKEN_BYTES)

    def disk_bytes(self) -> int:
        """What storing this window adds to the database."""
        return int(self.requests * ROW_DISK_BYTES + self.seconds * SAMPLE_DISK_PER_S)


def request_seconds(prof: Profile) -> float:
    """The shortest a closed-loop user's request cycle can be: the fastest server's request, plus think time."""
    think = getattr(prof.arrival, "think_time_s", 0.0)
    return MIN_REQUEST_S + mean_length(prof.workload.output_len) * MIN_TOKEN_S + think


def window_load(prof: Profile, phase: str, concurrency: int) -> WindowLoad:
    """The upper bound of one window of `phase` at ladder step `concurrency` (the soak: the winner's window)."""
    w = phase_window(prof, phase)
    seconds = w.warmup_seconds + w.measure_seconds + w.drain_seconds
    arrival = prof.step_arrival(concurrency)
    rate = getattr(arrival, "rate", None)
    if phase == "soak":
        knee_rate = max(getattr(prof.arrival, "rates", None) or [rate or 0.0]) if rate else (
            max(prof.ladder) / request_seconds(prof))
        sent = (prof.soak.rate_fraction * knee_rate * (w.warmup_seconds + w.measure_seconds) + w.warmup_requests
                + prof.soak.max_in_flight)
    elif isinstance(arrival, TraceArrival):  # the most sends any stretch of the trace this long holds
        offs = load_trace(arrival.file, arrival.time_scale, arrival.start_s)
        sent = float((np.searchsorted(offs, offs + seconds, side="left") - np.arange(len(offs))).max())
    elif rate is not None:
        users = open_users(concurrency, getattr(arrival, "max_in_flight", concurrency))
        sent = max(rate * w.warmup_seconds, w.warmup_requests, users) + rate * w.measure_seconds
    else:
        sent = concurrency * seconds / request_seconds(prof) + w.warmup_requests
    out = mean_length(prof.workload.output_len)
    return WindowLoad(int(sent) + 1, int(sent * out) + 1, seconds, int(sent * prompt_length(prof)) + 1)


def prompt_length(prof: Profile) -> float:
    """A request's expected prompt tokens: its drawn length and, for the share that has one, a shared prefix."""
    w = prof.workload
    prefix = w.shared_prefix.length * w.shared_prefix.share if w.shared_prefix.groups else 0.0
    return mean_length(w.prompt_len) + prefix


def cached_prompt_tokens(prof: Profile) -> float:
    """Prompt tokens of the requests the stream keeps made (its last KEEP_BLOCKS blocks)."""
    return KEEP_BLOCKS * BLOCK * prompt_length(prof)


@dataclass(frozen=True)
class Footprint:
    """A study's client memory (its largest window's) and database growth (every window's), upper bounds."""

    memory_bytes: int
    peak_window: str  # which window holds the most, e.g. "final c=128" or "soak"
    peak_requests: int
    disk_bytes: int
    windows: int

    def line(self) -> str:
        """One line for the plan: the figures and where they come from."""
        return (f"client memory up to {gib(self.memory_bytes)} (window {self.peak_window}: up to "
                f"{self.peak_requests:,} requests), database up to {gib(self.disk_bytes)} over {self.windows} windows")


def gib(n: float) -> str:
    """Bytes as GiB (MiB below one GiB)."""
    if n >= 2**30:
        return f"{n / 2**30:.1f} GiB"
    return f"{n / 2**20:.0f} MiB" if n >= 10 * 2**20 else f"{n / 2**20:.1f} MiB"


def study_footprint(prof: Profile) -> Footprint:
    """The study's footprint over every window its plan counts (views.plan's phases): the final ladders (the
    defaults' included) with their climb past the top and their refinement steps, the screen (a probe's one window
    or a screen ladder per screened configuration), the same-winner re-measures as if every one tied, the soak."""
    cached = cached_prompt_tokens(prof)
    base_n = 1 if prof.search.baseline and prof.search.mode != "coupled" else 0
    screened = screens(prof)
    finals = planned_configs(prof, "final") + base_n
    loads = [int(x) for x in ladder_loads(prof)]
    top = max(loads)
    windows_of: list[tuple[str, int, int]] = [("final", c, finals) for c in loads]  # (phase, load, how many)
    windows_of += [("final", top, finals)] * (prof.refine.max_steps if refines(prof, "final") else 0)
    # a refined ladder short near its knee measures a bracket end again (far_windows.near "short": views.plan)
    windows_of += [("final", top, finals)] * (sum(final_ladder(prof, assumed=True)) - len(loads)
                                              - (prof.refine.max_steps if refines(prof, "final") else 0))
    n = planned_configs(prof, "screen") if screened else 0
    if screened and probes(prof):
        windows_of.append(("probe", top, n))  # at the predicted knee's step: at most the top
    elif screened:
        windows_of += [("screen", c, n) for c in prof.ladder]
    windows_of.append(("final", top, sum(again_launches(prof, n, finals))))
    if prof.soak.enabled:
        windows_of.append(("soak", max(prof.ladder), 1))
    peak, peak_name, disk, windows = WindowLoad(0, 0, 0.0), "", 0, 0
    for phase, c, count in windows_of:
        if count <= 0:
            continue
        load = window_load(prof, phase, c)
        disk += count * load.disk_bytes()
        windows += count
        if load.memory_bytes(cached) > peak.memory_bytes(cached):
            peak, peak_name = load, "soak" if phase == "soak" else f"{phase} c={c}"
    return Footprint(peak.memory_bytes(cached), peak_name, peak.requests, disk, windows)
