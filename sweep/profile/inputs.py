"""The files a profile names (`workload.dataset.path`, a trace's `arrival.path`): absolute as given; relative,
in the profile's folder, then in the working directory. A missing or malformed one is one ProfileError line that
says where sweep looked, before anything is measured or written."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, TypeVar

from sweep.core.errors import ProfileError
from sweep.profile.arrival import Arrival, TraceArrival
from sweep.profile.trace import load_trace
from sweep.profile.workload import Workload


class NamesInputs(Protocol):
    """What of a profile names input files (sweep.profile.Profile is one): its workload, its arrival process and
    the folder its relative paths are relative to."""

    _folder: Path | None

    @property
    def workload(self) -> Workload: ...

    @property
    def arrival(self) -> Arrival: ...


P = TypeVar("P", bound=NamesInputs)


def locate_inputs(prof: P, folder: Path | None, where: str, hint: str = "") -> P:
    """Find prof's input files, first in `folder` (the profile file's, or the one a worker is given); `where`
    opens every error line (the profile file, or the study it came from), `hint` ends one for a missing file."""
    prof._folder = folder
    if prof.workload.dataset is not None:
        prof.workload.dataset._resolved = find_input(folder, where, "workload.dataset.path",
                                                     prof.workload.dataset.path, hint)
    if isinstance(prof.arrival, TraceArrival):
        ds = prof.workload.dataset
        if prof.arrival.path is not None:
            prof.arrival._resolved = find_input(folder, where, "arrival.path", prof.arrival.path, hint)
        of_dataset = ds is not None and (prof.arrival.path is None or prof.arrival._resolved == ds._resolved)
        if of_dataset and ds is not None:  # the dataset's entries at their own times, from its start_s
            prof.arrival._resolved, prof.arrival._start_s, prof.arrival._of_dataset = ds._resolved, ds.start_s, True
        _check_trace(where, prof.arrival)
    return prof


def relative_inputs(prof: NamesInputs) -> list[str]:
    """The input paths of prof that are relative (a worker elsewhere needs the folder they are relative to)."""
    raw = [prof.workload.dataset.path if prof.workload.dataset is not None else None,
           prof.arrival.path if isinstance(prof.arrival, TraceArrival) else None]
    return [r for r in raw if r is not None and not Path(r).expanduser().is_absolute()]


def find_input(folder: Path | None, where: str, field: str, raw: str, hint: str = "") -> Path:
    """The file `raw` names: absolute as given; relative, in `folder` (when known), then the working directory.
    Missing: one line that says where it looked."""
    path = Path(raw).expanduser()
    if path.is_absolute():
        tried = [path]
    else:
        tried = [*([folder / path] if folder is not None else []), Path.cwd() / path]
    for candidate in tried:
        if candidate.is_file():
            return candidate
    looked = " or ".join(str(t) for t in dict.fromkeys(tried))
    raise ProfileError(f"{where}: {field}: {raw}: no such file (looked for {looked}){hint}")


def _check_trace(where: str, arrival: TraceArrival) -> None:
    """The trace file parses (timestamps, non-decreasing, finite): its problem is the profile's, at load time."""
    try:
        load_trace(arrival.file, arrival.time_scale, arrival.start_s)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        field = "workload.dataset" if arrival.of_dataset else "arrival.path"
        raise ProfileError(f"{where}: {field}: {' '.join(str(exc).split())}") from None
    if arrival.scales is not None and arrival.recorded_rps is None:
        raise ProfileError(f"{where}: arrival.scales: the trace's sends all fall at one instant: it has no rate to "
                           "scale")
